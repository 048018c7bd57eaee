//! Pushed authorization requests (RFC 9126) and the FAPI 2.0 profile, on the
//! loopback authorization server: what a push carries (the request, the
//! client's authentication, a DPoP proof checked with `jsonwebtoken`), the
//! short URL the browser gets, the setting and the server's requirement,
//! and hostile answers: an error, a `request_uri` used before, an
//! `expires_in` of zero or none, control characters, a huge `request_uri`,
//! no endpoint under `fapi2()`. And `fapi2()` refusing each setting that
//! breaks the profile.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use support::keys::{Kind, TestKey};
use support::login_server::{LoginServer, CLIENT, WEB_CLIENT};
use tower_oauth::client_auth::{Algorithm, ClientAuth, SigningKey};
use tower_oauth::dpop::DpopKey;
use tower_oauth::login::{Login, PushedAuthorization};
use tower_oauth::{ConfigErrorKind, OAuthLayer, OAuthLayerBuilder, TokenErrorKind};

use super::accounts::CALLBACK;

fn offer_par(server: &LoginServer) {
    server.set_metadata(
        "pushed_authorization_request_endpoint",
        json!(format!("{}/par", server.issuer())),
    );
}

fn web(server: &LoginServer) -> OAuthLayerBuilder {
    super::accounts::builder(server).scope("openid read")
}

/// A person's login through a user agent that counts its calls.
fn person(server: &LoginServer, calls: &Arc<AtomicUsize>) -> OAuthLayerBuilder {
    let calls = Arc::clone(calls);
    let agent = LoginServer::user_agent();
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .client_id(CLIENT)
            .scope("read")
            .login(Login::user_agent(move |url| {
                calls.fetch_add(1, Ordering::SeqCst);
                agent(url)
            })),
    )
}

fn query(url: &str) -> std::collections::HashMap<String, String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

#[tokio::test]
async fn a_web_login_pushes_its_request_and_the_browser_carries_only_the_request_uri() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    offer_par(&server);
    server.state.requires_par.store(true, Ordering::SeqCst);
    let oauth = web(&server).build().unwrap();
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let q = query(&url);
    assert_eq!(q.len(), 2, "{q:?}");
    assert_eq!(q["client_id"], WEB_CLIENT);
    assert!(q["request_uri"].starts_with("urn:ietf:params:oauth:request_uri:"));
    let (pushed, _) = server.state.par_forms.lock().unwrap()[0].clone();
    // The client authenticated (Basic), and every parameter was pushed.
    assert_eq!(pushed["client_id"], WEB_CLIENT);
    for name in [
        "response_type",
        "redirect_uri",
        "state",
        "code_challenge",
        "scope",
        "nonce",
    ] {
        assert!(pushed.contains_key(name), "{name} in {pushed:?}");
    }
    assert_eq!(pushed["code_challenge_method"], "S256");
    let callback = LoginServer::sign_in(&url, "alice").await;
    let who = oauth
        .finish_login("alice", &callback)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(who.subject(), "alice");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

/// The push carries a DPoP proof of the layer's key for the PAR endpoint
/// (RFC 9449 section 10.1), checked with `jsonwebtoken`.
#[tokio::test]
async fn a_person_s_login_pushes_with_a_dpop_proof() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    offer_par(&server);
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = person(&server, &calls)
        .dpop(DpopKey::generate(Algorithm::Es256).unwrap())
        .build()
        .unwrap();
    oauth.login().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let (pushed, proof) = server.state.par_forms.lock().unwrap()[0].clone();
    assert!(pushed.contains_key("dpop_jkt"));
    let proof = proof.expect("a DPoP proof on the push");
    let header = jsonwebtoken::decode_header(&proof).unwrap();
    assert_eq!(header.typ.as_deref(), Some("dpop+jwt"));
    let jwk = header.jwk.expect("the proof's key");
    let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap();
    let mut validation = jsonwebtoken::Validation::new(header.alg);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    let claims = jsonwebtoken::decode::<Value>(&proof, &key, &validation)
        .unwrap()
        .claims;
    assert_eq!(claims["htm"], "POST");
    assert_eq!(claims["htu"], format!("{}/par", server.issuer()));
}

