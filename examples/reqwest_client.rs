//! reqwest with the layer's tokens, through reqwest-middleware: a stream of
//! requests to a protected API on an embedded token endpoint. The token is
//! fetched once, then renewed ahead of its expiry in the background (tokens
//! of 3 seconds here, so the run sees renewals); no request waits for one,
//! and none is refused.
//!
//! ```text
//! cargo run --example reqwest_client --features reqwest-middleware
//! ```

#[path = "../tests/support/authority.rs"]
mod authority;

use std::time::{Duration, Instant};

use reqwest_middleware::ClientBuilder;
use tower::BoxError;
use tower_oauth::OAuthLayer;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // The program's own reqwest client. reqwest is built here without a
    // default crypto provider (the crate configures its own transport's
    // TLS): this program chooses ring for its client.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let authority =
        authority::Authority::start("reqwest-client", "s3cr3t", Duration::from_secs(3)).await;
    println!("token endpoint and API on {}", authority.addr);

    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id("reqwest-client")
        .client_secret("s3cr3t")
        .build()?;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(oauth.middleware())
        .build();

    let started = Instant::now();
    let (mut requests, mut slowest) = (0, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(4) {
        let sent = Instant::now();
        let response = client
            .get(authority.api_url(&format!("/items/{requests}")))
            .send()
            .await?;
        if response.status() != 200 {
            return Err(format!("request {requests}: {}", response.status()).into());
        }
        if requests > 0 {
            slowest = slowest.max(sent.elapsed());
        }
        requests += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = oauth.stats();
    println!(
        "{requests} requests, every one accepted; {} token requests: the first, then {} \
         renewals ahead in the background; slowest request after the first: {slowest:?}",
        stats.token_requests, stats.renewals_ahead
    );
    if stats.token_requests < 2 || stats.renewals_ahead + 1 != stats.token_requests {
        return Err("the example did not go as expected".into());
    }
    Ok(())
}
