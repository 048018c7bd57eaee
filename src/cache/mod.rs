//! The token cache: the current token, checked against the clock on every
//! use, and the single flight that replaces it.
//!
//! One request's way through it:
//!
//! 1. [`TokenCache::check`] is the hot path. It gives the current token if
//!    the clock says it may be presented now. Past the token's renewal point
//!    it also starts a renewal in the background
//!    ([`TokenCache::renew_ahead`]), and the request goes on at once.
//! 2. Without a usable token, [`TokenCache::acquire`] looks under the lock.
//!    It finds a token that arrived meanwhile, the [`Flight`] under way to
//!    wait on, or the last error while backing off. Otherwise it starts a
//!    new fetch.
//! 3. The fetch task ([`fetch::Fetcher`]) makes the request. The outcome is
//!    installed by [`TokenCache::finish`], which also keeps the back-off
//!    ([`control::Control`], by the rules of [`Policy`]).
//!
//! The other files:
//!
//! - `control`: the state under the lock;
//! - `flight`: the requests waiting for a fetch;
//! - `fetch`: one bounded token request;
//! - `placement`: how a token is presented;
//! - `cached`: a token ready to present, and an instance's reference;
//! - `accessors`: the ways to a token outside a request;
//! - `step_up`: what the cache does when an API challenges its token.
//!
//! The timing rules themselves live in `crate::policy`.

mod accessors;
mod cached;
mod control;
mod fetch;
mod flight;
mod hearing;
mod placement;
mod step_up;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::time::Instant;
use tracing::Instrument;

pub(crate) use self::cached::{CacheRef, CachedToken};
use self::control::Control;
use self::fetch::Fetched;
pub(crate) use self::fetch::TokenSupply;
use self::fetch::{FetchTask, Fetcher};
pub(crate) use self::flight::{FetchOutcome, FetchResult, Flight, Waiter};
pub(crate) use self::hearing::Hearing;
pub(crate) use self::placement::{shared_bytes, Placement};
pub(crate) use self::step_up::{origin_of, Allowed, Challenges, StepUp, SupplyForScope};
use crate::error::{TokenError, TokenErrorKind};
use crate::policy::{Policy, RENEWAL_CHECK};
use crate::source::TokenSource;
use crate::store::StoreUse;
use crate::telemetry::stats::{Counters, Stats};
use crate::token::AccessToken;

/// What a request that has no usable token gets from [`TokenCache::acquire`].
pub(crate) enum Acquire {
    /// A token or an error, at once.
    Now(FetchResult),
    /// Wait for the fetch under way.
    Wait(Arc<Flight>),
}

/// Why a fetch was started. For logs.
#[derive(Clone, Copy, Debug)]
pub(super) enum Reason {
    NoToken,
    RenewAhead,
    Refused,
    /// A web login's callback came.
    Login,
}

/// The shared state behind one `OAuthLayer` and every service built from
/// it. Dropped with the last of them. A fetch under way is then stopped.
pub(crate) struct TokenCache {
    current: ArcSwapOption<CachedToken>,
    /// Bumped after every store to `current`, all made under the lock. A
    /// service instance compares it with the version its own view of the token
    /// was made at: one load on the hot path.
    version: AtomicU64,
    /// Never held across an `.await`, never taken on the hot path.
    control: Mutex<Control>,
    fetcher: Arc<Fetcher>,
    placement: Placement,
    /// The token endpoint, for logs, when it was configured rather than
    /// discovered.
    token_url: Option<http::Uri>,
    /// The token slot this cache serves, for logs. It is named by its
    /// parameters' names and its identity's first hex digits, never a value.
    /// `None` for the layer's default token.
    slot: Option<String>,
    epoch: Instant,
    counters: Counters,
    /// What it does when the API challenges its token.
    challenges: Challenges,
    /// For an account's token: whether this replica hears the store's news
    /// of sign-outs. While it does not, no token is presented from memory.
    hearing: Option<Arc<Hearing>>,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("current", &self.current.load().as_deref())
            .field("policy", &self.fetcher.policy)
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

impl Drop for TokenCache {
    fn drop(&mut self) {
        self.control
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .abort();
    }
}

impl TokenCache {
    /// The cache of a token source of the user's own: no token URL to
    /// report, no slot, perhaps a store.
    pub(crate) fn of_source(
        source: Arc<dyn TokenSource>,
        policy: Policy,
        placement: Placement,
        store: Option<StoreUse>,
    ) -> Arc<Self> {
        let challenges = Challenges::default();
        let supply = TokenSupply {
            source,
            store,
            chain: None,
        };
        TokenCache::new(supply, policy, placement, None, None, challenges, None)
    }

