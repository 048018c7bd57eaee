//! A person's session through a real Sentinel failover (a master, its
//! replica, three Sentinels): after the promotion, a sign-out on one replica
//! answers `Ok`, its writes on a Redis replica first, and stops the other
//! replica's requests for that person; a fresh replica gets no token for
//! her. The accounts' watch follows the new master.

#![cfg(feature = "redis-sentinel")]

use crate::support;

use std::time::Duration;

use support::login_server::LoginServer;
use support::redis_sentinel::{RedisSentinel, MASTER_NAME};
use tower_oauth::store::RedisStore;
use tower_oauth::{OAuthLayer, TokenErrorKind, TokenParams};

use super::accounts::{builder, sign_in};

fn replica(server: &LoginServer, redis: &RedisSentinel) -> OAuthLayer {
    builder(server)
        .token_store(
            RedisStore::sentinel(redis.urls(), MASTER_NAME)
                .unwrap()
                .prefix("f1:"),
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_after_a_failover_answers_ok_and_stops_every_replica() {
    if support::redis_server::missing() {
        return;
    }
    let mut redis = tokio::task::spawn_blocking(RedisSentinel::start)
        .await
        .unwrap();
    let server = LoginServer::start(Duration::from_secs(3600)).await;
    let (a, b) = (replica(&server, &redis), replica(&server, &redis));
    sign_in(&a, &a, "alice", "alice").await;
    sign_in(&a, &a, "bob", "bob").await;
    let alice = TokenParams::new().account("alice");
    let bob = TokenParams::new().account("bob");
    a.token_for(&alice).await.unwrap();
    b.token_for(&alice).await.unwrap();
    b.token_for(&bob).await.unwrap();
    // What the master holds has reached its replica (replication is
    // asynchronous: a write of the last moment dies with the master).
    let old = redis.master();
    let keys = |i: usize| {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("f1:*")
            .query(&mut redis.connection(i))
            .unwrap();
        keys.sort();
        keys
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while keys(old) != keys(1 - old) {
        assert!(
            std::time::Instant::now() < deadline,
            "the replica never caught up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each replica asks for Bob's token every 50 ms meanwhile: how long
    // each goes unserved (printed, for the docs).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = |oauth: OAuthLayer| {
        let stop = std::sync::Arc::clone(&stop);
        tokio::spawn(async move {
            let bob = TokenParams::new().account("bob");
            let (mut unserved, mut since) = (Duration::ZERO, None::<std::time::Instant>);
            let mut longest = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let asked = std::time::Instant::now();
                match oauth.token_for(&bob).await {
                    Ok(_) => {
                        longest = longest.max(asked.elapsed());
                        if let Some(at) = since.take() {
                            unserved += at.elapsed();
                        }
                    }
                    Err(_) => {
                        since.get_or_insert(asked);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let unserved = unserved + since.map_or(Duration::ZERO, |at| at.elapsed());
            (unserved, longest)
        })
    };
    let watching = [watch(a.clone()), watch(b.clone())];
    // The master dies; the Sentinels promote its replica.
    let killed = std::time::Instant::now();
    redis.kill(old);
    let redis = tokio::task::spawn_blocking(move || {
        redis.wait_for_failover(old, Duration::from_secs(30));
        redis
    })
    .await
    .unwrap();
    println!("promoted {:?} after the kill", killed.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Her sign-out on B answers Ok, on the new master.
    b.sign_out("alice")
        .await
        .expect("the sign-out after the failover");
    // A no longer serves her (it heard, or reads the store); Bob still is.
    let gone = a.token_for(&alice).await.unwrap_err();
    assert_eq!(gone.kind(), TokenErrorKind::LoginRequired, "{gone}");
    a.token_for(&bob).await.expect("Bob is served");
    let fresh = replica(&server, &redis);
    let e = fresh.token_for(&alice).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    fresh
        .token_for(&bob)
        .await
        .expect("Bob, from the new master");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for (name, task) in ["A", "B"].into_iter().zip(watching) {
        let (unserved, longest) = task.await.unwrap();
        println!("replica {name}: Bob refused for {unserved:?} in all, longest wait {longest:?}");
    }
    drop(redis);
}
