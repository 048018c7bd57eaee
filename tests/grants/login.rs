//! A person's login against a loopback authorization server: from an API's
//! URL alone, one login for a burst, the refresh token's chain after it, a
//! second process on one `FileStore`, a dead chain, the device grant; and
//! hostile servers and callbacks: a wrong `iss` or `state`, PKCE without
//! S256, endpoints a browser may not open, control characters for the
//! prompt. The system browser's way runs in a child process with `$BROWSER`
//! set to a script that sends forged callbacks first.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use support::login_server::{Approve, LoginServer, CLIENT};
use tower_oauth::{login::Login, store::FileStore, OAuthLayer, OAuthLayerBuilder, TokenErrorKind};

fn builder(server: &LoginServer, login: Login) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .client_id(CLIENT)
            .login(login),
    )
}

fn agent_login() -> Login {
    Login::user_agent(LoginServer::user_agent())
}

/// The status of one GET of the server's API through `oauth`.
async fn api_status(oauth: &OAuthLayer, server: &LoginServer) -> http::StatusCode {
    support::send(oauth, &server.api_url())
        .await
        .unwrap()
        .status()
}

/// `each` requests at once to `url` through every one of `layers`: each
/// answered 200.
async fn burst(layers: &[OAuthLayer], each: usize, url: &str) {
    let mut requests = Vec::new();
    for oauth in layers {
        for _ in 0..each {
            let (oauth, url) = (oauth.clone(), url.to_owned());
            requests.push(tokio::spawn(async move {
                support::send(&oauth, &url).await.unwrap().status()
            }));
        }
    }
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
}

/// Layers as `make` builds them, each on its own `FileStore` of the file
/// in `dir`: the processes of one machine.
fn processes(
    make: impl Fn() -> OAuthLayerBuilder,
    dir: std::path::PathBuf,
) -> impl Fn() -> OAuthLayer {
    move || {
        make()
            .token_store(FileStore::new(dir.join("tokens")).unwrap())
            .build()
            .unwrap()
    }
}

/// A user agent that counts its calls before it follows the URL.
fn counting_agent(calls: &Arc<AtomicUsize>) -> Login {
    let calls = Arc::clone(calls);
    let agent = LoginServer::user_agent();
    Login::user_agent(move |url| {
        calls.fetch_add(1, Ordering::SeqCst);
        agent(url)
    })
}

#[tokio::test]
async fn a_login_from_the_api_s_url_alone_sends_pkce_state_resource_and_scope() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server, agent_login()).build().unwrap();
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert_eq!(server.logins(), 1);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let asked = &server.authorizations()[0];
    assert_eq!(asked["resource"], server.api_url());
    assert_eq!(asked["scope"], "read offline_access");
    assert_eq!(asked["code_challenge_method"], "S256");
    assert_eq!(asked["redirect_uri"], "http://127.0.0.1/callback");
    // 32 random bytes each, base64url: 43 characters.
    assert_eq!(asked["state"].len(), 43);
    let exchange = &server.token_forms()[0];
    assert_eq!(exchange["grant_type"], "authorization_code");
    assert_eq!(exchange["resource"], server.api_url());
    assert_eq!(exchange["code_verifier"].len(), 43);
}

