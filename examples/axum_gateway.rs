//! A gateway (backend-for-frontend): an axum server whose handler calls a
//! protected upstream product API through one OAuth-wrapped client held in
//! the router's state. Many concurrent inbound requests, one token.
//!
//! ```text
//! cargo run --example axum_gateway
//! ```
//!
//! Starts the upstream (token endpoint and product API) and the gateway on
//! 127.0.0.1, sends 500 concurrent requests to the gateway, and exits.

#[path = "../tests/support/authority.rs"]
mod authority;

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, OAuthService};

/// The shared upstream client: cloning it is cheap, and every clone shares
/// the layer's token.
type Upstream = OAuthService<Client<HttpConnector, Full<Bytes>>>;

#[derive(Clone)]
struct AppState {
    upstream: Upstream,
    upstream_base: String,
}

async fn product(
    State(state): State<AppState>,
    Path(id): Path<u32>,
) -> Result<String, (StatusCode, String)> {
    let url = format!("{}/products/{id}", state.upstream_base);
    let request = http::Request::get(url)
        .body(Full::default())
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let response = state
        .upstream
        .oneshot(request)
        .await
        // A TokenError or a transport error: the upstream is unavailable.
        .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err((
            StatusCode::BAD_GATEWAY,
            format!("upstream answered {status}"),
        ));
    }
    Ok(format!("gateway: {}", String::from_utf8_lossy(&body)))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let upstream =
        authority::Authority::start("gateway", "gateway-secret", Duration::from_secs(3600)).await;
    let oauth = OAuthLayer::builder()
        .auth_url(upstream.base_url())
        .client_id("gateway")
        .client_secret("gateway-secret")
        .build()?;
    let state = AppState {
        upstream: ServiceBuilder::new()
            .layer(oauth.clone())
            .service(Client::builder(TokioExecutor::new()).build_http()),
        upstream_base: upstream.api_url(""),
    };
    let app = Router::new()
        .route("/products/{id}", get(product))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let gateway = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    println!("gateway on {gateway}, upstream on {}", upstream.addr);

    // 500 concurrent inbound requests.
    let inbound = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let tasks: Vec<_> = (0..500)
        .map(|i| {
            let inbound = inbound.clone();
            tokio::spawn(async move {
                let uri: http::Uri = format!("http://{gateway}/products/{i}").parse()?;
                let response = inbound.get(uri).await?;
                Ok::<_, BoxError>(response.status())
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        if t.await?? == StatusCode::OK {
            ok += 1;
        }
    }
    let stats = oauth.stats();
    println!(
        "500 concurrent inbound requests: {ok} answered 200; upstream saw {} requests \
         and {} token request(s)",
        upstream.api_requests(),
        stats.token_requests
    );
    if ok != 500 || upstream.token_requests() != 1 {
        return Err("the example did not go as expected".into());
    }
    Ok(())
}
