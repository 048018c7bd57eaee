//! A cold fleet sharing one token through Redis: how long until the last of
//! N in-process replicas has its token, and how many commands Redis served
//! (`INFO commandstats`), with waiters woken by pub/sub and with waiters
//! polling every 25 ms (`RedisStore::notifications(false)`), N = 1, 8, 64,
//! behind a token request of 100 ms and of 1 s; on one `redis-server`, and
//! with feature `redis-cluster` on a 3-master Redis Cluster too.
//!
//! `cargo bench --features redis --bench fleet` (needs `redis-server`;
//! `--features redis-cluster` adds the cluster's rows)

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/fleet.rs"]
mod fleet;
#[cfg(feature = "redis-cluster")]
#[path = "../tests/support/redis_cluster.rs"]
mod redis_cluster;
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use authority::Authority;
use redis_server::RedisServer;
use tower_oauth::{store::RedisStore, OAuthLayer};

/// The Redis the fleet shares through.
enum Redis {
    Server(RedisServer),
    #[cfg(feature = "redis-cluster")]
    Cluster(redis_cluster::RedisCluster),
}

impl Redis {
    fn name(&self) -> &'static str {
        match self {
            Redis::Server(_) => "server",
            #[cfg(feature = "redis-cluster")]
            Redis::Cluster(_) => "cluster",
        }
    }

    fn store(&self) -> RedisStore {
        match self {
            Redis::Server(server) => RedisStore::new(server.url()).unwrap(),
            #[cfg(feature = "redis-cluster")]
            Redis::Cluster(cluster) => RedisStore::cluster(cluster.urls()).unwrap(),
        }
    }

    fn reset_stats(&self) {
        match self {
            Redis::Server(server) => server.reset_stats(),
            #[cfg(feature = "redis-cluster")]
            Redis::Cluster(cluster) => cluster.reset_stats(),
        }
    }

    fn command_calls(&self) -> HashMap<String, u64> {
        match self {
            Redis::Server(server) => server.command_calls(),
            #[cfg(feature = "redis-cluster")]
            Redis::Cluster(cluster) => cluster.command_calls(),
        }
    }
}

/// One cold start of `n` replicas: (time to the first token, time to the
/// last, commands, reads).
async fn cold_start(
    redis: &Redis,
    authority: &Authority,
    n: usize,
    notifications: bool,
    run: usize,
) -> (Duration, Duration, u64, u64) {
    let replicas: Vec<OAuthLayer> = (0..n)
        .map(|_| {
            OAuthLayer::builder()
                .auth_url(authority.base_url())
                .client_id("fleet")
                .client_secret("fleet-secret")
                .token_store(
                    redis
                        .store()
                        .prefix(format!("run{run}:"))
                        .notifications(notifications),
                )
                .build()
                .unwrap()
        })
        .collect();
    redis.reset_stats();
    let start = Instant::now();
    let done: Vec<Duration> = fleet::tokens_at_once(&replicas)
        .await
        .into_iter()
        .map(|(_, at)| at - start)
        .collect();
    let calls = redis.command_calls();
    // The statistics' own CONFIG RESETSTAT is not the fleet's.
    let commands = calls
        .iter()
        .filter(|(name, _)| !name.starts_with("config"))
        .map(|(_, n)| n)
        .sum();
    // A read is one script with two PTTL (Redis counts the commands a
    // script runs).
    let reads = calls.get("pttl").copied().unwrap_or(0) / 2;
    (
        *done.iter().min().unwrap(),
        *done.iter().max().unwrap(),
        commands,
        reads,
    )
}

fn main() {
    // `cargo test --benches` runs benches with `--bench`-less arguments;
    // only a bench run measures.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        #[allow(unused_mut)]
        let mut deployments = vec![Redis::Server(RedisServer::start())];
        #[cfg(feature = "redis-cluster")]
        deployments.push(Redis::Cluster(redis_cluster::RedisCluster::start(3, 0)));
        let authority = Authority::start("fleet", "fleet-secret", Duration::from_secs(3600)).await;
        println!("| Redis | token request | replicas | waiters | token requests | last token after | last after first | Redis commands | reads |");
        println!("|---|---|---|---|---|---|---|---|---|");
        let mut run = 0;
        for redis in &deployments {
            for (delay, n) in [(100, 1), (100, 8), (100, 64), (1000, 8), (1000, 64)] {
                authority.set_delay(Duration::from_millis(delay));
                for notifications in [true, false] {
                    run += 1;
                    let before = authority.token_requests();
                    let (first, last, commands, reads) =
                        cold_start(redis, &authority, n, notifications, run).await;
                    println!(
                        "| {} | {delay} ms | {n} | {} | {} | {:.1} ms | {:.1} ms | {commands} | {reads} |",
                        redis.name(),
                        if notifications { "woken" } else { "polling" },
                        authority.token_requests() - before,
                        last.as_secs_f64() * 1e3,
                        (last - first).as_secs_f64() * 1e3,
                    );
                }
            }
        }
    });
}
