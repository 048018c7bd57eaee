//! The warm path allocates no more than inserting a fixed header does.
//! Allocation counts are deterministic, so this is an exact test; time is
//! measured by `benches/hot_path.rs`, never here.

#[path = "../support/services.rs"]
mod services;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::task::{Context, Waker};

use http::{Request, Response};
use services::{drive, fixed_header, warm_layer, Noop};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;

/// Counts the allocations made on the current thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated and not yet freed on this thread.
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn live(change: i64) {
    LIVE.with(|l| l.set(l.get() + change));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        live(layout.size() as i64);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        live(-(layout.size() as i64));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        live(new_size as i64 - layout.size() as i64);
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
        drive(svc, &mut cx);
    }
    allocations() - before
}

/// A runtime for the layer's timers, a warm layer on it, and the
/// fixed-header baseline, warmed (a first clone of a header value may
/// promote its buffer).
fn warm_and_fixed() -> (
    tokio::runtime::Runtime,
    tower_oauth::OAuthLayer,
    impl Service<Request<()>, Response = Response<()>, Error = std::convert::Infallible>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let oauth = warm_layer(&rt);
    let mut fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    allocations_for(&mut fixed, 2);
    (rt, oauth, fixed)
}

#[test]
fn the_warm_path_allocates_no_more_than_a_fixed_header() {
    let (_rt, oauth, mut fixed) = warm_and_fixed();
    let mut svc = oauth.layer(Noop);
    // A service instance makes its own copy of a new token's header value
    // at the second request that finds it, once per token.
    allocations_for(&mut svc, 2);

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

/// A clone of a warm service made for one request
/// (`svc.clone().oneshot(req)`, as a `BoxCloneService` or an axum router
/// is used) allocates nothing of its own: its one request allocates what a
/// fixed header's does.
#[test]
fn a_clone_for_one_request_allocates_no_more_than_a_fixed_header() {
    let (_rt, oauth, mut fixed) = warm_and_fixed();
    let svc = oauth.layer(Noop);
    allocations_for(&mut svc.clone(), 2);
    let n = 1000;
    let baseline = allocations_for(&mut fixed, n);
    let before = allocations();
    for _ in 0..n {
        let mut clone = svc.clone();
        allocations_for(&mut clone, 1);
    }
    let ours = allocations() - before;
    assert_eq!(
        ours, baseline,
        "{n} clones, one request each: {ours} allocations, fixed header: {baseline}"
    );
}

/// A request through a warm token slot (chosen by `params_for` among 8)
/// allocates no more than one with the default token.
#[test]
fn a_warm_slot_allocates_no_more_than_a_fixed_header() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    let mut slots = services::warm_slots_layer(&rt, 8).layer(Noop);
    allocations_for(&mut fixed, 1);
    allocations_for(&mut slots, 8);
    let n = 1000;
    let baseline = allocations_for(&mut fixed, n);
    let ours = allocations_for(&mut slots, n);
    assert_eq!(
        ours, baseline,
        "warm slots: {ours} allocations for {n} requests, fixed header: {baseline}"
    );
}

/// A request that names a warm account allocates nothing beyond what naming
/// it costs the caller (the same request with another extension of the same
/// size), and a layer bound to the account nothing beyond a fixed header.
#[test]
fn a_warm_account_allocates_nothing_of_its_own() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (layer, accounts) = services::warm_accounts_layer(&rt, 100);
    rt.block_on(layer.token()).unwrap();
    let mut by_account = layer.clone().layer(Noop);
    let mut tagged = layer.clone().layer(Noop);
    let tag = services::Tag("person-0@example.com".into());
    let n = 1000;
    let mut cx = Context::from_waker(Waker::noop());
    let mut count = |svc: &mut dyn FnMut(&mut Context<'_>)| {
        // Warm: a view makes its own copy of the header at its second request.
        for _ in 0..2 {
            svc(&mut cx);
        }
        let before = allocations();
        for _ in 0..n {
            svc(&mut cx);
        }
        allocations() - before
    };
    let mut i = 0;
    let ours = count(&mut |cx| {
        i += 1;
        services::drive_with(&mut by_account, cx, &accounts[i % accounts.len()]);
    });
    let baseline = count(&mut |cx| services::drive_with(&mut tagged, cx, &tag));
    assert_eq!(
        ours, baseline,
        "{n} account requests: {ours} allocations, {baseline} named nothing"
    );
    let mut fixed =
        SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed_header()).layer(Noop);
    let mut bound = layer
        .for_account("person-7@example.com")
        .unwrap()
        .layer(Noop);
    allocations_for(&mut fixed, 1);
    allocations_for(&mut bound, 2);
    let baseline = allocations_for(&mut fixed, n);
    let ours = allocations_for(&mut bound, n);
    assert_eq!(
        ours, baseline,
        "a bound layer: {ours} allocations, fixed header: {baseline}"
    );
}

/// A flood of distinct parameters through a layer of 4 slots: memory stops
/// growing once the slots are full. Every slot made after that evicts one,
/// and the evicted slot's cache, token and fetch go.
#[test]
fn evicted_slots_free_their_memory() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let oauth = tower_oauth::OAuthLayer::builder()
        .token_url("https://login.example/oauth2/token")
        .client_id("c")
        .client_secret("s")
        .transport(services::token_endpoint("Bearer"))
        .max_token_slots(4)
        .build()
        .unwrap();
    let flood = |from: usize, to: usize| {
        for i in from..to {
            let params = tower_oauth::TokenParams::new().scope(format!("read request-{i}"));
            rt.block_on(oauth.token_for(&params)).unwrap();
        }
        // Let the fetch tasks of the last slots finish.
        rt.block_on(tokio::task::yield_now());
    };
    flood(0, 100);
    let after_100 = LIVE.with(Cell::get);
    flood(100, 1000);
    let after_1000 = LIVE.with(Cell::get);
    eprintln!("live bytes after 100 slots: {after_100}, after 1000: {after_1000}");
    assert_eq!(oauth.slot_stats().len(), 4);
    assert_eq!(oauth.stats().token_requests, 1000);
    assert!(
        after_1000 - after_100 < 2048,
        "{} bytes more live after 900 more slots",
        after_1000 - after_100
    );
}

/// With DPoP, each request allocates three things more than a bearer
/// request: the proof's `htu` (kept to read the nonce of the answer), the
/// proof itself, sized exactly so that it becomes the header value as it
/// is, and the response future's state, kept out of line so that the
/// bearer requests' futures stay small (an allocation is a few dozen
/// instructions; the proof's signature, some 230,000). The header with the
/// `jwk` and the token's `ath` are made once, not per request; the claims
/// and the signature are put together on the stack.
#[cfg(feature = "reqwest")]
#[test]
fn a_dpop_request_allocates_only_its_proof() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut bearer = warm_layer(&rt).layer(Noop);
    allocations_for(&mut bearer, 2);
    for algorithm in [
        tower_oauth::client_auth::Algorithm::Es256,
        tower_oauth::client_auth::Algorithm::EdDsa,
    ] {
        let key = tower_oauth::dpop::DpopKey::generate(algorithm).unwrap();
        let mut dpop = services::warm_dpop_layer(&rt, key).layer(Noop);
        allocations_for(&mut dpop, 1);
        let n = 1000;
        let base = allocations_for(&mut bearer, n);
        let ours = allocations_for(&mut dpop, n);
        assert_eq!(
            ours - base,
            3 * n,
            "{algorithm}: {ours} allocations for {n} DPoP requests, {base} for bearer ones"
        );
    }
}
