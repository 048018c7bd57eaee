//! [`Flight`]: one token fetch under way, and the requests waiting for it.
//!
//! Every request that needs a token while a fetch is under way waits on the
//! same flight: one token request, however many callers. Waiting costs a
//! slot in a vector of wakers, no allocation of its own and no channel. The
//! outcome wakes them all at once.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use super::CachedToken;
use crate::error::TokenError;

/// What a fetch gives: a token ready to present, or why there is none.
pub(crate) type FetchResult = Result<Arc<CachedToken>, TokenError>;

/// How a flight ended.
#[derive(Clone, Debug)]
pub(crate) enum FetchOutcome {
    /// The fetch's outcome.
    Done(FetchResult),
    /// The fetch was cut off before it had an outcome: its runtime shut
    /// down, or stopped running it. The waiters ask again.
    CutOff,
}

/// One fetch under way.
#[derive(Debug)]
pub(crate) struct Flight {
    outcome: OnceLock<FetchOutcome>,
    /// The wakers of the requests waiting, each at the slot it was given.
    waiters: Mutex<Vec<Option<Waker>>>,
    /// Past this, a flight that has not finished counts as cut off: the
    /// runtime it runs on is not running it.
    overdue_at: Instant,
}

impl Flight {
    pub(crate) fn new(overdue_at: Instant) -> Arc<Self> {
        Arc::new(Flight {
            outcome: OnceLock::new(),
            waiters: Mutex::new(Vec::new()),
            overdue_at,
        })
    }

    /// Whether the flight has finished, or should have long ago.
    pub(crate) fn is_over(&self, now: Instant) -> bool {
        self.outcome.get().is_some() || now >= self.overdue_at
    }

    /// Finishes the flight and wakes every waiter. Only the first outcome
    /// counts. Whether this call finished it.
    pub(crate) fn finish(&self, outcome: FetchOutcome) -> bool {
        if self.outcome.set(outcome).is_err() {
            return false;
        }
        // The outcome is set before the lock is taken: a waiter that did not
        // see it registers under the lock, so it is among those taken here.
        let waiters = std::mem::take(&mut *self.lock());
        for waker in waiters.into_iter().flatten() {
            waker.wake();
        }
        true
    }

    /// The outcome, or `Pending` with the caller's waker registered in its
    /// `slot` (given on the first call, kept for the next ones, so a waiter
    /// polled again replaces its waker instead of adding one).
    pub(crate) fn poll_outcome(
        &self,
        slot: &mut Option<usize>,
        cx: &mut Context<'_>,
    ) -> Poll<&FetchOutcome> {
        if let Some(outcome) = self.outcome.get() {
            return Poll::Ready(outcome);
        }
        let mut waiters = self.lock();
        // Checked again under the lock: see `finish`.
        if let Some(outcome) = self.outcome.get() {
            return Poll::Ready(outcome);
        }
        match *slot {
            Some(i) => {
                let waker = &mut waiters[i];
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
            }
            None => {
                *slot = Some(waiters.len());
                waiters.push(Some(cx.waker().clone()));
            }
        }
        Poll::Pending
    }

    /// Gives up a waiter's slot (its request went away), so that a long
    /// flight does not keep the wakers of requests long gone.
    pub(crate) fn leave(&self, slot: Option<usize>) {
        // Once the outcome is set, the wakers are gone already: no lock needed
        // (every request of a cold start leaves right after it).
        if self.outcome.get().is_some() {
            return;
        }
        if let Some(i) = slot {
            if let Some(waker) = self.lock().get_mut(i) {
                *waker = None;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Waker>>> {
        // Nothing panics while holding it; a poisoned vector of wakers is
        // still a vector of wakers.
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One request waiting for a flight: it leaves the flight when dropped, so
/// a long flight keeps no waker of a request that went away.
#[derive(Debug)]
pub(crate) struct Waiter {
    flight: Arc<Flight>,
    slot: Option<usize>,
}

impl Waiter {
    pub(crate) fn new(flight: Arc<Flight>) -> Self {
        Waiter { flight, slot: None }
    }

    /// The outcome, or `Pending` with the waker registered.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<&FetchOutcome> {
        self.flight.poll_outcome(&mut self.slot, cx)
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.flight.leave(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;
    use std::time::Duration;

    use super::*;
    use crate::error::TokenErrorKind;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn every_waiter_is_woken_once_and_sees_the_landing() {
        let flight = Flight::new(Instant::now() + Duration::from_secs(10));
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut slots = vec![None; 100];
        for slot in &mut slots {
            assert!(flight.poll_outcome(slot, &mut cx).is_pending());
        }
        // Polled again: the slot is reused, not doubled.
        assert!(flight.poll_outcome(&mut slots[0], &mut cx).is_pending());
        assert_eq!(flight.lock().len(), 100);
        flight.leave(slots[99]);

        let error = TokenError::new(TokenErrorKind::Timeout);
        assert!(flight.finish(FetchOutcome::Done(Err(error))));
        assert!(
            !flight.finish(FetchOutcome::CutOff),
            "only the first outcome counts"
        );
        assert_eq!(count.0.load(Ordering::SeqCst), 99);
        for slot in &mut slots {
            match flight.poll_outcome(slot, &mut cx) {
                Poll::Ready(FetchOutcome::Done(Err(e))) => {
                    assert_eq!(e.kind(), TokenErrorKind::Timeout)
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(flight.lock().is_empty(), "no waker is kept after outcome");
    }

    #[test]
    fn a_flight_is_over_once_landed_or_overdue() {
        let now = Instant::now();
        let flight = Flight::new(now + Duration::from_secs(1));
        assert!(!flight.is_over(now));
        assert!(flight.is_over(now + Duration::from_secs(1)));
        let finished = Flight::new(now + Duration::from_secs(1));
        finished.finish(FetchOutcome::CutOff);
        assert!(finished.is_over(now));
    }
}