#[tokio::test]
async fn a_burst_of_requests_shares_one_login_and_the_chain_rotates_after_it() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server, agent_login()).build().unwrap();
    burst(std::slice::from_ref(&oauth), 50, &server.api_url()).await;
    assert_eq!(server.logins(), 1);
    assert_eq!(server.authorizations().len(), 1);
    // A renewal refreshes with the login's refresh token.
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(server.refreshes(), 1);
    assert_eq!(server.logins(), 1);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn a_second_process_on_the_same_file_store_does_not_log_in_again() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("login-file-store");
    let layer = processes(|| builder(&server, agent_login()), dir.clone());
    let first = layer();
    first.login().await.unwrap();
    assert_eq!(server.logins(), 1);
    // Another process, as a CLI run after it: the stored access token.
    let second = layer();
    assert_eq!(api_status(&second, &server).await, 200);
    assert_eq!(server.logins(), 1);
    // Its renewal refreshes with the stored chain, not a new login.
    assert!(second.force_renewal());
    second.token().await.unwrap();
    assert_eq!(server.refreshes(), 1);
    assert_eq!(server.logins(), 1);
    // The file holds no token, code or refresh token in clear.
    let text = std::fs::read_to_string(dir.join("tokens")).unwrap();
    for form in server.token_forms() {
        for value in form.values().filter(|v| v.len() > 20) {
            assert!(!text.contains(value.as_str()), "{value} in the file");
        }
    }
    // Each token the server issued, whole (a short prefix such as `at-`
    // may appear in base64 by chance).
    let tokens = server.issued_tokens();
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|t| !text.contains(t.as_str())), "{text}");
}

#[tokio::test]
async fn a_refused_refresh_token_starts_one_new_login_and_never_a_loop() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = builder(&server, counting_agent(&calls)).build().unwrap();
    oauth.token().await.unwrap();
    server.revoke_all();
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(server.logins(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // The next login is denied: one attempt, a clear error, no loop.
    server.revoke_all();
    server.approve(Approve::Deny);
    let e = oauth.login().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert!(e.to_string().contains("access_denied"), "{e}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_login_without_a_refresh_token_logs_in_again_when_its_token_ends() {
    let server = LoginServer::start(Duration::from_millis(1500)).await;
    server.state.gives_refresh.store(false, Ordering::SeqCst);
    let oauth = builder(&server, agent_login())
        .refresh_margin(Duration::from_millis(100))
        .build()
        .unwrap();
    oauth.token().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert_eq!(server.logins(), 2);
    assert_eq!(server.refreshes(), 0);
}

#[tokio::test]
async fn a_request_that_gives_up_does_not_cancel_the_login_others_wait_for() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let slow = Login::user_agent(move |url| {
        counted.fetch_add(1, Ordering::SeqCst);
        let agent = LoginServer::user_agent();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            agent(url).await
        })
    });
    let oauth = builder(&server, slow).build().unwrap();
    let gave_up = tokio::time::timeout(
        Duration::from_millis(100),
        support::send(&oauth, &server.api_url()),
    )
    .await;
    assert!(gave_up.is_err(), "the first request gave up");
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert_eq!((calls.load(Ordering::SeqCst), server.logins()), (1, 1));
}

#[tokio::test]
async fn a_dpop_login_binds_the_code_to_the_key_s_thumbprint() {
    use base64::Engine;
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let key =
        tower_oauth::dpop::DpopKey::generate(tower_oauth::client_auth::Algorithm::Es256).unwrap();
    let oauth = builder(&server, agent_login()).dpop(key).build().unwrap();
    let token = oauth.token().await.unwrap();
    assert_eq!(token.token_type(), Some("DPoP"));
    // The thumbprint (RFC 7638) of the key in the code exchange's proof,
    // computed here with RustCrypto: the one the authorization request named.
    let proof = server.state.dpop_proofs.lock().unwrap()[0].clone();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header: serde_json::Value =
        serde_json::from_slice(&b64.decode(proof.split('.').next().unwrap()).unwrap()).unwrap();
    let jwk = &header["jwk"];
    let canonical = format!(
        r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#,
        jwk["crv"].as_str().unwrap(),
        jwk["x"].as_str().unwrap(),
        jwk["y"].as_str().unwrap()
    );
    let thumbprint = b64.encode(<sha2::Sha256 as sha2::Digest>::digest(canonical.as_bytes()));
    assert_eq!(server.authorizations()[0]["dpop_jkt"], thumbprint);
    assert_eq!(server.token_forms()[0]["grant_type"], "authorization_code");
}

