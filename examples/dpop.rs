//! DPoP (RFC 9449): tokens bound to a key the client holds. The token
//! endpoint binds the token to the key's thumbprint, and every API request
//! carries a fresh proof signed with the key; a stolen token alone is
//! refused.
//!
//! ```text
//! cargo run --example dpop
//! ```
//!
//! Starts a strict authorization server and two API origins on 127.0.0.1
//! that verify every proof (with jsonwebtoken) and demand nonces; needs no
//! configuration. Against a real server, give its token URL and your
//! client's credentials instead.

#[path = "../tests/support/dpop_server.rs"]
mod dpop_server;
#[path = "../tests/support/serve.rs"]
mod serve;
#[path = "../tests/support/tally.rs"]
mod tally;

use bytes::Bytes;
use dpop_server::{DpopServer, Nonces, CLIENT_ID, CLIENT_SECRET};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{client_auth::Algorithm, dpop::DpopKey, OAuthLayer, RetryUnauthorized};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let server = DpopServer::start(2, Nonces::Strict, 3600).await;

    // 1. A key for this process (replicas that share tokens through a
    //    store read one key from a file instead: DpopKey::from_pem).
    let key = DpopKey::generate(Algorithm::Es256)?;
    let oauth = OAuthLayer::builder()
        .token_url(server.token_url())
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        .dpop(key.clone())
        .build()?;

    // 2. The stack: RetryUnauthorized resends a request an API answered
    //    with `use_dpop_nonce`, with a new proof carrying the nonce.
    let api = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(api);

    for (n, (origin, path)) in [
        (0, "/orders?page=1"),
        (1, "/stock/42"),
        (0, "/orders/7"),
        (1, "/"),
    ]
    .into_iter()
    .enumerate()
    {
        let request = http::Request::post(server.api_url(origin, path)).body(Full::default())?;
        let response = client.clone().oneshot(request).await?;
        println!(
            "request {}: {} {}",
            n + 1,
            response.status(),
            server.api_url(origin, path)
        );
        if response.status() != 200 {
            return Err(format!("the API refused a request: {:?}", server.refusals()).into());
        }
    }

    // 3. A stolen token alone is refused: the same token as a bearer token.
    let token = oauth.token().await?;
    let stolen = http::Request::get(server.api_url(0, "/orders"))
        .header("authorization", format!("Bearer {}", token.expose_token()))
        .body(Full::default())?;
    let plain = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let refused = plain.oneshot(stolen).await?.status();
    println!("the same token without a proof: {refused}");

    let stats = oauth.stats();
    println!(
        "token requests: {} (the endpoint asked for a nonce {} time); nonce challenges from the APIs: {}",
        server.token_requests(),
        server.token_nonce_challenges(),
        stats.dpop_nonce_challenges
    );
    println!(
        "the token is bound to the key's thumbprint {}: {}",
        key.thumbprint(),
        server.bindings() == [key.thumbprint()]
    );
    if refused != 401 || server.token_requests() != 1 || server.bindings() != [key.thumbprint()] {
        return Err("expected one token, bound to the key, useless without a proof".into());
    }
    Ok(())
}
