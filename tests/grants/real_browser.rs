//! A person's login in a real browser: headless Chromium (Debian's
//! `chromium`) driven by puppeteer-core (`tests/servers/browser.mjs`) through
//! the login, device and consent pages of panva's oidc-provider
//! (`tests/servers/oidc_provider.mjs`): a burst of 50 sharing one login,
//! rotation after it, a second process that does not log in, a login from an
//! API's URL alone with dynamic registration, a person who cancels, and the
//! device grant. `Login::browser()` opens Chromium through `$BROWSER`, so that
//! part runs in a child process with it set. And a web app's confidential
//! client signing two people in through one layer (`begin_login`,
//! `finish_login`), each with their own token, then one signing out. And an
//! API's `max_age` (RFC 9470) that makes the provider ask the person, whose
//! browser keeps its session, for a fresh sign-in.
//! `.ci/run` installs them; elsewhere the tests skip with a note.

use crate::support;

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tower_oauth::{login::Login, store::FileStore, OAuthLayer, OAuthLayerBuilder, TokenErrorKind};

/// Set (as `.ci/run` does) to make a missing browser or provider fail.
const REQUIRE: &str = "TOWER_OAUTH_REQUIRE_THIRD_PARTY";

/// The provider's port, for the child.
const PORT_VAR: &str = "LOGIN_PROVIDER_PORT";

