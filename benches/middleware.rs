//! The warm path through `OAuthMiddleware` against a reqwest middleware
//! that adds a fixed `Authorization` header (the floor), each in front of a
//! last middleware that answers at once (no network: what is measured is
//! the middleware), with the resend after a refusal on (the default) and
//! off. Printed at the end as the ratios of the medians of this run.
//!
//! `cargo bench --bench middleware --features reqwest-middleware`

#[path = "support/ratios.rs"]
mod ratios;
#[path = "../tests/support/reqwest_client.rs"]
mod reqwest_client;
#[path = "../tests/support/services.rs"]
mod services;

#[path = "support/middlewares.rs"]
mod middlewares;

use criterion::{criterion_group, criterion_main, Criterion};
use middlewares::{client, FixedHeader};

fn warm_path(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let oauth = services::warm_layer(&rt);
    let fixed = client(FixedHeader(services::fixed_header()));
    let with_oauth = client(oauth.middleware());
    let without_resend = client(oauth.middleware().resend(false));
    let url = "http://api.example/products/42";

    let mut group = c.benchmark_group("reqwest_middleware");
    group.bench_function("fixed_header", |b| {
        b.iter(|| rt.block_on(fixed.get(url).send()).unwrap())
    });
    group.bench_function("oauth", |b| {
        b.iter(|| rt.block_on(with_oauth.get(url).send()).unwrap())
    });
    group.bench_function("oauth_without_resend", |b| {
        b.iter(|| rt.block_on(without_resend.get(url).send()).unwrap())
    });
    group.finish();
}

fn report(_: &mut Criterion) {
    println!("\n| group | bench | median | baseline | ratio |\n|---|---|---|---|---|");
    ratios::print(
        "reqwest_middleware",
        "fixed_header",
        &["oauth", "oauth_without_resend"],
    );
}

criterion_group!(benches, warm_path, report);
criterion_main!(benches);
