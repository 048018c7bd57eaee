//! The warm path: `OAuthService` against tower-http's `SetRequestHeader`
//! with a fixed `Authorization` value (the floor) and the bare inner service.
//!
//! `cargo bench --bench hot_path`; at the end it prints each median as a
//! ratio to `set_request_header`'s in the same run.

#[path = "support/ratios.rs"]
mod ratios;
#[path = "../tests/support/services.rs"]
mod services;
#[path = "support/threads.rs"]
mod threads;

use std::task::{Context, Waker};

use criterion::{criterion_group, criterion_main, Criterion};
use services::{drive, fixed_header, warm_layer, Noop};
use threads::{on_two_threads, requests};
use tower::Layer;
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
    let mut slots = services::warm_slots_layer(&rt, 8).layer(Noop);
    group.bench_function("oauth_8_slots", |b| b.iter(|| drive(&mut slots, &mut cx)));
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

fn two_threads(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let oauth = warm_layer(&rt);
    let mut group = c.benchmark_group("warm_path_2_threads");
    group.bench_function("bare", |b| {
        b.iter_custom(|n| on_two_threads(requests(Noop), n))
    });
    let fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    group.bench_function("set_request_header", |b| {
        b.iter_custom(|n| on_two_threads(requests(fixed.clone()), n))
    });
    let svc = oauth.layer(Noop);
    group.bench_function("oauth", |b| {
        b.iter_custom(|n| on_two_threads(requests(svc.clone()), n))
    });
    let slots = services::warm_slots_layer(&rt, 8).layer(Noop);
    group.bench_function("oauth_8_slots", |b| {
        b.iter_custom(|n| on_two_threads(requests(slots.clone()), n))
    });
    group.finish();
}

/// The ratios to the fixed header, from the medians of this run.
fn report(_: &mut Criterion) {
    println!("\n| group | bench | median | baseline | ratio |\n|---|---|---|---|---|");
    for group in ["warm_path_1_thread", "warm_path_2_threads"] {
        ratios::print(
            group,
            "set_request_header",
            &["bare", "oauth", "oauth_8_slots"],
        );
    }
    ratios::print(
        "clone_per_request_1_thread",
        "set_request_header",
        &["oauth"],
    );
}

criterion_group!(
    benches,
    single_thread,
    two_threads,
    clone_per_request,
    report
);
criterion_main!(benches);