    /// A cache of the tokens `supply` gives; `token_url` and `slot` name
    /// it in messages and logs.
    pub(crate) fn new(
        supply: TokenSupply,
        policy: Policy,
        placement: Placement,
        token_url: Option<http::Uri>,
        slot: Option<String>,
        challenges: Challenges,
        hearing: Option<Arc<Hearing>>,
    ) -> Arc<Self> {
        Arc::new(TokenCache {
            current: ArcSwapOption::const_empty(),
            version: AtomicU64::new(0),
            control: Mutex::new(Control::default()),
            fetcher: Arc::new(Fetcher {
                supply: ArcSwap::from_pointee(supply),
                policy,
                fleet: Default::default(),
                late: Default::default(),
                hearing: hearing.clone(),
            }),
            placement,
            token_url,
            slot,
            epoch: Instant::now(),
            counters: Counters::default(),
            challenges,
            hearing,
        })
    }

    /// The chain of refresh tokens this cache's fetches use, if any.
    pub(crate) fn chain(&self) -> Option<Arc<crate::endpoint::Chain>> {
        self.fetcher.supply.load().chain.clone()
    }

    /// The current token.
    pub(crate) fn current(&self) -> &ArcSwapOption<CachedToken> {
        &self.current
    }

    /// How many times the current token was replaced or dropped: a view of
    /// it made at this version is still the current one. Read before
    /// [`current`](Self::current), which is then at least as new.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Stores `token` as the current one, under the lock as every store is, and
    /// says so to the services' views.
    fn set_current(&self, _ctl: &mut Control, token: Option<Arc<CachedToken>>) {
        self.current.store(token);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// When the cache was made: an instant in the past.
    pub(crate) fn epoch(&self) -> Instant {
        self.epoch
    }

    pub(crate) fn placement(&self) -> &Placement {
        &self.placement
    }

    fn policy(&self) -> &Policy {
        &self.fetcher.policy
    }

    /// An API asked for a new DPoP nonce.
    pub(crate) fn count_nonce_challenge(&self) {
        Counters::bump(&self.counters.dpop_nonce_challenges);
    }

    /// The counters and the token's state now.
    pub(crate) fn stats(&self) -> Stats {
        let mut stats = self.counters.snapshot();
        let fleet = &self.fetcher.fleet;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        stats.token_requests = get(&fleet.token_requests);
        stats.store_took_shared = get(&fleet.took_shared);
        stats.store_fetched_for_fleet = get(&fleet.fetched_for_fleet);
        stats.store_waited = get(&fleet.waited);
        stats.store_fell_back = get(&fleet.fell_back);
        let now = Instant::now();
        stats.token_usable_for = self
            .current
            .load()
            .as_ref()
            .map(|t| t.timings.usable_for(now))
            .filter(|d| !d.is_zero());
        stats.backing_off = self.control().retry_at(now).map(|at| at - now);
        stats
    }

    fn control(&self) -> MutexGuard<'_, Control> {
        // Nothing panics while holding the lock; if something ever did, the
        // state is still consistent field by field, so carry on.
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn offset(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The hot path: `token` if it may be presented at `now`, exactly. Past
    /// its renewal point this also starts a renewal in the background, and
    /// the caller goes on with the token at once. `None`: no usable token,
    /// call [`acquire`](Self::acquire).
    #[inline]
    pub(crate) fn check<'t>(
        self: &Arc<Self>,
        token: Option<&'t CachedToken>,
        now: Instant,
    ) -> Option<&'t CachedToken> {
        let token = token?;
        if !self.hears(now) {
            // The news of a sign-out may not have reached this replica:
            // the token comes from the store again.
            return None;
        }
        if now < token.timings.refresh_at {
            return Some(token);
        }
        if token.timings.usable_at(now) {
            self.renew_ahead(token, now);
            return Some(token);
        }
        None
    }

