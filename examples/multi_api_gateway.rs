//! One client stack, several APIs, the right token for each: an axum
//! gateway calls two upstream APIs that need tokens for different resources
//! (RFC 8707), through one OAuth layer that chooses each request's token
//! with `params_for`.
//!
//! ```text
//! cargo run --example multi_api_gateway
//! ```
//!
//! Starts a token endpoint that binds each token to the resource requested,
//! two APIs that accept only tokens for themselves, and the gateway, all on
//! 127.0.0.1; sends 400 concurrent requests to the gateway, half for each
//! API, and exits.

#[path = "../tests/support/resource_server.rs"]
mod resource_server;
#[path = "../tests/support/serve.rs"]
mod serve;
#[path = "../tests/support/tally.rs"]
mod tally;

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use resource_server::{ResourceServer, CLIENT_ID, CLIENT_SECRET};
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, OAuthService, TokenParams};

type Upstream = OAuthService<Client<HttpConnector, Full<Bytes>>>;

#[derive(Clone)]
struct AppState {
    upstream: Upstream,
    orders_url: String,
    stock_url: String,
}

/// Calls `url` through the shared client; the layer picks the token.
async fn call(upstream: Upstream, url: String) -> Result<String, (StatusCode, String)> {
    let request = http::Request::get(url)
        .body(Full::default())
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let response = upstream
        .oneshot(request)
        .await
        .map_err(|e| (StatusCode::BAD_GATEWAY, e.to_string()))?;
    match response.status() {
        StatusCode::OK => Ok("ok".into()),
        status => Err((
            StatusCode::BAD_GATEWAY,
            format!("upstream answered {status}"),
        )),
    }
}

async fn order(
    State(s): State<AppState>,
    Path(id): Path<u32>,
) -> Result<String, (StatusCode, String)> {
    call(s.upstream, format!("{}?id={id}", s.orders_url)).await
}

async fn stock(
    State(s): State<AppState>,
    Path(id): Path<u32>,
) -> Result<String, (StatusCode, String)> {
    call(s.upstream, format!("{}?id={id}", s.stock_url)).await
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let upstream = ResourceServer::start(Duration::from_secs(3600)).await;
    let (orders_url, stock_url) = (upstream.api_url("orders"), upstream.api_url("stock"));

    // Each upstream's token parameters, built once; the layer clones them
    // (a reference count) onto the requests that need them.
    let orders = TokenParams::new().resource(ResourceServer::resource("orders"));
    let stock_params = TokenParams::new()
        .resource(ResourceServer::resource("stock"))
        .scope("stock:read");
    let oauth = OAuthLayer::builder()
        .token_url(upstream.token_url())
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        // Usually by origin (`request.uri.host()`); here both upstreams
        // share a host, so by path.
        .params_for(move |request| match request.uri.path() {
            "/api/orders" => Some(orders.clone()),
            "/api/stock" => Some(stock_params.clone()),
            _ => None,
        })
        .build()?;
    let state = AppState {
        upstream: ServiceBuilder::new()
            .layer(oauth.clone())
            .service(Client::builder(TokioExecutor::new()).build_http()),
        orders_url,
        stock_url,
    };
    let app = Router::new()
        .route("/orders/{id}", get(order))
        .route("/stock/{id}", get(stock))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let gateway = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let inbound = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let tasks: Vec<_> = (0..400)
        .map(|i| {
            let inbound = inbound.clone();
            let path = if i % 2 == 0 { "orders" } else { "stock" };
            tokio::spawn(async move {
                let uri: http::Uri = format!("http://{gateway}/{path}/{i}").parse()?;
                Ok::<_, BoxError>(inbound.get(uri).await?.status())
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        if t.await?? == StatusCode::OK {
            ok += 1;
        }
    }
    println!("400 concurrent requests through the gateway: {ok} answered 200");
    for (params, stats) in oauth.slot_stats() {
        println!(
            "  token slot {params:?}: {} token request(s)",
            stats.token_requests
        );
    }
    println!(
        "token requests: orders {}, stock {}; the APIs refused {} request(s)",
        upstream.requests_for("orders"),
        upstream.requests_for("stock"),
        upstream.api_refused()
    );
    if ok != 400
        || upstream.requests_for("orders") != 1
        || upstream.requests_for("stock") != 1
        || upstream.api_refused() != 0
    {
        return Err("the example did not go as expected".into());
    }
    Ok(())
}
