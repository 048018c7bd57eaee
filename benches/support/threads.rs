//! Running a benchmark's work on two threads at once, each with its own
//! state (a clone of the service, its own signer).
#![allow(dead_code)]

use std::sync::{Arc, Barrier};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use http::{Request, Response};
use tower::Service;

use super::services::drive;

/// `iters` runs of `work` on each of two threads, started together: the
/// longer of the two threads' times, each timed by the thread itself (a
/// timer on a third thread would start late whenever the two workers hold
/// both cores).
pub fn on_two_threads<W>(work: W, iters: u64) -> Duration
where
    W: Fn() -> Box<dyn FnMut() + Send> + Send + Sync + 'static,
{
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let mut job = work();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iters {
                    job();
                }
                start.elapsed()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .max()
        .unwrap_or_default()
}

/// Requests through a clone of `svc` per thread.
pub fn requests<S>(svc: S) -> impl Fn() -> Box<dyn FnMut() + Send> + Send + Sync + 'static
where
    S: Service<Request<()>, Response = Response<()>> + Clone + Send + Sync + 'static,
    S::Error: std::fmt::Debug,
{
    move || {
        let mut svc = svc.clone();
        Box::new(move || drive(&mut svc, &mut Context::from_waker(Waker::noop())))
    }
}