pub(super) struct Provider {
    /// A turn alone among the tests that load the machine or time a
    /// replica's watch (`support::quiet_turn`), for as long as the
    /// provider and its browser run.
    _quiet: std::sync::MutexGuard<'static, ()>,
    child: Child,
    pub(super) base: String,
    /// Its output, kept open: a closed pipe would end it at its next line.
    _output: std::io::BufReader<std::process::ChildStdout>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn browser_script() -> String {
    root()
        .join("tests/servers/browser.mjs")
        .display()
        .to_string()
}

/// The provider, if it and Chromium are installed.
fn provider() -> Option<Provider> {
    provider_with(&[])
}

/// The provider started with `env` set, if it and Chromium are installed.
fn provider_with(env: &[(&str, &str)]) -> Option<Provider> {
    node_provider("oidc_provider.mjs", env)
}

/// The provider `script` (under `tests/servers`) starts, with `env` set, if
/// it and Chromium are installed.
pub(super) fn node_provider(script: &str, env: &[(&str, &str)]) -> Option<Provider> {
    let installed = root()
        .join("tests/servers/node_modules/oidc-provider")
        .exists()
        && root()
            .join("tests/servers/node_modules/puppeteer-core")
            .exists()
        && std::path::Path::new(
            &std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
        )
        .exists();
    if !installed {
        assert!(
            std::env::var_os(REQUIRE).is_none(),
            "chromium or the test servers are missing and {REQUIRE} is set (see .ci/run)"
        );
        eprintln!("note: skipped, chromium or oidc-provider is not installed (see .ci/run)");
        return None;
    }
    let quiet = support::quiet_turn();
    let mut child = Command::new("node")
        .arg(root().join("tests/servers").join(script))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs");
    let mut line = String::new();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    output.read_line(&mut line).unwrap();
    let port = serde_json::from_str::<serde_json::Value>(&line).unwrap()["port"]
        .as_u64()
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    Some(Provider {
        _quiet: quiet,
        child,
        base: format!("http://127.0.0.1:{port}"),
        _output: output,
    })
}

pub(super) async fn stats(base: &str) -> serde_json::Value {
    let resp = support::hyper_client()
        .request(support::get(&format!("{base}/admin/stats")))
        .await
        .unwrap();
    serde_json::from_str(&support::read(resp).await.1).unwrap()
}

fn layer(base: &str) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .issuer(base)
            .scope("openid read")
            .resource(format!("{base}/api")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_logs_in_with_chromium_and_on_another_device() {
    let Some(provider) = provider() else {
        return;
    };
    // The browser login, in a child with $BROWSER set.
    let browser = format!("node {}", browser_script());
    let port = provider.base.rsplit(':').next().unwrap();
    support::child_test(
        "real_browser::browser_child",
        &[("BROWSER", browser.as_ref()), (PORT_VAR, port.as_ref())],
    )
    .await;

    // The device grant: the prompt hands the code's page to Chromium.
    let script = browser_script();
    let device = Login::device(move |prompt| {
        let page = prompt
            .verification_uri_complete()
            .unwrap_or(prompt.verification_uri())
            .to_owned();
        let script = script.clone();
        std::thread::spawn(move || {
            let _ = Command::new("node").arg(script).arg(page).status();
        });
    });
    let oauth = layer(&provider.base)
        .client_id("browser-cli")
        .login(device.timeout(Duration::from_secs(90)))
        .build()
        .unwrap();
    let token = oauth.token().await.unwrap();
    // The provider grants the resource's scope for its token.
    assert!(
        token.scope().unwrap_or_default().contains("read"),
        "{token:?}"
    );
    assert_eq!(stats(&provider.base).await["device"], 1);
}

/// The child of the test above: `Login::browser()` opens Chromium.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_person_logs_in_with_chromium_and_on_another_device"]
async fn browser_child() {
    let port = std::env::var(PORT_VAR).expect("run by the parent test");
    let base = format!("http://127.0.0.1:{port}");
    let dir = support::scratch("real-browser");
    let build = |login: Login| {
        layer(&base)
            .client_id("browser-cli")
            .login(login.timeout(Duration::from_secs(90)))
            .token_store(FileStore::new(dir.join("tokens")).unwrap())
            .build()
            .unwrap()
    };
    // A burst of 50 shares one login.
    let oauth = build(Login::browser());
    let burst: Vec<_> = (0..50)
        .map(|_| {
            let oauth = oauth.clone();
            tokio::spawn(async move { oauth.token().await.map(|t| t.expose_token().to_owned()) })
        })
        .collect();
    for request in burst {
        request.await.unwrap().unwrap();
    }
    assert_eq!(stats(&base).await["codes"], 1);
    // The refresh token rotates after it.
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(stats(&base).await["refreshes"], 1);
    // A second process on the same store does not log in.
    let second = build(Login::browser());
    second.token().await.unwrap();
    assert_eq!(stats(&base).await["codes"], 1);
    // From the API's URL alone, without a client id: the API's metadata
    // names the provider, a registration, then a login as that client.
    let registered = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(format!("{base}/api"))
            .login(Login::browser().timeout(Duration::from_secs(90))),
    )
    .build()
    .unwrap();
    registered.token().await.unwrap();
    let now = stats(&base).await;
    assert_eq!(
        (now["registrations"].as_u64(), now["codes"].as_u64()),
        (Some(1), Some(2))
    );
    // A person who cancels: a clear error.
    std::env::set_var("BROWSER_DENY", "1");
    let e = layer(&base)
        .client_id("browser-cli")
        .login(Login::browser().timeout(Duration::from_secs(90)))
        .build()
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert!(e.to_string().contains("access_denied"), "{e}");
}

/// RFC 9470's `max_age` at a real provider, in one person's Chromium whose
/// profile (the provider's session) lasts from one login to the next: a
/// second login signs the person in by the provider's session, without the
/// sign-in page; an API that asks for a sign-in within the last second makes
/// the layer log in again with `max_age=1`, and the provider asks the person
/// to sign in again, as `max_age` requires, its ID token's `auth_time` new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_s_max_age_makes_the_provider_ask_for_a_fresh_sign_in() {
    let Some(provider) = provider() else {
        return;
    };
    let dir = support::scratch("max-age-browser");
    let browser = format!("node {}", browser_script());
    let port = provider.base.rsplit(':').next().unwrap();
    let (profile, signins) = (dir.join("profile"), dir.join("sign-ins"));
    support::child_test(
        "real_browser::max_age_child",
        &[
            ("BROWSER", browser.as_ref()),
            (PORT_VAR, port.as_ref()),
            ("BROWSER_PROFILE", profile.as_os_str()),
            ("BROWSER_SIGNINS", signins.as_os_str()),
        ],
    )
    .await;
}

