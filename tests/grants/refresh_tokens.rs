//! The refresh token grant against a loopback server that rotates refresh
//! tokens and revokes the whole login when a retired one comes back (as
//! Auth0 and Okta do): one layer under load, token slots, several replicas
//! on a real redis-server, several processes (spawned, not threads) on one
//! `FileStore`, a restart, a process killed mid-refresh, a revoked login,
//! a new login, hostile answers and a server that echoes the refresh token.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::refresh_server::{Answer, RefreshServer};
use tower::ServiceExt;
use tower_oauth::{
    client_auth::ClientAuth, grant::RefreshToken, store::FileStore, OAuthLayer, OAuthLayerBuilder,
    TokenErrorKind, TokenParams,
};

const CLIENT: &str = "cli-app";

fn builder(server: &RefreshServer, token: RefreshToken) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id(CLIENT)
            .refresh_token(token),
    )
}

/// `rounds` rounds of `tasks` requests at once through `oauth`, `pause`
/// apart: the answers that were not 200.
async fn rounds(
    oauth: &OAuthLayer,
    url: &str,
    rounds: usize,
    tasks: usize,
    pause: Duration,
) -> usize {
    let service = support::client(oauth);
    let mut refused = 0;
    for _ in 0..rounds {
        let mut round = Vec::new();
        for _ in 0..tasks {
            let (service, url) = (service.clone(), url.to_owned());
            round.push(tokio::spawn(async move {
                service.oneshot(support::get(&url)).await
            }));
        }
        for task in round {
            match task.await.unwrap() {
                Ok(resp) if resp.status() == 200 => {}
                Ok(resp) => {
                    eprintln!("answered {}", resp.status());
                    refused += 1
                }
                Err(e) => {
                    eprintln!("failed: {e}");
                    refused += 1
                }
            }
        }
        tokio::time::sleep(pause).await;
    }
    refused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_layer_refreshes_once_per_renewal_and_never_sends_a_retired_token() {
    let server = RefreshServer::start(Duration::from_secs(2)).await;
    let initial = server.login();
    let rotations = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&rotations);
    let oauth = builder(
        &server,
        RefreshToken::new(initial.clone())
            .on_rotation(move |new| seen.lock().unwrap().push(new.to_owned())),
    )
    .build()
    .unwrap();
    // 200 tasks a round for about 5 s: two and a half lifetimes.
    let refused = rounds(
        &oauth,
        &server.api_url(),
        25,
        200,
        Duration::from_millis(200),
    )
    .await;
    assert_eq!(refused, 0);
    assert_eq!(server.reuses(), 0, "no retired refresh token was sent");
    assert!(!server.is_revoked(&initial));
    let refreshes = server.refreshes();
    // Renewed ahead at half the lifetime: about one refresh a second.
    assert!((3..=9).contains(&refreshes), "{refreshes} refreshes");
    // Each refresh sent the token the one before it got, starting with
    // the login's.
    let (sent, issued) = (server.sent(), server.issued());
    assert_eq!(sent, issued[..sent.len()].to_vec());
    // Each new one was announced, once, in order.
    assert_eq!(*rotations.lock().unwrap(), issued[1..].to_vec());
    // The client authenticated as a public client: its id, no secret.
    let params = server.state.params.lock().unwrap().clone();
    assert!(params.iter().all(|(id, _)| id.as_deref() == Some(CLIENT)));
    assert!(!format!("{oauth:?}").contains("rt-login"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_slots_refresh_one_at_a_time_through_one_chain() {
    let server = RefreshServer::start(Duration::from_secs(2)).await;
    let initial = server.login();
    server.state.delay_ms.store(50, Ordering::SeqCst);
    let oauth = builder(&server, RefreshToken::new(initial.clone()))
        .scope("read write")
        .build()
        .unwrap();
    let scopes = ["read", "write", "read write"];
    let mut tasks = Vec::new();
    for round in 0..60 {
        for scope in scopes {
            let oauth = oauth.clone();
            tasks.push(tokio::spawn(async move {
                let params = TokenParams::new().scope(scope);
                oauth.token_for(&params).await
            }));
        }
        if round % 3 == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(server.reuses(), 0);
    assert_eq!(server.state.unknown.load(Ordering::SeqCst), 0);
    let narrowed: Vec<Option<String>> = server
        .state
        .params
        .lock()
        .unwrap()
        .iter()
        .map(|(_, scope)| scope.clone())
        .collect();
    assert!(narrowed.contains(&Some("read".into())));
    assert!(narrowed.contains(&Some("write".into())));
}

#[tokio::test]
async fn an_answer_without_a_refresh_token_keeps_the_current_one() {
    let server = RefreshServer::start(Duration::from_millis(600)).await;
    let initial = server.login();
    *server.state.answer.lock().unwrap() = Answer::Keep;
    let oauth = builder(&server, RefreshToken::new(initial.clone()))
        .build()
        .unwrap();
    for _ in 0..4 {
        oauth.token().await.unwrap();
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    assert!(server.refreshes() >= 3);
    assert!(server.sent().iter().all(|sent| *sent == initial));
}

#[tokio::test]
async fn hostile_refresh_tokens_are_refused_never_sent_and_leave_the_chain() {
    let long = "r".repeat(100 * 1024);
    for hostile in [
        serde_json::json!(12345),
        serde_json::json!(""),
        serde_json::json!(long),
        serde_json::json!("evil\u{0}token-value"),
        serde_json::json!("evil\ntoken-value"),
        serde_json::json!("évil-token-value"),
        serde_json::json!(["array-token-value"]),
    ] {
        let server = RefreshServer::start(Duration::from_secs(60)).await;
        let initial = server.login();
        *server.state.answer.lock().unwrap() = Answer::Hostile(hostile.clone());
        let (_guard, logs) = support::capture_logs();
        let oauth = builder(&server, RefreshToken::new(initial.clone()))
            .min_backoff(Duration::from_millis(10))
            .build()
            .unwrap();
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{hostile}");
        let text = format!("{e} {e:?} {}", logs.text());
        assert!(
            !text.contains("token-value") && !text.contains("rrrrrrrr"),
            "{text}"
        );
        // (A 100 KB one makes the answer larger than any token response
        // is allowed to be.)
        let what = if hostile == serde_json::json!(long) {
            "larger"
        } else {
            "refresh_token"
        };
        assert!(e.to_string().contains(what), "{e}");
        // The chain is unchanged: the next refresh sends the login's token
        // (which this server retired, so it ends the login: as it would).
        *server.state.answer.lock().unwrap() = Answer::Rotate;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = oauth.token().await;
        let sent = server.sent();
        assert_eq!(sent, vec![initial.clone(), initial.clone()], "{hostile}");
    }
}

#[tokio::test]
async fn a_new_refresh_token_beside_an_unusable_access_token_is_kept() {
    let server = RefreshServer::start(Duration::from_secs(60)).await;
    let initial = server.login();
    *server.state.answer.lock().unwrap() = Answer::UnusableAccessToken;
    let oauth = builder(&server, RefreshToken::new(initial.clone()))
        .min_backoff(Duration::from_millis(10))
        .build()
        .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{e}");
    // The server retired the login's token when it answered: the next
    // refresh sends the new one it gave, not the retired one.
    *server.state.answer.lock().unwrap() = Answer::Rotate;
    tokio::time::sleep(Duration::from_millis(50)).await;
    oauth.token().await.unwrap();
    let (sent, issued) = (server.sent(), server.issued());
    assert_eq!(sent, vec![initial, issued[1].clone()]);
    assert_eq!(server.reuses(), 0);
}

#[tokio::test]
async fn a_refused_refresh_token_ends_the_login_and_is_never_sent_again() {
    let server = RefreshServer::start(Duration::from_millis(400)).await;
    let initial = server.login();
    server.state.echo.store(true, Ordering::SeqCst);
    let (_guard, logs) = support::capture_logs();
    let oauth = builder(&server, RefreshToken::new(initial.clone()))
        .min_backoff(Duration::from_millis(20))
        .max_backoff(Duration::from_millis(40))
        .build()
        .unwrap();
    oauth.token().await.unwrap();
    let current = server.issued().last().unwrap().clone();
    server.revoke(&current);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = server.refreshes();
    let mut errors = Vec::new();
    for _ in 0..10 {
        errors.push(oauth.token().await.unwrap_err());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One refused refresh; none after it.
    assert_eq!(server.refreshes(), before + 1);
    for e in &errors {
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
        assert!(!e.is_retryable());
    }
    let e = &errors[0];
    assert!(e.to_string().contains("a new login is needed"), "{e}");
    assert!(e.to_string().contains("revoked"), "{e}");
    assert_eq!(e.error_code(), Some("invalid_grant"));
    // The server echoed the refresh token raw, form-encoded, in base64 and
    // as JSON: none of it reached the error or the logs.
    let text = format!("{e} {e:?} {}", logs.text());
    assert!(!text.contains(&current), "{text}");
    assert!(!text.contains("rt-login"), "{text}");
    // A new login, without rebuilding the layer: at once.
    let fresh = server.login();
    oauth.replace_refresh_token(fresh.clone()).unwrap();
    oauth.token().await.unwrap();
    assert_eq!(server.sent().last(), Some(&fresh));
    assert_eq!(server.reuses(), 0);
    assert!(oauth.replace_refresh_token("bad\ttoken").is_err());
}

#[tokio::test]
async fn a_confidential_client_refreshes_with_its_own_authentication() {
    let server = RefreshServer::start(Duration::from_secs(60)).await;
    let initial = server.login();
    let oauth = builder(&server, RefreshToken::new(initial))
        .client_secret("client-secret")
        .client_auth(ClientAuth::FormBody)
        .scope("read")
        .build()
        .unwrap();
    oauth.token().await.unwrap();
    let params = server.state.params.lock().unwrap().clone();
    assert_eq!(
        params,
        vec![(Some(CLIENT.to_owned()), Some("read".to_owned()))]
    );
    // What the layer is built with is checked.
    for bad in ["", "a\u{7f}b", &"x".repeat(9000)] {
        let e = builder(&server, RefreshToken::new(bad))
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("refresh token"), "{e}");
    }
    let e = OAuthLayer::builder()
        .auth_url("http://127.0.0.1:1")
        .client_id("id")
        .client_secret("s")
        .refresh_token(RefreshToken::new("abc"))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("auth_url"), "{e}");
    let plain = support::with_transport(
        OAuthLayer::builder()
            .token_url("http://127.0.0.1:1/token")
            .client_id("id")
            .client_secret("s"),
    )
    .build()
    .unwrap();
    assert!(plain.replace_refresh_token("abc").is_err());
}

#[tokio::test]
async fn a_public_client_refreshes_at_the_endpoint_its_issuer_names() {
    let server = RefreshServer::start(Duration::from_secs(60)).await;
    let initial = server.login();
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(server.issuer())
            .client_id(CLIENT)
            .refresh_token(RefreshToken::new(initial.clone())),
    )
    .build()
    .unwrap();
    let token = oauth.token().await.unwrap();
    assert!(token.expose_token().starts_with("at-"));
    assert_eq!(server.sent(), vec![initial]);
    let found = oauth.server_metadata().unwrap();
    assert_eq!(found.token_endpoint, server.token_url());
    let params = server.state.params.lock().unwrap().clone();
    assert_eq!(params, vec![(Some(CLIENT.to_owned()), None)]);
}

/// Several processes of a machine (or tasks standing for them) on one
/// file: the chain written under the file's lock.
mod file_store {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_with_the_rotated_initial_token_goes_on_from_the_file() {
        let dir = support::scratch("refresh-restart");
        let file = dir.join("tokens");
        let server = RefreshServer::start(Duration::from_millis(400)).await;
        let initial = server.login();
        {
            let oauth = builder(&server, RefreshToken::new(initial.clone()))
                .token_store(FileStore::new(&file).unwrap())
                .build()
                .unwrap();
            for _ in 0..3 {
                oauth.token().await.unwrap();
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
        }
        assert!(server.refreshes() >= 3);
        // The process starts again, configured with the login's token,
        // rotated long ago.
        let oauth = builder(&server, RefreshToken::new(initial.clone()))
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        oauth.token().await.unwrap();
        assert_eq!(server.reuses(), 0);
        assert!(!server.is_revoked(&initial));
        assert_eq!(server.sent().iter().filter(|s| **s == initial).count(), 1);
        // The file holds no refresh token or access token in clear, and
        // only its owner may read it.
        // (Each access token looked for whole: the file is base64, in
        // which a short prefix such as `at-` may appear by chance.)
        let text = std::fs::read_to_string(&file).unwrap();
        let access = server.issued_access();
        assert!(!access.is_empty());
        assert!(!text.contains("rt-login"), "{text}");
        assert!(access.iter().all(|t| !text.contains(t.as_str())), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Another login (another initial refresh token) is another chain.
        let other = server.login();
        let second = builder(&server, RefreshToken::new(other.clone()))
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap();
        second.token().await.unwrap();
        assert_eq!(server.sent().last(), Some(&other));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_layer_dropped_mid_refresh_still_stores_the_rotated_token() {
        let dir = support::scratch("refresh-dropped");
        let file = dir.join("tokens");
        let server = RefreshServer::start(Duration::from_secs(60)).await;
        let initial = server.login();
        server.state.delay_ms.store(500, Ordering::SeqCst);
        let oauth = builder(&server, RefreshToken::new(initial.clone()))
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap();
        let waiting = tokio::spawn({
            let oauth = oauth.clone();
            async move { oauth.token().await }
        });
        while server.refreshes() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The server rotated the refresh token; its answer is on the way.
        // The request and the layer go away.
        waiting.abort();
        drop(oauth);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        server.state.delay_ms.store(0, Ordering::SeqCst);
        // The refresh ran to its end: the file holds the rotated token, and
        // the next layer (or process) goes on from it.
        let next = builder(&server, RefreshToken::new(initial.clone()))
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap();
        next.token().await.unwrap();
        assert_eq!(server.reuses(), 0);
        assert!(!server.is_revoked(&initial));
    }

    #[test]
    fn a_path_that_cannot_be_made_is_an_error_at_once() {
        let e = FileStore::new("/nonexistent-folder/for/tokens").unwrap_err();
        assert!(e.to_string().contains("nonexistent-folder"), "{e}");
    }

    /// What a spawned process runs (see `processes_share_one_chain`).
    #[test]
    fn child_process() {
        let Ok(spec) = std::env::var(CHILD) else {
            return;
        };
        let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
        let s = |k: &str| spec[k].as_str().unwrap().to_owned();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let oauth = support::with_transport(
                OAuthLayer::builder()
                    .token_url(s("token_url"))
                    .client_id(CLIENT)
                    .refresh_token(RefreshToken::new(s("initial")))
                    .token_store(FileStore::new(s("file")).unwrap()),
            )
            .build()
            .unwrap();
            let until = Instant::now() + Duration::from_millis(spec["millis"].as_u64().unwrap());
            let (mut ok, mut failed) = (0, 0);
            while Instant::now() < until {
                match support::send(&oauth, &s("api_url")).await {
                    Ok(resp) if resp.status() == 200 => ok += 1,
                    Ok(resp) => {
                        eprintln!("answered {}", resp.status());
                        failed += 1
                    }
                    Err(e) => {
                        eprintln!("failed: {e}");
                        failed += 1
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            println!("CHILD-RESULT {ok} {failed}");
        });
    }

    const CHILD: &str = "TOWER_OAUTH_REFRESH_CHILD";

    fn spawn(
        server: &RefreshServer,
        file: &std::path::Path,
        initial: &str,
        millis: u64,
    ) -> std::process::Child {
        let spec = serde_json::json!({
            "token_url": server.token_url(),
            "api_url": server.api_url(),
            "file": file,
            "initial": initial,
            "millis": millis,
        });
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "refresh_tokens::file_store::child_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, spec.to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn processes_share_one_chain() {
        let dir = support::scratch("refresh-processes");
        let file = dir.join("tokens");
        let server = RefreshServer::start(Duration::from_secs(2)).await;
        let initial = server.login();
        let children: Vec<_> = (0..3)
            .map(|_| spawn(&server, &file, &initial, 6000))
            .collect();
        let outputs = tokio::task::spawn_blocking(move || {
            children
                .into_iter()
                .map(|c| c.wait_with_output().unwrap())
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        let mut total = 0;
        for output in outputs {
            assert!(output.status.success());
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            let line = text
                .split("CHILD-RESULT ")
                .nth(1)
                .and_then(|rest| rest.lines().next())
                .unwrap_or_else(|| panic!("no result in {text}"))
                .to_owned();
            let parts: Vec<u64> = line.split(' ').map(|n| n.parse().unwrap()).collect();
            assert_eq!(parts[1], 0, "a process had refused requests");
            // Every process asked (how many times is the machine's speed,
            // not the promise).
            assert!(parts[0] > 0, "a process made no request");
            total += parts[0];
        }
        println!("{total} requests from three processes");
        assert_eq!(server.reuses(), 0);
        assert!(!server.is_revoked(&initial));
        // About one refresh per renewal (half a lifetime) for the three.
        let refreshes = server.refreshes();
        assert!((3..=10).contains(&refreshes), "{refreshes} refreshes");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("rt-login"), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_process_killed_between_the_answer_and_the_write_ends_the_login() {
        let dir = support::scratch("refresh-killed");
        let file = dir.join("tokens");
        let server = RefreshServer::start(Duration::from_secs(60)).await;
        let initial = server.login();
        // The server rotates the refresh token as it receives it, then
        // answers late: the process is killed before it has the new one.
        server.state.delay_ms.store(3000, Ordering::SeqCst);
        let mut child = spawn(&server, &file, &initial, 500);
        let started = Instant::now();
        while server.refreshes() == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the child never refreshed"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        child.kill().unwrap();
        let _ = child.wait();
        server.state.delay_ms.store(0, Ordering::SeqCst);
        // The file (and its lock, which the system released) still works,
        // and holds the login's token only: the next process sends it,
        // which the server takes for a replay and ends the login.
        let oauth = builder(&server, RefreshToken::new(initial.clone()))
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap();
        let e = tokio::time::timeout(Duration::from_secs(5), oauth.token())
            .await
            .expect("the lock of a killed process is released")
            .unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
        assert_eq!(server.reuses(), 1);
        // A new login works from there.
        let fresh = server.login();
        oauth.replace_refresh_token(fresh).unwrap();
        oauth.token().await.unwrap();
    }
}

/// Replicas on a real redis-server: the chain under the fleet's lock.
#[cfg(feature = "redis")]
mod redis_fleet {
    use super::*;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    /// Three replicas refreshing `initial` through `redis`, each set up by
    /// `tweak` too.
    fn replicas(
        server: &RefreshServer,
        redis: &RedisServer,
        initial: &str,
        tweak: impl Fn(OAuthLayerBuilder) -> OAuthLayerBuilder,
    ) -> Vec<OAuthLayer> {
        (0..3)
            .map(|_| {
                tweak(builder(server, RefreshToken::new(initial)))
                    .token_store(RedisStore::new(redis.url()).unwrap())
                    .build()
                    .unwrap()
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_share_one_chain_and_keep_it_sealed() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = RefreshServer::start(Duration::from_secs(2)).await;
        let initial = server.login();
        let replicas = replicas(&server, &redis, &initial, |b| b);
        let until = std::time::Instant::now() + Duration::from_secs(6);
        let (ok, failed) = support::Senders::start(&replicas, &server.api_url(), until)
            .finish()
            .await;
        assert_eq!(failed, 0);
        assert!(ok > 300);
        assert_eq!(server.reuses(), 0);
        assert!(!server.is_revoked(&initial));
        let refreshes = server.refreshes();
        assert!(
            (3..=10).contains(&refreshes),
            "{refreshes} refreshes for the fleet"
        );
        // Nothing in Redis in clear.
        let mut con = redis.connection();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        assert!(keys.iter().any(|k| k.ends_with(":chain")), "{keys:?}");
        // (Each access token whole: a short prefix may appear in base64.)
        let access = server.issued_access();
        assert!(!access.is_empty());
        for key in keys {
            let value: Option<String> = redis::cmd("GET").arg(&key).query(&mut con).unwrap_or(None);
            let value = value.unwrap_or_default();
            assert!(!value.contains("rt-login"), "{key}: {value}");
            assert!(
                access.iter().all(|t| !value.contains(t.as_str())),
                "{key}: {value}"
            );
        }
        // A replica that starts now with the login's token goes on.
        let late = builder(&server, RefreshToken::new(initial.clone()))
            .token_store(RedisStore::new(redis.url()).unwrap())
            .build()
            .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        late.token().await.unwrap();
        assert_eq!(server.reuses(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_login_revoked_fails_every_replica_with_login_required_in_few_requests() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = RefreshServer::start(Duration::from_millis(800)).await;
        let initial = server.login();
        let replicas = replicas(&server, &redis, &initial, |b| {
            b.min_backoff(Duration::from_millis(50))
                .max_backoff(Duration::from_millis(300))
        });
        for replica in &replicas {
            replica.token().await.unwrap();
        }
        server.revoke(&initial);
        let before = server.refreshes();
        tokio::time::sleep(Duration::from_millis(900)).await;
        let started = Instant::now();
        for replica in &replicas {
            let e = replica.token().await.unwrap_err();
            assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
        }
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            for replica in &replicas {
                assert!(replica.token().await.is_err());
            }
        }
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(
            server.refreshes() - before <= 3,
            "{}",
            server.refreshes() - before
        );
        // A new login on one replica: the others follow it from Redis.
        let fresh = server.login();
        replicas[0].replace_refresh_token(fresh.clone()).unwrap();
        replicas[0].token().await.unwrap();
        tokio::time::sleep(Duration::from_millis(900)).await;
        for replica in &replicas[1..] {
            replica.token().await.unwrap();
        }
        assert_eq!(server.reuses(), 0);
    }
}

/// Third-party authorization servers: @node-oauth/oauth2-server (rotation
/// on, the old refresh token revoked through its model, reuse detection
/// added there) and Authlib's `RefreshTokenGrant` (a new refresh token per
/// use), run from `tests/servers/` as `.ci/run` installs them.
mod third_party {
    use super::*;
    use std::io::BufRead;
    use std::process::{Child, Command, Stdio};

    /// Set (as `.ci/run` does) to make missing third-party servers fail
    /// these tests instead of skipping them.
    const REQUIRE: &str = "TOWER_OAUTH_REQUIRE_THIRD_PARTY";

    struct External {
        child: Child,
        base: String,
    }

    impl Drop for External {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// The server `script` under `interpreter`, if its packages are
    /// installed (`needs`, under the crate's folder).
    fn start(
        interpreter: &str,
        script: &str,
        needs: &str,
        env: &[(&str, &str)],
    ) -> Option<External> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        if !root.join(needs).exists() {
            assert!(
                std::env::var_os(REQUIRE).is_none(),
                "{needs} is missing and {REQUIRE} is set (see .ci/run for the install)"
            );
            eprintln!("note: skipped, {needs} is not installed (see .ci/run)");
            return None;
        }
        let mut command = Command::new(interpreter);
        command
            .arg(root.join("tests/servers").join(script))
            .env("ACCESS_SECONDS", "2")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, root.join(value));
        }
        let mut child = command.spawn().expect("the interpreter runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = serde_json::from_str::<serde_json::Value>(&line).unwrap()["port"]
            .as_u64()
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Some(External {
            child,
            base: format!("http://127.0.0.1:{port}"),
        })
    }

    /// The Authlib server, if installed.
    fn authlib() -> Option<External> {
        start(
            "python3",
            "authlib_refresh_server.py",
            "target/py-servers/authlib",
            &[("PYTHONPATH", "target/py-servers")],
        )
    }

    async fn admin(server: &External, path: &str) -> serde_json::Value {
        let resp = support::hyper_client()
            .request(support::get(&format!("{}{path}", server.base)))
            .await
            .unwrap();
        let (_, body) = support::read(resp).await;
        serde_json::from_str(&body).unwrap()
    }

    /// Three processes' layers (each its own `FileStore` on one file) for
    /// 5 s against `server`, 2-second tokens: every request accepted, no
    /// refresh token sent twice, the login alive.
    async fn survives_rotation(server: &External, name: &str) {
        let login = admin(server, "/admin/login").await;
        let initial = login["refresh_token"].as_str().unwrap().to_owned();
        let file = support::scratch(name).join("tokens");
        let layers: Vec<OAuthLayer> = (0..3)
            .map(|_| {
                support::with_transport(
                    OAuthLayer::builder()
                        .token_url(format!("{}/token", server.base))
                        .client_id(CLIENT)
                        .refresh_token(RefreshToken::new(initial.clone()))
                        .token_store(FileStore::new(&file).unwrap()),
                )
                .build()
                .unwrap()
            })
            .collect();
        let until = std::time::Instant::now() + Duration::from_secs(5);
        let api = format!("{}/api", server.base);
        let (ok, failed) = support::Senders::start(&layers, &api, until).finish().await;
        let stats = admin(server, "/admin/stats").await;
        assert_eq!(failed, 0, "{stats}");
        assert!(ok > 200, "{ok}");
        assert_eq!(stats["reuses"], 0, "{stats}");
        let refreshes = stats["refreshes"].as_u64().unwrap();
        assert!((3..=9).contains(&refreshes), "{stats}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn node_oauth2_server() {
        let Some(server) = start(
            "node",
            "node_refresh_server.js",
            "tests/servers/node_modules/@node-oauth/oauth2-server",
            &[],
        ) else {
            return;
        };
        survives_rotation(&server, "node-oauth2-server").await;
        // A login revoked at the server: LoginRequired within a few
        // seconds, after one refused refresh, and none after it.
        let login = admin(&server, "/admin/login").await;
        let oauth = support::with_transport(
            OAuthLayer::builder()
                .token_url(format!("{}/token", server.base))
                .client_id(CLIENT)
                .refresh_token(RefreshToken::new(login["refresh_token"].as_str().unwrap()))
                .min_backoff(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
        oauth.token().await.unwrap();
        admin(
            &server,
            &format!("/admin/revoke?family={}", login["family"].as_str().unwrap()),
        )
        .await;
        let before = admin(&server, "/admin/stats").await["refreshes"]
            .as_u64()
            .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let started = Instant::now();
        for _ in 0..5 {
            let e = oauth.token().await.unwrap_err();
            assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        assert!(started.elapsed() < Duration::from_secs(3));
        let after = admin(&server, "/admin/stats").await["refreshes"]
            .as_u64()
            .unwrap();
        assert_eq!(after - before, 1);
    }

    /// A person's device login (RFC 8628) against Authlib's own
    /// `DeviceAuthorizationEndpoint` and `DeviceCodeGrant`, found through
    /// its metadata: the prompt, polls while the person has not approved,
    /// then the token, and a refresh with the login's refresh token; a
    /// refused login ends in `LoginFailed`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn authlib_device_grant() {
        let Some(server) = authlib() else {
            return;
        };
        let login = |deny: bool| {
            let base = server.base.clone();
            tower_oauth::login::Login::device(move |prompt| {
                let url = format!(
                    "{base}/admin/approve?user_code={}{}",
                    prompt.user_code(),
                    if deny { "&deny=1" } else { "" }
                );
                assert!(prompt.verification_uri().ends_with("/activate"));
                // The person approves on another device, a moment later.
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    support::hyper_client()
                        .request(support::get(&url))
                        .await
                        .unwrap();
                });
            })
        };
        let layer = |deny| {
            support::with_transport(
                OAuthLayer::builder()
                    .issuer(&server.base)
                    .client_id(CLIENT)
                    .scope("read")
                    .login(login(deny)),
            )
            .build()
            .unwrap()
        };
        let oauth = layer(false);
        let api = format!("{}/api", server.base);
        assert_eq!(support::send(&oauth, &api).await.unwrap().status(), 200);
        let stats = admin(&server, "/admin/stats").await;
        assert_eq!(stats["device_logins"], 1, "{stats}");
        assert!(stats["device_polls"].as_u64().unwrap() >= 2, "{stats}");
        assert!(oauth.force_renewal());
        oauth.token().await.unwrap();
        let stats = admin(&server, "/admin/stats").await;
        assert_eq!(
            (stats["refreshes"].as_u64(), stats["reuses"].as_u64()),
            (Some(1), Some(0))
        );
        let e = layer(true).token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
        assert!(e.to_string().contains("access_denied"), "{e}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn authlib_refresh_token_grant() {
        let Some(server) = authlib() else {
            return;
        };
        survives_rotation(&server, "authlib").await;
    }
}