#[tokio::test]
async fn never_pushes_unless_the_server_requires_it() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    offer_par(&server);
    let calls = Arc::new(AtomicUsize::new(0));
    let never = person(&server, &calls)
        .pushed_authorization(PushedAuthorization::Never)
        .build()
        .unwrap();
    never.login().await.unwrap();
    assert!(server.state.par_forms.lock().unwrap().is_empty());
    assert!(server.authorizations()[0].contains_key("code_challenge"));
    server.set_metadata("require_pushed_authorization_requests", json!(true));
    let never = person(&server, &calls)
        .pushed_authorization(PushedAuthorization::Never)
        .build()
        .unwrap();
    never.login().await.unwrap();
    assert_eq!(server.state.par_forms.lock().unwrap().len(), 1);
    // Always, at a server without the endpoint: no login begins.
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let before = calls.load(Ordering::SeqCst);
    let always = person(&server, &calls)
        .pushed_authorization(PushedAuthorization::Always)
        .build()
        .unwrap();
    let e = always.login().await.unwrap_err();
    assert!(
        e.to_string()
            .contains("pushed_authorization_request_endpoint"),
        "{e}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), before, "no browser");
}

/// Each hostile PAR answer ends the login with a reason, before any browser
/// opens; the layer never falls back to a plain authorization request.
#[tokio::test]
async fn hostile_par_answers_end_the_login_before_any_browser() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    offer_par(&server);
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = person(&server, &calls).build().unwrap();
    // The first login takes a request_uri the server made.
    oauth.login().await.unwrap();
    let used = server.state.par_forms.lock().unwrap().len();
    assert_eq!(used, 1);
    let huge = "u".repeat(10_000);
    let cases: Vec<(&str, u16, String, &str)> = vec![
        (
            "an error",
            400,
            json!({"error": "invalid_request", "error_description": "no\u{7}bell \u{1b}[31mred"})
                .to_string(),
            "invalid_request",
        ),
        (
            "no expires_in",
            201,
            json!({"request_uri": "urn:x:1"}).to_string(),
            "expires_in",
        ),
        (
            "expires_in 0",
            201,
            json!({"request_uri": "urn:x:2", "expires_in": 0}).to_string(),
            "under one second",
        ),
        (
            "control characters",
            201,
            json!({"request_uri": "urn:x:\u{7}3", "expires_in": 60}).to_string(),
            "visible ASCII",
        ),
        (
            "a huge request_uri",
            201,
            json!({"request_uri": huge, "expires_in": 60}).to_string(),
            "over 512 bytes",
        ),
        ("no JSON", 201, "<html>".to_owned(), "JSON"),
    ];
    for (name, status, body, says) in cases {
        *server.state.par_answer.lock().unwrap() = Some((status, body));
        let before = (calls.load(Ordering::SeqCst), server.authorizations().len());
        let e = oauth.login().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{name}: {e}");
        assert!(e.to_string().contains(says), "{name}: {e}");
        assert!(
            !e.to_string().contains('\u{7}') && !e.to_string().contains('\u{1b}'),
            "{name}: {e}"
        );
        assert_eq!(
            (calls.load(Ordering::SeqCst), server.authorizations().len()),
            before,
            "{name}: no browser, no plain authorization request"
        );
    }
}

/// A `request_uri` a login used already, handed out again, is refused: each
/// is used once.
#[tokio::test]
async fn a_request_uri_used_before_is_refused() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    offer_par(&server);
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = person(&server, &calls).build().unwrap();
    let fixed = json!({"request_uri": "urn:ietf:params:oauth:request_uri:same", "expires_in": 60});
    *server.state.par_answer.lock().unwrap() = Some((201, fixed.to_string()));
    // The first use reaches the server, which knows no such request.
    let e = oauth.login().await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "{e}");
    let e = oauth.login().await.unwrap_err();
    assert!(e.to_string().contains("used already"), "{e}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no second browser");
}

fn ec_key() -> SigningKey {
    let key = TestKey::new(Kind::P256);
    SigningKey::from_pem(&key.pkcs8, Algorithm::Es256)
        .unwrap()
        .key_id("fapi-key")
}

/// A layer that holds the profile: `private_key_jwt` (ES256) and DPoP.
fn fapi(server: &LoginServer) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .issuer(server.issuer())
            .client_id(WEB_CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
            .dpop(DpopKey::generate(Algorithm::Es256).unwrap())
            .scope("openid read")
            .fapi2(),
    )
}

