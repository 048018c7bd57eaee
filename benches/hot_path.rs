//! The warm path: `OAuthService` side by side with its peers, around the
//! same no-op inner service, token at hand:
//!
//! - `bare`: the inner service alone;
//! - `set_request_header`: tower-http's `SetRequestHeader` with a fixed
//!   `Authorization` value (the floor of any layer that adds a header);
//! - `exact_clock`: the same fixed header, put on only after a read of the
//!   clock says it has not expired (the floor of a layer that never sends an
//!   expired token);
//! - `middle`: the closest peer, `middle` 0.5's `authorization_header()` in
//!   a small `map_request` layer (`benches/support/peers.rs`);
//! - `oauth`, and `oauth_8_slots` (requests choosing among 8 token slots).
//!
//! Two threads: each thread drives its own clone of one service built from
//! one layer (one authorizer); the times are per request per thread.
//!
//! `cargo bench --bench hot_path`; at the end it prints each median as a
//! ratio to `set_request_header`'s in the same run, and `oauth`'s to
//! `middle`'s and to `exact_clock`'s.

#[path = "support/peers.rs"]
mod peers;
#[path = "../tests/support/provider.rs"]
mod provider;
#[path = "support/ratios.rs"]
mod ratios;
#[path = "../tests/support/serve.rs"]
mod serve;
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
    let (_provider, authorizer) = peers::middle_authorizer(&rt);
    let mut cx = Context::from_waker(Waker::noop());

    let mut group = c.benchmark_group("warm_path_1_thread");
    let mut bare = Noop;
    group.bench_function("bare", |b| b.iter(|| drive(&mut bare, &mut cx)));
    let mut fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    group.bench_function("set_request_header", |b| {
        b.iter(|| drive(&mut fixed, &mut cx))
    });
    let mut exact = peers::exact_clock(Noop);
    group.bench_function("exact_clock", |b| b.iter(|| drive(&mut exact, &mut cx)));
    let mut middle = peers::middle(Noop, &authorizer);
    group.bench_function("middle", |b| b.iter(|| drive(&mut middle, &mut cx)));
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
    let (_provider, authorizer) = peers::middle_authorizer(&rt);
    let mut group = c.benchmark_group("warm_path_2_threads");
    group.bench_function("bare", |b| {
        b.iter_custom(|n| on_two_threads(requests(Noop), n))
    });
    let fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    group.bench_function("set_request_header", |b| {
        b.iter_custom(|n| on_two_threads(requests(fixed.clone()), n))
    });
    let exact = peers::exact_clock(Noop);
    group.bench_function("exact_clock", |b| {
        b.iter_custom(|n| on_two_threads(requests(exact.clone()), n))
    });
    let middle = peers::middle(Noop, &authorizer);
    group.bench_function("middle", |b| {
        b.iter_custom(|n| on_two_threads(requests(middle.clone()), n))
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

/// The ratios, from the medians of this run: every contender to the fixed
/// header, and `oauth` to `middle` and to the exact-clock floor.
fn report(_: &mut Criterion) {
    println!("\n| group | bench | median | baseline | ratio |\n|---|---|---|---|---|");
    for group in ["warm_path_1_thread", "warm_path_2_threads"] {
        ratios::print(
            group,
            "set_request_header",
            &["bare", "exact_clock", "middle", "oauth", "oauth_8_slots"],
        );
        ratios::print(group, "middle", &["oauth"]);
        ratios::print(group, "exact_clock", &["oauth"]);
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
