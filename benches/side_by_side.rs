//! The warm path's contenders timed in turns (`support/turns.rs`): each
//! round runs a short burst of requests through every contender, and the
//! report gives each contender's median over the rounds and its fastest
//! tenth, per request, with its ratios to the fixed header, the exact-check
//! floor, `middle`, and the exact-check floor that also reads each answer
//! (`exact_clock_reading`, `support/peers.rs`).
//!
//! `cargo bench --bench side_by_side` (one thread, then two threads each
//! with its own clone of one service); `-- <rounds> <burst>` to change the
//! defaults (1,001 rounds of 2,000 requests).

#[path = "support/peers.rs"]
mod peers;
#[path = "../tests/support/provider.rs"]
mod provider;
#[path = "../tests/support/serve.rs"]
mod serve;
#[path = "../tests/support/services.rs"]
mod services;
#[path = "support/threads.rs"]
mod threads;
#[path = "support/turns.rs"]
mod turns;

use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Instant;

use http::{Request, Response};
use services::{drive, fixed_header, warm_layer, Noop};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;

/// One contender: makes a fresh instance (a clone) of its service, and
/// runs `n` requests through it.
type Contender = (
    &'static str,
    Arc<dyn Fn() -> Box<dyn FnMut(u64) + Send> + Send + Sync>,
);

fn contender<S>(name: &'static str, svc: S) -> Contender
where
    S: Service<Request<()>, Response = Response<()>> + Clone + Send + Sync + 'static,
    S::Error: std::fmt::Debug,
{
    (
        name,
        Arc::new(move || {
            let mut svc = svc.clone();
            Box::new(move |n| {
                let mut cx = Context::from_waker(Waker::noop());
                for _ in 0..n {
                    drive(&mut svc, &mut cx);
                }
            })
        }),
    )
}

/// `burst` requests through `c` on one thread, or on each of two at once
/// (each with its own instance, warmed); nanoseconds per request per
/// thread.
fn time(c: &Contender, threads: usize, burst: u64) -> f64 {
    let elapsed = if threads == 1 {
        let mut job = (c.1)();
        let start = Instant::now();
        job(burst);
        start.elapsed()
    } else {
        let make = Arc::clone(&c.1);
        threads::on_two_threads(
            move || {
                let mut job = make();
                job(16); // warm
                Box::new(move || job(burst))
            },
            1,
        )
    };
    elapsed.as_secs_f64() * 1e9 / burst as f64
}

fn main() {
    let (rounds, burst) = turns::rounds_and_burst(1001, 2_000);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let oauth = warm_layer(&rt);
    let (_provider, authorizer) = peers::middle_authorizer(&rt);
    let fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    let contenders = [
        contender("set_request_header", fixed),
        contender("exact_clock", peers::exact_clock(Noop)),
        contender("middle", peers::middle(Noop, &authorizer)),
        contender("exact_clock_reading", peers::exact_clock_reading(Noop)),
        contender("oauth", oauth.layer(Noop)),
    ];
    let names: Vec<&str> = contenders.iter().map(|c| c.0).collect();
    for threads in [1, 2] {
        let times = turns::take_turns(contenders.len(), rounds, |i| {
            time(&contenders[i], threads, burst)
        });
        let title = format!("{threads} thread(s), {rounds} rounds of {burst} requests");
        turns::report(&title, &names, &times, 4);
    }
}