/// The child of the test above, with `$BROWSER` set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by an_api_s_max_age_makes_the_provider_ask_for_a_fresh_sign_in"]
async fn max_age_child() {
    let port = std::env::var(PORT_VAR).expect("run by the parent test");
    let base = format!("http://127.0.0.1:{port}");
    let signins = std::path::PathBuf::from(std::env::var("BROWSER_SIGNINS").unwrap());
    let sign_ins = || {
        std::fs::read_to_string(&signins)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let oauth = layer(&base)
        .client_id("browser-cli")
        .login(Login::browser().timeout(Duration::from_secs(90)))
        .build()
        .unwrap();
    oauth.token().await.unwrap();
    assert_eq!(sign_ins(), 1);
    // The same browser again: the provider's session signs the person in.
    oauth.login().await.unwrap();
    assert_eq!(
        sign_ins(),
        1,
        "the provider asked for a sign-in without max_age"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (url, seen) = max_age_api().await;
    let asked_at = now_s();
    assert_eq!(
        super::reauthentication::pay(&oauth, &url).await.unwrap(),
        200
    );
    assert_eq!(sign_ins(), 2, "max_age=1 asked for no fresh sign-in");
    assert_eq!(seen.lock().unwrap().len(), 2, "the request sent again once");
    let identity = oauth.identity().await.unwrap();
    let auth_time = identity.claims()["auth_time"].as_u64().expect("auth_time");
    assert!(
        auth_time >= asked_at,
        "auth_time {auth_time} before {asked_at}"
    );
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// An API on 127.0.0.1 that asks for a sign-in within the last second
/// (RFC 9470) of the first token it sees, and takes any other: its URL,
/// and the tokens it saw.
async fn max_age_api() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use support::serve::{answer, serve_state};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/orders", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    serve_state(
        listener,
        std::sync::Arc::clone(&seen),
        |seen, req| async move {
            let token = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let first = {
                let mut seen = seen.lock().unwrap();
                seen.push(token.clone());
                seen[0] == token
            };
            if !first {
                return answer(200, serde_json::json!({"orders": []}));
            }
            let mut refused = answer(
                401,
                serde_json::json!({"error": "insufficient_user_authentication"}),
            );
            refused.headers_mut().insert(
                "www-authenticate",
                r#"Bearer error="insufficient_user_authentication", max_age="1""#
                    .parse()
                    .unwrap(),
            );
            refused
        },
    );
    (url, seen)
}

/// oidc-provider with its defaults issues a refresh token only for an
/// `offline_access` it kept, and keeps it in an OpenID request only with
/// `prompt=consent` (OpenID Connect Core section 11). A person's login asks
/// for both; after the access token ran out, a second process on the same
/// file refreshes, with no second login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_at_a_provider_with_its_defaults_gets_a_refresh_token() {
    let Some(provider) = provider_with(&[("PROVIDER_DEFAULTS", "1"), ("ACCESS_TTL", "2")]) else {
        return;
    };
    let browser = format!("node {}", browser_script());
    let port = provider.base.rsplit(':').next().unwrap();
    support::child_test(
        "real_browser::offline_access_child",
        &[("BROWSER", browser.as_ref()), (PORT_VAR, port.as_ref())],
    )
    .await;
}