#[tokio::test]
async fn a_short_token_counts_from_its_answer_not_from_the_login_s_start() {
    let server = LoginServer::start(Duration::from_secs(4)).await;
    let slow = Login::user_agent(|url| {
        let agent = LoginServer::user_agent();
        Box::pin(async move {
            // A person takes longer to approve than the token lasts: counted
            // from the login's start, it would be over on arrival.
            tokio::time::sleep(Duration::from_millis(4500)).await;
            agent(url).await
        })
    });
    let oauth = builder(&server, slow).build().unwrap();
    let token = oauth.token().await.unwrap();
    assert!(token.expose_token().starts_with("at-"));
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert_eq!(server.logins(), 1);
}

/// Builds a layer on `server` with a counting user agent, asks for a
/// token, and returns the error and how often the agent was called.
async fn refused(server: &LoginServer) -> (tower_oauth::TokenError, usize) {
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = builder(server, counting_agent(&calls)).build().unwrap();
    let e = oauth.token().await.unwrap_err();
    (e, calls.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_callback_with_another_server_s_iss_or_another_state_is_refused() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server.approve(Approve::WrongIss);
    let (e, _) = refused(&server).await;
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert!(e.to_string().contains("mix-up"), "{e}");
    server.approve(Approve::WrongState);
    let (e, _) = refused(&server).await;
    assert!(e.to_string().contains("state"), "{e}");
    // Neither code was exchanged.
    assert!(server.token_forms().is_empty());
    // A server that says it sends `iss`, and does not.
    server.approve(Approve::Yes);
    let oauth = builder(
        &server,
        Login::user_agent(|url| {
            let agent = LoginServer::user_agent();
            Box::pin(async move {
                let back = agent(url).await?;
                Ok(back.split("&iss=").next().unwrap().to_owned())
            })
        }),
    )
    .build()
    .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert!(e.to_string().contains("no `iss`"), "{e}");
    assert!(server.token_forms().is_empty());
}

#[tokio::test]
async fn servers_a_browser_may_not_be_sent_to_are_refused_before_any_request() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server.set_metadata("code_challenge_methods_supported", json!(["plain"]));
    let (e, calls) = refused(&server).await;
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert!(e.to_string().contains("without S256"), "{e}");
    assert_eq!(calls, 0);
    server.set_metadata("code_challenge_methods_supported", json!(["S256"]));
    for endpoint in [
        "javascript:alert(document.cookie)",
        "http://login.example.com/authorize",
        "file:///etc/passwd",
    ] {
        server.set_metadata("authorization_endpoint", json!(endpoint));
        let (e, calls) = refused(&server).await;
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{endpoint}: {e}");
        assert_eq!(calls, 0, "{endpoint}");
    }
    assert!(server.authorizations().is_empty());
}

#[tokio::test]
async fn no_code_verifier_or_refresh_token_appears_in_errors_or_logs() {
    let (_guard, logs) = support::capture_logs();
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server, agent_login()).build().unwrap();
    oauth.token().await.unwrap();
    server.revoke_all();
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    let text = logs.text();
    let debug = format!("{oauth:?}");
    for form in server.token_forms() {
        for name in ["code", "code_verifier", "refresh_token", "device_code"] {
            if let Some(value) = form.get(name) {
                assert!(!text.contains(value.as_str()), "{name} in the logs");
                assert!(!debug.contains(value.as_str()), "{name} in Debug");
            }
        }
    }
    assert!(text.contains("login"), "{text}");
}

#[tokio::test]
async fn the_device_grant_prompts_once_polls_at_the_interval_and_slows_down() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server
        .state
        .polls_before_approval
        .store(1, Ordering::SeqCst);
    server.state.slow_downs.store(1, Ordering::SeqCst);
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let shown = Arc::clone(&prompts);
    let login = Login::device(move |prompt| {
        shown.lock().unwrap().push((
            prompt.user_code().to_owned(),
            prompt.verification_uri().to_owned(),
        ));
    });
    let oauth = builder(&server, login).build().unwrap();
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert_eq!(
        *prompts.lock().unwrap(),
        [(
            "WDJB-MJHT".to_owned(),
            format!("{}/activate", server.issuer())
        )]
    );
    assert_eq!(server.device_logins(), 1);
    // slow_down, pending, approved: the interval grew by 5 s after the first.
    let times = server.state.poll_times.lock().unwrap().clone();
    assert_eq!(times.len(), 3);
    assert!(times[1] - times[0] >= Duration::from_secs(6), "{times:?}");
    assert!(times[2] - times[1] >= Duration::from_secs(6), "{times:?}");
    let device_poll = &server.token_forms()[0];
    assert_eq!(
        device_poll["grant_type"],
        "urn:ietf:params:oauth:grant-type:device_code"
    );
}