    /// Starts a renewal of `token` unless one is under way or backing off. One
    /// request at a time gets here. The others find `renew_after` claimed, and
    /// look again after [`RENEWAL_CHECK`]. So a renewal whose runtime shut down
    /// is started again well before the token runs out.
    #[cold]
    fn renew_ahead(self: &Arc<Self>, token: &CachedToken, now: Instant) {
        let after = token.renew_after.load(Ordering::Acquire);
        if self.offset(now) < after
            || token
                .renew_after
                .compare_exchange(
                    after,
                    self.offset(now + RENEWAL_CHECK),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        let mut ctl = self.control();
        if ctl.under_way(now).is_some() {
            return;
        }
        if let Some(at) = ctl.retry_at(now) {
            token.renew_after.store(self.offset(at), Ordering::Release);
            return;
        }
        tracing::debug!(
            usable_for = ?token.timings.usable_for(now),
            "renewing the access token ahead of expiry"
        );
        // Without a runtime here, a later request tries again.
        let _ = self.start_renewal(&mut ctl, now);
    }

    /// Starts a renewal ahead of expiry, counted as one.
    fn start_renewal(
        self: &Arc<Self>,
        ctl: &mut Control,
        now: Instant,
    ) -> Result<Arc<Flight>, TokenError> {
        let flight = self.start_fetch(ctl, Reason::RenewAhead, None, now)?;
        Counters::bump(&self.counters.renewals_ahead);
        crate::telemetry::renewal(crate::telemetry::Renewal::Ahead);
        Ok(flight)
    }

    /// The slow path: a usable token that appeared meanwhile, the fetch under
    /// way to wait on, a new fetch, or the last error while backing off.
    pub(crate) fn acquire(self: &Arc<Self>) -> Acquire {
        let mut ctl = self.control();
        let now = Instant::now();
        if let Some(token) = self.current.load_full() {
            if token.timings.usable_at(now) && self.hears(now) {
                return Acquire::Now(Ok(token));
            }
        }
        if let Some(flight) = ctl.under_way(now) {
            Counters::bump(&self.counters.waited_for_token);
            crate::telemetry::wait();
            return Acquire::Wait(Arc::clone(flight));
        }
        if let Some((left, error)) = ctl.backing_off(now) {
            return Acquire::Now(Err(error.during_backoff(left)));
        }
        match self.start_fetch(&mut ctl, Reason::NoToken, None, now) {
            Ok(flight) => {
                Counters::bump(&self.counters.waited_for_token);
                crate::telemetry::wait();
                Acquire::Wait(flight)
            }
            Err(e) => Acquire::Now(Err(e)),
        }
    }

    /// The API refused the token of `generation` with HTTP 401. Drops it if it
    /// is still the current one and no token was dropped within the forced
    /// renewal interval, and starts fetching a new one. Returns `Some(wait)`
    /// when the next request would carry that same token, since the renewal is
    /// rate-limited for `wait`. Sending the refused request again is then
    /// pointless. Returns `None` when another token comes: dropped now, or
    /// replaced already.
    pub(crate) fn refused(self: &Arc<Self>, generation: u64) -> Option<Duration> {
        // Replaced already (a storm of 401s for one token mostly is): no
        // lock needed to know that another token comes.
        if self
            .current
            .load()
            .as_ref()
            .is_none_or(|t| t.generation != generation)
        {
            return None;
        }
        match self.force(Some(generation)) {
            Forced::RateLimited(wait) => Some(wait),
            Forced::Dropped | Forced::NotCurrent => None,
        }
    }

    /// Drops the current token and starts fetching a new one, unless a token
    /// was dropped so within the forced renewal interval. With `generation`
    /// given, it drops the token only if it is of that generation. Returns
    /// whether it was dropped.
    pub(crate) fn force_renewal(self: &Arc<Self>, generation: Option<u64>) -> bool {
        matches!(self.force(generation), Forced::Dropped)
    }

    /// [`force_renewal`](Self::force_renewal), saying why a token was not
    /// dropped.
    fn force(self: &Arc<Self>, generation: Option<u64>) -> Forced {
        let mut ctl = self.control();
        // All stores to `current` happen under the lock: this check is exact.
        let Some(current) = self.current.load_full() else {
            return Forced::NotCurrent;
        };
        if generation.is_some_and(|g| g != current.generation) {
            return Forced::NotCurrent;
        }
        let now = Instant::now();
        if let Err(wait) = ctl.may_force(now, self.policy().forced_renewal_interval) {
            tracing::debug!(
                ?wait,
                "the access token was refused again; not renewing yet \
                 (forced renewals are rate-limited)"
            );
            return Forced::RateLimited(wait);
        }
        self.set_current(&mut ctl, None);
        Counters::bump(&self.counters.forced_renewals);
        crate::telemetry::renewal(crate::telemetry::Renewal::Refused);
        tracing::warn!("the access token was refused; dropping it and fetching a new one");
        // At once, even while a renewal's back-off lasts: the token in hand
        // serves no more, and forced renewals are rate-limited already (by
        // the interval above), so the endpoint sees at most one per interval.
        // A pause the server asked for (`Retry-After`) is waited out.
        if ctl.under_way(now).is_none() && !ctl.held_by_server(now) {
            // Without a runtime here, the next request starts the fetch.
            let refused = Some(current.token.clone());
            let _ = self.start_fetch(&mut ctl, Reason::Refused, refused, now);
        }
        Forced::Dropped
    }

    /// Drops the current token, forgets the back-off whatever caused it,
    /// and cuts off the fetch under way: a new login began, or a sign-out,
    /// so the next request fetches at once, and no fetch begun before
    /// installs its token afterwards.
    pub(crate) fn restart(&self) {
        let mut ctl = self.control();
        self.set_current(&mut ctl, None);
        ctl.abort();
        ctl.record_success();
    }

    /// Drops the current token, whatever its generation, and starts fetching
    /// one. This is a step-up, and not rate-limited, since the scope it adds
    /// only grows, within what the layer allows. The next forced renewal is
    /// rate-limited, though.
    fn drop_for_step_up(self: &Arc<Self>, now: Instant) {
        let mut ctl = self.control();
        self.set_current(&mut ctl, None);
        ctl.forced(now);
        Counters::bump(&self.counters.forced_renewals);
        // At once, back-off or not, as a forced renewal.
        if ctl.under_way(now).is_none() && !ctl.held_by_server(now) {
            let _ = self.start_fetch(&mut ctl, Reason::Refused, None, now);
        }
    }

    /// Starts a fetch on a task of the current runtime, telling the store
    /// first that `refused` was refused. The task holds no strong reference
    /// to the cache: dropping the last layer stops it.
    fn start_fetch(
        self: &Arc<Self>,
        ctl: &mut Control,
        reason: Reason,
        refused: Option<AccessToken>,
        now: Instant,
    ) -> Result<Arc<Flight>, TokenError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            TokenError::new(TokenErrorKind::Runtime)
                .with_message("a token fetch needs a Tokio runtime, and none is running here")
        })?;
        // The task finishes its flight by the fetch's bound; one still
        // unfinished a second later is on a runtime that is not running it.
        let overdue = self.policy().fetch_bound() + Duration::from_secs(1);
        let flight = Flight::new(now + overdue);
        Counters::bump(&self.counters.fetches);
        let slot = self.slot.as_deref().unwrap_or("default");
        let span = match reason {
            // A renewal ahead is the layer's own work, not the request's that
            // happened to start it: a span of its own, naming the slot.
            Reason::RenewAhead => tracing::debug_span!(
                parent: None,
                "oauth_token_renewal",
                slot,
                token_url = ?self.token_url,
            ),
            // A token request that requests wait for runs under the span of
            // the one that started it.
            _ => tracing::debug_span!(
                "oauth_token_fetch",
                ?reason,
                slot,
                token_url = ?self.token_url,
            ),
        };
        let task = FetchTask {
            cache: Arc::downgrade(self),
            flight: Arc::clone(&flight),
            reason,
        };
        let fetcher = Arc::clone(&self.fetcher);
        // The fetch runs on its own task: dropping the request that started
        // it neither cancels it nor loses its result.
        let join = handle.spawn(task.run(fetcher, refused).instrument(span));
        ctl.record_fetch(Arc::clone(&flight), join.abort_handle());
        Ok(flight)
    }

    /// The current token, if it may be presented at `now`.
    fn serving(&self, now: Instant) -> Option<Arc<CachedToken>> {
        self.current
            .load_full()
            .filter(|t| t.timings.usable_at(now))
    }

    /// Installs the outcome of `flight`, if it is still the fetch under way,
    /// and finishes it.
    fn finish(
        &self,
        flight: &Arc<Flight>,
        outcome: Result<Fetched, TokenError>,
        reason: Reason,
        sent_at: Instant,
    ) {
        let now = Instant::now();
        let mut ctl = self.control();
        if !ctl.is_under_way(flight) {
            // Given up on as overdue; another fetch has taken its place.
            return;
        }
        let outcome = outcome
            .and_then(|fetched| self.prepare(fetched, ctl.next_generation(), now - sent_at, now));
        crate::telemetry::fetch(&outcome);
        match &outcome {
            Ok(token) => {
                tracing::debug!(
                    ?reason,
                    took = ?now - sent_at,
                    lifetime = ?token.token.lifetime(),
                    usable_for = ?token.timings.usable_for(now),
                    "access token fetched"
                );
                self.set_current(&mut ctl, Some(Arc::clone(token)));
                ctl.record_success();
            }
            Err(error) => {
                Counters::bump(&self.counters.failed_token_requests);
                let serving = self.serving(now);
                let serving_until = serving.as_ref().map(|t| t.timings.usable_until);
                let (failures, retry_at) =
                    ctl.record_failure(error, self.policy(), serving_until, now, jitter());
                if error.is_login_state() {
                    // "No login": the account's state, never backed off; at
                    // debug level, since a page that polls while its person
                    // logs in meets it often (a refused refresh token is
                    // logged where it is read).
                    tracing::debug!(?reason, error = %error, "no login to fetch a token with");
                } else {
                    tracing::warn!(
                        ?reason,
                        error = %error,
                        failures,
                        retry_in = ?retry_at - now,
                        "access token request failed"
                    );
                }
                // A still-usable token keeps serving; its renewal is tried
                // again once the back-off is over.
                if let Some(serving) = serving {
                    serving
                        .renew_after
                        .store(self.offset(retry_at), Ordering::Release);
                }
            }
        }
        ctl.finished();
        drop(ctl);
        flight.finish(FetchOutcome::Done(outcome));
    }

    /// Turns a fetched token into one ready to present, or an error when it
    /// cannot be: a value that cannot be a header, or a token that was no
    /// longer usable when it arrived `took` after its request was sent.
    fn prepare(
        &self,
        fetched: Fetched,
        generation: u64,
        took: Duration,
        now: Instant,
    ) -> FetchResult {
        let Fetched { token, expires_at } = fetched;
        let (header, ath) = self.placement.header_for(&token)?;

        let lifetime = token.lifetime();
        let timings = self
            .policy()
            .timings(lifetime, expires_at, jitter(), token.refresh_in());
        if !timings.usable_at(now) {
            return Err(
                TokenError::new(TokenErrorKind::Timeout).with_message(format!(
                    "the token's lifetime ({lifetime:?}, less {:?} of expiry skew) was over \
                 when its answer arrived, {took:?} after the request",
                    self.policy().skew_for(lifetime)
                )),
            );
        }
        Ok(Arc::new(CachedToken {
            header,
            timings,
            generation,
            token,
            ath,
            renew_after: AtomicU64::new(0),
        }))
    }
}

/// What a forced renewal did.
enum Forced {
    /// The token was dropped. A new one is being fetched.
    Dropped,
    /// The token was no longer the current one (or there was none): the
    /// next request gets another.
    NotCurrent,
    /// A token was dropped within the forced renewal interval: this one
    /// stays for `.0` more.
    RateLimited(Duration),
}

/// The error for a request whose fetches were cut off again and again.
pub(crate) fn cut_off() -> TokenError {
    TokenError::new(TokenErrorKind::Runtime).with_message(
        "the token fetch was cut off before it answered (its runtime shut down or stopped \
         running it)",
    )
}

/// A random number in `[0, 1)` for jitter.
fn jitter() -> f64 {
    crate::support::random::random_unit()
}

#[cfg(test)]
mod tests;
