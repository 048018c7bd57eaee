//! Backchannel logins (OpenID Connect CIBA Core 1.0, poll mode) on a real
//! server, panva's oidc-provider (`tests/servers/oidc_provider.mjs`,
//! `CIBA=1`), whose test "device" approves for alice, refuses for bob,
//! never answers for carol, and approves without the `acr` asked for dave:
//! an agent asks alice with a binding message and gets her token once she
//! approves, her ID token's `acr` one of those asked; a refusal, a request
//! that runs out and a person the server does not know each end the login
//! with their own code, nothing kept; an ID token without the `acr` asked
//! for is refused; `automatic(false)` asks nobody until `login()`. And on
//! the crate's own loopback server: hostile answers end the login before
//! any poll, `slow_down` adds 5 s, and a binding message with a control
//! character is refused before anything is sent.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tower_oauth::login::{Backchannel, Login};
use tower_oauth::{
    AccessToken, OAuthLayer, OAuthLayerBuilder, TokenError, TokenErrorKind, TokenParams,
};

use super::real_browser::{node_provider, stats, Provider};
use support::serve::{answer, serve_state};

pub(super) const ASKED: &str = "Pay 25 EUR to ACME, order 4711";

/// The provider with CIBA; `None` where it is not installed.
pub(super) fn provider() -> Option<Provider> {
    node_provider("oidc_provider.mjs", &[("CIBA", "1")])
}

/// The `ciba-agent` client's layer at `base`, logging in with `login`.
fn agent(base: &str, login: Login) -> OAuthLayer {
    agent_builder(base, login).build().unwrap()
}

/// The builder of [`agent`], for more settings.
pub(super) fn agent_builder(base: &str, login: Login) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .issuer(base)
            .client_id("ciba-agent")
            .client_secret("ciba-secret")
            .scope("read")
            .resource(format!("{base}/api"))
            .login(login),
    )
}

/// What `ask` gets once the person decides (20 s at most), each
/// `ApprovalPending` waited out for its `retry_after`.
pub(super) async fn until_decided<F, Fut>(ask: F) -> Result<AccessToken, TokenError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<AccessToken, TokenError>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "never decided");
        match ask().await {
            Err(e) if e.kind() == TokenErrorKind::ApprovalPending => {
                tokio::time::sleep(e.retry_after().unwrap()).await;
            }
            outcome => return outcome,
        }
    }
}

/// What each backchannel request the provider took asked.
pub(super) async fn asked(base: &str) -> Vec<Value> {
    let resp = support::hyper_client()
        .request(support::get(&format!("{base}/admin/ciba")))
        .await
        .unwrap();
    serde_json::from_str(&support::read(resp).await.1).unwrap()
}

#[tokio::test]
async fn an_agent_asks_a_person_and_gets_their_token_once_they_approve() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let ask = Backchannel::login_hint("alice")
        .binding_message(ASKED)
        .requested_expiry(Duration::from_secs(60))
        .acr_values("urn:example:mfa urn:example:pwd");
    let oauth = agent(&base, Login::backchannel(ask));
    let token = oauth.token().await.unwrap();
    assert!(!token.expose_token().is_empty());
    let identity = oauth.identity().await.expect("her ID token, verified");
    assert_eq!(identity.subject(), "alice");
    assert_eq!(identity.claims()["acr"], "urn:example:mfa");
    let requests = asked(&base).await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    let request = &requests[0];
    assert_eq!(request["login_hint"], "alice");
    assert_eq!(request["binding_message"], ASKED);
    assert_eq!(request["acr_values"], "urn:example:mfa urn:example:pwd");
    assert_eq!(request["requested_expiry"], "60");
    let scope = request["scope"].as_str().unwrap();
    assert!(scope.split(' ').any(|s| s == "openid"), "{scope}");
    let counts = stats(&base).await;
    assert_eq!(counts["ciba"], 1, "{counts}");
    // The device answers after 1.5 s: polled at its interval meanwhile.
    assert!(counts["ciba_pending"].as_u64().unwrap() >= 1, "{counts}");
    // The token serves on; nobody is asked again.
    oauth.token().await.unwrap();
    assert_eq!(asked(&base).await.len(), 1);
}

