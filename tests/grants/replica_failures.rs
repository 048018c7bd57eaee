//! Sign-outs when a replica dies or stalls, on a real Redis with real
//! processes: a replica killed by its PID (SIGKILL, as an orchestrator does
//! after the grace period) holds up a sign-out for no more than its short
//! listing; a replica stopped (SIGSTOP) past its listing, then continued,
//! never presents the signed-out person's token again, nor writes what it
//! refreshed under a lock that ran out over the sign-out.

#![cfg(feature = "redis")]

use crate::support;

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::login_server::{LoginServer, WEB_CLIENT, WEB_SECRET};
use support::redis_server::{missing, RedisServer};
use tokio::io::{AsyncBufReadExt, BufReader};
use tower_oauth::store::RedisStore;
use tower_oauth::{OAuthLayer, TokenParams};

use super::accounts::{builder, sign_in};

const ISSUER_VAR: &str = "REPLICA_CHILD_ISSUER";
const REDIS_VAR: &str = "REPLICA_CHILD_REDIS";
/// The child's fetch timeout in ms, where a test sets one.
const FETCH_TIMEOUT_VAR: &str = "REPLICA_CHILD_FETCH_TIMEOUT_MS";

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// A replica in a process of its own: this test binary, run again as
/// `replica_child`, which serves Alice's account every 50 ms and prints
/// what it got.
fn replica_process(server: &LoginServer, redis_url: &str) -> tokio::process::Child {
    replica_process_with(server, redis_url, &[])
}

/// [`replica_process`], with more variables for the child.
fn replica_process_with(
    server: &LoginServer,
    redis_url: &str,
    env: &[(&str, String)],
) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args([
            "replica_failures::replica_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(ISSUER_VAR, server.issuer())
        .env(REDIS_VAR, redis_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The replicas listed as watching the accounts' news.
fn watchers(redis: &RedisServer) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*:watchers")
        .query(&mut redis.connection())
        .unwrap();
    keys.iter()
        .map(|k| {
            redis::cmd("ZCARD")
                .arg(k)
                .query::<usize>(&mut redis.connection())
                .unwrap()
        })
        .sum()
}

/// Waits (at most 30 s) until `lines` says the child served Alice, and
/// holds her token in memory (its watch began, and its first resync is
/// done).
async fn served_once(lines: &mut ChildLines) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.starts_with("served ") && line.ends_with("held=true") {
                return;
            }
        }
        panic!("the child ended without serving");
    })
    .await
    .expect("the child serves within 30 s");
}

/// The child's lines for `wait`, and those of them that say it served
/// Alice with a request begun after `signed_out_at` (ms since the epoch).
async fn lines_after(
    lines: &mut ChildLines,
    wait: Duration,
    signed_out_at: u128,
) -> (Vec<String>, Vec<String>) {
    let mut after = Vec::new();
    let _ = tokio::time::timeout(wait, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            after.push(line);
        }
    })
    .await;
    let late = after
        .iter()
        .filter(|line| {
            line.strip_prefix("served ")
                .and_then(|at| at.split(' ').next()?.parse::<u128>().ok())
                .is_some_and(|at| at > signed_out_at)
        })
        .cloned()
        .collect();
    (after, late)
}

/// Sends `name` (`-STOP`, `-CONT`) to `child` by its PID.
fn signal(child: &tokio::process::Child, name: &str) {
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args([name, &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill {name}");
}

/// The child stopped already: after `stopped`, Alice signs out on `a`, and
/// the child is continued. For 3 s then, whatever it gets, it serves her
/// no more, and goes on asking; then it is killed.
async fn signed_out_while_stopped(
    a: &OAuthLayer,
    child: &mut tokio::process::Child,
    lines: &mut ChildLines,
    stopped: Duration,
) {
    tokio::time::sleep(stopped).await;
    a.sign_out("alice").await.unwrap();
    let signed_out_at = now_ms();
    signal(child, "-CONT");
    let (after, late) = lines_after(lines, Duration::from_secs(3), signed_out_at).await;
    child.start_kill().unwrap();
    assert!(late.is_empty(), "served after the sign-out: {late:?}");
    assert!(
        after.iter().any(|line| line.starts_with("refused ")),
        "it went on asking: {after:?}"
    );
}

/// Lines the child prints.
type ChildLines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

/// Alice signed in on a replica here (on `redis`), and a replica process on
/// the Redis at `child_redis` (the same, or a way to it) serving her from
/// memory: the authorization server, the replica here, the child and its
/// lines.
async fn alice_on_two_replicas(
    redis: &RedisServer,
    child_redis: &str,
) -> (LoginServer, OAuthLayer, tokio::process::Child, ChildLines) {
    let server = LoginServer::start(Duration::from_secs(3600)).await;
    let a = replica(&server, redis);
    sign_in(&a, &a, "alice", "alice").await;
    let mut child = replica_process(&server, child_redis);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    served_once(&mut lines).await;
    (server, a, child, lines)
}

fn replica(server: &LoginServer, redis: &RedisServer) -> OAuthLayer {
    builder(server)
        .token_store(RedisStore::new(redis.url()).unwrap())
        .build()
        .unwrap()
}

/// A replica killed (SIGKILL by its PID) while listed: the sign-out on
/// another answers within 2 s, and Alice is signed out everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_answers_within_2_s_when_a_replica_was_killed() {
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    // Its lines are kept open: the child writes to them until it is killed.
    let (server, a, mut child, _lines) = alice_on_two_replicas(&redis, &redis.url()).await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while watchers(&redis) != 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("both replicas listed");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let started = std::time::Instant::now();
    a.sign_out("alice").await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "the sign-out took {took:?}");
    let params = TokenParams::new().account("alice");
    assert!(a.token_for(&params).await.is_err());
    assert!(replica(&server, &redis).token_for(&params).await.is_err());
}

