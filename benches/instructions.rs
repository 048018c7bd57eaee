//! Instruction counts of the warm path, for a measure that does not move
//! with the machine's load: run each mode under callgrind with two request
//! counts; the difference divided by the difference in requests is the cost
//! of one request, set-up excluded.
//!
//! ```text
//! cargo bench --bench instructions --no-run
//! for mode in bare set_request_header oauth; do for n in 10000 20000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/deps/instructions-* $mode $n 2>&1 | grep refs
//! done; done
//! ```
//!
//! Run without arguments (as `cargo bench` does) it does nothing.

#[path = "../tests/support/services.rs"]
mod services;

use std::task::{Context, Waker};

use http::{Request, Response};
use services::{drive, fixed_header, warm_layer, Noop};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;

fn run<S>(mut svc: S, n: u64)
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..n {
        drive(&mut svc, &mut cx);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(n)) = (args.first(), args.get(1).and_then(|n| n.parse().ok())) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let oauth = warm_layer(&rt);
    let fixed = fixed_header();
    match mode.as_str() {
        "bare" => run(Noop, n),
        "set_request_header" => run(
            SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed).layer(Noop),
            n,
        ),
        "oauth" => run(oauth.layer(Noop), n),
        other => panic!("unknown mode {other}"),
    }
}