/// A request's own binding message replaces the layer's in the login it
/// needs; the layer's token serves the rest, and nobody is asked again.
#[tokio::test]
async fn a_request_s_binding_message_is_what_the_person_is_shown() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let ask = Backchannel::login_hint("alice").binding_message(ASKED);
    let oauth = agent(&base, Login::backchannel(ask));
    let invoice = "Approve invoice 9, 120 EUR";
    let before = asked(&base).await.len();
    oauth
        .token_for(&TokenParams::new().binding_message(invoice))
        .await
        .unwrap();
    let requests = asked(&base).await;
    assert_eq!(requests.len(), before + 1, "{requests:?}");
    assert_eq!(requests[before]["binding_message"], invoice);
    // The login serves the layer's own token too: a refresh, no request.
    oauth.token().await.unwrap();
    assert_eq!(asked(&base).await.len(), before + 1);
}

/// One layer acts for many people: each request names its account and
/// the account's person, whom the layer's backchannel login asks when the
/// account has no login; a refusal is that account's alone, and an
/// account's login serves its requests on, with or without the hint.
#[tokio::test]
async fn each_account_s_person_is_asked_by_the_request_that_names_them() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let oauth = agent(
        &base,
        Login::backchannel(Backchannel::per_request().binding_message(ASKED)),
    );
    let before = asked(&base).await.len();
    let alice = TokenParams::new()
        .account("user-1")
        .login_hint("alice")
        .binding_message("Let the agent read your orders");
    let bob = TokenParams::new().account("user-2").login_hint("bob");
    let token = oauth.token_for(&alice).await.unwrap();
    let e = oauth.token_for(&bob).await.unwrap_err();
    assert_eq!(e.error_code(), Some("access_denied"), "{e}");
    assert!(!e.to_string().contains("bob"), "the hint in an error: {e}");
    let requests = asked(&base).await;
    assert_eq!(requests.len(), before + 2, "{requests:?}");
    assert_eq!(requests[before]["login_hint"], "alice");
    assert_eq!(
        requests[before]["binding_message"],
        "Let the agent read your orders"
    );
    assert_eq!(requests[before + 1]["login_hint"], "bob");
    assert_eq!(requests[before + 1]["binding_message"], ASKED);
    // Alice's login serves her account on: the same token, and her
    // account's requests without the hint; nobody is asked again.
    assert_eq!(oauth.token_for(&alice).await.unwrap(), token);
    oauth
        .token_for(&TokenParams::new().account("user-1"))
        .await
        .unwrap();
    let identity = oauth
        .for_account("user-1")
        .unwrap()
        .identity()
        .await
        .unwrap();
    assert_eq!(identity.subject(), "alice");
    assert!(oauth
        .for_account("user-2")
        .unwrap()
        .identity()
        .await
        .is_none());
    assert_eq!(asked(&base).await.len(), before + 2);
    // An account nobody named has no login; the layer's own token neither.
    let e = oauth
        .token_for(&TokenParams::new().account("user-3"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    let e = oauth.token().await.unwrap_err();
    assert!(e.to_string().contains("per_request"), "{e}");
    // A hint without its account is refused, before anything is sent.
    let e = oauth
        .token_for(&TokenParams::new().login_hint("carol"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidRequest, "{e}");
    assert_eq!(asked(&base).await.len(), before + 2);
}

/// An account first named with the wrong person, then the right one: the
/// right person is asked on their own, never handed the wrong one's
/// pending request (whose approval would give that person the account).
#[tokio::test]
async fn a_corrected_hint_asks_the_right_person_anew() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let oauth = agent(
        &base,
        Login::backchannel(Backchannel::per_request().wait(false)),
    );
    let before = asked(&base).await.len();
    let wrong = TokenParams::new().account("user-9").login_hint("carol");
    let e = oauth.token_for(&wrong).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::ApprovalPending, "{e}");
    let right = TokenParams::new().account("user-9").login_hint("alice");
    until_decided(|| oauth.token_for(&right)).await.unwrap();
    let requests = asked(&base).await;
    let hints: Vec<&str> = requests[before..]
        .iter()
        .map(|r| r["login_hint"].as_str().unwrap())
        .collect();
    assert_eq!(hints, ["carol", "alice"]);
    let identity = oauth
        .for_account("user-9")
        .unwrap()
        .identity()
        .await
        .unwrap();
    assert_eq!(identity.subject(), "alice");
}

