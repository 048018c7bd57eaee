//! The warm path through `OAuthMiddleware` against a reqwest middleware
//! that adds a fixed `Authorization` header (the floor), each in front of a
//! last middleware that answers at once (no network: what is measured is
//! the middleware). Printed at the end as the ratio of the medians of this
//! run.
//!
//! `cargo bench --bench middleware --features reqwest-middleware`

#[path = "support/ratios.rs"]
mod ratios;
#[path = "../tests/support/reqwest_client.rs"]
mod reqwest_client;
#[path = "../tests/support/services.rs"]
mod services;

use criterion::{criterion_group, criterion_main, Criterion};
use http::{Extensions, HeaderValue};
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

/// Answers every request with `200` and no body, without sending it.
struct Answer;

#[async_trait::async_trait]
impl Middleware for Answer {
    async fn handle(
        &self,
        _: Request,
        _: &mut Extensions,
        _: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        Ok(Response::from(http::Response::new("")))
    }
}

/// Adds a fixed `Authorization` header: the floor.
struct FixedHeader(HeaderValue);

#[async_trait::async_trait]
impl Middleware for FixedHeader {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, self.0.clone());
        next.run(req, extensions).await
    }
}

fn client(first: impl Middleware) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest_client::reqwest_client())
        .with(first)
        .with(Answer)
        .build()
}

fn warm_path(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let oauth = services::warm_layer(&rt);
    let fixed = client(FixedHeader(services::fixed_header()));
    let with_oauth = client(oauth.middleware());
    let url = "http://api.example/products/42";

    let mut group = c.benchmark_group("reqwest_middleware");
    group.bench_function("fixed_header", |b| {
        b.iter(|| rt.block_on(fixed.get(url).send()).unwrap())
    });
    group.bench_function("oauth", |b| {
        b.iter(|| rt.block_on(with_oauth.get(url).send()).unwrap())
    });
    group.finish();
}

fn report(_: &mut Criterion) {
    println!("\n| group | bench | median | baseline | ratio |\n|---|---|---|---|---|");
    ratios::print("reqwest_middleware", "fixed_header", &["oauth"]);
}

criterion_group!(benches, warm_path, report);
criterion_main!(benches);