/// A replica stopped (SIGSTOP) during its requests, past its listing; the
/// person signs out on another replica, which does not wait for it; then
/// it is continued (SIGCONT). It never presents her token again, and a
/// fresh replica gets no token for her either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_past_its_listing_never_presents_a_signed_out_token() {
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    let (server, a, mut child, mut lines) = alice_on_two_replicas(&redis, &redis.url()).await;
    signal(&child, "-STOP");
    // Past its listing: the sign-out does not wait for it.
    let stopped = Duration::from_secs(2);
    signed_out_while_stopped(&a, &mut child, &mut lines, stopped).await;
    let params = TokenParams::new().account("alice");
    assert!(replica(&server, &redis).token_for(&params).await.is_err());
}

/// A replica stopped (SIGSTOP) while its refresh is out, past its lock
/// (the fetch timeout and a second); the person signs out on another
/// replica meanwhile; then the stopped one is continued (SIGCONT) and reads
/// its refresh's answer. What it fetched under the lock that ran out is
/// fenced off: it writes nothing over the sign-out, never serves her again,
/// and a fresh replica gets no token for her.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_stopped_mid_refresh_never_writes_over_a_sign_out() {
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    // Access tokens of 3 s: the child renews about every 1.5 s.
    let server = LoginServer::start(Duration::from_secs(3)).await;
    let a = replica(&server, &redis);
    sign_in(&a, &a, "alice", "alice").await;
    let env = [(FETCH_TIMEOUT_VAR, "1000".to_owned())];
    let mut child = replica_process_with(&server, &redis.url(), &env);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    served_once(&mut lines).await;
    // The child's next refresh is answered 1.5 s after it arrives (the
    // server rotates at once); the child is stopped as it arrives.
    let before = server.arrivals("refresh_token");
    server.delay_tokens(Duration::from_millis(1500));
    tokio::time::timeout(Duration::from_secs(10), async {
        while server.arrivals("refresh_token") == before {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the child refreshes");
    signal(&child, "-STOP");
    server.delay_tokens(Duration::ZERO);
    // Past its lock (2 s) and its listing: the sign-out takes the lock.
    let stopped = Duration::from_secs(3);
    signed_out_while_stopped(&a, &mut child, &mut lines, stopped).await;
    let params = TokenParams::new().account("alice");
    let fresh = replica(&server, &redis).token_for(&params).await;
    assert_eq!(
        fresh.unwrap_err().kind(),
        tower_oauth::TokenErrorKind::LoginRequired
    );
    assert!(a.token_for(&params).await.is_err());
}

/// A TCP proxy to Redis on 127.0.0.1 that can be frozen: while frozen it
/// forwards nothing either way, and keeps every connection open, as a
/// network partition does.
struct Partition {
    url: String,
    frozen: tokio::sync::watch::Sender<bool>,
}

impl Partition {
    async fn start(redis: &RedisServer) -> Partition {
        let target = redis.url().trim_start_matches("redis://").to_owned();
        let target = target.trim_end_matches('/').to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let (frozen, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(forward(cr, sw, watch.clone()));
                tokio::spawn(forward(sr, cw, watch.clone()));
            }
        });
        Partition { url, frozen }
    }

    fn freeze(&self) {
        self.frozen.send_replace(true);
    }
}

/// Copies `from` to `to`, holding each read while the partition is frozen.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !*f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A replica cut off from Redis (a partition: its connections open, nothing
/// through) for longer than its listing: the sign-out on another replica
/// does not wait for it, and it presents no account's token from memory
/// meanwhile, though it never heard of the sign-out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_redis_stops_presenting_account_tokens() {
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    let partition = Partition::start(&redis).await;
    let (_server, a, mut child, mut lines) = alice_on_two_replicas(&redis, &partition.url).await;
    partition.freeze();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = std::time::Instant::now();
    a.sign_out("alice").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "no wait for it");
    let signed_out_at = now_ms();
    let (_, late) = lines_after(&mut lines, Duration::from_secs(2), signed_out_at).await;
    child.start_kill().unwrap();
    // Its requests now go to the store it cannot reach, and fail or wait:
    // none is served from memory.
    assert!(late.is_empty(), "served after the sign-out: {late:?}");
}

/// The child of the tests above: a replica on the same Redis that asks for
/// Alice's token every 50 ms and prints `served <ms>` or `refused <ms>`,
/// with the instant it asked (ms since the epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the tests of replica_failures"]
async fn replica_child() {
    let var = |name: &str| std::env::var(name).expect("run by the parent test");
    let issuer = var(ISSUER_VAR);
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(format!("{issuer}/api"))
            .trusted_issuers([issuer.as_str()])
            .client_id(WEB_CLIENT)
            .client_secret(WEB_SECRET),
    )
    .fetch_timeout(
        std::env::var(FETCH_TIMEOUT_VAR)
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(Duration::from_secs(10), Duration::from_millis),
    )
    .token_store(RedisStore::new(var(REDIS_VAR)).unwrap())
    .build()
    .unwrap();
    let params = TokenParams::new().account("alice");
    loop {
        let asked = now_ms();
        match oauth.token_for(&params).await {
            Ok(_) => println!(
                "served {asked} held={}",
                oauth.token_now_for(&params).is_ok()
            ),
            Err(e) => println!("refused {asked} {:?}", e.kind()),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