#[tokio::test]
async fn a_refusal_an_expiry_and_an_unknown_person_each_end_the_login_with_their_code() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    for (hint, code) in [
        ("bob", "access_denied"),
        ("carol", "expired_token"),
        ("nobody", "unknown_user_id"),
    ] {
        let ask = Backchannel::login_hint(hint).requested_expiry(Duration::from_secs(3));
        let oauth = agent(&base, Login::backchannel(ask));
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{hint}: {e}");
        assert_eq!(e.error_code(), Some(code), "{hint}: {e}");
        assert!(!e.to_string().contains(hint), "the hint in an error: {e}");
        // Nothing kept; the person is not asked again at once (the
        // layer's back-off).
        assert!(oauth.identity().await.is_none());
        assert!(oauth.token().await.is_err());
    }
    // bob and carol were asked once each; nobody was not known.
    assert_eq!(asked(&base).await.len(), 2);
    let counts = stats(&base).await;
    assert_eq!(counts["ciba"], 0, "{counts}");
}

#[tokio::test]
async fn an_id_token_without_the_acr_asked_for_is_refused_and_nothing_kept() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let ask = Backchannel::login_hint("dave").acr_values("urn:example:mfa");
    let oauth = agent(&base, Login::backchannel(ask));
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert!(e.to_string().contains("no `acr`"), "{e}");
    assert!(oauth.identity().await.is_none());
    // The server issued it; the layer kept none of it.
    assert_eq!(stats(&base).await["ciba"], 1);
}

#[tokio::test]
async fn without_automatic_logins_nobody_is_asked_until_login() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let ask = Backchannel::login_hint("alice").binding_message(ASKED);
    let oauth = agent(&base, Login::backchannel(ask).automatic(false));
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    assert!(asked(&base).await.is_empty());
    oauth.login().await.unwrap();
    oauth.token().await.unwrap();
    assert_eq!(asked(&base).await.len(), 1);
}

/// An API asks for a stronger, more recent sign-in (RFC 9470): the agent
/// asks the person again on their device, with the `acr_values` the API
/// named, and the request goes through with the new token; the ID token
/// says that sign-in.
#[tokio::test]
async fn an_api_s_sign_in_challenge_asks_the_person_again_on_their_device() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let (url, api) = super::reauthentication::api(false).await;
    let oauth = agent(&base, Login::backchannel(Backchannel::login_hint("alice")));
    assert_eq!(
        super::reauthentication::pay(&oauth, &url).await.unwrap(),
        200
    );
    let requests = asked(&base).await;
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0]["acr_values"], Value::Null);
    assert_eq!(requests[1]["acr_values"], "urn:gold");
    assert_eq!(oauth.identity().await.unwrap().claims()["acr"], "urn:gold");
    assert_eq!(api.tokens.lock().unwrap().len(), 2);
}