#[tokio::test]
async fn a_device_code_that_runs_out_ends_the_login() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server
        .state
        .polls_before_approval
        .store(100, Ordering::SeqCst);
    server.state.device_answer.lock().unwrap()["expires_in"] = json!(3);
    let oauth = builder(&server, Login::device(|_| {})).build().unwrap();
    let started = std::time::Instant::now();
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert!(e.to_string().contains("ran out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn control_characters_in_the_device_answer_never_reach_the_prompt() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let prompted = Arc::new(AtomicUsize::new(0));
    for (key, value) in [
        ("user_code", "\u{1b}]0;pwned\u{7}ABCD"),
        ("verification_uri", "https://as.example.com/\u{1b}[2J"),
        ("verification_uri", "javascript:alert(1)"),
    ] {
        let original = server.state.device_answer.lock().unwrap().clone();
        server.state.device_answer.lock().unwrap()[key] = json!(value);
        let counter = Arc::clone(&prompted);
        let login = Login::device(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let e = builder(&server, login)
            .build()
            .unwrap()
            .token()
            .await
            .unwrap_err();
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
        *server.state.device_answer.lock().unwrap() = original;
    }
    assert_eq!(prompted.load(Ordering::SeqCst), 0);
}

#[test]
fn a_login_needs_a_server_s_metadata_and_a_loopback_redirect() {
    let login = || Login::browser();
    let e = OAuthLayer::builder()
        .token_url("https://login.example.com/token")
        .client_id("cli")
        .login(login())
        .build()
        .unwrap_err();
    assert!(
        e.to_string().contains("issuer or protected_resource"),
        "{e}"
    );
    let with = |login: Login| {
        support::with_transport(
            OAuthLayer::builder()
                .issuer("https://login.example.com")
                .client_id("cli")
                .login(login),
        )
        .build()
    };
    // `localhost` too, for a server that registers only that.
    assert!(with(Login::browser().redirect_uri("http://localhost:8400/callback")).is_ok());
    for refused in [
        "https://127.0.0.1:8400/callback",
        "http://[::1]:8400/callback",
    ] {
        let e = with(Login::browser().redirect_uri(refused)).unwrap_err();
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
    }
    // A pasted address serves the browser's listener alone.
    let e = with(Login::device(|_| {}).paste_from_stdin()).unwrap_err();
    assert!(e.to_string().contains("Login::browser"), "{e}");
    assert!(!format!("{:?}", Login::browser()).is_empty());
}

/// The script `$BROWSER` names in the child: a forged callback and one
/// without a state to the listener first, then the login as a browser
/// follows it; what each got, in `LOGIN_BROWSER_LOG`.
const BROWSER_SCRIPT: &str = r#"#!/usr/bin/env python3
import os, sys, urllib.error, urllib.parse, urllib.request
url = sys.argv[1]
redirect = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["redirect_uri"][0]
def status(u):
    try:
        return urllib.request.urlopen(u, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code
with open(os.environ["LOGIN_BROWSER_LOG"], "a") as log:
    log.write("forged %d\n" % status(redirect + "?code=forged&state=wrong"))
    log.write("no-state %d\n" % status(redirect + "?code=forged"))
    log.write("login %d\n" % status(url))
"#;

#[tokio::test]
async fn the_system_browser_logs_in_through_the_loopback_listener() {
    let dir = support::scratch("login-browser");
    let Some(script) = support::stand_in_browser(&dir, BROWSER_SCRIPT) else {
        return;
    };
    let log = dir.join("browser.log");
    let stderr = support::child_test(
        "login::browser_child",
        &[
            ("BROWSER", script.as_os_str()),
            ("LOGIN_BROWSER_LOG", log.as_os_str()),
        ],
    )
    .await;
    assert!(stderr.contains("To sign in, open this URL"), "{stderr}");
    let seen = std::fs::read_to_string(&log).unwrap();
    assert_eq!(seen, "forged 404\nno-state 404\nlogin 200\n");
}

/// The child of the test above: a browser login with `$BROWSER` set.
#[tokio::test]
#[ignore = "run by the_system_browser_logs_in_through_the_loopback_listener"]
async fn browser_child() {
    assert!(
        std::env::var_os("BROWSER").is_some(),
        "run by the parent test"
    );
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server, Login::browser().timeout(Duration::from_secs(30)))
        .build()
        .unwrap();
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert_eq!(server.logins(), 1);
    let asked = &server.authorizations()[0];
    assert!(asked["redirect_uri"].starts_with("http://127.0.0.1:"));
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

/// `builder` without a client id: the login finds one itself.
fn unregistered(server: &LoginServer, login: Login) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .login(login),
    )
}

#[tokio::test]
async fn without_a_client_id_the_login_registers_once_for_every_process() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let layer = processes(
        || unregistered(&server, agent_login()),
        support::scratch("login-registration"),
    );
    let first = layer();
    assert_eq!(api_status(&first, &server).await, 200);
    let registrations = server.registrations();
    assert_eq!(registrations.len(), 1);
    let asked = &registrations[0];
    assert_eq!(asked["token_endpoint_auth_method"], "none");
    assert_eq!(asked["redirect_uris"], json!(["http://127.0.0.1/callback"]));
    assert_eq!(
        asked["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    let registered = server.state.registered.lock().unwrap()[0].clone();
    assert_eq!(server.authorizations()[0]["client_id"], registered);
    // Another process: the stored login, then a new login with the stored
    // client, and its refreshes with that client too.
    let second = layer();
    assert_eq!(api_status(&second, &server).await, 200);
    second.login().await.unwrap();
    assert!(second.force_renewal());
    second.token().await.unwrap();
    assert_eq!(server.registrations().len(), 1);
    assert_eq!(server.logins(), 2);
    assert_eq!(server.authorizations()[1]["client_id"], registered);
    assert!(server
        .token_forms()
        .iter()
        .all(|f| f["client_id"] == registered));
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn a_client_metadata_document_s_url_is_the_client_id_where_the_server_takes_one() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let document = format!("{}/clients/agent.json", server.issuer());
    let build = || {
        unregistered(&server, agent_login())
            .client_metadata_url(&document)
            .build()
            .unwrap()
    };
    // The server does not say it takes one: a registration.
    build().token().await.unwrap();
    assert_eq!(server.registrations().len(), 1);
    server.set_metadata("client_id_metadata_document_supported", json!(true));
    *server.state.metadata_document.lock().unwrap() = Some(document.clone());
    build().token().await.unwrap();
    assert_eq!(server.registrations().len(), 1);
    assert_eq!(server.authorizations()[1]["client_id"], document);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let e = OAuthLayer::builder()
        .issuer("https://login.example.com")
        .client_metadata_url("https://agent.example.com/")
        .login(Login::browser())
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("path"), "{e}");
}

#[tokio::test]
async fn hostile_registration_answers_end_the_login_with_a_clear_error() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    for (status, body, says) in [
        (201, "not json at all".to_owned(), "no JSON object"),
        (201, r#"{"client_secret":"x"}"#.to_owned(), "no client_id"),
        (201, r#"{"client_id":""}"#.to_owned(), "empty"),
        (
            201,
            format!(r#"{{"client_id":"{}"}}"#, "a".repeat(5000)),
            "too long",
        ),
        (
            201,
            format!(r#"{{"client_id":"{}"}}"#, "a".repeat(200_000)),
            "registration",
        ),
        (
            400,
            r#"{"error":"invalid_redirect_uri"}"#.to_owned(),
            "invalid_redirect_uri",
        ),
    ] {
        *server.state.registration_answer.lock().unwrap() = Some((status, body));
        let e = unregistered(&server, agent_login())
            .build()
            .unwrap()
            .token()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    assert!(server.authorizations().is_empty());
    // No registration endpoint, no metadata document, no client id.
    server.set_metadata("registration_endpoint", serde_json::Value::Null);
    let e = unregistered(&server, agent_login())
        .build()
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("client_id"), "{e}");
}

#[tokio::test]
async fn metadata_only_a_challenge_names_is_read_there_on_the_api_s_own_origin() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let elsewhere = LoginServer::start(Duration::from_secs(60)).await;
    // Named on another origin: not read, and nothing is sent there. With no
    // metadata, the login takes the API's own origin as its server (MCP
    // 2025-03-26), which this one is.
    *server.state.metadata_moved_to.lock().unwrap() =
        Some(format!("{}/moved/prm.json", elsewhere.issuer()));
    let oauth = builder(&server, agent_login()).build().unwrap();
    oauth.token().await.unwrap();
    assert_eq!(oauth.resource_metadata().unwrap().issuer, server.issuer());
    assert!(elsewhere.authorizations().is_empty() && elsewhere.token_forms().is_empty());
    // Named on the API's own origin: read there, and the login goes on.
    *server.state.metadata_moved_to.lock().unwrap() =
        Some(format!("{}/moved/prm.json", server.issuer()));
    let oauth = builder(&server, agent_login()).build().unwrap();
    assert_eq!(api_status(&oauth, &server).await, 200);
    assert!(oauth
        .resource_metadata()
        .unwrap()
        .metadata_url
        .ends_with("/moved/prm.json"));
}

/// A public client's login shared by replicas through a real redis-server,
/// sealed with the store's own key.
#[cfg(feature = "redis")]
mod redis_fleet {
    use super::*;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_share_one_login_and_its_chain() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let key = [7u8; 32];
        let replica = || {
            builder(&server, agent_login())
                .token_store(RedisStore::new(redis.url()).unwrap().encryption_key(key))
                .build()
                .unwrap()
        };
        let replicas: Vec<OAuthLayer> = (0..3).map(|_| replica()).collect();
        burst(&replicas, 5, &server.api_url()).await;
        assert_eq!(server.logins(), 1, "one login for the fleet");
        // Each replica's renewal refreshes with the stored chain: the
        // server sees no retired refresh token, and no second login.
        for oauth in &replicas {
            assert!(oauth.force_renewal());
            oauth.token().await.unwrap();
        }
        assert_eq!(server.logins(), 1);
        assert!(server.refreshes() >= 1);
        assert!(server.violations().is_empty(), "{:?}", server.violations());
        // Redis holds no token in clear (each looked for whole: a short
        // prefix such as `rt-` may appear in base64 by chance).
        let mut con = redis.connection();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        let tokens = server.issued_tokens();
        assert!(!tokens.is_empty());
        for key in keys {
            let value: Option<String> = redis::cmd("GET").arg(&key).query(&mut con).unwrap_or(None);
            let value = value.unwrap_or_default();
            assert!(tokens.iter().all(|t| !value.contains(t.as_str())), "{key}");
        }
    }
}

#[tokio::test]
async fn token_slots_of_different_scopes_never_take_turns_logging_in() {
    let server = LoginServer::start(Duration::from_millis(1500)).await;
    let oauth = builder(&server, agent_login())
        .refresh_margin(Duration::from_millis(100))
        .build()
        .unwrap();
    let read = tower_oauth::TokenParams::new().scope("read");
    let write = tower_oauth::TokenParams::new().scope("write");
    oauth.token_for(&read).await.unwrap();
    oauth.token_for(&write).await.unwrap();
    // The second login asked for both, so that neither needs another.
    assert_eq!(server.logins(), 2);
    let asked = server.authorizations()[1]["scope"].clone();
    assert!(asked.contains("read") && asked.contains("write"), "{asked}");
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(1600)).await;
        oauth.token_for(&read).await.unwrap();
        oauth.token_for(&write).await.unwrap();
    }
    assert_eq!(server.logins(), 2);
    assert_eq!(server.refreshes(), 4);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

/// The status of one GET of `url` through `oauth` and `RetryUnauthorized`,
/// which sends a request again after a step-up.
async fn status_with_retry(oauth: &OAuthLayer, url: &str) -> http::StatusCode {
    use tower::ServiceExt;
    let client = tower::ServiceBuilder::new()
        .layer(tower::retry::RetryLayer::new(
            tower_oauth::RetryUnauthorized::default(),
        ))
        .layer(oauth.clone())
        .service(support::hyper_client());
    client.oneshot(support::get(url)).await.unwrap().status()
}

#[tokio::test]
async fn a_challenge_s_scopes_start_a_login_with_them_where_no_list_is_set() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server.set_metadata(
        "scopes_supported",
        serde_json::json!(["openid", "read", "write", "offline_access"]),
    );
    *server.state.required_scope.lock().unwrap() = Some("write".into());
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = builder(&server, counting_agent(&calls)).build().unwrap();
    assert_eq!(status_with_retry(&oauth, &server.api_url()).await, 200);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the login, then the step-up's"
    );
    let scopes: Vec<String> = server
        .authorizations()
        .iter()
        .map(|a| a["scope"].clone())
        .collect();
    assert_eq!(scopes, ["read offline_access", "read write offline_access"]);
    // No OpenID request: no `prompt` (OpenID Connect Core 11 does not apply).
    assert!(!server.authorizations()[0].contains_key("prompt"));
    // The wider login serves from then on.
    for _ in 0..3 {
        assert_eq!(status_with_retry(&oauth, &server.api_url()).await, 200);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

/// Without `step_up_scopes`, an API cannot steer the person's login: a
/// scope the server does not list, or a URL scope of another origin than
/// the API's (another API's token, as Entra's `https://graph.microsoft.com`
/// scopes are), starts no login.
#[tokio::test]
async fn a_challenge_cannot_steer_a_login_toward_another_api() {
    for needed in ["write", "https://graph.microsoft.com/.default"] {
        let server = LoginServer::start(Duration::from_secs(60)).await;
        if needed.starts_with("https") {
            server.set_metadata(
                "scopes_supported",
                serde_json::json!(["openid", "read", needed, "offline_access"]),
            );
        }
        *server.state.required_scope.lock().unwrap() = Some(needed.into());
        let calls = Arc::new(AtomicUsize::new(0));
        let oauth = builder(&server, counting_agent(&calls)).build().unwrap();
        use tower::ServiceExt;
        let client = tower::ServiceBuilder::new()
            .layer(tower::retry::RetryLayer::new(
                tower_oauth::RetryUnauthorized::default(),
            ))
            .layer(oauth.clone())
            .service(support::hyper_client());
        match client.oneshot(support::get(&server.api_url())).await {
            // Another origin's scope: no step-up at all, the API's answer.
            Ok(response) => assert_eq!(response.status(), 403, "{needed}"),
            // A scope the server does not list: the step-up's token
            // request fails, and says why, before any login.
            Err(e) => assert!(e.to_string().contains("scopes_supported"), "{needed}: {e}"),
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{needed}: no second login");
        let scopes: Vec<String> = server
            .authorizations()
            .iter()
            .map(|a| a["scope"].clone())
            .collect();
        assert_eq!(scopes, ["read offline_access"], "{needed}");
    }
}

#[tokio::test]
async fn step_up_scopes_still_bound_a_login_s_step_up() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    *server.state.required_scope.lock().unwrap() = Some("write".into());
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = builder(&server, counting_agent(&calls))
        .step_up_scopes(["files:share"])
        .build()
        .unwrap();
    assert_eq!(status_with_retry(&oauth, &server.api_url()).await, 403);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "no login for a scope not listed"
    );
    assert_eq!(server.authorizations().len(), 1);
}
