//! A hyper-util client stack: retry on 401, a timeout, and the OAuth layer,
//! with a token revoked mid-run to show the transparent renewal.
//!
//! ```text
//! cargo run --example hyper_client
//! ```
//!
//! Starts an embedded token endpoint and product API on 127.0.0.1; needs no
//! configuration.

#[path = "../tests/support/authority.rs"]
mod authority;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, RetryUnauthorized};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let authority =
        authority::Authority::start("hyper-client", "hyper-secret", Duration::from_secs(3600))
            .await;
    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id("hyper-client")
        .client_secret("hyper-secret")
        .build()?;

    // Outermost first: retry a refused request once (the layer has dropped
    // the refused token by then), bound each attempt, authenticate.
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .timeout(Duration::from_secs(5))
        .layer(oauth.clone())
        .service(Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>());

    let mut statuses = Vec::new();
    for n in 1..=6 {
        if n == 4 {
            authority.revoke_all();
            println!("-- the token endpoint revokes every token it issued --");
        }
        let request = http::Request::post(authority.api_url(&format!("/orders/{n}")))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(format!(r#"{{"order":{n}}}"#))))?;
        let response = client.clone().oneshot(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        println!(
            "POST /api/orders/{n} -> {status} {}",
            String::from_utf8_lossy(&body)
        );
        statuses.push(status);
    }

    let stats = oauth.stats();
    println!(
        "\n{} requests, all answered 200: {}; the API refused {} request(s), resent \
         transparently; {} token requests ({} forced by the refusal)",
        statuses.len(),
        statuses.iter().all(|s| *s == 200),
        authority.api_refused(),
        stats.token_requests,
        stats.forced_renewals
    );
    if statuses.iter().any(|s| *s != 200)
        || authority.api_refused() != 1
        || stats.token_requests != 2
    {
        return Err("the example did not go as expected".into());
    }
    Ok(())
}