/// Without waiting (`wait(false)`): the request that needs the approval
/// fails at once, saying what the person was asked and when to ask again;
/// each later request asks the server once, and gets the token once the
/// person approved, or the refusal. The person is asked once per login.
#[tokio::test]
async fn without_waiting_a_request_fails_at_once_and_a_later_one_gets_the_approval() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    for (hint, approves) in [("alice", true), ("bob", false)] {
        let ask = Backchannel::login_hint(hint)
            .binding_message(ASKED)
            .wait(false);
        let oauth = agent(&base, Login::backchannel(ask));
        let before = asked(&base).await.len();
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::ApprovalPending, "{e}");
        assert!(e.to_string().contains(ASKED), "{e}");
        assert_eq!(
            e.retry_after(),
            Some(Duration::from_secs(1)),
            "the server's interval"
        );
        // At once again: still pending, and nobody asked twice.
        let again = oauth.token().await.unwrap_err();
        assert_eq!(again.kind(), TokenErrorKind::ApprovalPending, "{again}");
        let outcome = until_decided(|| oauth.token()).await;
        assert_eq!(asked(&base).await.len(), before + 1, "{hint} asked once");
        match (approves, outcome) {
            (true, Ok(_)) => assert_eq!(oauth.identity().await.unwrap().subject(), "alice"),
            (false, Err(e)) => assert_eq!(e.error_code(), Some("access_denied"), "{e}"),
            (_, outcome) => panic!("{hint}: {outcome:?}"),
        }
    }
}

/// What the loopback server got: each backchannel request's form, and
/// when each poll came.
#[derive(Default)]
struct Seen {
    requests: Vec<String>,
    polls: Vec<(Instant, String)>,
    /// Each poll's `DPoP` header, if any.
    proofs: Vec<Option<String>>,
}

/// A loopback server whose backchannel endpoint answers `answer_with`, and
/// whose token endpoint answers `slow_down` first (`slow_first`), then a
/// token.
async fn loopback(answer_with: Value, slow_first: bool) -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let state = Arc::new((base.clone(), answer_with, Arc::clone(&seen), slow_first));
    serve_state(listener, state, |state, req| async move {
        let (base, answer_with, seen, slow_first) = &*state;
        let path = req.uri().path().to_owned();
        let proof = req
            .headers()
            .get("dpop")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let form = String::from_utf8(req.into_body().collect().await.unwrap().to_bytes().to_vec())
            .unwrap();
        match path.as_str() {
            "/.well-known/oauth-authorization-server" | "/.well-known/openid-configuration" => {
                answer(
                    200,
                    json!({
                        "issuer": base,
                        "token_endpoint": format!("{base}/token"),
                        "backchannel_authentication_endpoint": format!("{base}/bc"),
                        "backchannel_token_delivery_modes_supported": ["poll", "ping"],
                        "grant_types_supported": ["urn:openid:params:grant-type:ciba"],
                    }),
                )
            }
            "/bc" => {
                seen.lock().unwrap().requests.push(form);
                answer(200, answer_with.clone())
            }
            "/token" => {
                let mut seen = seen.lock().unwrap();
                seen.polls.push((Instant::now(), form));
                let token_type = if proof.is_some() { "DPoP" } else { "Bearer" };
                seen.proofs.push(proof);
                match seen.polls.len() {
                    1 if *slow_first => answer(400, json!({"error": "slow_down"})),
                    _ => answer(
                        200,
                        json!({"access_token": "at-ciba", "token_type": token_type, "expires_in": 300}),
                    ),
                }
            }
            _ => answer(404, json!({})),
        }
    });
    (base, seen)
}

fn loopback_agent(base: &str, ask: Backchannel) -> Result<OAuthLayer, tower_oauth::ConfigError> {
    support::with_transport(
        OAuthLayer::builder()
            .issuer(base)
            .client_id("agent")
            .client_secret("agent-secret")
            .login(Login::backchannel(ask)),
    )
    .build()
}

