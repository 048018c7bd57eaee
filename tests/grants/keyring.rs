//! A login kept in a `FileStore` whose sealing key lives in a real Secret
//! Service: Debian's `gnome-keyring` on a session bus of its own
//! (`dbus-run-session`), unlocked with a throwaway password, and checked
//! with `secret-tool` (`libsecret-tools`): one item and no key file; a second
//! store on the file reads the login; the item deleted, a new login; an
//! item holding garbage, a locked collection and a Secret Service that never
//! answers, each a clear error within the bound, nothing written in clear.
//! `.ci/run` installs them; elsewhere the test skips with a note.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::login_server::{LoginServer, CLIENT};
use tower_oauth::login::Login;
use tower_oauth::store::FileStore;
use tower_oauth::{OAuthLayer, TokenErrorKind};

/// Set (as `.ci/run` does) to make a missing keyring fail the test.
const REQUIRE: &str = "TOWER_OAUTH_REQUIRE_KEYRING";

/// Debian's python, with Debian's `python3-dbus` (a pyenv's has none).
const DEBIAN_PYTHON: &str = "/usr/bin/python3";

/// The service the test's items are kept under.
const SERVICE: &str = "tower-oauth-test";

fn installed(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the child test `name` in a session of its own: a D-Bus session bus,
/// and, with `keyring`, gnome-keyring's Secret Service on it, unlocked.
async fn in_session(name: &str, keyring: bool) {
    let tools = [
        "dbus-run-session",
        "gnome-keyring-daemon",
        "secret-tool",
        DEBIAN_PYTHON,
    ];
    let python_dbus = Command::new(DEBIAN_PYTHON)
        .args(["-c", "import dbus"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !tools.iter().all(|t| installed(t)) || !python_dbus {
        assert!(
            std::env::var_os(REQUIRE).is_none(),
            "gnome-keyring, libsecret-tools, dbus or python3-dbus is missing and {REQUIRE} is set \
             (see .ci/run)"
        );
        eprintln!(
            "note: skipped, gnome-keyring, libsecret-tools, dbus or python3-dbus is missing \
             (see .ci/run)"
        );
        return;
    }
    let home = support::scratch(&format!("keyring-home-{name}"));
    let start = match keyring {
        true => "printf throwaway | gnome-keyring-daemon --unlock --components=secrets >/dev/null",
        false => "true",
    };
    let script = format!("{start}; exec \"$0\" \"$@\"");
    let output = tokio::process::Command::new("dbus-run-session")
        .args(["--", "sh", "-c", &script])
        .arg(std::env::current_exe().unwrap())
        .args([
            &format!("keyring::{name}"),
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_RUNTIME_DIR", &home)
        .env("KEYRING_TEST_SESSION", "1")
        .output()
        .await
        .unwrap();
    support::child_passed(name, &output);
}

#[tokio::test]
async fn a_login_sealed_with_a_key_in_the_secret_service() {
    in_session("keyring_child", true).await;
}

#[tokio::test]
async fn a_secret_service_that_never_answers_is_an_error_within_the_bound() {
    in_session("silent_service_child", false).await;
}

/// What `secret-tool` says of the item of the file at `path`: its secret.
fn item_secret(path: &std::path::Path) -> Option<String> {
    let path = std::fs::canonicalize(path).unwrap();
    let out = Command::new("secret-tool")
        .args(["lookup", "service", SERVICE, "username"])
        .arg(format!("token-file:{}", path.display()))
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn secret_tool(args: &[&str], path: &std::path::Path, input: Option<&str>) {
    use std::io::Write;
    let path = std::fs::canonicalize(path).unwrap();
    let mut child = Command::new("secret-tool")
        .args(args)
        .args(["service", SERVICE, "username"])
        .arg(format!("token-file:{}", path.display()))
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = input {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success(), "secret-tool {args:?}");
}

fn layer(server: &LoginServer, store: FileStore) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .client_id(CLIENT)
            .login(Login::user_agent(LoginServer::user_agent()))
            .token_store(store),
    )
    .build()
    .unwrap()
}

/// The child of the first test, in a session with an unlocked keyring.
#[tokio::test]
#[ignore = "run by a_login_sealed_with_a_key_in_the_secret_service"]
async fn keyring_child() {
    assert!(std::env::var_os("KEYRING_TEST_SESSION").is_some());
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("keyring-file");
    let tokens = dir.join("tokens");
    let store = || FileStore::new(&tokens).unwrap().key_in_keyring(SERVICE);
    // The login: one item, 32 bytes in base64; no key file; nothing in clear.
    let first = layer(&server, store());
    assert!(
        item_secret(&tokens).is_none(),
        "no item before the first write"
    );
    let token = first.token().await.unwrap();
    assert_eq!(server.logins(), 1);
    let secret = item_secret(&tokens).expect("the item is made with the first write");
    let key = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(secret.trim())
            .unwrap()
    };
    assert_eq!(key.len(), 32);
    let key_file = dir.join("tokens.key");
    assert!(!key_file.exists(), "no key beside the file");
    let file = std::fs::read_to_string(&tokens).unwrap();
    for issued in server.issued_tokens() {
        assert!(!file.contains(&issued), "a token in clear in the file");
    }
    assert!(!file.contains(token.expose_token()));

    // A second store on the file (another process's): the login, no new one.
    let second = layer(&server, store());
    second.token().await.unwrap();
    assert_eq!(server.logins(), 1, "the second store read the login");

    // The item deleted: the file no longer opens; a new login, a new item.
    secret_tool(&["clear"], &tokens, None);
    let third = layer(&server, store());
    third.token().await.unwrap();
    assert_eq!(server.logins(), 2);
    let renewed = item_secret(&tokens).expect("a new item");
    assert_ne!(renewed, secret);
    assert!(!key_file.exists());

    // An item holding garbage: a clear error, no login, nothing written.
    secret_tool(
        &["store", "--label=garbage"],
        &tokens,
        Some("not a key \u{1b}[2J"),
    );
    let before = std::fs::read(&tokens).unwrap();
    let e = layer(&server, store()).token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
    assert!(
        e.to_string().contains("does not hold a token file's key"),
        "{e}"
    );
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
    assert_eq!(server.logins(), 2);
    assert_eq!(std::fs::read(&tokens).unwrap(), before);

    // A locked collection: an error within the bound, nothing written.
    secret_tool(&["clear"], &tokens, None);
    let locked = Command::new(DEBIAN_PYTHON)
        .args([
            "-c",
            "import dbus; s = dbus.SessionBus().get_object('org.freedesktop.secrets', \
             '/org/freedesktop/secrets'); dbus.Interface(s, 'org.freedesktop.Secret.Service')\
             .Lock([dbus.ObjectPath('/org/freedesktop/secrets/collection/login')])",
        ])
        .status()
        .unwrap();
    assert!(locked.success());
    let started = Instant::now();
    let e = layer(&server, store()).token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
    eprintln!("a locked collection: {e}");
    assert!(e.to_string().contains("Secret Service"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "bounded");
    assert_eq!(server.logins(), 2);
    assert_eq!(std::fs::read(&tokens).unwrap(), before);
    // The layers that hold the key keep serving from memory.
    first.token().await.unwrap();
}

/// The Secret Service's name owned by a process that never answers.
const SILENT_SERVICE: &str = "import dbus, sys, time
bus = dbus.SessionBus()
bus.request_name('org.freedesktop.secrets')
print('ready', flush=True)
time.sleep(60)
";

/// The child of the second test: a session bus whose Secret Service never
/// answers.
#[tokio::test]
#[ignore = "run by a_secret_service_that_never_answers_is_an_error_within_the_bound"]
async fn silent_service_child() {
    use std::io::BufRead;
    assert!(std::env::var_os("KEYRING_TEST_SESSION").is_some());
    let mut silent = Command::new(DEBIAN_PYTHON)
        .args(["-c", SILENT_SERVICE])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufReader::new(silent.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("keyring-silent");
    let tokens = dir.join("tokens");
    let store = FileStore::new(&tokens).unwrap().key_in_keyring(SERVICE);
    let started = Instant::now();
    let e = layer(&server, store).token().await.unwrap_err();
    let took = started.elapsed();
    let _ = silent.kill();
    let _ = silent.wait();
    assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
    assert!(e.to_string().contains("did not answer within 3 s"), "{e}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(server.logins(), 0, "no login without a key to keep it");
    assert!(!dir.join("tokens.key").exists());
}
