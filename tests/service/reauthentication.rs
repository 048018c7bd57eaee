//! An API that asks for a stronger or more recent sign-in of the person
//! (RFC 9470: `401` with `error="insufficient_user_authentication"`,
//! `acr_values`, `max_age`), on 127.0.0.1, to a layer that does not sign
//! people in again: the token is not the trouble, so it stays (no token
//! request), and the request is not sent again (`RetryUnauthorized` reads
//! the mark); the answer goes back with its challenge for the caller. A
//! plain `401` still drops the token, for comparison.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use serde_json::json;
use support::serve::{answer, serve_state, Response};
use support::{hyper_client, with_transport, CLIENT_ID};
use tokio::net::TcpListener;
use tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, RetryUnauthorized};

/// RFC 9470 section 3's example challenge.
const CHALLENGE: &str = r#"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="myACR""#;

#[derive(Default)]
struct State {
    token_requests: AtomicUsize,
    api_calls: AtomicUsize,
    /// What the API answers: the RFC 9470 challenge, or a plain refusal.
    plain: Mutex<bool>,
}

async fn handle(state: &State, req: http::Request<hyper::body::Incoming>) -> Response {
    if req.uri().path() == "/token" {
        let n = state.token_requests.fetch_add(1, Ordering::SeqCst);
        return answer(
            200,
            json!({"access_token": format!("t-{n}"), "token_type": "Bearer", "expires_in": 3600}),
        );
    }
    state.api_calls.fetch_add(1, Ordering::SeqCst);
    let (challenge, error) = match *state.plain.lock().unwrap() {
        true => (r#"Bearer error="invalid_token""#, "invalid_token"),
        false => (CHALLENGE, "insufficient_user_authentication"),
    };
    let mut response = answer(401, json!({ "error": error }));
    response
        .headers_mut()
        .insert("www-authenticate", challenge.parse().unwrap());
    response
}

#[tokio::test]
async fn a_sign_in_challenge_keeps_the_token_and_goes_back_to_the_caller_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(State::default());
    serve_state(listener, Arc::clone(&state), |state, req| async move {
        handle(&state, req).await
    });
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(format!("http://{addr}/token"))
            .client_id(CLIENT_ID)
            .client_secret("secret"),
    )
    .build()
    .unwrap();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(hyper_client());
    let send = || {
        let request = http::Request::post(format!("http://{addr}/payments"))
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap();
        client.clone().oneshot(request)
    };
    for round in 1..=2 {
        let response = send().await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(
            response.headers()["www-authenticate"].to_str().unwrap(),
            CHALLENGE
        );
        // Sent once per call, and the first token still serves.
        assert_eq!(state.api_calls.load(Ordering::SeqCst), round);
        assert_eq!(state.token_requests.load(Ordering::SeqCst), 1);
    }
    assert_eq!(oauth.token_now().unwrap().token().expose_token(), "t-0");
    // A plain refusal of the token, by contrast, drops it: a new one comes
    // and the request goes again once.
    *state.plain.lock().unwrap() = true;
    let response = send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(state.token_requests.load(Ordering::SeqCst), 2);
    assert_eq!(state.api_calls.load(Ordering::SeqCst), 4);
}