#[tokio::test]
async fn hostile_answers_end_the_login_before_any_poll() {
    for (hostile, says) in [
        (json!({"expires_in": 60}), "auth_req_id"),
        (
            json!({"auth_req_id": "r", "expires_in": 60, "interval": 0}),
            "interval",
        ),
        (
            json!({"auth_req_id": "r", "expires_in": 60, "interval": 3600}),
            "interval",
        ),
        (
            json!({"auth_req_id": "r", "expires_in": 86_401}),
            "expires_in",
        ),
    ] {
        let (base, seen) = loopback(hostile.clone(), true).await;
        let oauth = loopback_agent(&base, Backchannel::login_hint("alice")).unwrap();
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{hostile}: {e}");
        assert!(e.to_string().contains(says), "{hostile}: {e}");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.requests.len(), 1, "{hostile}");
        assert!(seen.polls.is_empty(), "{hostile}: polled");
    }
}

#[tokio::test]
async fn polls_wait_the_interval_and_five_seconds_more_after_slow_down() {
    let (base, seen) = loopback(
        json!({"auth_req_id": "req-1", "expires_in": 60, "interval": 1}),
        true,
    )
    .await;
    let ask = Backchannel::login_hint("alice@example.com").binding_message(ASKED);
    let oauth = loopback_agent(&base, ask).unwrap();
    let asked_at = Instant::now();
    let token = oauth.token().await.unwrap();
    assert_eq!(token.expose_token(), "at-ciba");
    let seen = seen.lock().unwrap();
    let form: Vec<(String, String)> = url_pairs(&seen.requests[0]);
    let has = |name: &str, value: &str| form.iter().any(|(n, v)| n == name && v == value);
    assert!(has("login_hint", "alice@example.com"), "{form:?}");
    assert!(has("binding_message", ASKED), "{form:?}");
    assert!(has("scope", "openid"), "{form:?}");
    assert_eq!(seen.polls.len(), 2);
    let poll = url_pairs(&seen.polls[0].1);
    assert!(
        poll.contains(&("auth_req_id".into(), "req-1".into())),
        "{poll:?}"
    );
    assert!(poll.contains(&(
        "grant_type".into(),
        "urn:openid:params:grant-type:ciba".into()
    )));
    assert!(seen.polls[0].0 - asked_at >= Duration::from_secs(1));
    assert!(seen.polls[1].0 - seen.polls[0].0 >= Duration::from_secs(6));
}

#[tokio::test]
async fn a_binding_message_with_a_control_character_is_refused_before_anything_is_sent() {
    let (base, seen) = loopback(json!({"auth_req_id": "r", "expires_in": 60}), true).await;
    for hostile in ["Pay 25 EUR\nto ACME", "Pay \u{1b}[2J25 EUR", ""] {
        let ask = Backchannel::login_hint("alice").binding_message(hostile);
        let e = loopback_agent(&base, ask).expect_err("refused");
        assert!(e.to_string().contains("binding_message"), "{e}");
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
    }
    assert!(seen.lock().unwrap().requests.is_empty());
}