/// The child of the test above: `Login::browser()` opens Chromium.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_login_at_a_provider_with_its_defaults_gets_a_refresh_token"]
async fn offline_access_child() {
    let port = std::env::var(PORT_VAR).expect("run by the parent test");
    let base = format!("http://127.0.0.1:{port}");
    let dir = support::scratch("real-browser-defaults");
    let build = || {
        layer(&base)
            .client_id("browser-cli")
            .login(Login::browser().timeout(Duration::from_secs(90)))
            .token_store(FileStore::new(dir.join("tokens")).unwrap())
            .build()
            .unwrap()
    };
    let first = build();
    first.token().await.unwrap();
    assert!(first.login_status().await.has_refresh_token());
    assert_eq!(stats(&base).await["codes"], 1);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let second = build();
    second.token().await.unwrap();
    let now = stats(&base).await;
    assert_eq!(
        (now["codes"].as_u64(), now["refreshes"].as_u64()),
        (Some(1), Some(1)),
        "a refresh, no second login"
    );
}

/// A web app's callback route: it keeps the URL each browser came back to.
pub(super) async fn callback_route() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let callback = format!("http://{}/callback", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    support::serve::serve_state(listener, std::sync::Arc::clone(&seen), |kept, req| {
        // Not the browser's other asks, such as `/favicon.ico`.
        if req.uri().path() == "/callback" {
            kept.lock().unwrap().push(req.uri().to_string());
        }
        async move { support::serve::answer(200, serde_json::json!({"signed_in": true})) }
    });
    (callback, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_app_signs_two_people_in_with_chromium_and_one_out() {
    let (callback, seen) = callback_route().await;
    let Some(provider) = provider_with(&[("WEB_REDIRECT_URI", &callback)]) else {
        return;
    };
    let base = provider.base.clone();
    let oauth = layer(&base)
        .scope("openid read offline_access")
        .client_id("web-app")
        .client_secret("web-app-secret")
        .build()
        .unwrap();
    for person in ["alice@example.com", "bob@example.com"] {
        let url = oauth.begin_login(person, &callback).await.unwrap();
        let back = browser_comes_back(&url, person, &seen).await;
        oauth.finish_login(person, back).await.unwrap();
    }
    let whois = |token: String| {
        let base = base.clone();
        async move {
            let url = format!("{base}/admin/whois?token={token}");
            let resp = support::hyper_client()
                .request(support::get(&url))
                .await
                .unwrap();
            serde_json::from_str::<serde_json::Value>(&support::read(resp).await.1).unwrap()["sub"]
                .as_str()
                .map(str::to_owned)
        }
    };
    let token_of = |person: &str| {
        let oauth = oauth.clone();
        let params = tower_oauth::TokenParams::new().account(person);
        async move { oauth.token_for(&params).await }
    };
    let alice = token_of("alice@example.com").await.unwrap();
    let bob = token_of("bob@example.com").await.unwrap();
    assert_ne!(alice.expose_token(), bob.expose_token());
    assert_eq!(
        whois(alice.expose_token().to_owned()).await.as_deref(),
        Some("alice@example.com")
    );
    assert_eq!(
        whois(bob.expose_token().to_owned()).await.as_deref(),
        Some("bob@example.com")
    );
    assert_eq!(stats(&base).await["codes"], 2);
    // Alice signs out: the provider sees the revocation, which ends her
    // grant (her access token too), and she gets no new token.
    oauth.sign_out("alice@example.com").await.unwrap();
    assert_eq!(stats(&base).await["revocations"], 1);
    assert_eq!(whois(alice.expose_token().to_owned()).await, None);
    let e = token_of("alice@example.com").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert_eq!(
        whois(
            token_of("bob@example.com")
                .await
                .unwrap()
                .expose_token()
                .to_owned()
        )
        .await
        .as_deref(),
        Some("bob@example.com")
    );
}

/// Where the child of the test below finds the provider and the file the
/// browser writes its address to.
const ELSEWHERE_VAR: &str = "BROWSER_ELSEWHERE";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_on_another_machine_signs_in_by_the_address_pasted() {
    use tokio::io::AsyncWriteExt;
    let Some(provider) = provider() else {
        return;
    };
    let dir = support::scratch("real-browser-elsewhere");
    let address = dir.join("address");
    // The browser cannot reach the child's listener: the person pastes the
    // address it ended on into the child's standard input.
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "real_browser::pasting_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("BROWSER", format!("node {}", browser_script()))
        .env(ELSEWHERE_VAR, &address)
        .env(PORT_VAR, provider.base.rsplit(':').next().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let pasted = loop {
        match std::fs::read_to_string(&address) {
            Ok(text) if !text.is_empty() => break text,
            _ if std::time::Instant::now() > deadline => panic!("the browser wrote no address"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    assert!(pasted.contains("/callback?"), "{pasted}");
    let mut stdin = child.stdin.take().unwrap();
    // A line that is not the login's first, then the address; the login
    // takes the address and goes no further.
    stdin
        .write_all(b"http://127.0.0.1:1/callback?code=forged&state=another-login\n")
        .await
        .unwrap();
    stdin.write_all(pasted.trim().as_bytes()).await.unwrap();
    stdin.write_all(b"\n").await.unwrap();
    stdin.flush().await.unwrap();
    let output = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("the child ends")
        .unwrap();
    let stderr = support::child_passed("real_browser::pasting_child", &output);
    assert!(stderr.contains("paste the address it ended on"), "{stderr}");
    assert!(stderr.contains("another sign-in's state"), "{stderr}");
    assert_eq!(stats(&provider.base).await["codes"], 1);
}

/// The child of the test above: a browser login that takes the address
/// pasted on standard input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_browser_on_another_machine_signs_in_by_the_address_pasted"]
async fn pasting_child() {
    let port = std::env::var(PORT_VAR).expect("run by the parent test");
    assert!(std::env::var_os(ELSEWHERE_VAR).is_some());
    let base = format!("http://127.0.0.1:{port}");
    let oauth = layer(&base)
        .client_id("browser-cli")
        .login(
            Login::browser()
                .paste_from_stdin()
                .timeout(Duration::from_secs(90)),
        )
        .build()
        .unwrap();
    let token = oauth.token().await.unwrap();
    assert!(token.scope().unwrap_or_default().contains("read"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_login_at_a_provider_that_matches_exactly_and_forgets_clients() {
    let Some(provider) = provider_with(&[("EXACT_REDIRECTS", "1")]) else {
        return;
    };
    let browser = format!("node {}", browser_script());
    let port = provider.base.rsplit(':').next().unwrap();
    support::child_test(
        "real_browser::second_login_child",
        &[("BROWSER", browser.as_ref()), (PORT_VAR, port.as_ref())],
    )
    .await;
}

/// The child of the test above: a registered client's logins, through
/// Chromium.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_second_login_at_a_provider_that_matches_exactly_and_forgets_clients"]
async fn second_login_child() {
    let port = std::env::var(PORT_VAR).expect("run by the parent test");
    let base = format!("http://127.0.0.1:{port}");
    // No client id: the layer registers one, with its listener's URI.
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(format!("{base}/api"))
            .forced_renewal_interval(Duration::ZERO)
            .login(Login::browser().timeout(Duration::from_secs(90))),
    )
    .build()
    .unwrap();
    oauth.token().await.unwrap();
    let now = stats(&base).await;
    assert_eq!(
        (now["registrations"].as_u64(), now["codes"].as_u64()),
        (Some(1), Some(1))
    );
    // The login ends (the refresh token revoked); the next one is at the
    // URI the client was registered with, which this provider takes alone.
    oauth.logout().await.unwrap();
    oauth.token().await.unwrap();
    let now = stats(&base).await;
    assert_eq!(
        (now["registrations"].as_u64(), now["codes"].as_u64()),
        (Some(1), Some(2))
    );
    // The provider forgets its clients: the refresh is refused as
    // invalid_client, and the login that follows registers once more.
    let forget = http::Request::post(format!("{base}/admin/forget-clients"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    support::hyper_client().request(forget).await.unwrap();
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    let now = stats(&base).await;
    assert_eq!(
        (now["registrations"].as_u64(), now["codes"].as_u64()),
        (Some(2), Some(3))
    );
}

/// A web app's routes for the test below: `/callback` keeps the URL each
/// browser came back to; `/backchannel-logout` hands the provider's logout
/// token to the replica set in `logout_to`, and keeps what it answered;
/// `/signed-out` keeps the `state` it came back with (none is sent).
#[cfg(feature = "redis")]
#[derive(Default)]
struct AppRoutes {
    callbacks: std::sync::Mutex<Vec<String>>,
    logout_to: std::sync::OnceLock<OAuthLayer>,
    logouts: std::sync::Mutex<Vec<Result<usize, String>>>,
    signed_out: std::sync::Mutex<Vec<String>>,
}

#[cfg(feature = "redis")]
async fn app_routes() -> (String, std::sync::Arc<AppRoutes>) {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let routes = std::sync::Arc::new(AppRoutes::default());
    support::serve::serve_state(
        listener,
        std::sync::Arc::clone(&routes),
        |app, req| async move {
            let query = req.uri().query().unwrap_or_default().to_owned();
            match req.uri().path() {
                "/callback" => app.callbacks.lock().unwrap().push(req.uri().to_string()),
                "/signed-out" => {
                    let state = form_urlencoded::parse(query.as_bytes())
                        .find(|(k, _)| k == "state")
                        .map(|(_, v)| v.into_owned());
                    app.signed_out
                        .lock()
                        .unwrap()
                        .push(state.unwrap_or_default());
                }
                "/backchannel-logout" => {
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let token = form_urlencoded::parse(&body)
                        .find(|(k, _)| k == "logout_token")
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default();
                    let oauth = app.logout_to.get().expect("the replica is set").clone();
                    let done = oauth.back_channel_logout(token).await;
                    let status = if done.is_ok() { 200 } else { 400 };
                    app.logouts
                        .lock()
                        .unwrap()
                        .push(done.map_err(|e| e.to_string()));
                    return support::serve::answer(status, serde_json::json!({}));
                }
                _ => {}
            }
            support::serve::answer(200, serde_json::json!({"ok": true}))
        },
    );
    (base, routes)
}

/// Two replicas of a web app on one real Redis sign two people in through
/// Chromium, each getting their verified identity; the person's session
/// ended at the provider's own end-session page makes the provider post a
/// logout token, which signs that person out on both replicas while the
/// other is served; the other's logout begins at the app (RP-initiated),
/// whose URL the provider takes.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_app_knows_who_signed_in_and_the_provider_ends_their_session() {
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;
    if missing() {
        return;
    }
    let (app, routes) = app_routes().await;
    let callback = format!("{app}/callback");
    let post_logout = format!("{app}/signed-out");
    let Some(provider) = provider_with(&[
        ("WEB_REDIRECT_URI", &callback),
        ("WEB_BACKCHANNEL_URI", &format!("{app}/backchannel-logout")),
        ("WEB_POST_LOGOUT_URI", &post_logout),
    ]) else {
        return;
    };
    let redis = RedisServer::start();
    let base = provider.base.clone();
    let replica = || {
        layer(&base)
            .scope("openid read offline_access")
            .client_id("web-app")
            .client_secret("web-app-secret")
            .token_store(RedisStore::new(redis.url()).unwrap())
            .build()
            .unwrap()
    };
    let (a, b) = (replica(), replica());
    routes.logout_to.set(b.clone()).ok().unwrap();
    let scratch = support::scratch("web-app-logout");
    // Each person's browser stays open after the login, for the address
    // written to their file next.
    let mut browsers = Vec::new();
    for (person, begin, finish) in [("alice@example.com", &a, &b), ("bob@example.com", &b, &a)] {
        let next = scratch.join(person);
        let url = begin.begin_login(person, &callback).await.unwrap();
        let child = tokio::process::Command::new("node")
            .arg(browser_script())
            .arg(&url)
            .env("BROWSER_LOGIN", person)
            .env("BROWSER_THEN", &next)
            .spawn()
            .unwrap();
        let back = wait_for(|| routes.callbacks.lock().unwrap().pop()).await;
        let identity = finish
            .finish_login(person, format!("http://127.0.0.1{back}"))
            .await
            .unwrap()
            .expect("an identity with openid");
        assert_eq!(
            identity.subject(),
            person,
            "the person who typed their name"
        );
        assert_eq!(identity.issuer(), base);
        assert!(identity.session_id().is_some(), "oidc-provider sends sid");
        browsers.push((child, next));
    }
    let token_of = |oauth: &OAuthLayer, person: &str| {
        let (oauth, params) = (
            oauth.clone(),
            tower_oauth::TokenParams::new().account(person),
        );
        async move { oauth.token_for(&params).await.map_err(|e| e.kind()) }
    };
    for replica in [&a, &b] {
        for person in ["alice@example.com", "bob@example.com"] {
            assert!(token_of(replica, person).await.is_ok());
        }
    }
    // Alice ends her session at the provider's own end-session page.
    let (mut alice_browser, alice_next) = browsers.remove(0);
    std::fs::write(&alice_next, format!("{base}/session/end")).unwrap();
    assert!(alice_browser.wait().await.unwrap().success());
    let logouts = wait_for(|| {
        let logouts = routes.logouts.lock().unwrap();
        (!logouts.is_empty()).then(|| logouts.clone())
    })
    .await;
    assert_eq!(
        logouts,
        [Ok(1)],
        "the provider's logout token signed Alice out"
    );
    assert_eq!(stats(&base).await["backchannel"], 1);
    for replica in [&a, &b] {
        assert_eq!(
            token_of(replica, "alice@example.com").await.unwrap_err(),
            TokenErrorKind::LoginRequired
        );
        assert!(
            token_of(replica, "bob@example.com").await.is_ok(),
            "Bob untouched"
        );
    }
    // Bob's logout begins at the app: the provider takes its URL (which
    // carries no `state`), and sends him back to the app.
    let url = a
        .end_session_url("bob@example.com", &post_logout)
        .await
        .unwrap();
    let sent_state = url::Url::parse(&url)
        .unwrap()
        .query_pairs()
        .any(|(k, _)| k == "state");
    assert!(!sent_state, "{url}");
    let (mut bob_browser, bob_next) = browsers.remove(0);
    std::fs::write(&bob_next, &url).unwrap();
    assert!(bob_browser.wait().await.unwrap().success());
    assert_eq!(*routes.signed_out.lock().unwrap(), [String::new()]);
    for replica in [&a, &b] {
        assert_eq!(
            token_of(replica, "bob@example.com").await.unwrap_err(),
            TokenErrorKind::LoginRequired
        );
    }
    assert_eq!(stats(&base).await["backchannel_errors"], 0);
}

/// `found`'s answer, asked every 20 ms for at most 60 s.
#[cfg(feature = "redis")]
async fn wait_for<T>(found: impl Fn() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = found() {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "it never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The FAPI 2.0 profile on oidc-provider's own (PAR and DPoP required,
/// `private_key_jwt`): a person signs in through Chromium, the token is taken
/// by the provider's userinfo endpoint as the API (DPoP-bound); a machine
/// token too; and the same server refuses the client without DPoP, which
/// `fapi2()` would have refused to build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fapi2_profile_signs_a_person_in_at_oidc_provider_s_fapi2_server() {
    use support::keys::{Kind, TestKey};
    use tower::ServiceExt;
    use tower_oauth::client_auth::{Algorithm, ClientAuth, SigningKey};
    use tower_oauth::dpop::DpopKey;
    let key = TestKey::new(Kind::P256);
    let mut public: serde_json::Value = serde_json::from_str(&key.jwk(Kind::P256)).unwrap();
    public.as_object_mut().unwrap().remove("d");
    public["kid"] = "fapi-client".into();
    let (callback, seen) = callback_route().await;
    let Some(provider) = node_provider(
        "fapi_provider.mjs",
        &[
            ("FAPI_CLIENT_JWK", &public.to_string()),
            ("FAPI_REDIRECT_URI", &callback),
        ],
    ) else {
        return;
    };
    let base = provider.base.clone();
    let signing = || {
        SigningKey::from_pem(&key.pkcs8, Algorithm::Es256)
            .unwrap()
            .key_id("fapi-client")
    };
    let builder = || {
        support::with_transport(
            OAuthLayer::builder()
                .issuer(&base)
                .client_id("fapi-app")
                .client_auth(ClientAuth::PrivateKeyJwt(signing()))
                .scope("openid offline_access"),
        )
    };
    let oauth = builder()
        .dpop(DpopKey::generate(Algorithm::Es256).unwrap())
        .fapi2()
        .build()
        .unwrap();
    let person = "carol@example.com";
    let url = oauth.begin_login(person, &callback).await.unwrap();
    let q: std::collections::HashMap<String, String> = url::Url::parse(&url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(q.len(), 2, "only client_id and request_uri: {q:?}");
    let back = browser_comes_back(&url, person, &seen).await;
    let who = oauth
        .finish_login(person, back)
        .await
        .unwrap()
        .expect("an identity");
    assert_eq!(who.subject(), person);
    // The API: the provider's userinfo endpoint, which takes the token only
    // with a DPoP proof of the key it is bound to.
    let api = tower::ServiceBuilder::new()
        .layer(oauth.for_account(person).unwrap())
        .service(support::hyper_client());
    let response = api
        .oneshot(support::get(&format!("{base}/me")))
        .await
        .unwrap();
    let (status, body) = support::read(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["sub"],
        person
    );
    let counts = stats(&base).await;
    assert_eq!(counts["pushed"], 1);
    assert_eq!(counts["codes"], 1);
    // A machine token under the profile: client credentials, DPoP-bound.
    let machine = builder()
        .scope("openid")
        .dpop(DpopKey::generate(Algorithm::Es256).unwrap())
        .fapi2()
        .build()
        .unwrap();
    let token = machine.token().await.unwrap();
    assert_eq!(token.token_type(), Some("DPoP"));
    // Without DPoP the server refuses the client; fapi2() refuses to build it.
    let e = builder().fapi2().build().unwrap_err();
    assert!(e.to_string().contains("sender-constrained"), "{e}");
    let plain = builder().build().unwrap();
    let dave = "dave@example.com";
    let url = plain.begin_login(dave, &callback).await.unwrap();
    let back = browser_comes_back(&url, dave, &seen).await;
    let e = plain.finish_login(dave, back).await.unwrap_err();
    assert_eq!(e.error_code(), Some("invalid_grant"), "{e}");
    let errors = stats_errors(&base).await;
    assert!(errors.iter().any(|e| e.contains("DPoP")), "{errors:?}");
    assert_eq!(
        stats(&base).await["codes"],
        1,
        "no token for the plain client"
    );
}

/// Chromium signs `person` in at `url`: the callback URL the web app's
/// route kept.
pub(super) async fn browser_comes_back(
    url: &str,
    person: &str,
    seen: &std::sync::Mutex<Vec<String>>,
) -> String {
    let status = tokio::process::Command::new("node")
        .arg(browser_script())
        .arg(url)
        .env("BROWSER_LOGIN", person)
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let back = seen.lock().unwrap().pop().expect("the browser came back");
    format!("http://127.0.0.1{back}")
}

async fn stats_errors(base: &str) -> Vec<String> {
    stats(base).await["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
