//! Cold start: 10,000 concurrent requests on a fresh layer against a real
//! loopback token endpoint. Exactly one token request is made (checked on
//! every iteration); the time for all 10,000 is compared with one request on
//! a fresh layer (one token round trip), and with a hand-written `RwLock`
//! refresher doing the same (`tests/support/refresher.rs`), measured in the
//! same run.
//!
//! `cargo bench --bench cold_start`; at the end it prints the bursts as
//! ratios to the refresher's in the same run.

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "support/ratios.rs"]
mod ratios;
#[path = "../tests/support/refresher.rs"]
mod refresher;
#[path = "../tests/support/services.rs"]
mod services;

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use http::Request;
use services::Noop;
use tower::{Layer, Service, ServiceExt};

/// Runs `concurrency` requests at once on a fresh layer (or, `warm`, one
/// that already has its token); the time until the last completes.
async fn burst(authority: &authority::Authority, concurrency: usize, warm: bool) -> Duration {
    let oauth = authority.layer();
    if warm {
        oauth.token().await.unwrap();
    }
    let svc = oauth.layer(Noop);
    let before = authority.token_requests();
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let svc = svc.clone();
            tokio::spawn(async move { svc.oneshot(Request::new(())).await.unwrap() })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let took = start.elapsed();
    let expected = if warm { 0 } else { 1 };
    assert_eq!(
        authority.token_requests() - before,
        expected,
        "one token request per cold burst"
    );
    took
}

/// The same burst through a fresh hand-written refresher.
async fn refresher_burst(authority: &authority::Authority, concurrency: usize) -> Duration {
    let refresher = refresher::Refresher::new(&authority.base_url(), "bench", "bench-secret");
    let before = authority.token_requests();
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let refresher = refresher.clone();
            tokio::spawn(async move {
                let req = refresher.authorize(Request::new(())).await.unwrap();
                Noop.call(req).await.unwrap()
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let took = start.elapsed();
    assert_eq!(authority.token_requests() - before, 1);
    took
}

fn cold_start(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let authority = rt.block_on(authority::Authority::start(
        "bench",
        "bench-secret",
        Duration::from_secs(3600),
    ));
    // A token endpoint 20 ms away.
    authority.set_delay(Duration::from_millis(20));

    let mut group = c.benchmark_group("cold_start");
    group.sample_size(20);
    // One token round trip (and one request).
    group.bench_function("cold_1_request", |b| {
        b.iter_custom(|n| {
            (0..n)
                .map(|_| rt.block_on(burst(&authority, 1, false)))
                .sum()
        })
    });
    // What 10,000 concurrent tasks cost here without any token to wait for.
    group.bench_function("warm_10000_concurrent", |b| {
        b.iter_custom(|n| {
            (0..n)
                .map(|_| rt.block_on(burst(&authority, 10_000, true)))
                .sum()
        })
    });
    // Both together: the target is the sum of the two above, plus a little.
    group.bench_function("cold_10000_concurrent", |b| {
        b.iter_custom(|n| {
            (0..n)
                .map(|_| rt.block_on(burst(&authority, 10_000, false)))
                .sum()
        })
    });
    // The hand-written refresher, cold, for comparison.
    group.bench_function("refresher_cold_10000_concurrent", |b| {
        b.iter_custom(|n| {
            (0..n)
                .map(|_| rt.block_on(refresher_burst(&authority, 10_000)))
                .sum()
        })
    });
    group.finish();
}

/// The layer's cold burst against the refresher's, from this run's medians.
fn report(_: &mut Criterion) {
    println!("\n| group | bench | median | baseline | ratio |\n|---|---|---|---|---|");
    ratios::print(
        "cold_start",
        "refresher_cold_10000_concurrent",
        &["cold_10000_concurrent", "warm_10000_concurrent"],
    );
}

criterion_group!(benches, cold_start, report);
criterion_main!(benches);