/// The client authenticates as for its token requests: a backchannel
/// request and each poll carry its own `private_key_jwt` assertion, and
/// each poll a DPoP proof of the layer's key, both verified here with
/// jsonwebtoken against openssl's public key and the proof's own.
#[tokio::test]
async fn a_backchannel_login_authenticates_with_private_key_jwt_and_polls_with_dpop() {
    use jsonwebtoken::{Algorithm as Jwa, DecodingKey, Validation};
    use support::keys::{Kind, TestKey};
    use tower_oauth::client_auth::{Algorithm, ClientAuth, SigningKey};
    use tower_oauth::dpop::DpopKey;

    let (base, seen) = loopback(
        json!({"auth_req_id": "r-1", "expires_in": 60, "interval": 1}),
        false,
    )
    .await;
    let key = TestKey::new(Kind::P256);
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(&base)
            .client_id("agent")
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap(),
            ))
            .dpop(DpopKey::generate(Algorithm::Es256).unwrap())
            .login(Login::backchannel(Backchannel::login_hint("alice"))),
    )
    .build()
    .unwrap();
    let token = oauth.token().await.unwrap();
    assert_eq!(token.expose_token(), "at-ciba");
    let seen = seen.lock().unwrap();
    let assertion_of = |form: &str| {
        let pairs = url_pairs(form);
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {name} in {form}"))
        };
        assert_eq!(
            get("client_assertion_type"),
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        let mut validation = Validation::new(Jwa::ES256);
        validation.set_audience(&[
            base.as_str(),
            &format!("{base}/token"),
            &format!("{base}/bc"),
        ]);
        let decoding = DecodingKey::from_ec_pem(key.public.as_bytes()).unwrap();
        let claims =
            jsonwebtoken::decode::<Value>(&get("client_assertion"), &decoding, &validation)
                .unwrap_or_else(|e| panic!("the assertion does not verify: {e}"))
                .claims;
        assert_eq!(
            (claims["iss"].as_str(), claims["sub"].as_str()),
            (Some("agent"), Some("agent"))
        );
        claims["jti"].as_str().unwrap().to_owned()
    };
    let mut jtis = vec![assertion_of(&seen.requests[0])];
    assert!(!seen.polls.is_empty());
    for ((_, form), proof) in seen.polls.iter().zip(&seen.proofs) {
        jtis.push(assertion_of(form));
        let proof = proof.as_deref().expect("a DPoP proof on the poll");
        let header = jsonwebtoken::decode_header(proof).unwrap();
        assert_eq!(header.typ.as_deref(), Some("dpop+jwt"));
        let decoding = DecodingKey::from_jwk(&header.jwk.unwrap()).unwrap();
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.required_spec_claims = Default::default();
        let claims = jsonwebtoken::decode::<Value>(proof, &decoding, &validation)
            .unwrap_or_else(|e| panic!("the proof does not verify: {e}"))
            .claims;
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], format!("{base}/token"));
    }
    jtis.sort();
    jtis.dedup();
    assert_eq!(jtis.len(), 1 + seen.polls.len(), "an assertion used twice");
}

/// A request's own binding message (`TokenParams::binding_message`) is
/// checked as the layer's is, before anything is sent; so is a layer with
/// no backchannel login for it to show.
#[tokio::test]
async fn a_request_s_binding_message_is_checked_before_anything_is_sent() {
    let (base, seen) = loopback(json!({"auth_req_id": "r", "expires_in": 60}), true).await;
    let oauth = loopback_agent(&base, Backchannel::login_hint("alice")).unwrap();
    for hostile in [
        "Pay 25 EUR\nto ACME",
        "Pay \u{1b}[2J25 EUR",
        "",
        &"x".repeat(257),
    ] {
        let params = TokenParams::new().binding_message(hostile);
        let e = oauth.token_for(&params).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidRequest, "{e}");
        assert!(e.to_string().contains("binding message"), "{e}");
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
    }
    let machine = support::with_transport(
        OAuthLayer::builder()
            .token_url(format!("{base}/token"))
            .client_id("agent")
            .client_secret("agent-secret"),
    )
    .build()
    .unwrap();
    let e = machine
        .token_for(&TokenParams::new().binding_message(ASKED))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidRequest, "{e}");
    assert!(e.to_string().contains("Login::backchannel"), "{e}");
    assert!(seen.lock().unwrap().requests.is_empty());
}

