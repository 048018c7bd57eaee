//! Step-up: an API that answers `403` with an `insufficient_scope`
//! challenge naming the scope it needs, on 127.0.0.1. With
//! `step_up_scopes`, the layer asks for a token with the scopes it had and
//! the allowed ones asked for, and the request goes again (through
//! `RetryUnauthorized` on the Tower path, by the reqwest middleware itself);
//! a scope not allowed is never requested; an API that keeps asking gets a
//! bounded number of token requests.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::json;
use support::serve::{answer, bearer, has_basic, serve_state, Response};
use support::{hyper_client, with_transport, CLIENT_ID};
use tokio::net::TcpListener;
use tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, OAuthLayerBuilder, RetryUnauthorized};

const SECRET: &str = "step-up-secret";

#[derive(Default)]
struct State {
    /// The scope each token was issued with.
    tokens: Mutex<Vec<(String, String)>>,
    /// The scope the API asks for in its challenge.
    asks: Mutex<String>,
    /// The scopes a token needs.
    needs: Mutex<Vec<String>>,
    api_calls: AtomicUsize,
    /// The status of the challenge: 403, or 401 as some APIs send it.
    status: Mutex<Option<u16>>,
}

struct Server {
    addr: std::net::SocketAddr,
    state: Arc<State>,
}

impl Server {
    /// The API needs `needs` and asks for `asks` when they are missing.
    async fn start(needs: &[&str], asks: &str) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        *state.needs.lock().unwrap() = needs.iter().map(|s| s.to_string()).collect();
        *state.asks.lock().unwrap() = asks.to_owned();
        serve_state(listener, Arc::clone(&state), |state, req| async move {
            handle(&state, req).await
        });
        Server { addr, state }
    }

    fn token_url(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    fn api_url(&self) -> String {
        format!("http://{}/files", self.addr)
    }

    /// The scope of every token request, in order.
    fn requested(&self) -> Vec<String> {
        let tokens = self.state.tokens.lock().unwrap();
        tokens.iter().map(|(_, scope)| scope.clone()).collect()
    }

    /// A layer of this server's client that may add `scopes` on a challenge.
    fn stepping_up(&self, scopes: &[&str]) -> OAuthLayer {
        self.builder()
            .step_up_scopes(scopes.iter().copied())
            .build()
            .unwrap()
    }

    fn builder(&self) -> OAuthLayerBuilder {
        with_transport(
            OAuthLayer::builder()
                .token_url(self.token_url())
                .client_id(CLIENT_ID)
                .client_secret(SECRET)
                .scope("files:read"),
        )
    }
}

async fn handle(state: &State, req: http::Request<hyper::body::Incoming>) -> Response {
    if req.uri().path() == "/token" {
        if !has_basic(&req, CLIENT_ID, SECRET) {
            return answer(401, json!({"error": "invalid_client"}));
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
        let scope = form
            .iter()
            .find(|(n, _)| n == "scope")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let mut tokens = state.tokens.lock().unwrap();
        let token = format!("t-{}", tokens.len());
        tokens.push((token.clone(), scope));
        return answer(
            200,
            json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}),
        );
    }
    state.api_calls.fetch_add(1, Ordering::SeqCst);
    let scope = {
        let tokens = state.tokens.lock().unwrap();
        tokens
            .iter()
            .find(|(t, _)| t == bearer(req.headers()))
            .map(|(_, scope)| scope.clone())
    };
    let Some(scope) = scope else {
        return answer(401, json!({"error": "invalid_token"}));
    };
    let has = |s: &String| scope.split(' ').any(|x| x == s);
    if state.needs.lock().unwrap().iter().all(has) {
        return answer(200, json!({"ok": true}));
    }
    let challenge = format!(
        r#"Bearer error="insufficient_scope", scope="{}", error_description="more scope""#,
        state.asks.lock().unwrap()
    );
    let status = state.status.lock().unwrap().unwrap_or(403);
    let mut response = answer(status, json!({"error": "insufficient_scope"}));
    response
        .headers_mut()
        .insert("www-authenticate", challenge.parse().unwrap());
    response
}

