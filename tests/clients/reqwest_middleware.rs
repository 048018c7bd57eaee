//! reqwest through `OAuthMiddleware` (feature `reqwest-middleware`), against
//! the loopback servers the Tower tests use: one token for a stream of
//! requests, one cache with the layer, a refused token dropped and the
//! request sent again, token slots through request extensions, DPoP proofs
//! and nonces.
#![cfg(feature = "reqwest-middleware")]

use crate::support;

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
    let from_middleware = tower_oauth::middleware::OAuthMiddleware::from(oauth.clone());
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
    use tower_oauth::{client_auth::Algorithm, dpop::DpopKey};
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

/// What an API that refuses the first request it gets saw of each request.
#[derive(Default)]
struct Seen {
    requests: std::sync::Mutex<Vec<(http::Method, http::Uri, http::HeaderMap, http::Version)>>,
    /// How long the answers after the first take.
    delay: Option<Duration>,
}

/// An API on 127.0.0.1 that answers its first request `401` and every
/// other `200` (after `seen.delay`), recording each.
async fn refusing_once(seen: std::sync::Arc<Seen>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    support::serve::serve_state(listener, seen, |seen, req| async move {
        let n = {
            let mut requests = seen.requests.lock().unwrap();
            requests.push((
                req.method().clone(),
                req.uri().clone(),
                req.headers().clone(),
                req.version(),
            ));
            requests.len()
        };
        if n == 1 {
            return support::serve::answer(401, serde_json::json!({"error": "invalid_token"}));
        }
        if let Some(delay) = seen.delay {
            tokio::time::sleep(delay).await;
        }
        support::serve::answer(200, serde_json::json!({"ok": true}))
    });
    base
}

/// What an API that refuses the first request it gets saw of each request
/// `build` makes (given a client through a fresh layer's middleware and the
/// API's base URL), sent once and, after the refusal, once more: the answer
/// must be the second's `200`. The authority, to count token requests.
async fn sent_again(
    build: impl FnOnce(&ClientWithMiddleware, &str) -> reqwest_middleware::RequestBuilder,
) -> (
    Authority,
    Vec<(http::Method, http::Uri, http::HeaderMap, http::Version)>,
) {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let seen = std::sync::Arc::new(Seen::default());
    let api = refusing_once(std::sync::Arc::clone(&seen)).await;
    let response = build(&client(&oauth), &api).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "sent once more after the 401");
    (authority, requests)
}

/// A request without a body is copied by hand for the resend (not with
/// `Request::try_clone`): the copy must reach the API as the request did,
/// method, URI, headers and version, with a new token.
#[tokio::test]
async fn a_bodiless_request_is_sent_again_as_it_was() {
    let (authority, requests) = sent_again(|client, api| {
        client
            .request(
                http::Method::DELETE,
                format!("{api}/orders/7?reason=dup&x=%20"),
            )
            .header("x-trace", "abc")
            .header("accept", "application/json")
            .version(http::Version::HTTP_11)
    })
    .await;
    let (first, again) = (&requests[0], &requests[1]);
    assert_eq!(again.0, http::Method::DELETE);
    assert_eq!(again.0, first.0);
    assert_eq!(again.1, first.1);
    assert_eq!(again.1.query(), Some("reason=dup&x=%20"));
    assert_eq!(again.3, first.3);
    for name in ["x-trace", "accept", "host", "user-agent"] {
        assert_eq!(again.2.get(name), first.2.get(name), "{name}");
    }
    assert_eq!(again.2["x-trace"], "abc");
    // A new token: the refused one was dropped.
    let token = |h: &http::HeaderMap| h["authorization"].to_str().unwrap().to_owned();
    assert_ne!(token(&again.2), token(&first.2));
    assert_eq!(authority.token_requests(), 2);
}

/// A request whose only header is the token's is copied without it (the
/// resend puts the new token on): the copy reaches the API with the same
/// headers as the request, the new token in place of the refused one.
#[tokio::test]
async fn a_request_with_only_the_token_is_sent_again_with_the_new_one() {
    let (authority, requests) = sent_again(|client, api| client.get(format!("{api}/orders"))).await;
    let (first, again) = (&requests[0].2, &requests[1].2);
    let names = |h: &http::HeaderMap| {
        let mut names: Vec<String> = h.keys().map(|n| n.to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(names(again), names(first));
    assert_eq!(again.get_all("authorization").iter().count(), 1);
    assert!(again["authorization"]
        .to_str()
        .unwrap()
        .starts_with("Bearer "));
    assert_ne!(again["authorization"], first["authorization"]);
    assert_eq!(authority.token_requests(), 2);
}

/// The copy keeps the request's timeout: the resent request times out as
/// the first would have.
#[tokio::test]
async fn a_bodiless_request_sent_again_keeps_its_timeout() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let seen = std::sync::Arc::new(Seen {
        delay: Some(Duration::from_secs(5)),
        ..Seen::default()
    });
    let api = refusing_once(std::sync::Arc::clone(&seen)).await;
    let started = std::time::Instant::now();
    let error = client(&oauth)
        .get(format!("{api}/slow"))
        .timeout(Duration::from_millis(400))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(seen.requests.lock().unwrap().len(), 2);
}

/// With the resend off, a refusal comes back as it is; the refused token is
/// dropped all the same, and the next request carries a new one.
#[tokio::test]
async fn without_the_resend_a_refusal_comes_back_and_the_next_request_has_a_new_token() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let seen = std::sync::Arc::new(Seen::default());
    let api = refusing_once(std::sync::Arc::clone(&seen)).await;
    let client = ClientBuilder::new(reqwest_client())
        .with(oauth.middleware().resend(false))
        .build();
    let first = client.get(format!("{api}/a")).send().await.unwrap();
    assert_eq!(first.status(), 401);
    assert_eq!(seen.requests.lock().unwrap().len(), 1, "not sent again");
    assert_eq!(oauth.stats().forced_renewals, 1);
    let second = client.get(format!("{api}/a")).send().await.unwrap();
    assert_eq!(second.status(), 200);
    let requests = seen.requests.lock().unwrap();
    assert_ne!(
        requests[0].2["authorization"],
        requests[1].2["authorization"]
    );
    assert_eq!(authority.token_requests(), 2);
}
