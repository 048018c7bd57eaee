//! [`Control`]: what a cache is doing besides serving its token: the fetch
//! under way, failures in a row and the back-off they cause, and the last
//! forced renewal. Kept under the cache's lock, never touched by the hot
//! path.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::flight::{FetchOutcome, Flight};
use crate::error::TokenError;
use crate::policy::{Failure, Policy, MAX_RETRY_AFTER};

#[derive(Debug, Default)]
pub(crate) struct Control {
    /// The fetch under way, and its task.
    flight: Option<(Arc<Flight>, AbortHandle)>,
    /// Failed fetches in a row.
    failures: u32,
    /// After a failure: no new fetch before this instant, and the error
    /// that caused it.
    backoff: Option<(Instant, TokenError)>,
    /// When a token was last dropped on purpose (refused by the API).
    last_forced: Option<Instant>,
    /// The generation of the last token made.
    generation: u64,
}

impl Control {
    /// The fetch under way, if any. One that is over but still here (its
    /// task was cut off, or its runtime stopped running it long ago) is
    /// finished as cut off, so its waiters ask again, and forgotten.
    pub(crate) fn under_way(&mut self, now: Instant) -> Option<&Arc<Flight>> {
        if self
            .flight
            .as_ref()
            .is_some_and(|(flight, _)| flight.is_over(now))
        {
            if let Some((flight, task)) = self.flight.take() {
                flight.finish(FetchOutcome::CutOff);
                task.abort();
            }
        }
        self.flight.as_ref().map(|(flight, _)| flight)
    }

    /// Records the fetch just started.
    pub(crate) fn record_fetch(&mut self, flight: Arc<Flight>, task: AbortHandle) {
        self.flight = Some((flight, task));
    }

    /// Whether `flight` is the fetch under way (and not one given up on).
    pub(crate) fn is_under_way(&self, flight: &Arc<Flight>) -> bool {
        self.flight
            .as_ref()
            .is_some_and(|(f, _)| Arc::ptr_eq(f, flight))
    }

    /// The fetch under way has an outcome: it is no longer under way.
    pub(crate) fn finished(&mut self) {
        self.flight = None;
    }

    /// Stops the fetch under way, if any: its layer is gone, or a new login
    /// or a sign-out began, so that nothing it fetched from before is
    /// installed. Its waiters ask again. A refresh it started goes on to
    /// the end on its own task (see `Fetcher::fetch_to_end`), so a rotated
    /// refresh token is stored all the same.
    pub(crate) fn abort(&mut self) {
        if let Some((flight, task)) = self.flight.take() {
            task.abort();
            flight.finish(FetchOutcome::CutOff);
        }
    }

    /// While backing off at `now`: how long it still lasts, and the error
    /// that caused it.
    pub(crate) fn backing_off(&self, now: Instant) -> Option<(Duration, &TokenError)> {
        let (until, error) = self.backoff.as_ref().filter(|(at, _)| now < *at)?;
        Some((*until - now, error))
    }

    /// Whether the back-off at `now` is one the server asked for
    /// (`Retry-After`), which even a forced renewal waits out.
    pub(crate) fn held_by_server(&self, now: Instant) -> bool {
        self.backing_off(now)
            .is_some_and(|(_, error)| error.retry_after().is_some())
    }

    /// When the back-off ends, if it has not yet at `now`.
    pub(crate) fn retry_at(&self, now: Instant) -> Option<Instant> {
        self.backoff
            .as_ref()
            .map(|(at, _)| *at)
            .filter(|at| now < *at)
    }

    /// A fetch succeeded: the back-off is over.
    pub(crate) fn record_success(&mut self) {
        self.failures = 0;
        self.backoff = None;
    }

    /// A fetch failed with `error` at `now`: backs off by the rule of
    /// `policy` (see [`Policy::backoff`]), taking into account a token that
    /// still serves until `serving_until`. Returns the failure count and
    /// when to try again. "No login" holds no request back; a token that
    /// still serves is renewed again after the shortest back-off.
    pub(crate) fn record_failure(
        &mut self,
        error: &TokenError,
        policy: &Policy,
        serving_until: Option<Instant>,
        now: Instant,
        jitter: f64,
    ) -> (u32, Instant) {
        if error.is_login_state() {
            // "No login" is the chain's state, not a server's failure: never
            // backed off, so that a login finished meanwhile (here, or on
            // another replica, which the next fetch reads from the store)
            // serves the next request. Each such fetch is one store read.
            self.backoff = None;
            return (self.failures, now + policy.min_backoff);
        }
        if error.is_reported_by_another() {
            // Another replica's failure, read back from the store: the
            // fleet holds back for what is left of its hold, and no longer.
            // Not a failure of this layer's: counting it would stretch this
            // layer's back-off on each reading of the same failure.
            // (At most an hour, as any `Retry-After`, whatever Redis says.)
            let left = error.retry_after().unwrap_or(policy.min_backoff);
            let at = now + left.min(MAX_RETRY_AFTER);
            self.backoff = Some((at, error.clone()));
            return (self.failures, at);
        }
        self.failures = self.failures.saturating_add(1);
        let failure = Failure {
            in_a_row: self.failures,
            retry_after: error.retry_after(),
            // An answer that does not read (a proxy's HTML page with 200,
            // an error body, `expires_in` 0) is retried as a 503 is: a
            // gateway or a deployment in progress answers so for a while.
            can_heal: error.is_retryable() || error.is_unreadable_answer(),
            serving_until,
        };
        let at = policy.retry_at(&failure, now, jitter);
        self.backoff = Some((at, error.clone()));
        (self.failures, at)
    }

    /// Whether a token may be dropped on purpose at `now`, at most once per
    /// `interval`. Records it if so, else says how long to wait.
    pub(crate) fn may_force(&mut self, now: Instant, interval: Duration) -> Result<(), Duration> {
        if let Some(next) = self.last_forced.map(|last| last + interval) {
            if now < next {
                return Err(next - now);
            }
        }
        self.last_forced = Some(now);
        Ok(())
    }

    /// A token was dropped now, not rate-limited (a step-up): the next
    /// forced renewal waits the interval from here.
    pub(crate) fn forced(&mut self, now: Instant) {
        self.last_forced = Some(now);
    }

    /// A generation for the next token, unique within the cache: counted
    /// from 1, so that its top bit stays free (`SentToken` keeps a mark
    /// there).
    pub(crate) fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }
}
