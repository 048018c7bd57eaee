//! The cache's ways to a token for code outside a request's path:
//! `usable_now` (never waits: `OAuthLayer::token_now`), `token` (waits for
//! the shared fetch: `OAuthLayer::token`), and `fresh_token` (a token past
//! its renewal point renewed first: a token exchange's subject).

use std::sync::Arc;

use tokio::time::Instant;

use super::{cut_off, Acquire, FetchOutcome, FetchResult, Flight, Reason, TokenCache, Waiter};
use crate::error::{TokenError, TokenErrorKind};

impl TokenCache {
    /// A token usable now, without waiting: the current one (starting its
    /// renewal ahead when it is due), else an error, having started the
    /// shared fetch in the background if none is under way. For
    /// [`OAuthLayer::token_now`](crate::OAuthLayer::token_now).
    pub(crate) fn usable_now(self: &Arc<Self>) -> FetchResult {
        if let Some(token) = self.current.load_full() {
            if self.check(Some(&token), Instant::now()).is_some() {
                return Ok(token);
            }
        }
        match self.acquire() {
            Acquire::Now(outcome) => outcome,
            Acquire::Wait(_) => Err(TokenError::new(TokenErrorKind::NotReady).with_message(
                "a token request is under way in the background; ask again shortly, or await \
                 OAuthLayer::token",
            )),
        }
    }

    /// A usable token, waiting for the shared fetch if need be: for
    /// [`OAuthLayer::token`](crate::OAuthLayer::token).
    pub(crate) async fn token(self: &Arc<Self>) -> FetchResult {
        if let Some(token) = self.current.load_full() {
            // The hot path's check, renewal ahead included.
            if self.check(Some(&token), Instant::now()).is_some() {
                return Ok(token);
            }
        }
        // A flight cut off (its runtime shut down) is asked again, a few
        // times: each ask starts a fetch on this task's runtime.
        for _ in 0..3 {
            let flight = match self.acquire() {
                Acquire::Now(outcome) => return outcome,
                Acquire::Wait(flight) => flight,
            };
            match outcome_of(flight).await {
                FetchOutcome::Done(Ok(token)) if token.timings.usable_at(Instant::now()) => {
                    return Ok(token)
                }
                FetchOutcome::Done(Err(e)) => return Err(e),
                _ => continue,
            }
        }
        Err(cut_off())
    }

    /// A token at its freshest, for another grant to trade (a token
    /// exchange's subject): the current one before its renewal point; past
    /// it, the renewal's (started now if none is under way), waited for at
    /// most the fetch timeout; the current one again if the renewal fails
    /// or is backing off while it still serves.
    pub(crate) async fn fresh_token(self: &Arc<Self>) -> FetchResult {
        let now = Instant::now();
        if !self.hears(now) {
            // An account's token past the store's last word: from the store.
            return self.token().await;
        }
        let current = match self.current.load_full() {
            Some(token) if now < token.timings.refresh_at => return Ok(token),
            Some(token) if token.timings.usable_at(now) => token,
            _ => return self.token().await,
        };
        let flight = {
            let mut ctl = self.control();
            // Renewed meanwhile: the new one.
            if let Some(token) = self.current.load_full() {
                if token.generation != current.generation && now < token.timings.refresh_at {
                    return Ok(token);
                }
            }
            let under_way = ctl.under_way(now).map(Arc::clone);
            match under_way {
                Some(flight) => flight,
                None if ctl.retry_at(now).is_some() => return Ok(current),
                None => match self.start_renewal(&mut ctl, now) {
                    Ok(flight) => flight,
                    Err(_) => return Ok(current),
                },
            }
        };
        let finished = tokio::time::timeout(self.policy().fetch_timeout, outcome_of(flight)).await;
        let now = Instant::now();
        match finished {
            Ok(FetchOutcome::Done(Ok(token))) if token.timings.usable_at(now) => Ok(token),
            _ if current.timings.usable_at(now) => {
                tracing::debug!(
                    usable_for = ?current.timings.usable_for(now),
                    "the renewal of a token past its renewal point did not bring a new one; \
                     the current one serves"
                );
                Ok(current)
            }
            Ok(FetchOutcome::Done(Err(error))) => Err(error),
            _ => self.token().await,
        }
    }

    /// The outcome of the fetch under way, or of one started now whatever
    /// the back-off (a person finished a login): the caller asks again when
    /// the one it waited for began too early for what it needed. The token
    /// in hand serves meanwhile, and stays if the fetch fails. `None`: cut
    /// off.
    pub(crate) async fn fetch_now(self: &Arc<Self>) -> Option<FetchResult> {
        let flight = {
            let mut ctl = self.control();
            let now = Instant::now();
            match ctl.under_way(now) {
                Some(flight) => Arc::clone(flight),
                None => {
                    ctl.record_success();
                    match self.start_fetch(&mut ctl, Reason::Login, None, now) {
                        Ok(flight) => flight,
                        Err(e) => return Some(Err(e)),
                    }
                }
            }
        };
        match outcome_of(flight).await {
            FetchOutcome::Done(outcome) => Some(outcome),
            FetchOutcome::CutOff => None,
        }
    }

    /// The chain of refresh tokens read from the store into memory, with
    /// no lock and no token request, within `bound`; and the current
    /// token's usable time, if it is usable. A login's status.
    pub(crate) async fn read_for_status(
        &self,
        bound: std::time::Duration,
    ) -> (Result<(), String>, Option<std::time::Duration>) {
        let read = self.fetcher.read_stored_chain(bound).await;
        let now = Instant::now();
        let usable = self
            .current
            .load()
            .as_ref()
            .map(|token| token.timings.usable_for(now))
            .filter(|left| !left.is_zero());
        (read, usable)
    }
}

/// How `flight` finishes, waited for.
async fn outcome_of(flight: Arc<Flight>) -> FetchOutcome {
    let mut waiter = Waiter::new(flight);
    std::future::poll_fn(|cx| waiter.poll(cx).map(FetchOutcome::clone)).await
}
