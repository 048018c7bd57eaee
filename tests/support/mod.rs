#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "reqwest")]
pub mod assertion_endpoint;
pub mod authority;
pub mod chaos;
#[cfg(feature = "reqwest")]
pub mod dpop_server;
pub mod fleet;
pub mod grpc;
pub mod id_tokens;
pub mod keys;
pub mod login_server;
#[cfg(feature = "mcp")]
pub mod mcp_server;
#[cfg(feature = "reqwest")]
pub mod mtls;
pub mod provider;
#[cfg(feature = "redis-cluster")]
pub mod redis_cluster;
#[cfg(feature = "redis-sentinel")]
pub mod redis_sentinel;
#[cfg(feature = "redis")]
pub mod redis_server;
pub mod refresh_server;
#[cfg(feature = "reqwest")]
mod reqwest_client;
pub mod resource_server;
pub mod serve;
pub mod tally;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tower_oauth::OAuthLayerBuilder;

pub use authority::{Authority, Fault};
#[cfg(feature = "reqwest")]
#[allow(unused_imports)]
pub use reqwest_client::reqwest_client;

pub const CLIENT_ID: &str = "quick-client";
pub const CLIENT_SECRET: &str = "s3cr3t+/=value";

pub type HyperClient = Client<HttpConnector, Full<Bytes>>;

/// A turn alone, held for a test's length, among the tests of one binary
/// that load the machine (a real browser starting) and those whose verdict
/// rests on a replica's watch running within a second of Redis dying (a
/// store restarted empty): on two busy cores a starved watch cannot tell a
/// loss from being cut off, and takes the safe side (see docs/replicas.md,
/// "What remains a risk"), which such a test would count as a failure.
pub fn quiet_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A plain hyper-util client: the inner service of the layer.
pub fn hyper_client() -> HyperClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A builder pointed at `authority` with the right credentials. Without the
/// `reqwest` feature the token request goes over a hyper-util client.
pub fn builder(authority: &Authority) -> OAuthLayerBuilder {
    with_transport(
        tower_oauth::OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
}

/// The builder with a transport when the crate has no default one.
pub fn with_transport(builder: OAuthLayerBuilder) -> OAuthLayerBuilder {
    if cfg!(feature = "reqwest") {
        builder
    } else {
        builder.transport(hyper_client())
    }
}

/// The layer in front of a plain hyper-util client.
pub fn client(oauth: &tower_oauth::OAuthLayer) -> tower_oauth::OAuthService<HyperClient> {
    tower::ServiceBuilder::new()
        .layer(oauth.clone())
        .service(hyper_client())
}

/// One GET of `url` through `oauth` and a hyper-util client.
pub async fn send(
    oauth: &tower_oauth::OAuthLayer,
    url: &str,
) -> Result<http::Response<hyper::body::Incoming>, tower::BoxError> {
    use tower::ServiceExt;
    client(oauth).oneshot(get(url)).await
}

/// Every layer of a fleet sending a GET every 20 ms, each on its own task.
pub struct Senders(Vec<tokio::task::JoinHandle<(u64, u64)>>);

impl Senders {
    /// Each of `layers` sends a GET of `url` every 20 ms until `until`.
    pub fn start(
        layers: &[tower_oauth::OAuthLayer],
        url: &str,
        until: std::time::Instant,
    ) -> Senders {
        Senders(
            layers
                .iter()
                .map(|layer| {
                    let (service, url) = (client(layer), url.to_owned());
                    tokio::spawn(async move {
                        use tower::ServiceExt;
                        let (mut ok, mut failed) = (0, 0);
                        while std::time::Instant::now() < until {
                            match service.clone().oneshot(get(&url)).await {
                                Ok(resp) if resp.status() == 200 => ok += 1,
                                _ => failed += 1,
                            }
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        }
                        (ok, failed)
                    })
                })
                .collect(),
        )
    }

    /// Once all are done: the requests answered 200, and the others
    /// (failed, or answered otherwise).
    pub async fn finish(self) -> (u64, u64) {
        let (mut ok, mut failed) = (0, 0);
        for sender in self.0 {
            let (o, f) = sender.await.unwrap();
            ok += o;
            failed += f;
        }
        (ok, failed)
    }
}

pub fn get(url: &str) -> http::Request<Full<Bytes>> {
    http::Request::get(url).body(Full::default()).unwrap()
}

/// A response's status and body as text.
pub async fn read<B>(resp: http::Response<B>) -> (http::StatusCode, String)
where
    B: hyper::body::Body,
    B::Error: std::fmt::Debug,
{
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub fn fault(status: u16, body: &str) -> Fault {
    Fault {
        status,
        body: body.into(),
        headers: vec![("content-type".into(), "application/json".into())],
    }
}

/// Captures every tracing event of the current thread, at every level.
pub fn capture_logs() -> (tracing::subscriber::DefaultGuard, Captured) {
    let (subscriber, captured) = capturing();
    (tracing::subscriber::set_default(subscriber), captured)
}

/// A subscriber that writes every event, at every level, to what it
/// returns beside it.
pub fn capturing() -> (impl tracing::Subscriber + Send + Sync, Captured) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    (subscriber, captured)
}

/// Log output captured by [`capture_logs`].
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A fresh directory under the system's temporary one, for one test's files.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tower-oauth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `text` to `path` as secret managers and Kubernetes do: a new
/// file renamed over the old one.
pub fn replace(path: &std::path::Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// Runs `test`, an ignored test of this test binary, in a child process
/// with the environment `env` (a browser login's `$BROWSER`, say), and
/// asserts that it ran and passed; its stderr.
pub async fn child_test(test: &str, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture"])
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    child_passed(test, &output)
}

/// Asserts that the child test `test`, which gave `output`, ran and
/// passed; its stderr.
pub fn child_passed(test: &str, output: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{test}: {stderr}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "{test} did not run: {stderr}"
    );
    stderr
}

/// A stand-in browser for `$BROWSER`: the python `script`, written to
/// `dir` and made executable; `None` (said) where python3 is missing.
pub fn stand_in_browser(dir: &std::path::Path, script: &str) -> Option<std::path::PathBuf> {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: python3 is missing, and the stand-in browser is a python script");
        return None;
    }
    let path = dir.join("browser.py");
    std::fs::write(&path, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Some(path)
}
