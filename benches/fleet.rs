//! A cold fleet sharing one token through Redis: how long until the last of
//! N in-process replicas has its token, and how many commands Redis served
//! (`INFO commandstats`), with waiters woken by pub/sub and with waiters
//! polling every 25 ms (`RedisStore::notifications(false)`), N = 1, 8, 64,
//! behind a token request of 100 ms and of 1 s.
//!
//! `cargo bench --features redis --bench fleet` (needs `redis-server`)

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use authority::Authority;
use redis_server::RedisServer;
use tower_oauth::{OAuthLayer, RedisStore};

/// One cold start of `n` replicas: (time to the first token, time to the
/// last, commands, reads).
async fn cold_start(
    server: &RedisServer,
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
                    RedisStore::new(server.url())
                        .unwrap()
                        .prefix(format!("run{run}:"))
                        .notifications(notifications),
                )
                .build()
                .unwrap()
        })
        .collect();
    server.reset_stats();
    let start = Instant::now();
    let tasks: Vec<_> = replicas
        .iter()
        .map(|r| {
            let r = r.clone();
            tokio::spawn(async move {
                r.token().await.unwrap();
                Instant::now()
            })
        })
        .collect();
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap() - start);
    }
    let calls = server.command_calls();
    // The statistics' own CONFIG RESETSTAT is not the fleet's.
    let commands = calls
        .iter()
        .filter(|(name, _)| !name.starts_with("config"))
        .map(|(_, n)| n)
        .sum();
    let reads = calls.get("exec").copied().unwrap_or(0);
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
        let server = RedisServer::start();
        let authority = Authority::start("fleet", "fleet-secret", Duration::from_secs(3600)).await;
        println!("| token request | replicas | waiters | token requests | last token after | last after first | Redis commands | reads |");
        println!("|---|---|---|---|---|---|---|---|");
        let mut run = 0;
        for (delay, n) in [(100, 1), (100, 8), (100, 64), (1000, 8), (1000, 64)] {
            authority.set_delay(Duration::from_millis(delay));
            for notifications in [true, false] {
                run += 1;
                let before = authority.token_requests();
                let (first, last, commands, reads) =
                    cold_start(&server, &authority, n, notifications, run).await;
                println!(
                    "| {delay} ms | {n} | {} | {} | {:.1} ms | {:.1} ms | {commands} | {reads} |",
                    if notifications { "woken" } else { "polling" },
                    authority.token_requests() - before,
                    last.as_secs_f64() * 1e3,
                    (last - first).as_secs_f64() * 1e3,
                );
            }
        }
    });
}
