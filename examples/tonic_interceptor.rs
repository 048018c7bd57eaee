//! A tonic client that puts the token on its calls with an `Interceptor`:
//! synchronous code that cannot await, using `OAuthLayer::token_now`. The
//! token is fetched once before the first call; after that the interceptor
//! never waits, and renewal ahead of expiry runs in the background (tokens
//! of 3 seconds here, so the run sees renewals). The server checks the
//! bearer token of every call.
//!
//! ```text
//! cargo run --example tonic_interceptor
//! ```

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/grpc.rs"]
mod grpc;

use std::time::{Duration, Instant};

use tonic::service::Interceptor;
use tonic::transport::Channel;
use tonic::{Request, Status};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tower::BoxError;
use tower_oauth::OAuthLayer;

/// Puts the layer's current token on every call, without awaiting.
#[derive(Clone)]
struct BearerToken(OAuthLayer);

impl Interceptor for BearerToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let token = self
            .0
            .token_now()
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let value = token
            .header_value()
            .as_bytes()
            .try_into()
            .map_err(|_| Status::internal("the token cannot go into gRPC metadata"))?;
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let authority =
        authority::Authority::start("grpc-client", "grpc-secret", Duration::from_secs(3)).await;
    let addr = grpc::start_health_server(&authority).await;
    println!(
        "gRPC health service on {addr}, token endpoint on {}",
        authority.addr
    );

    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id("grpc-client")
        .client_secret("grpc-secret")
        .build()?;
    // Without a token yet, the interceptor refuses at once (and the fetch
    // starts in the background)...
    let cold = oauth.token_now().unwrap_err();
    println!("before any token:  {cold}");
    // ...so fetch the first one before serving calls.
    oauth.token().await?;

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = HealthClient::with_interceptor(channel, BearerToken(oauth.clone()));
    let started = Instant::now();
    let mut calls = 0;
    while started.elapsed() < Duration::from_secs(4) {
        let request = HealthCheckRequest {
            service: String::new(),
        };
        client.check(request).await?;
        calls += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = oauth.stats();
    println!(
        "{calls} calls in 4 s, every one accepted; {} token requests ({} renewals ahead, in \
         the background)",
        stats.token_requests, stats.renewals_ahead
    );
    if stats.token_requests < 3 || stats.renewals_ahead < 2 {
        return Err("the example did not go as expected".into());
    }
    Ok(())
}