#[tokio::test]
async fn fapi2_without_a_par_endpoint_is_refused_before_any_browser_opens() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = fapi(&server).build().unwrap();
    let e = oauth.begin_login("alice", CALLBACK).await.unwrap_err();
    assert!(e.to_string().contains("FAPI 2.0"), "{e}");
    assert!(server.state.par_forms.lock().unwrap().is_empty());
    // With the endpoint: the push carries the client's assertion.
    offer_par(&server);
    let oauth = fapi(&server).build().unwrap();
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    assert_eq!(query(&url).len(), 2);
    let (pushed, proof) = server.state.par_forms.lock().unwrap()[0].clone();
    assert!(pushed.contains_key("client_assertion"), "{pushed:?}");
    assert!(proof.is_some());
}

/// Under the profile, a callback without the server's `iss` is refused,
/// whatever the metadata says.
#[tokio::test]
async fn fapi2_requires_iss_in_every_authorization_response() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    offer_par(&server);
    server.set_metadata(
        "authorization_response_iss_parameter_supported",
        json!(false),
    );
    let oauth = fapi(&server).build().unwrap();
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    let without_iss: String = callback
        .split('&')
        .filter(|part| !part.starts_with("iss="))
        .collect::<Vec<_>>()
        .join("&");
    let e = oauth.finish_login("alice", &without_iss).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert!(e.to_string().contains("iss"), "{e}");
}

#[test]
fn fapi2_refuses_each_setting_that_breaks_the_profile() {
    let base = || {
        support::with_transport(
            OAuthLayer::builder()
                .issuer("https://bank.example")
                .client_id("fintech")
                .fapi2(),
        )
    };
    let dpop = || DpopKey::generate(Algorithm::Es256).unwrap();
    let rsa = TestKey::new(Kind::Rsa(2048));
    let cases: Vec<(&str, OAuthLayerBuilder, &str)> = vec![
        (
            "a secret",
            base().client_secret("s").dpop(dpop()),
            "never a secret",
        ),
        (
            "client_secret_jwt",
            base()
                .client_secret("s")
                .client_auth(ClientAuth::ClientSecretJwt)
                .dpop(dpop()),
            "never a secret",
        ),
        (
            "no client authentication",
            base().dpop(dpop()),
            "private_key_jwt",
        ),
        (
            "an RS256 key",
            base()
                .client_auth(ClientAuth::PrivateKeyJwt(
                    SigningKey::from_pem(&rsa.pkcs8, Algorithm::Rs256).unwrap(),
                ))
                .dpop(dpop()),
            "RS256",
        ),
        (
            "no DPoP or certificate",
            base().client_auth(ClientAuth::PrivateKeyJwt(ec_key())),
            "sender-constrained",
        ),
        (
            "an RS256 DPoP key",
            base()
                .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
                .dpop(DpopKey::from_pem(&rsa.pkcs8, Algorithm::Rs256).unwrap()),
            "DPoP key signs RS256",
        ),
        (
            "a bearer fallback",
            base()
                .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
                .dpop(dpop())
                .dpop_allow_bearer(true),
            "dpop_allow_bearer",
        ),
        (
            "PAR never",
            base()
                .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
                .dpop(dpop())
                .pushed_authorization(PushedAuthorization::Never),
            "pushed",
        ),
        (
            "a token URL",
            OAuthLayer::builder()
                .token_url("https://bank.example/token")
                .client_id("fintech")
                .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
                .dpop(dpop())
                .fapi2(),
            "metadata",
        ),
        (
            "another assertion audience",
            base()
                .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
                .dpop(dpop())
                .assertion_audience("https://bank.example/token"),
            "audience",
        ),
        (
            "plain http",
            base()
                .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
                .dpop(dpop())
                .allow_insecure_http(true),
            "https everywhere",
        ),
    ];
    for (name, builder, says) in cases {
        let e = builder.build().unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Conflicting, "{name}: {e}");
        assert!(e.to_string().contains("FAPI 2.0"), "{name}: {e}");
        assert!(e.to_string().contains(says), "{name}: {e}");
    }
    // The profile's own pieces build.
    assert!(base()
        .client_auth(ClientAuth::PrivateKeyJwt(ec_key()))
        .dpop(dpop())
        .build()
        .is_ok());
}
