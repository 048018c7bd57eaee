//! The warm path: `OAuthService` against tower-http's `SetRequestHeader`
//! with a fixed `Authorization` value (the floor) and the bare inner service.
//!
//! `cargo bench --bench hot_path`

#[path = "../tests/support/services.rs"]
mod services;

use std::sync::{Arc, Barrier};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use http::{Request, Response};
use services::{drive, fixed_header, warm_layer, Noop};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;

fn single_thread(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let oauth = warm_layer(&rt);
    let mut cx = Context::from_waker(Waker::noop());

    let mut group = c.benchmark_group("warm_path_1_thread");
    let mut bare = Noop;
    group.bench_function("bare", |b| b.iter(|| drive(&mut bare, &mut cx)));
    let mut fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    group.bench_function("set_request_header", |b| {
        b.iter(|| drive(&mut fixed, &mut cx))
    });
    let mut svc = oauth.layer(Noop);
    group.bench_function("oauth", |b| b.iter(|| drive(&mut svc, &mut cx)));
    group.finish();
}

/// A clone of the service per request, as `svc.clone().oneshot(req)` does:
/// what making a service instance costs on top of a request.
fn clone_per_request(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let oauth = warm_layer(&rt);
    let mut cx = Context::from_waker(Waker::noop());

    let mut group = c.benchmark_group("clone_per_request_1_thread");
    let fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    group.bench_function("set_request_header", |b| {
        b.iter(|| drive(&mut fixed.clone(), &mut cx))
    });
    let svc = oauth.layer(Noop);
    group.bench_function("oauth", |b| b.iter(|| drive(&mut svc.clone(), &mut cx)));
    group.finish();
}

/// Two threads, each with its own clone of the service, on one layer.
fn run_two<S>(svc: S, iters: u64) -> Duration
where
    S: Service<Request<()>, Response = Response<()>> + Clone + Send + 'static,
    S::Error: std::fmt::Debug,
{
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let mut svc = svc.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                barrier.wait();
                for _ in 0..iters {
                    drive(&mut svc, &mut cx);
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
}

fn two_threads(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let oauth = warm_layer(&rt);
    let mut group = c.benchmark_group("warm_path_2_threads");
    group.bench_function("bare", |b| b.iter_custom(|n| run_two(Noop, n)));
    let fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    group.bench_function("set_request_header", |b| {
        b.iter_custom(|n| run_two(fixed.clone(), n))
    });
    let svc = oauth.layer(Noop);
    group.bench_function("oauth", |b| b.iter_custom(|n| run_two(svc.clone(), n)));
    group.finish();
}

criterion_group!(benches, single_thread, two_threads, clone_per_request);
criterion_main!(benches);