/// One POST through the layer and `RetryUnauthorized`; its status.
async fn post(oauth: &OAuthLayer, url: &str) -> u16 {
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(hyper_client());
    let request = http::Request::post(url)
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    client.oneshot(request).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_scope_the_layer_may_add_is_asked_for_and_the_request_sent_again() {
    let server = Server::start(&["files:read", "files:write"], "files:read files:write").await;
    let oauth = server.stepping_up(&["files:write"]);
    assert_eq!(post(&oauth, &server.api_url()).await, 200);
    assert_eq!(server.requested(), ["files:read", "files:read files:write"]);
    // From then on the wider token serves every request.
    for _ in 0..3 {
        assert_eq!(post(&oauth, &server.api_url()).await, 200);
    }
    assert_eq!(server.requested().len(), 2);
}

#[tokio::test]
async fn a_scope_not_allowed_is_never_requested() {
    let server = Server::start(&["files:read", "files:admin"], "files:admin files:write").await;
    let oauth = server.stepping_up(&["files:write"]);
    // A token without the admin scope cannot satisfy the API: no token
    // request at all, not even for the allowed part, and the 403 as it is.
    assert_eq!(post(&oauth, &server.api_url()).await, 403);
    assert_eq!(post(&oauth, &server.api_url()).await, 403);
    assert_eq!(server.requested(), ["files:read"]);
    assert_eq!(
        server.state.api_calls.load(Ordering::SeqCst),
        2,
        "no resend"
    );
    // Nor when it asks for that scope alone (once a renewal with the
    // same scopes).
    *server.state.asks.lock().unwrap() = "files:admin".into();
    assert_eq!(post(&oauth, &server.api_url()).await, 403);
    assert_eq!(server.requested(), ["files:read"]);
}

#[tokio::test]
async fn a_scope_split_otherwise_than_by_spaces_is_unusable() {
    // "files:write<TAB>files:admin" is no list of scope tokens (RFC 6749
    // section 3.3): not `files:write` and `files:admin`, nothing.
    // A tab; a quote and a backslash (escaped in the quoted string), which
    // are outside NQCHAR.
    for asks in [
        "files:write\tfiles:admin",
        r#"files:wr\"ite"#,
        r"files:wr\\ite",
    ] {
        let server = Server::start(&["files:read", "files:write"], asks).await;
        let oauth = server.stepping_up(&["files:write", "files:admin"]);
        let status = post(&oauth, &server.api_url()).await;
        assert!(status == 403 || status == 200, "{status}");
        assert_eq!(server.requested(), ["files:read"], "{asks:?}");
    }
}

#[tokio::test]
async fn insufficient_scope_on_a_401_steps_up_as_on_a_403() {
    let server = Server::start(&["files:read", "files:write"], "files:read files:write").await;
    *server.state.status.lock().unwrap() = Some(401);
    let oauth = server.stepping_up(&["files:write"]);
    assert_eq!(post(&oauth, &server.api_url()).await, 200);
    assert_eq!(server.requested(), ["files:read", "files:read files:write"]);
    // Without step_up_scopes: no renewal (one with the same scope cannot
    // help), the 401 as it is, not sent again.
    let server = Server::start(&["files:write"], "files:write").await;
    *server.state.status.lock().unwrap() = Some(401);
    let oauth = server.builder().build().unwrap();
    assert_eq!(post(&oauth, &server.api_url()).await, 401);
    assert_eq!(post(&oauth, &server.api_url()).await, 401);
    assert_eq!(server.requested(), ["files:read"]);
    assert_eq!(server.state.api_calls.load(Ordering::SeqCst), 2);
    assert_eq!(oauth.stats().forced_renewals, 0);
}

#[tokio::test]
async fn without_step_up_scopes_a_403_is_returned_as_it_is() {
    let server = Server::start(&["files:write"], "files:write").await;
    let oauth = server.builder().build().unwrap();
    assert_eq!(post(&oauth, &server.api_url()).await, 403);
    assert_eq!(server.requested(), ["files:read"]);
    assert_eq!(server.state.api_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_api_that_keeps_asking_gets_a_bounded_number_of_token_requests() {
    // It asks for a scope it then never takes.
    let server = Server::start(&["files:never"], "files:write").await;
    let oauth = server.stepping_up(&["files:write"]);
    for _ in 0..6 {
        assert_eq!(post(&oauth, &server.api_url()).await, 403);
    }
    // The step-up, and no more within the forced-renewal interval: the
    // same scopes asked for again get the 403 back as it is.
    assert_eq!(server.requested(), ["files:read", "files:read files:write"]);
    assert_eq!(
        server.state.api_calls.load(Ordering::SeqCst),
        7,
        "one resend"
    );
}

#[test]
fn step_up_scopes_are_checked() {
    let e = with_transport(OAuthLayer::builder())
        .token_url("https://login.example.com/token")
        .client_id(CLIENT_ID)
        .client_secret(SECRET)
        .step_up_scopes(["files:write", "two words"])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("`two words`"), "{e}");
    // The specification's unencoded body carries one scope, no spaces.
    let e = with_transport(OAuthLayer::builder())
        .auth_url("https://auth.example.com")
        .client_id(CLIENT_ID)
        .client_secret(SECRET)
        .step_up_scopes(["files:write"])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("unencoded body"), "{e}");
}

/// The reqwest middleware sends the request again itself.
#[cfg(feature = "reqwest-middleware")]
#[tokio::test]
async fn the_middleware_sends_the_request_again_with_more_scope() {
    let server = Server::start(&["files:read", "files:write"], "files:write").await;
    let oauth = server.stepping_up(&["files:write"]);
    let client = reqwest_middleware::ClientBuilder::new(support::reqwest_client())
        .with(oauth.middleware())
        .build();
    let response = client
        .post(server.api_url())
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requested(), ["files:read", "files:read files:write"]);
}
