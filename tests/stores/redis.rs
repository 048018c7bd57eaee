//! Fleets: replicas share one token, and one token request, through Redis.
//! Each test runs its own `redis-server` on a free port of 127.0.0.1.

#![cfg(feature = "redis")]

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use redis::Commands;
use support::fleet::{reported, tokens_at_once};
use support::redis_server::RedisServer;
use support::*;
use tower::ServiceExt;
use tower_oauth::{store::RedisStore, OAuthLayer};

const HOUR: Duration = Duration::from_secs(3600);

fn replica(authority: &Authority, redis: &str, prefix: &str) -> OAuthLayer {
    builder(authority)
        .token_store(RedisStore::new(redis).unwrap().prefix(prefix))
        .fetch_timeout(Duration::from_secs(1))
        .build()
        .unwrap()
}

/// The keys under `prefix`.
fn keys(server: &RedisServer, prefix: &str) -> Vec<String> {
    let mut con = server.connection();
    let mut keys: Vec<String> = con.keys(format!("{prefix}*")).unwrap();
    keys.sort();
    keys
}

/// The key replicas with `prefix` use: one replica fetches, the key is read
/// back (it is a hash, not something a test can know in advance).
async fn learn_key(authority: &Authority, server: &RedisServer, prefix: &str) -> String {
    replica(authority, &server.url(), prefix)
        .token()
        .await
        .unwrap();
    keys(server, prefix).remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_cold_starting_together_make_one_token_request() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(100));
    let replicas: Vec<_> = (0..8)
        .map(|_| replica(&authority, &server.url(), "t1:"))
        .collect();
    let tokens = tokens_at_once(&replicas).await;
    assert_eq!(authority.token_requests(), 1);
    assert!(tokens.iter().all(|(t, _)| t == &tokens[0].0));
    // Each replica's stats say what the store did: one fetched for all,
    // the seven others took its token (most after waiting on its lock).
    let mut fleet = tower_oauth::Stats::default();
    for r in &replicas {
        let s = r.stats();
        fleet.store_took_shared += s.store_took_shared;
        fleet.store_fetched_for_fleet += s.store_fetched_for_fleet;
        fleet.store_waited += s.store_waited;
        fleet.store_fell_back += s.store_fell_back;
    }
    assert_eq!(fleet.store_fetched_for_fleet, 1, "{fleet:?}");
    assert_eq!(fleet.store_took_shared, 7, "{fleet:?}");
    assert!(fleet.store_waited >= 1, "{fleet:?}");
    assert_eq!(fleet.store_fell_back, 0, "{fleet:?}");
    // Stored under the prefix and a hash; the lock is gone; no secret in keys.
    let keys = keys(&server, "t1:");
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(!keys[0].contains(CLIENT_SECRET) && !keys[0].contains(CLIENT_ID));
    let ttl: i64 = server.connection().pttl(&keys[0]).unwrap();
    assert!(ttl > 3_500_000 && ttl <= 3_590_000, "{ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_renews_once_per_renewal() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3)).await;
    let replicas: Vec<_> = (0..4)
        .map(|_| replica(&authority, &server.url(), "t2:"))
        .collect();
    let start = Instant::now();
    let tasks: Vec<_> = replicas
        .iter()
        .map(|r| {
            let (r, authority) = (r.clone(), authority.clone());
            tokio::spawn(async move {
                let mut refused = 0;
                while start.elapsed() < Duration::from_secs(7) {
                    let t = r.token().await.unwrap();
                    if !authority.accepts(t.expose_token()) {
                        refused += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                refused
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 0, "a replica held an expired token");
    }
    // 3 s tokens renewed about halfway: 1 + about 4 renewals in 7 s, for
    // the whole fleet (each replica on its own would make about 20).
    let n = authority.token_requests();
    println!("fleet of 4, 7 s of 3 s tokens: {n} token requests");
    assert!((3..=7).contains(&n), "{n} token requests for 4 replicas");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lock_holder_delays_but_does_not_block_the_fleet() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    // Learn the key, then leave a lock as a crashed holder would.
    let key = learn_key(&authority, &server, "t3:").await;
    let mut con = server.connection();
    let _: () = con.del(&key).unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{key}:lock"))
        .arg("crashed-holder")
        .arg("PX")
        .arg(1500)
        .query(&mut con)
        .unwrap();

    let started = Instant::now();
    let replicas: Vec<_> = (0..4)
        .map(|_| replica(&authority, &server.url(), "t3:"))
        .collect();
    tokens_at_once(&replicas).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1400),
        "{waited:?}: the lock was ignored"
    );
    assert!(waited < Duration::from_secs(4), "{waited:?}");
    assert_eq!(
        authority.token_requests(),
        2,
        "one for the fleet after the lock expired"
    );
}

#[tokio::test]
async fn redis_going_away_and_coming_back() {
    if support::redis_server::missing() {
        return;
    }
    let (_logs, captured) = capture_logs();
    let mut server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
    let a = replica(&authority, &server.url(), "t4:");
    let b = replica(&authority, &server.url(), "t4:");
    a.token().await.unwrap();
    b.token().await.unwrap();
    assert_eq!(authority.token_requests(), 1);

    // Redis dies: tokens keep coming, each replica on its own.
    server.stop();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        for r in [&a, &b] {
            let t = tokio::time::timeout(Duration::from_secs(2), r.token())
                .await
                .expect("bounded")
                .expect("Redis down must not fail requests");
            assert!(authority.accepts(t.expose_token()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let warnings = captured
        .text()
        .matches("Redis token store unavailable")
        .count();
    assert!(
        (1..=2).contains(&warnings),
        "warned {warnings} times, once per replica at most"
    );
    // Each warning says why: the connection's I/O error, not just its kind.
    let text = captured.text();
    for line in text
        .lines()
        .filter(|l| l.contains("Redis token store unavailable"))
    {
        let lower = line.to_lowercase();
        assert!(
            [
                "refused",
                "dropped",
                "reset",
                "broken pipe",
                "closed",
                "timed out"
            ]
            .iter()
            .any(|why| lower.contains(why)),
            "the warning does not say why: {line}"
        );
        assert!(!line.contains("error=Io: "), "an empty reason: {line}");
    }
    assert!(a.stats().store_fell_back >= 1 && b.stats().store_fell_back >= 1);

    // Redis is back: the fleet shares again.
    server.restart();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        a.token().await.unwrap();
        b.token().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(keys(&server, "t4:").len(), 1);
    assert!(captured.text().contains("Redis token store answers again"));
    let logs = captured.text();
    assert!(!logs.contains(CLIENT_SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_redis_does_not_fail_requests() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let key = learn_key(&authority, &server, "t5:").await;
    let _: () = server.connection().set(&key, "\u{0}not json{").unwrap();
    let t = replica(&authority, &server.url(), "t5:")
        .token()
        .await
        .unwrap();
    assert!(authority.accepts(t.expose_token()));
    assert_eq!(authority.token_requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_on_one_replica_is_renewed_once_for_all() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let a = replica(&authority, &server.url(), "t6:");
    let b = replica(&authority, &server.url(), "t6:");
    let url = authority.api_url("/p");
    assert_eq!(client(&a).oneshot(get(&url)).await.unwrap().status(), 200);
    assert_eq!(client(&b).oneshot(get(&url)).await.unwrap().status(), 200);
    assert_eq!(authority.token_requests(), 1);

    authority.revoke_all();
    // Both replicas meet the refusal; only the first renews.
    assert_eq!(client(&a).oneshot(get(&url)).await.unwrap().status(), 401);
    assert_eq!(client(&a).oneshot(get(&url)).await.unwrap().status(), 200);
    assert_eq!(client(&b).oneshot(get(&url)).await.unwrap().status(), 401);
    assert_eq!(client(&b).oneshot(get(&url)).await.unwrap().status(), 200);
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(a.token().await.unwrap(), b.token().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_url_is_used_and_never_shown() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start_with_password("r3dis-pa55");
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let store = RedisStore::new(server.url()).unwrap().prefix("t7:");
    assert!(!format!("{store:?}").contains("r3dis-pa55"));
    let oauth = builder(&authority).token_store(store).build().unwrap();
    assert!(!format!("{oauth:?}").contains("r3dis-pa55"));
    oauth.token().await.unwrap();
    replica(&authority, &server.url(), "t7:")
        .token()
        .await
        .unwrap();
    // Shared through the password-protected server: one token request.
    assert_eq!(authority.token_requests(), 1);
    assert_eq!(keys(&server, "t7:").len(), 1);

    // The wrong password: requests still succeed, on the replica's own.
    let wrong = format!("redis://:wrong@127.0.0.1:{}", server.port);
    let t = replica(&authority, &wrong, "t7:").token().await.unwrap();
    assert!(authority.accepts(t.expose_token()));
    // A URL that cannot be used is a ConfigError that does not echo it.
    let err = RedisStore::new("redis://:s3cret@[not a host").unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

/// Runs openssl (Debian's `openssl` package) in `dir`.
#[cfg(feature = "reqwest")]
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is needed for the TLS test (apt-get install openssl)")
        .success();
    assert!(ok, "openssl {args:?}");
}

#[cfg(feature = "reqwest")] // rustls's crypto provider (ring) comes with it
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_through_redis_over_tls() {
    if support::redis_server::missing() {
        return;
    }
    // A throwaway CA and a server certificate for 127.0.0.1.
    let dir = std::env::temp_dir().join(format!("tower-oauth-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &dir,
        &[
            &["req", "-x509"],
            &ec[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "1",
                "-subj",
                "/CN=test-ca",
            ],
        ]
        .concat(),
    );
    openssl(
        &dir,
        &[
            &["req"],
            &ec[..],
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        ]
        .concat(),
    );
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
        ],
    );
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let server = RedisServer::start_tls(&path("server.crt"), &path("server.key"), &path("ca.crt"));
    let ca = std::fs::read(dir.join("ca.crt")).unwrap();

    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let url = format!("rediss://127.0.0.1:{}", server.port);
    let tls_replica = || {
        let client = redis::Client::build_with_tls(
            url.as_str(),
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.clone()),
            },
        )
        .unwrap();
        builder(&authority)
            .token_store(RedisStore::from_client(client).prefix("tls:"))
            .build()
            .unwrap()
    };
    let (a, b) = (tls_replica(), tls_replica());
    let (ta, tb) = (a.token().await.unwrap(), b.token().await.unwrap());
    assert_eq!(ta, tb);
    assert_eq!(authority.token_requests(), 1, "shared over TLS");

    // A replica that does not trust the server's certificate is refused by
    // TLS, and fetches on its own.
    let untrusting = builder(&authority)
        .token_store(RedisStore::new(&url).unwrap().prefix("tls:"))
        .build()
        .unwrap();
    untrusting.token().await.unwrap();
    assert_eq!(authority.token_requests(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run as a separate process by `replicas_in_separate_processes`.
#[tokio::test]
#[ignore = "a helper: run by replicas_in_separate_processes"]
async fn replica_process() {
    if support::redis_server::missing() {
        return;
    }
    let auth_url = std::env::var("REPLICA_AUTH_URL").unwrap();
    let redis_url = std::env::var("REPLICA_REDIS_URL").unwrap();
    let fetch_timeout = std::env::var("REPLICA_FETCH_TIMEOUT_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis);
    let layer = with_transport(
        OAuthLayer::builder()
            .auth_url(auth_url)
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .token_store(RedisStore::new(redis_url).unwrap().prefix("procs:"))
    .fetch_timeout(fetch_timeout)
    .build()
    .unwrap();
    let token = layer.token().await.unwrap();
    // A digest, so that the token itself is not printed.
    let digest = token
        .expose_token()
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    println!("REPLICA-TOKEN {digest:x}");
}

/// Starts `replica_process` as a child process.
fn spawn_replica(authority: &Authority, server: &RedisServer) -> std::process::Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "redis::replica_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("REPLICA_AUTH_URL", authority.base_url())
        .env("REPLICA_REDIS_URL", server.url())
        .stdout(std::process::Stdio::piped());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_holder_process_killed_mid_fetch_does_not_block_the_fleet() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    // The holder's token request hangs; the holder is killed while it waits.
    authority.set_delay(Duration::from_secs(30));
    let mut holder = spawn_replica(&authority, &server)
        .env("REPLICA_FETCH_TIMEOUT_MS", "1000")
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while authority.token_requests() == 0 {
        assert!(Instant::now() < deadline, "the holder never fetched");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    holder.kill().unwrap();
    let _ = holder.wait();
    authority.set_delay(Duration::ZERO);
    assert_eq!(
        keys(&server, "procs:").len(),
        1,
        "the dead holder's lock is left behind"
    );

    // Replicas starting now wait for the orphaned lock to expire (the
    // holder's fetch timeout plus a second), then one of them fetches.
    let started = Instant::now();
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let layer = with_transport(
                OAuthLayer::builder()
                    .auth_url(authority.base_url())
                    .client_id(CLIENT_ID)
                    .client_secret(CLIENT_SECRET),
            )
            .token_store(RedisStore::new(server.url()).unwrap().prefix("procs:"))
            .build()
            .unwrap();
            tokio::spawn(async move { layer.token().await.unwrap() })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        authority.token_requests(),
        2,
        "the dead holder's, then one for all"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_in_separate_processes_make_one_token_request() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(300));
    let children: Vec<_> = (0..4)
        .map(|_| spawn_replica(&authority, &server).spawn().unwrap())
        .collect();
    let mut digests = Vec::new();
    for child in children {
        let line = reported(child, "REPLICA-TOKEN").await;
        digests.push(
            line.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    assert_eq!(
        authority.token_requests(),
        1,
        "four processes, one token request"
    );
    assert!(digests.iter().all(|d| d == &digests[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_shared_so_the_fleet_backs_off_together() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    // The endpoint fails once, slowly: every replica starts while it does.
    authority.set_delay(Duration::from_millis(200));
    authority.push_faults([fault(
        503,
        r#"{"fault":{"faultstring":"Service Unavailable","detail":{"errorcode":"messaging.adaptors.http.flow.ServiceUnavailable"}}}"#,
    )]);
    let replicas: Vec<_> = (0..4)
        .map(|_| {
            builder(&authority)
                .token_store(RedisStore::new(server.url()).unwrap().prefix("t8:"))
                .min_backoff(Duration::from_millis(500))
                .max_backoff(Duration::from_millis(500))
                .build()
                .unwrap()
        })
        .collect();
    let tasks: Vec<_> = replicas
        .iter()
        .map(|r| {
            let r = r.clone();
            tokio::spawn(async move { r.token().await })
        })
        .collect();
    for t in tasks {
        let e = t.await.unwrap().unwrap_err();
        assert_eq!(e.status().map(|s| s.as_u16()), Some(503));
        assert_eq!(
            e.error_code(),
            Some("messaging.adaptors.http.flow.ServiceUnavailable")
        );
    }
    // One failing request for the fleet, not one per replica (had the others
    // asked, the single fault would have been used up and they would hold
    // tokens now).
    assert_eq!(authority.token_requests(), 1);

    // After the back-off the fleet recovers, with one more request.
    authority.set_delay(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(600)).await;
    for r in &replicas {
        r.token().await.unwrap();
    }
    assert_eq!(authority.token_requests(), 2);
}

/// Opens a value the store sealed under `key`, at the Redis key
/// `store_key`, for the token identity `identity` (its documented encoding),
/// with RustCrypto's AES-256-GCM: not the crate's own code. The associated
/// data is as documented: `tower-oauth/sealed/2`, the store key's length
/// (4 bytes, big-endian) and bytes, the identity's encoding.
fn open_independently(
    key: &[u8; 32],
    store_key: &str,
    identity: &[u8],
    value: &str,
) -> Option<Vec<u8>> {
    use aes_gcm::aead::{Aead, KeyInit, Payload};
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value.strip_prefix("sealed2.")?)
        .ok()?;
    let (nonce, sealed) = bytes.split_at(12);
    let mut aad = b"tower-oauth/sealed/2".to_vec();
    aad.extend_from_slice(&(store_key.len() as u32).to_be_bytes());
    aad.extend_from_slice(store_key.as_bytes());
    aad.extend_from_slice(identity);
    aes_gcm::Aes256Gcm::new(key.into())
        .decrypt(
            nonce.into(),
            Payload {
                msg: sealed,
                aad: &aad,
            },
        )
        .ok()
}

/// The documented encoding of the identity of a token requested from
/// `token_url` by `CLIENT_ID` with the specification's unencoded body and no
/// parameters: `tower-oauth/token-identity/2`, then each part as a tag, its
/// length (4 bytes, big-endian) and its bytes.
fn documented_identity(token_url: &str) -> Vec<u8> {
    let mut encoded = b"tower-oauth/token-identity/2".to_vec();
    for (tag, value) in [
        (b'o', "token_url"),
        (b'u', token_url),
        (b'c', CLIENT_ID),
        (b'a', "unencoded_body"),
    ] {
        encoded.push(tag);
        encoded.extend_from_slice(&(value.len() as u32).to_be_bytes());
        encoded.extend_from_slice(value.as_bytes());
    }
    encoded
}

/// The store key of `identity` under `prefix`: SHA-256 of the encoding, hex
/// (RustCrypto's SHA-256), in braces.
fn documented_key_name(prefix: &str, identity: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(identity);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{{{hex}}}")
}

/// The sealing key the crate documents: HKDF-SHA256 of the client secret,
/// salt `tower-oauth token store`, info `sealing key v1` (RustCrypto's HKDF).
fn documented_key(secret: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    hkdf::Hkdf::<sha2::Sha256>::new(Some(b"tower-oauth token store"), secret.as_bytes())
        .expand(b"sealing key v1", &mut key)
        .unwrap();
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_is_stored_in_clear() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let token = replica(&authority, &server.url(), "s1:")
        .token()
        .await
        .unwrap();
    let key = keys(&server, "s1:").remove(0);
    let identity = documented_identity(&authority.token_url());
    assert_eq!(key, documented_key_name("s1:", &identity));
    let value: String = server.connection().get(&key).unwrap();
    assert!(value.starts_with("sealed2."), "{value}");
    assert!(!value.contains(token.expose_token()) && !value.contains("access_token"));
    assert!(!value.contains(CLIENT_SECRET));
    // Opened with the documented derivation and an independent AES-GCM.
    let sealing = documented_key(CLIENT_SECRET);
    let json = open_independently(&sealing, &key, &identity, &value).unwrap();
    let stored: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(stored["access_token"], token.expose_token());
    // Bound to its Redis key: under another name it does not open.
    assert!(open_independently(&sealing, "s1:other", &identity, &value).is_none());
    // Bound to the whole identity: for another (one more part) neither.
    let mut other = identity.clone();
    other.extend_from_slice(b"p\0\0\0\x05scopev\0\0\0\x04read");
    assert!(open_independently(&sealing, &key, &other, &value).is_none());

    // A key of the user's own seals instead.
    let own = [7u8; 32];
    let oauth = builder(&authority)
        .token_store(
            RedisStore::new(server.url())
                .unwrap()
                .prefix("s2:")
                .encryption_key(own),
        )
        .build()
        .unwrap();
    let token = oauth.token().await.unwrap();
    let key = keys(&server, "s2:").remove(0);
    let value: String = server.connection().get(&key).unwrap();
    let identity = documented_identity(&authority.token_url());
    let json = open_independently(&own, &key, &identity, &value).unwrap();
    assert!(String::from_utf8(json)
        .unwrap()
        .contains(token.expose_token()));
}

// One thread, so that the log capture sees the fetch tasks' warnings.
#[tokio::test]
async fn a_value_that_does_not_open_counts_as_no_token() {
    if support::redis_server::missing() {
        return;
    }
    let (_logs, captured) = capture_logs();
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    replica(&authority, &server.url(), "s3:")
        .token()
        .await
        .unwrap();
    let key = keys(&server, "s3:").remove(0);
    let mut con = server.connection();

    // Tampered with: one character changed.
    let value: String = con.get(&key).unwrap();
    let mut tampered = value.into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let _: () = con
        .set_ex(&key, String::from_utf8(tampered).unwrap(), 3600)
        .unwrap();
    let fresh = replica(&authority, &server.url(), "s3:");
    let token = fresh.token().await.unwrap();
    assert_eq!(authority.token_requests(), 2, "fetched anew");
    // Overwritten with a value that opens.
    let value: String = con.get(&key).unwrap();
    let identity = documented_identity(&authority.token_url());
    assert!(open_independently(&documented_key(CLIENT_SECRET), &key, &identity, &value).is_some());

    // A token stored in clear (by an older version, or by someone else).
    let clear = format!(
        r#"{{"access_token":"{}","expires_in":3600}}"#,
        token.expose_token()
    );
    let _: () = con.set_ex(&key, clear, 3600).unwrap();
    replica(&authority, &server.url(), "s3:")
        .token()
        .await
        .unwrap();
    assert_eq!(authority.token_requests(), 3);

    // Replicas with another sealing key cannot take the token: they fetch.
    let other = builder(&authority)
        .token_store(
            RedisStore::new(server.url())
                .unwrap()
                .prefix("s3:")
                .encryption_key([9u8; 32]),
        )
        .build()
        .unwrap();
    other.token().await.unwrap();
    assert_eq!(authority.token_requests(), 4);
    let warnings = captured.text().matches("does not open").count();
    assert!((1..=3).contains(&warnings), "warned {warnings} times");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_fleet_wakes_on_the_news_instead_of_polling() {
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(300));
    let replicas: Vec<_> = (0..8)
        .map(|_| replica(&authority, &server.url(), "w1:"))
        .collect();
    server.reset_stats();
    let done: Vec<Instant> = tokens_at_once(&replicas)
        .await
        .into_iter()
        .map(|(_, at)| at)
        .collect();
    assert_eq!(authority.token_requests(), 1);
    let calls = server.command_calls();
    // A read is one script with two PTTL (Redis counts the commands a
    // script runs).
    let reads = calls.get("pttl").copied().unwrap_or(0) / 2;
    eprintln!(
        "8 replicas, 300 ms token request: {reads} reads, {} subscriptions, {} publications; \
         last replica {:?} after the first",
        calls.get("subscribe").copied().unwrap_or(0),
        calls.get("publish").copied().unwrap_or(0),
        done.iter()
            .max()
            .unwrap()
            .duration_since(*done.iter().min().unwrap())
    );
    // Polling every 25 ms would read about 12 times per waiting replica
    // (some 90 reads); woken by the news, each reads three times (before
    // the lock, after subscribing, after the news).
    assert!(reads <= 30, "{calls:?}");
    assert_eq!(calls.get("publish").copied(), Some(1), "{calls:?}");
    assert!(
        calls.get("subscribe").copied().unwrap_or(0) <= 7,
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_while_a_renewal_waits_for_redis_is_replaced_at_once() {
    if support::redis_server::missing() {
        return;
    }
    let mut server = RedisServer::start();
    // 12 s tokens are renewed 5.4 to 6 s after they are issued, with about
    // 5 s left: the renewal waits for Redis up to two fetch timeouts (2 s).
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(12)).await;
    let layer = builder(&authority)
        .token_store(RedisStore::new(server.url()).unwrap().prefix("t9:"))
        .fetch_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let url = authority.api_url("/p");
    let send = || client(&layer).oneshot(get(&url));
    assert_eq!(send().await.unwrap().status(), 200);
    server.stop();
    let deadline = Instant::now() + Duration::from_secs(8);
    while layer.stats().renewals_ahead == 0 {
        assert!(Instant::now() < deadline, "no renewal ahead");
        assert_eq!(send().await.unwrap().status(), 200);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The renewal is waiting for Redis on the token in hand; the API now
    // refuses that token. The wait ends at once: the token serves no more.
    tokio::time::sleep(Duration::from_millis(200)).await;
    authority.revoke_all();
    let refused = Instant::now();
    assert_eq!(send().await.unwrap().status(), 401);
    assert_eq!(send().await.unwrap().status(), 200);
    let took = refused.elapsed();
    println!("a new token {took:?} after the refusal");
    assert!(took < Duration::from_millis(1200), "{took:?}");
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(layer.stats().store_fell_back, 1);
}

/// `Stats::token_requests` counts what each replica itself sent to the token
/// endpoint, never a token the store handed it: summed over the replicas it
/// is what the endpoint received, through renewals, a Redis outage and its
/// return; `fetches` counts every fetch, the store's answers included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_summed_over_replicas_are_what_the_endpoint_received() {
    if support::redis_server::missing() {
        return;
    }
    let mut server = RedisServer::start();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
    let replicas = [
        replica(&authority, &server.url(), "t-count:"),
        replica(&authority, &server.url(), "t-count:"),
    ];
    let run = |for_: Duration| {
        let replicas = replicas.clone();
        let authority = &authority;
        async move {
            let start = Instant::now();
            while start.elapsed() < for_ {
                for r in &replicas {
                    let t = tokio::time::timeout(Duration::from_secs(2), r.token())
                        .await
                        .expect("bounded")
                        .expect("a token");
                    assert!(authority.accepts(t.expose_token()));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    // Renewals through the store, then an outage, then Redis back.
    run(Duration::from_millis(3500)).await;
    server.stop();
    run(Duration::from_millis(2500)).await;
    server.restart();
    run(Duration::from_millis(2500)).await;

    let stats: Vec<_> = replicas.iter().map(OAuthLayer::stats).collect();
    let sent: u64 = stats.iter().map(|s| s.token_requests).sum();
    let fetches: u64 = stats.iter().map(|s| s.fetches).sum();
    let took_shared: u64 = stats.iter().map(|s| s.store_took_shared).sum();
    println!(
        "endpoint received {}, replicas sent {sent} ({:?}), fetched {fetches}, \
         {took_shared} of them another replica's token",
        authority.token_requests(),
        stats.iter().map(|s| s.token_requests).collect::<Vec<_>>()
    );
    assert_eq!(sent, authority.token_requests() as u64);
    assert!(took_shared >= 1, "the store shared no token: {stats:?}");
    assert!(fetches >= sent + took_shared, "{stats:?}");
    for s in &stats {
        assert_eq!(
            s.token_requests,
            s.store_fetched_for_fleet + s.store_fell_back,
            "a replica sends only for the fleet or alone: {s:?}"
        );
    }
}
