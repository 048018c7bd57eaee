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

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{HeaderValue, Request, Response};
use services::{FixedToken, Noop, FIXED_TOKEN};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;
use tower_oauth::OAuthLayer;

fn run<S>(mut svc: S, n: u64)
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..n {
        assert!(svc.poll_ready(&mut cx).is_ready());
        let req = Request::get("http://api.example/products/42")
            .body(())
            .unwrap();
        let fut = pin!(svc.call(req));
        match fut.poll(&mut cx) {
            Poll::Ready(r) => {
                std::hint::black_box(r.unwrap());
            }
            Poll::Pending => panic!("the warm path must not wait"),
        }
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
    let oauth = OAuthLayer::builder()
        .token_source(FixedToken)
        .build()
        .unwrap();
    rt.block_on(oauth.token()).unwrap();
    let fixed = HeaderValue::from_str(&format!("Bearer {FIXED_TOKEN}")).unwrap();
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
