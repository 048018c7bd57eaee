//! reqwest through `OAuthMiddleware` (feature `reqwest-middleware`), against
//! the loopback servers the Tower tests use: one token for a stream of
//! requests, one cache with the layer, a refused token dropped and the
//! request sent again, token slots through request extensions, DPoP proofs
//! and nonces.
#![cfg(feature = "reqwest-middleware")]

mod support;

use std::time::Duration;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use support::*;
use tower_oauth::{OAuthLayer, TokenParams};

const HOUR: Duration = Duration::from_secs(3600);

fn client(oauth: &OAuthLayer) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest_client())
        .with(oauth.middleware())
        .build()
}

#[tokio::test]
async fn a_stream_of_requests_makes_one_token_request() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    for n in 0..20 {
        let response = client
            .get(authority.api_url(&format!("/items/{n}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    assert_eq!(authority.token_requests(), 1);
    assert_eq!(authority.api_requests(), 20);
    assert!(
        authority.violations().is_empty(),
        "{:?}",
        authority.violations()
    );
}

#[tokio::test]
async fn the_layer_and_the_middleware_share_one_token() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let url = authority.api_url("/shared");
    assert_eq!(send(&oauth, &url).await.unwrap().status(), 200);
    let response = client(&oauth).get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let from_middleware = tower_oauth::OAuthMiddleware::from(oauth.clone());
    let other = ClientBuilder::new(reqwest_client())
        .with(from_middleware)
        .build();
    assert_eq!(other.get(&url).send().await.unwrap().status(), 200);
    assert_eq!(authority.token_requests(), 1);
}

#[tokio::test]
async fn a_refused_token_is_dropped_and_the_request_sent_once_more() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let url = authority.api_url("/orders");
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    authority.revoke_all();
    // The 401 is not seen: the token is dropped, a new one fetched, the
    // request (its body clonable) sent again.
    let response = client.post(&url).body("payload").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(authority.api_refused(), 1);
    assert_eq!(oauth.stats().forced_renewals, 1);
    // Refused again at once (an API that refuses every token): renewals
    // stay rate-limited (one per forced_renewal_interval), so a resend
    // would carry the very token refused: each call reaches the API once,
    // and its 401 comes back.
    authority.revoke_all();
    for n in 1..=4 {
        let response = client.post(&url).body("payload").send().await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(authority.api_refused(), 1 + n, "call {n} was sent again");
    }
    assert_eq!(authority.token_requests(), 2);
}

#[tokio::test]
async fn token_params_in_the_extensions_select_a_slot() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let url = authority.api_url("/default");
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    authority.expect(support::authority::Style::Unencoded, &[("scope", "orders")]);
    let orders = TokenParams::new().scope("orders");
    for _ in 0..3 {
        let response = client
            .get(authority.api_url("/orders"))
            .with_extension(orders.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    assert_eq!(authority.token_requests(), 2);
    let slots = oauth.slot_stats();
    assert_eq!(slots.len(), 1);
    assert_eq!(slots[0].0, orders);
    assert_eq!(slots[0].1.token_requests, 1);
    assert!(
        authority.violations().is_empty(),
        "{:?}",
        authority.violations()
    );
}

#[cfg(feature = "reqwest")]
#[tokio::test]
async fn dpop_proofs_and_nonces_go_with_every_request() {
    use support::dpop_server::{DpopServer, Nonces};
    use tower_oauth::{Algorithm, DpopKey};
    // Two origins: the API's nonce is not the token endpoint's.
    let server = DpopServer::start(2, Nonces::Strict, 3600).await;
    let key = DpopKey::generate(Algorithm::Es256).unwrap();
    let thumbprint = key.thumbprint().to_owned();
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id(support::dpop_server::CLIENT_ID)
            .client_secret(support::dpop_server::CLIENT_SECRET)
            .dpop(key),
    )
    .build()
    .unwrap();
    let client = client(&oauth);
    for n in 0..3 {
        let response = client
            .put(server.api_url(1, &format!("/things/{n}")))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{:?}", server.refusals());
    }
    // The first API request drew the nonce demand and was sent once more.
    assert_eq!(server.api_nonce_challenges(), 1);
    assert_eq!(server.bindings(), vec![thumbprint]);
    assert_eq!(oauth.stats().token_requests, 1);
}

/// The middleware reads an answer as the Tower service does: a gRPC
/// `UNAUTHENTICATED` (HTTP 200, `grpc-status: 16`) refuses the token as a
/// `401` does, so the token is dropped and the request sent once more.
#[tokio::test]
async fn a_grpc_unauthenticated_answer_drops_the_token_as_on_the_tower_path() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    // An API that refuses the first call the gRPC way, then answers.
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let api = axum::Router::new().route(
        "/grpc",
        axum::routing::post(move || {
            let seen = Arc::clone(&seen);
            async move {
                match seen.fetch_add(1, Ordering::SeqCst) {
                    0 => [("grpc-status", "16")].into_response(),
                    _ => [("grpc-status", "0")].into_response(),
                }
            }
        }),
    );
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, api).await });

    let response = client(&oauth)
        .post(format!("http://{addr}/grpc"))
        .body("call")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["grpc-status"], "0");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "sent once more");
    assert_eq!(
        authority.token_requests(),
        2,
        "the refused token was renewed"
    );
}
