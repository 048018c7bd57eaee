//! Redis replies that come after the store's bound (250 ms), through a
//! loopback TCP proxy that holds back the reply to one chosen command: a
//! late reply is no proof that the command failed. The fetch lock taken by
//! a late `SET NX` never leaves the fleet waiting on a lock nobody works
//! under; a pending login taken by a late reply is not lost.

#![cfg(feature = "redis")]

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::authority::Authority;
use support::login_server::LoginServer;
use support::redis_server::{missing, RedisServer};
use support::{CLIENT_ID, CLIENT_SECRET};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower_oauth::store::RedisStore;
use tower_oauth::TokenParams;

use super::accounts::{builder, CALLBACK};

/// How long the chosen reply is held back: past the store's bound.
const HELD: Duration = Duration::from_millis(600);

/// A proxy to `redis` on 127.0.0.1. The first request (of any connection)
/// whose bytes hold one of the `marks` has its reply held back for
/// [`HELD`], once; everything else passes at once.
async fn proxy(redis: &RedisServer, marks: &'static [&'static [u8]]) -> String {
    let marks = marks.iter().map(|m| vec![*m]).collect();
    proxy_all(redis, marks, Arc::new(AtomicBool::new(true))).await
}

/// [`proxy`], holding back the reply to the first request whose bytes hold
/// every member of one of the `marks`, from when `armed` is set.
async fn proxy_all(
    redis: &RedisServer,
    marks: Vec<Vec<&'static [u8]>>,
    armed: Arc<AtomicBool>,
) -> String {
    let target = format!("127.0.0.1:{}", redis.port);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    let marks = Arc::new(marks);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let hold = Arc::new(AtomicBool::new(false));
            let (armed, to_hold) = (Arc::clone(&armed), Arc::clone(&hold));
            let marks = Arc::clone(&marks);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let chunk = &buf[..n];
                    let holds = |m: &[u8]| chunk.windows(m.len()).any(|w| w == m);
                    let marked = marks.iter().any(|all| all.iter().all(|m| holds(m)));
                    if marked && armed.swap(false, Ordering::SeqCst) {
                        to_hold.store(true, Ordering::SeqCst);
                    }
                    if sw.write_all(chunk).await.is_err() {
                        return;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    if hold.swap(false, Ordering::SeqCst) {
                        tokio::time::sleep(HELD).await;
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// Replica A's fetch lock is taken by a command whose reply comes late. A
/// asks again with the same nonce, and holds the lock it took; replica B,
/// asking meanwhile, gets A's token in moments, not after the lock runs
/// out (the fetch timeout, 20 s here, and a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_by_a_late_reply_leaves_nobody_waiting_on_it() {
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    let slow = proxy(&redis, &[b":lock"]).await;
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3600)).await;
    authority.set_delay(Duration::from_millis(300));
    let replica = |url: String| {
        support::builder(&authority)
            .fetch_timeout(Duration::from_secs(20))
            .token_store(RedisStore::new(url).unwrap())
            .build()
            .unwrap()
    };
    let (a, b) = (replica(slow), replica(redis.url()));
    let first = tokio::spawn({
        let a = a.clone();
        async move { a.token().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let second = tokio::time::timeout(Duration::from_secs(60), b.token())
        .await
        .expect("B waited past every bound");
    let took = started.elapsed();
    first.await.unwrap().expect("A's token");
    second.expect("B's token");
    // Far below the lock's life (21 s): nobody waited on a dead lock.
    assert!(took < Duration::from_secs(10), "B waited {took:?}");
}

/// A pending login is taken by a command whose reply comes late: asked
/// again, the login is found where the late try put it, and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_login_taken_by_a_late_reply_is_not_lost() {
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    let slow = proxy(&redis, &[b"GETDEL", b":taken:"]).await;
    let server = LoginServer::start(Duration::from_secs(3600)).await;
    let a = builder(&server)
        .token_store(RedisStore::new(redis.url()).unwrap())
        .build()
        .unwrap();
    let b = builder(&server)
        .token_store(RedisStore::new(slow).unwrap())
        .build()
        .unwrap();
    // Begun on A, finished on B, whose take of the pending login is late.
    let url = a.begin_login("alice", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    b.finish_login("alice", &callback)
        .await
        .expect("the login, found again");
    b.token_for(&TokenParams::new().account("alice"))
        .await
        .expect("Alice is served");
}

/// The chain's write is answered late, after it landed: the write tried
/// again is the same write (the record sealed once), which lands over
/// itself, not a write fenced off. The refresh serves, and the next one
/// sends the rotated refresh token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_write_answered_late_is_not_taken_for_a_fenced_one() {
    use support::refresh_server::RefreshServer;
    use tower_oauth::grant::RefreshToken;
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    let armed = Arc::new(AtomicBool::new(false));
    // The chain's write: a script (EVALSHA) on the `:chain` key; its read
    // is a GET.
    let marks = vec![vec![b"EVALSHA".as_slice(), b":chain".as_slice()]];
    let slow = proxy_all(&redis, marks, Arc::clone(&armed)).await;
    let server = RefreshServer::start(Duration::from_secs(1)).await;
    let initial = server.login();
    let oauth = support::with_transport(
        tower_oauth::OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id("cli-app")
            .refresh_token(RefreshToken::new(initial.clone())),
    )
    .token_store(RedisStore::new(slow).unwrap())
    .build()
    .unwrap();
    // The first refresh loads the write's script into Redis.
    oauth.token().await.unwrap();
    armed.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    oauth
        .token()
        .await
        .expect("the second refresh, stored late");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    oauth
        .token()
        .await
        .expect("the third, with the rotated token");
    assert_eq!(server.reuses(), 0);
    assert!(!server.is_revoked(&initial));
}
