//! How long a sign-out takes on Redis, the store waiting for every watching
//! replica's word that it dropped the account's tokens: with every replica
//! alive (3 replicas, in one process), and with one of 3 killed by its PID
//! (SIGKILL, a process of its own, as an orchestrator kills one after its
//! grace period) just before the sign-out. The baseline, in the same
//! run: the same sign-out with no other replica listed. p50 and p99 (the
//! slowest, for the 20 kills).
//!
//! `cargo bench --features redis --bench sign_out` (needs `redis-server`)

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use authority::Authority;
use redis_server::RedisServer;
use tower_oauth::{store::RedisStore, OAuthLayer, TokenParams};

/// Set in a replica process of the bench's own: the Redis URL, then the
/// authority's URL.
const CHILD: &str = "SIGN_OUT_BENCH_CHILD";

fn replica(redis_url: &str, authority_url: &str) -> OAuthLayer {
    OAuthLayer::builder()
        .auth_url(authority_url)
        .client_id("fleet")
        .client_secret("fleet-secret")
        .token_store(RedisStore::new(redis_url).unwrap())
        .build()
        .unwrap()
}

/// Makes `oauth` watch the accounts' news (its first account does).
async fn watch(oauth: &OAuthLayer) {
    let _ = oauth.token_for(&TokenParams::new().account("probe")).await;
}

fn listed(redis: &RedisServer) -> usize {
    let mut con = redis.connection();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*:watchers")
        .query(&mut con)
        .unwrap();
    keys.iter()
        .map(|k| redis::cmd("ZCARD").arg(k).query::<usize>(&mut con).unwrap())
        .sum()
}

async fn until_listed(redis: &RedisServer, n: usize) {
    while listed(redis) != n {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// p50 and p99 of `times`, in ms.
fn percentiles(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    let at = |q: f64| {
        let i = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1;
        times[i].as_secs_f64() * 1e3
    };
    (at(0.5), at(0.99))
}

async fn sign_outs(oauth: &OAuthLayer, n: usize, name: &str) -> Vec<Duration> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        oauth.sign_out(format!("{name}-{i}")).await.unwrap();
        times.push(started.elapsed());
    }
    times
}

fn main() {
    if let Ok(urls) = std::env::var(CHILD) {
        let (redis_url, authority_url) = urls.split_once(' ').unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let oauth = replica(redis_url, authority_url);
            watch(&oauth).await;
            println!("ready");
            std::future::pending::<()>().await;
        });
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let redis = RedisServer::start();
        let authority = Authority::start("fleet", "fleet-secret", Duration::from_secs(3600)).await;
        let a = replica(&redis.url(), &authority.base_url());
        watch(&a).await;
        until_listed(&redis, 1).await;
        let alone = sign_outs(&a, 100, "alone").await;
        let (b, c) = (
            replica(&redis.url(), &authority.base_url()),
            replica(&redis.url(), &authority.base_url()),
        );
        watch(&b).await;
        watch(&c).await;
        until_listed(&redis, 3).await;
        let alive = sign_outs(&a, 100, "alive").await;
        drop(c);
        let mut killed = Vec::new();
        for i in 0..20 {
            until_listed(&redis, 2).await;
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .env(CHILD, format!("{} {}", redis.url(), authority.base_url()))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(child.stdout.take().unwrap()),
                &mut line,
            )
            .unwrap();
            until_listed(&redis, 3).await;
            child.kill().unwrap();
            child.wait().unwrap();
            let started = Instant::now();
            a.sign_out(format!("killed-{i}")).await.unwrap();
            killed.push(started.elapsed());
        }
        println!("| replicas | sign-outs | p50 | p99 |");
        println!("|---|---|---|---|");
        for (what, times) in [
            ("1, alone (the baseline)", alone),
            ("3, all alive", alive),
            ("3, one killed just before", killed),
        ] {
            let n = times.len();
            let (p50, p99) = percentiles(times);
            println!("| {what} | {n} | {p50:.1} ms | {p99:.1} ms |");
        }
    });
}
