//! The warm path allocates no more than inserting a fixed header does.
//! Allocation counts are deterministic, so this is an exact test; time is
//! measured by `benches/hot_path.rs`, never here.

#[path = "support/services.rs"]
mod services;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{HeaderValue, Request, Response};
use services::{FixedToken, Noop, FIXED_TOKEN};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;
use tower_oauth::OAuthLayer;

/// Counts the allocations made on the current thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Allocations made by `n` requests through `svc`, requests included.
fn allocations_for<S>(svc: &mut S, n: u64) -> u64
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let before = allocations();
    for _ in 0..n {
        assert!(svc.poll_ready(&mut cx).is_ready());
        let fut = pin!(svc.call(Request::new(())));
        match fut.poll(&mut cx) {
            Poll::Ready(r) => {
                r.unwrap();
            }
            Poll::Pending => panic!("the warm path must not wait"),
        }
    }
    allocations() - before
}

#[test]
fn the_warm_path_allocates_no_more_than_a_fixed_header() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let oauth = OAuthLayer::builder()
        .token_source(FixedToken)
        .build()
        .unwrap();
    rt.block_on(oauth.token()).unwrap();

    let mut fixed = SetRequestHeaderLayer::overriding(
        http::header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {FIXED_TOKEN}")).unwrap(),
    )
    .layer(Noop);
    let mut svc = oauth.layer(Noop);
    // Warm both once (first clones of a header value may promote its buffer).
    allocations_for(&mut fixed, 1);
    allocations_for(&mut svc, 1);

    let n = 1000;
    let baseline = allocations_for(&mut fixed, n);
    let bare = allocations_for(&mut Noop, n);
    let ours = allocations_for(&mut svc, n);
    assert!(
        baseline > bare,
        "inserting a header allocates the header map"
    );
    assert_eq!(
        ours, baseline,
        "warm path: {ours} allocations for {n} requests, fixed header: {baseline}"
    );
}
