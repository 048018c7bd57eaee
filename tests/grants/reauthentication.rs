//! An API that asks for a stronger or more recent sign-in (RFC 9470:
//! `401` with `error="insufficient_user_authentication"`, `acr_values`,
//! `max_age`), on 127.0.0.1, to a layer whose person logs in through a user
//! agent at the crate's loopback authorization server: the person logs in
//! again, the authorization request asking for that sign-in, and the
//! request is sent once more with the new token; an ID token that does not
//! show the sign-in asked for (its `acr`, its `auth_time`) fails the login;
//! an API that asks again after a login that asked for it gets its answer
//! back, with no second login.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::json;
use support::id_tokens::now;
use support::login_server::{LoginServer, CLIENT};
use support::serve::{answer, bearer, serve_state};
use tokio::net::TcpListener;
use tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::login::Login;
use tower_oauth::{OAuthLayer, RetryUnauthorized, TokenError, TokenErrorKind};

const CHALLENGE: &str = r#"Bearer error="insufficient_user_authentication", error_description="A stronger sign-in is required", acr_values="urn:gold", max_age="300""#;

/// The API: the tokens it saw, and whether it challenges every token or
/// only the first.
#[derive(Default)]
pub(super) struct Api {
    pub(super) tokens: Mutex<Vec<String>>,
    always: bool,
    calls: AtomicUsize,
}

/// The API on 127.0.0.1: its URL.
pub(super) async fn api(always: bool) -> (String, Arc<Api>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/payments", listener.local_addr().unwrap());
    let state = Arc::new(Api {
        always,
        ..Api::default()
    });
    serve_state(listener, Arc::clone(&state), |api, req| async move {
        let call = api.calls.fetch_add(1, Ordering::SeqCst);
        let token = bearer(req.headers()).to_owned();
        let first = {
            let mut tokens = api.tokens.lock().unwrap();
            tokens.push(token.clone());
            tokens[0] == token
        };
        if !api.always && !first {
            return answer(200, json!({"paid": true}));
        }
        // Challenges of one token answered one after the other, 150 ms
        // apart: the later ones come while the login they began runs.
        tokio::time::sleep(Duration::from_millis(150) * call.min(8) as u32).await;
        let mut refused = answer(401, json!({"error": "insufficient_user_authentication"}));
        refused
            .headers_mut()
            .insert("www-authenticate", CHALLENGE.parse().unwrap());
        refused
    });
    (url, state)
}

/// A person's layer at `server`, logging in through a user agent.
fn person(server: &LoginServer) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .issuer(server.issuer())
            .client_id(CLIENT)
            .scope("openid read")
            .login(Login::user_agent(LoginServer::user_agent())),
    )
    .build()
    .unwrap()
}

/// One POST to `url` through `oauth`, resent once where the layer says a
/// new token may help: the status, or the layer's error.
pub(super) async fn pay(oauth: &OAuthLayer, url: &str) -> Result<u16, TokenError> {
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(support::hyper_client());
    let request = http::Request::post(url)
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    match client.oneshot(request).await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(e) => Err(*e.downcast::<TokenError>().expect("a TokenError")),
    }
}

/// The server's ID tokens say the person signed in with `acr`,
/// `signed_in_ago` seconds ago.
fn signs_with(server: &LoginServer, acr: &'static str, signed_in_ago: u64) {
    *server.state.oidc.id_token_hook.lock().unwrap() = Some(Box::new(move |claims, _| {
        claims["acr"] = acr.into();
        claims["auth_time"] = (now() - signed_in_ago).into();
    }));
}

#[tokio::test]
async fn the_person_logs_in_again_asking_for_the_sign_in_the_api_asks_for() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    signs_with(&server, "urn:gold", 0);
    let (url, api) = api(false).await;
    let oauth = person(&server);
    assert_eq!(pay(&oauth, &url).await.unwrap(), 200);
    let asked = server.authorizations();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(!asked[0].contains_key("acr_values"), "{asked:?}");
    assert_eq!(asked[1]["acr_values"], "urn:gold");
    assert_eq!(asked[1]["max_age"], "300");
    let tokens = api.tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 2);
    assert_ne!(
        tokens[0], tokens[1],
        "sent again with the new login's token"
    );
    let who = oauth.identity().await.unwrap();
    assert_eq!(who.claims()["acr"], "urn:gold");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn an_id_token_that_does_not_show_the_sign_in_asked_for_fails_the_login() {
    for (acr, ago, says) in [
        ("urn:bronze", 0, "not one the login asked for"),
        ("urn:gold", 3600, "3600 s ago"),
    ] {
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let (url, _api) = api(false).await;
        let oauth = person(&server);
        oauth.login().await.unwrap();
        let before = oauth.identity().await.unwrap();
        signs_with(&server, acr, ago);
        let e = pay(&oauth, &url).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
        assert!(e.to_string().contains(says), "{e}");
        // Nothing of that login kept: who signed in is who did before.
        let after = oauth.identity().await.unwrap();
        assert_eq!(after.id_token(), before.id_token());
    }
}

