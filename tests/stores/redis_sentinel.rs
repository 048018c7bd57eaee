//! Fleets through Redis Sentinel: replicas share one token, and one token
//! request, on the master Sentinel names, and follow it when it fails over.
//! The test runs its own master, replica and Sentinels (`redis-server`
//! processes) on free ports of 127.0.0.1.

#![cfg(feature = "redis-sentinel")]

use crate::support;

use std::time::{Duration, Instant};

use redis::Commands;
use support::redis_sentinel::{RedisSentinel, MASTER_NAME};
use support::*;
use tower_oauth::{store::RedisStore, ConfigErrorKind, OAuthLayer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_follows_the_master_sentinel_names_through_a_failover() {
    if support::redis_server::missing() {
        return;
    }
    let mut redis = tokio::task::spawn_blocking(RedisSentinel::start)
        .await
        .unwrap();
    let lifetime = Duration::from_secs(2);
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, lifetime).await;
    authority.set_delay(Duration::from_millis(100));
    let replicas: Vec<OAuthLayer> = (0..8)
        .map(|_| {
            builder(&authority)
                .token_store(
                    RedisStore::sentinel(redis.urls(), MASTER_NAME)
                        .unwrap()
                        .prefix("s1:"),
                )
                .fetch_timeout(Duration::from_secs(1))
                .build()
                .unwrap()
        })
        .collect();
    let run = Duration::from_secs(20);
    let started = Instant::now();
    let senders = Senders::start(&replicas, &authority.api_url("/p"), started + run);

    // The master dies; the Sentinels promote its replica. Later the old
    // master comes back, and they make it a replica.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let old = redis.master();
    redis.kill(old);
    let mut redis = tokio::task::spawn_blocking(move || {
        redis.wait_for_failover(old, Duration::from_secs(15));
        redis
    })
    .await
    .unwrap();
    let new = redis.master();
    println!(
        "master {old} killed; {new} promoted at {:?}",
        started.elapsed()
    );
    // Once a second has passed since the promotion, no replica fetches
    // alone any more: they all found the new master.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let alone_after_failover: u64 = replicas.iter().map(|r| r.stats().store_fell_back).sum();
    tokio::time::sleep(Duration::from_secs(8).saturating_sub(started.elapsed())).await;
    redis.restart(old);
    let redis = tokio::task::spawn_blocking(move || {
        redis.wait_until_replica(old, Duration::from_secs(25));
        redis
    })
    .await
    .unwrap();
    println!("{old} back as a replica at {:?}", started.elapsed());

    let (ok, failed) = senders.finish().await;
    assert_eq!(failed, 0, "a request failed");
    assert_eq!(authority.api_refused(), 0, "a request was refused");
    assert!(ok > 8 * 300, "{ok} requests");

    let times = authority.token_request_times();
    let cold = times
        .iter()
        .filter(|t| t.duration_since(times[0]) < Duration::from_millis(700))
        .count();
    assert_eq!(cold, 1, "the cold start made {cold} token requests");
    let stats: Vec<_> = replicas.iter().map(OAuthLayer::stats).collect();
    let sum = |f: fn(&tower_oauth::Stats) -> u64| stats.iter().map(f).sum::<u64>();
    let fetched = sum(|s| s.store_fetched_for_fleet);
    let alone = sum(|s| s.store_fell_back);
    let one_replica = stats.iter().map(|s| s.fetches).max().unwrap();
    println!(
        "8 replicas, {run:?} of {lifetime:?} tokens, a failover: {} token requests \
         ({fetched} fetched for the fleet, {alone} alone while Redis did not answer; \
         one replica needs {one_replica})",
        times.len()
    );
    assert_eq!(times.len() as u64, fetched + alone);
    assert!(fetched <= one_replica + 2, "{fetched} for the fleet");
    // While no master answers (Sentinel's 1 s down-after, then its
    // election), each replica fetches alone at each renewal: with 2 s
    // tokens renewed about every second, two or three times.
    assert!(alone <= 3 * 8, "{alone} alone");
    assert_eq!(
        alone, alone_after_failover,
        "a replica fetched alone after the failover (the old master back, a rogue master \
         of nothing for ten seconds, must not be used)"
    );
    // Sharing went on on the new master: it holds the token now.
    let keys: Vec<String> = redis.connection(new).keys("s1:*").unwrap();
    assert!(keys.iter().any(|k| k.ends_with('}')), "{keys:?}");
}

#[test]
fn sentinel_settings_are_checked_and_never_shown() {
    let none: [&str; 0] = [];
    let e = RedisStore::sentinel(none, "tokens").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidUrl);

    let e = RedisStore::sentinel(["redis://127.0.0.1:26379"], "").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidSetting);

    let e = RedisStore::sentinel(["nonsense://:hunter2@x"], "tokens").unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidUrl);
    assert!(!e.to_string().contains("hunter2"), "{e}");

    let store = RedisStore::sentinel(["redis://:hunter2@127.0.0.1:26379"], "tokens").unwrap();
    assert!(!format!("{store:?}").contains("hunter2"));
}
