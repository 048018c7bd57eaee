//! A real gRPC call (the standard health-check service) through a tonic
//! `Channel` wrapped in the OAuth layer. The server checks the bearer token
//! in an interceptor: a call with the layer succeeds, one without it is
//! refused, and a token revoked mid-run (refused with `UNAUTHENTICATED`) is
//! dropped and replaced.
//!
//! ```text
//! cargo run --example tonic_client
//! ```

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/grpc.rs"]
mod grpc;

use std::time::Duration;

use tonic::transport::Channel;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tower::{BoxError, ServiceBuilder};
use tower_oauth::OAuthLayer;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let authority =
        authority::Authority::start("grpc-client", "grpc-secret", Duration::from_secs(3600)).await;

    // The gRPC server: health service, bearer token checked by an interceptor
    // (tests/support/grpc.rs).
    let addr = grpc::start_health_server(&authority).await;
    println!(
        "gRPC health service on {addr}, token endpoint on {}",
        authority.addr
    );

    let channel = Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id("grpc-client")
        .client_secret("grpc-secret")
        .build()?;
    let mut client = HealthClient::new(
        ServiceBuilder::new()
            .layer(oauth.clone())
            .service(channel.clone()),
    );
    let check_request = || HealthCheckRequest {
        service: String::new(),
    };

    let status = client.check(check_request()).await?.into_inner().status();
    println!("with the layer:    {status:?}");

    let refused = HealthClient::new(channel)
        .check(check_request())
        .await
        .unwrap_err();
    println!(
        "without the layer: {:?} ({})",
        refused.code(),
        refused.message()
    );

    authority.revoke_all();
    let after_revoke = client.check(check_request()).await.unwrap_err();
    println!(
        "token revoked:     {:?}; the layer drops the token",
        after_revoke.code()
    );
    let again = client.check(check_request()).await?.into_inner().status();
    println!("next call:         {again:?} with a new token");

    let stats = oauth.stats();
    println!(
        "\n{} token requests, {} forced renewal after UNAUTHENTICATED",
        stats.token_requests, stats.forced_renewals
    );
    let ok = refused.code() == Code::Unauthenticated
        && after_revoke.code() == Code::Unauthenticated
        && stats.token_requests == 2
        && stats.forced_renewals == 1;
    if !ok {
        return Err("the example did not go as expected".into());
    }
    Ok(())
}