#[tokio::test]
async fn an_api_that_asks_again_gets_its_answer_back_and_no_second_login() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    signs_with(&server, "urn:gold", 0);
    let (url, api) = api(true).await;
    let oauth = person(&server);
    assert_eq!(pay(&oauth, &url).await.unwrap(), 401);
    assert_eq!(server.authorizations().len(), 2, "one login, then one more");
    assert_eq!(api.calls.load(Ordering::SeqCst), 2);
    // Within the forced-renewal interval, the same challenge begins none.
    assert_eq!(pay(&oauth, &url).await.unwrap(), 401);
    assert_eq!(server.authorizations().len(), 2);
    assert_eq!(api.calls.load(Ordering::SeqCst), 3, "not sent again");
}

#[tokio::test]
async fn without_automatic_logins_the_sign_in_asked_for_waits_for_login() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    signs_with(&server, "urn:gold", 0);
    let (url, _api) = api(false).await;
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(server.issuer())
            .client_id(CLIENT)
            .scope("openid read")
            .login(Login::user_agent(LoginServer::user_agent()).automatic(false)),
    )
    .build()
    .unwrap();
    oauth.login().await.unwrap();
    let e = pay(&oauth, &url).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    assert!(
        e.to_string().contains("stronger or more recent sign-in"),
        "{e}"
    );
    assert_eq!(server.authorizations().len(), 1, "no login begun by itself");
    oauth.login().await.unwrap();
    assert_eq!(server.authorizations()[1]["acr_values"], "urn:gold");
    assert_eq!(pay(&oauth, &url).await.unwrap(), 200);
}

#[tokio::test]
async fn concurrent_requests_challenged_together_share_one_login() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    signs_with(&server, "urn:gold", 0);
    let (url, api) = api(false).await;
    let oauth = person(&server);
    oauth.login().await.unwrap();
    // The API's first token: each request below carries it, and each is
    // challenged, but for the first API call (the API challenges only the
    // first token it saw, whoever sends it).
    let first = oauth.token().await.unwrap().expose_token().to_owned();
    api.tokens.lock().unwrap().push(first);
    // The new login's code is exchanged slowly: the other answers come
    // while it runs.
    server.delay_tokens(Duration::from_millis(500));
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (oauth, url) = (oauth.clone(), url.clone());
            tokio::spawn(async move { pay(&oauth, &url).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), 200);
    }
    assert_eq!(
        server.authorizations().len(),
        2,
        "one login, and one more for all"
    );
}

/// A person who refuses the sign-in an API asks for is not asked again at
/// the next request: the layer refreshes the token it had, and the API's
/// next challenge goes back to the caller within the forced-renewal
/// interval.
#[tokio::test]
async fn a_refused_re_authentication_is_not_asked_again_at_the_next_request() {
    use support::login_server::Approve;
    let server = LoginServer::start(Duration::from_secs(60)).await;
    signs_with(&server, "urn:gold", 0);
    let (url, api) = api(true).await;
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(server.issuer())
            .client_id(CLIENT)
            .scope("openid read")
            .min_backoff(Duration::from_millis(100))
            .login(Login::user_agent(LoginServer::user_agent())),
    )
    .build()
    .unwrap();
    oauth.login().await.unwrap();
    server.approve(Approve::Deny);
    let e = pay(&oauth, &url).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert_eq!(server.authorizations().len(), 2, "asked once");
    // Past the back-off: the chain refreshes, the API challenges again,
    // and the person is not asked.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(pay(&oauth, &url).await.unwrap(), 401);
    assert_eq!(
        server.authorizations().len(),
        2,
        "asked again after refusing"
    );
    assert!(api.calls.load(Ordering::SeqCst) >= 2);
}