/// Ping mode on the loopback server: the request carries a notification
/// token of 256 bits; a notification without it (another token, none, or
/// for another request) is refused and wakes nothing; the right one wakes
/// the login, which asks the token endpoint at once.
#[tokio::test]
async fn a_notification_wakes_the_login_only_with_the_token_sent_for_its_request() {
    let (base, seen) = loopback(json!({"auth_req_id": "req-7", "expires_in": 60}), false).await;
    let ask = Backchannel::login_hint("alice").ping();
    let route = ask.clone();
    let poll_mode = Backchannel::login_hint("alice");
    let body = br#"{"auth_req_id":"req-7"}"#;
    let e = poll_mode.notification(Some("Bearer x"), body).unwrap_err();
    assert!(e.to_string().contains("not in ping mode"), "{e}");
    let e = route.notification(Some("Bearer x"), body).unwrap_err();
    assert!(e.to_string().contains("no request"), "{e}");
    let oauth = loopback_agent(&base, ask).unwrap();
    let login = tokio::spawn(async move { oauth.token().await });
    let deadline = Instant::now() + Duration::from_secs(30);
    let token = loop {
        assert!(Instant::now() < deadline, "no backchannel request");
        let form = seen.lock().unwrap().requests.first().cloned();
        if let Some(form) = form {
            let pairs = url_pairs(&form);
            break pairs
                .into_iter()
                .find(|(n, _)| n == "client_notification_token")
                .expect("a notification token")
                .1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(token.len(), 64, "{token}");
    let right = format!("Bearer {token}");
    for (authorization, body, says) in [
        (
            Some("Bearer not-the-token"),
            &body[..],
            "not the notification token",
        ),
        (None, &body[..], "no bearer token"),
        (
            Some(right.as_str()),
            br#"{"auth_req_id":"req-8"}"#,
            "no request",
        ),
        (Some(right.as_str()), b"req-7", "no JSON object"),
    ] {
        let e = route.notification(authorization, body).unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
        assert!(e.to_string().contains(says), "{e}");
        assert!(!e.to_string().contains(&token), "{e}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        seen.lock().unwrap().polls.is_empty(),
        "polled without a notification"
    );
    route.notification(Some(&right), body).unwrap();
    let token = login.await.unwrap().unwrap();
    assert_eq!(token.expose_token(), "at-ciba");
    assert_eq!(seen.lock().unwrap().polls.len(), 1);
    // Its login ended: the request waits no more.
    let e = route.notification(Some(&right), body).unwrap_err();
    assert!(e.to_string().contains("no request"), "{e}");
}

/// Ping mode on oidc-provider: the provider calls the app's route once the
/// person approved, and the login asks the token endpoint then, never
/// before.
#[tokio::test]
async fn in_ping_mode_the_server_s_notification_wakes_the_login() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ping_uri = format!("http://{}/ciba-ping", listener.local_addr().unwrap());
    let Some(provider) = node_provider(
        "oidc_provider.mjs",
        &[("CIBA", "1"), ("CIBA_PING_URI", &ping_uri)],
    ) else {
        return;
    };
    let base = provider.base.clone();
    let ask = Backchannel::login_hint("alice")
        .binding_message(ASKED)
        .ping();
    serve_state(listener, Arc::new(ask.clone()), |ask, req| async move {
        let authorization = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let status = match ask.notification(authorization.as_deref(), &body) {
            Ok(()) => 204,
            Err(_) => 401,
        };
        http::Response::builder()
            .status(status)
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    });
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(&base)
            .client_id("ciba-pinged")
            .client_secret("ciba-secret")
            .scope("read")
            .resource(format!("{base}/api"))
            .login(Login::backchannel(ask)),
    )
    .build()
    .unwrap();
    oauth.token().await.unwrap();
    assert_eq!(oauth.identity().await.unwrap().subject(), "alice");
    let counts = stats(&base).await;
    assert_eq!(counts["ciba_pings"], 1, "{counts}");
    assert_eq!(counts["ciba"], 1, "{counts}");
    assert_eq!(
        counts["ciba_pending"], 0,
        "polled before the notification: {counts}"
    );
}

/// A form body's pairs, decoded by the `form_urlencoded` crate.
fn url_pairs(form: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(form.as_bytes())
        .into_owned()
        .collect()
}
