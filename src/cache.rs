//! The token cache: the current token and its timings, single-flight
//! fetching, renewal ahead of expiry, back-off after failures, and dropping a
//! token the API refused.
//!
//! The hot path ([`TokenCache::check_usable`], fed by a per-service
//! [`CurrentCache`]) is a relaxed pointer check and a flag read until the
//! token's renewal point, and a clock read after it (and on every
//! [`CLOCK_SAMPLE`]-th request of a service, as a safety net). Everything else happens
//! under a `std::sync::Mutex` that is never held across an `.await`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use http::HeaderValue;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::client::TokenSource;
use crate::error::{TokenError, TokenErrorKind};
use crate::stats::{Counters, Stats};
use crate::store::{FetchContext, TokenStore};
use crate::token::AccessToken;
use crate::transport::BoxFuture;

/// The timing settings of a cache.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) refresh_margin: Duration,
    pub(crate) expiry_skew: Duration,
    pub(crate) fetch_timeout: Duration,
    pub(crate) forced_renewal_interval: Duration,
    pub(crate) backoff_min: Duration,
    pub(crate) backoff_max: Duration,
    /// The header that carries the token.
    pub(crate) header_name: http::HeaderName,
    /// The scheme before the token (`Bearer`); empty for the bare token.
    pub(crate) auth_scheme: String,
    /// Leave a request's own header of that name in place.
    pub(crate) keep_existing: bool,
}

/// Where tokens come from, for display.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub(crate) url: http::Uri,
    pub(crate) client_id: String,
}

/// A service reads the clock on its first request and every this many
/// requests after, even while the token is marked fresh: the mark is kept by
/// a timer, and a timer can be late when its runtime is not driving timers.
pub(crate) const CLOCK_SAMPLE: u32 = 16;

/// The longest `Retry-After` honoured; a longer one is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);

/// A token ready to present, with its timings.
pub(crate) struct CachedToken {
    /// `Bearer <token>` (or as configured), marked sensitive.
    pub(crate) header: HeaderValue,
    /// From here on a request starts a renewal in the background.
    pub(crate) refresh_at: Instant,
    /// Past this the token is never presented.
    pub(crate) usable_until: Instant,
    /// `sent_at + lifetime`.
    pub(crate) expires_at: Instant,
    /// Identifies this token within its cache (tokens are compared by it).
    pub(crate) generation: u64,
    /// The token and what the endpoint said about it.
    pub(crate) token: AccessToken,
    /// When a renewal may next be started, in nanoseconds since the cache's
    /// epoch; `u64::MAX` while one is claimed or under way.
    renew_after: AtomicU64,
    /// True until `refresh_at`, cleared by a timer (see [`fresh_until`]):
    /// while it holds, the hot path needs no clock read.
    fresh: AtomicBool,
}

/// Clears `token.fresh` at `token.refresh_at`, or as soon as the timer can no
/// longer run (its runtime shuts down and drops it): after that, every use
/// reads the clock.
async fn fresh_until(token: Weak<CachedToken>, at: Instant) {
    struct ClearOnDrop(Weak<CachedToken>);
    impl Drop for ClearOnDrop {
        fn drop(&mut self) {
            if let Some(token) = self.0.upgrade() {
                token.fresh.store(false, Ordering::Relaxed);
            }
        }
    }
    let _clear = ClearOnDrop(token);
    tokio::time::sleep_until(at).await;
}

impl fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedToken")
            .field("generation", &self.generation)
            .field("refresh_at", &self.refresh_at)
            .field("usable_until", &self.usable_until)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

type FetchResult = Result<Arc<CachedToken>, TokenError>;

/// What a request that has no usable token gets from [`TokenCache::acquire`].
pub(crate) enum Acquire {
    /// A token or an error, at once.
    Now(FetchResult),
    /// Wait for the fetch under way.
    Wait(watch::Receiver<Option<FetchResult>>),
}

/// Why a fetch was started; for logs.
#[derive(Clone, Copy, Debug)]
enum Reason {
    NoToken,
    RenewAhead,
    Refused,
}

struct Control {
    /// The fetch under way, if any: every caller that needs a token waits on it.
    fetch: Option<watch::Receiver<Option<FetchResult>>>,
    /// Failed fetches in a row.
    failures: u32,
    /// No new fetch before this, after a failure.
    backoff_until: Option<Instant>,
    last_error: Option<TokenError>,
    /// When a token was last dropped because the API refused it.
    last_forced: Option<Instant>,
}

/// Names a token sent with a request: its cache and generation. Plain
/// numbers, so a response future holds no reference count (a shared count
/// touched on every request would be a contended cache line across threads).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    cache: u64,
    generation: u64,
}

/// A per-service view of the current token: `arc_swap::Cache` checks it with
/// one relaxed pointer load and keeps its own reference, so the hot path
/// takes no reference count and writes no shared memory.
pub(crate) type CurrentCache = arc_swap::Cache<Current, Option<Arc<CachedToken>>>;

/// Derefs a cache to its current token, for [`CurrentCache`].
#[derive(Clone)]
pub(crate) struct Current(pub(crate) Arc<TokenCache>);

impl std::ops::Deref for Current {
    type Target = ArcSwapOption<CachedToken>;

    fn deref(&self) -> &Self::Target {
        &self.0.current
    }
}

/// Every live cache, by id: the rare 401 path finds its cache here.
static CACHES: Mutex<Vec<(u64, Weak<TokenCache>)>> = Mutex::new(Vec::new());
static CACHE_IDS: AtomicU64 = AtomicU64::new(0);

/// The shared state behind one `OAuthLayer` and every service built from it.
pub(crate) struct TokenCache {
    id: u64,
    current: ArcSwapOption<CachedToken>,
    control: Mutex<Control>,
    source: Arc<dyn TokenSource>,
    settings: Settings,
    endpoint: Option<Endpoint>,
    /// A store shared with other replicas, and this layer's identity in it.
    store: Option<(Arc<dyn TokenStore>, String)>,
    epoch: Instant,
    generations: AtomicU64,
    counters: Counters,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("current", &self.current.load().as_deref())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Drop for TokenCache {
    fn drop(&mut self) {
        CACHES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

impl TokenCache {
    pub(crate) fn new(
        source: Arc<dyn TokenSource>,
        settings: Settings,
        endpoint: Option<Endpoint>,
        store: Option<(Arc<dyn TokenStore>, String)>,
    ) -> Arc<Self> {
        let id = CACHE_IDS.fetch_add(1, Ordering::Relaxed);
        let cache = Arc::new(TokenCache {
            id,
            current: ArcSwapOption::const_empty(),
            control: Mutex::new(Control {
                fetch: None,
                failures: 0,
                backoff_until: None,
                last_error: None,
                last_forced: None,
            }),
            source,
            settings,
            endpoint,
            store,
            epoch: Instant::now(),
            generations: AtomicU64::new(0),
            counters: Counters::default(),
        });
        CACHES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, Arc::downgrade(&cache)));
        cache
    }

    /// The counters and the token's state now.
    pub(crate) fn stats(&self) -> Stats {
        let mut stats = self.counters.snapshot();
        let now = Instant::now();
        stats.token_usable_for = self
            .current
            .load()
            .as_ref()
            .map(|t| t.usable_until.saturating_duration_since(now))
            .filter(|d| !d.is_zero());
        stats.backing_off = self
            .control()
            .backoff_until
            .map(|u| u.saturating_duration_since(now))
            .filter(|d| !d.is_zero());
        stats
    }

    /// What a response future keeps to report a refusal of `token`.
    #[inline]
    pub(crate) fn sent(&self, token: &CachedToken) -> Sent {
        Sent {
            cache: self.id,
            generation: token.generation,
        }
    }

    pub(crate) fn endpoint(&self) -> Option<&Endpoint> {
        self.endpoint.as_ref()
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A usable token, waiting for the shared fetch if need be.
    pub(crate) async fn token(self: &Arc<Self>) -> FetchResult {
        if let Some(token) = self
            .with_usable(|_| ())
            .and_then(|()| self.current.load_full())
        {
            return Ok(token);
        }
        match self.acquire() {
            Acquire::Now(outcome) => outcome,
            Acquire::Wait(rx) => crate::future::wait_for(rx).await,
        }
    }

    fn control(&self) -> MutexGuard<'_, Control> {
        // Nothing panics while holding the lock; if something ever did, the
        // state is still consistent field by field, so carry on.
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn offset(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// The hot path: runs `f` with the current token if it may be presented
    /// now, and starts a background renewal once past its renewal point.
    /// `None` when there is no usable token: call [`acquire`](Self::acquire).
    #[inline]
    pub(crate) fn with_usable<R>(self: &Arc<Self>, f: impl FnOnce(&CachedToken) -> R) -> Option<R> {
        self.check_usable(self.current.load().as_deref(), true, f)
    }

    /// [`with_usable`](Self::with_usable) for a token already loaded (by a
    /// [`CurrentCache`]). With `read_clock`, the clock is read even while the
    /// token is marked fresh: a safety net in case its timer is late (its
    /// runtime not driving timers), which then clears the mark itself.
    #[inline]
    pub(crate) fn check_usable<R>(
        self: &Arc<Self>,
        token: Option<&CachedToken>,
        read_clock: bool,
        f: impl FnOnce(&CachedToken) -> R,
    ) -> Option<R> {
        let token = token?;
        if !read_clock && token.fresh.load(Ordering::Relaxed) {
            // Before the renewal point: the timer has not fired yet.
            return Some(f(token));
        }
        let now = Instant::now();
        if now < token.refresh_at {
            return Some(f(token));
        }
        if token.fresh.load(Ordering::Relaxed) {
            // Past the renewal point, whatever the (late) timer says.
            token.fresh.store(false, Ordering::Relaxed);
        }
        if now < token.usable_until {
            self.renew_ahead(token, now);
            return Some(f(token));
        }
        None
    }

    /// Starts a renewal of `token` unless one is claimed, under way, or
    /// backing off. The caller goes on with `token` at once.
    #[cold]
    fn renew_ahead(self: &Arc<Self>, token: &CachedToken, now: Instant) {
        let after = token.renew_after.load(Ordering::Acquire);
        if self.offset(now) < after
            || token
                .renew_after
                .compare_exchange(after, u64::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let mut ctl = self.control();
        if self.fetch_under_way(&mut ctl) {
            return;
        }
        if let Some(until) = ctl.backoff_until.filter(|u| now < *u) {
            token
                .renew_after
                .store(self.offset(until), Ordering::Release);
            return;
        }
        tracing::debug!(
            usable_for = ?token.usable_until.saturating_duration_since(now),
            "renewing the access token ahead of expiry"
        );
        if self.start_fetch(&mut ctl, Reason::RenewAhead).is_ok() {
            Counters::bump(&self.counters.renewals_ahead);
        } else {
            // No runtime to run it on here; let a later request try.
            token.renew_after.store(
                self.offset(now + Duration::from_millis(100)),
                Ordering::Release,
            );
        }
    }

    /// The slow path: a usable token that appeared meanwhile, the fetch under
    /// way to wait on, a new fetch, or the last error while backing off.
    pub(crate) fn acquire(self: &Arc<Self>) -> Acquire {
        let mut ctl = self.control();
        let now = Instant::now();
        if let Some(token) = self.current.load_full() {
            if now < token.usable_until {
                return Acquire::Now(Ok(token));
            }
        }
        if self.fetch_under_way(&mut ctl) {
            if let Some(rx) = &ctl.fetch {
                Counters::bump(&self.counters.waited_for_token);
                return Acquire::Wait(rx.clone());
            }
        }
        if let (Some(until), Some(err)) = (ctl.backoff_until, &ctl.last_error) {
            if now < until {
                return Acquire::Now(Err(err.during_backoff(until - now)));
            }
        }
        match self.start_fetch(&mut ctl, Reason::NoToken) {
            Ok(rx) => {
                Counters::bump(&self.counters.waited_for_token);
                Acquire::Wait(rx)
            }
            Err(e) => Acquire::Now(Err(e)),
        }
    }

    /// The API refused the token of `generation` (HTTP 401). Drops it if it is
    /// still the current one and no token was dropped within the forced
    /// renewal interval, and starts fetching a new one.
    pub(crate) fn refused(sent: Sent) {
        let cache = CACHES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(id, _)| *id == sent.cache)
            .and_then(|(_, cache)| cache.upgrade());
        if let Some(cache) = cache {
            cache.refused_generation(sent.generation);
        }
    }

    fn refused_generation(self: &Arc<Self>, generation: u64) {
        if self
            .current
            .load()
            .as_ref()
            .is_some_and(|t| t.generation == generation)
        {
            self.force_renewal(Some(generation));
        }
    }

    /// Drops the current token (only if it is of `generation`, when given)
    /// and starts fetching a new one, unless a token was dropped so within
    /// the forced renewal interval. Whether it was dropped.
    pub(crate) fn force_renewal(self: &Arc<Self>, generation: Option<u64>) -> bool {
        let mut ctl = self.control();
        // All stores to `current` happen under the lock: this check is exact.
        let Some(current) = self.current.load_full() else {
            return false;
        };
        if generation.is_some_and(|g| g != current.generation) {
            return false;
        }
        let now = Instant::now();
        if let Some(last) = ctl.last_forced {
            let next = last + self.settings.forced_renewal_interval;
            if now < next {
                tracing::debug!(
                    wait = ?next - now,
                    "the access token was refused again; not renewing yet \
                     (forced renewals are rate-limited)"
                );
                return false;
            }
        }
        ctl.last_forced = Some(now);
        self.current.store(None);
        Counters::bump(&self.counters.forced_renewals);
        tracing::warn!("the access token was refused; dropping it and fetching a new one");
        if !self.fetch_under_way(&mut ctl) && ctl.backoff_until.is_none_or(|u| now >= u) {
            // Without a runtime the next request starts the fetch.
            let _ = self.start_fetch_after(&mut ctl, Reason::Refused, Some(current.token.clone()));
        }
        true
    }

    /// Whether a fetch is under way; forgets one whose task died.
    fn fetch_under_way(&self, ctl: &mut Control) -> bool {
        match &ctl.fetch {
            // The task clears `fetch` before it sends; a closed channel with
            // `fetch` still set means the task died (runtime shut down).
            Some(rx) if rx.has_changed().is_ok() => true,
            Some(_) => {
                ctl.fetch = None;
                false
            }
            None => false,
        }
    }

    fn start_fetch(
        self: &Arc<Self>,
        ctl: &mut Control,
        reason: Reason,
    ) -> Result<watch::Receiver<Option<FetchResult>>, TokenError> {
        self.start_fetch_after(ctl, reason, None)
    }

    /// [`start_fetch`](Self::start_fetch), telling the store first that
    /// `refused` was refused.
    fn start_fetch_after(
        self: &Arc<Self>,
        ctl: &mut Control,
        reason: Reason,
        refused: Option<AccessToken>,
    ) -> Result<watch::Receiver<Option<FetchResult>>, TokenError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            TokenError::new(TokenErrorKind::Runtime)
                .with_message("a token fetch needs a Tokio runtime, and none is running here")
        })?;
        let (tx, rx) = watch::channel(None);
        ctl.fetch = Some(rx.clone());
        Counters::bump(&self.counters.token_requests);
        // The fetch runs on its own task: dropping the request that started
        // it neither cancels it nor loses its result.
        let span = tracing::debug_span!(
            "oauth_token_fetch",
            ?reason,
            token_url = ?self.endpoint.as_ref().map(|e| &e.url),
        );
        handle.spawn(Arc::clone(self).fetch(tx, reason, refused).instrument(span));
        Ok(rx)
    }

    async fn fetch(
        self: Arc<Self>,
        tx: watch::Sender<Option<FetchResult>>,
        reason: Reason,
        refused: Option<AccessToken>,
    ) {
        let sent_at = Instant::now();
        let outcome = match &self.store {
            None => self.fetch_from_source().await.and_then(|token| {
                let expires_at = sent_at + token.lifetime();
                self.prepare(token, expires_at)
            }),
            Some((store, identity)) => {
                if let Some(refused) = &refused {
                    store.refused(identity, refused).await;
                }
                let fetch = || -> BoxFuture<'_, Result<AccessToken, TokenError>> {
                    Box::pin(self.fetch_from_source())
                };
                // A shared token is stale once any replica may have reached its
                // renewal point: margin plus the largest jitter, less the skew.
                // So the first replica there renews for all, and the others
                // find a fresh token when their turn comes.
                let refresh_before = |lifetime: Duration| {
                    let margin = self.margin_for(lifetime);
                    (margin + margin / 10).saturating_sub(self.skew_for(lifetime))
                };
                let skew = |lifetime: Duration| self.skew_for(lifetime);
                let ctx = FetchContext {
                    identity,
                    fetch: &fetch,
                    refresh_before: &refresh_before,
                    skew: &skew,
                    fetch_timeout: self.settings.fetch_timeout,
                    min_backoff: self.settings.backoff_min,
                };
                match store.get_or_fetch(&ctx).await {
                    Ok(shared) => {
                        let lifetime = shared.token.lifetime();
                        let expires_at =
                            Instant::now() + shared.usable_for + self.skew_for(lifetime);
                        self.prepare(shared.token, expires_at)
                    }
                    Err(e) => Err(e),
                }
            }
        };
        let now = Instant::now();
        {
            let mut ctl = self.control();
            match &outcome {
                Ok(token) => {
                    tracing::debug!(
                        ?reason,
                        took = ?now - sent_at,
                        lifetime = ?token.token.lifetime(),
                        usable_for = ?token.usable_until.saturating_duration_since(now),
                        "access token fetched"
                    );
                    self.current.store(Some(Arc::clone(token)));
                    self.arm_fresh_timer(token);
                    ctl.failures = 0;
                    ctl.backoff_until = None;
                    ctl.last_error = None;
                }
                Err(e) => {
                    Counters::bump(&self.counters.failed_token_requests);
                    ctl.failures = ctl.failures.saturating_add(1);
                    let delay = self.backoff_delay(ctl.failures, e.retry_after());
                    tracing::warn!(
                        ?reason,
                        error = %e,
                        failures = ctl.failures,
                        retry_in = ?delay,
                        "access token request failed"
                    );
                    let until = now + delay;
                    ctl.backoff_until = Some(until);
                    ctl.last_error = Some(e.clone());
                    // A still-usable token keeps serving; its renewal is tried
                    // again once the back-off is over.
                    if let Some(current) = self.current.load().as_deref() {
                        current
                            .renew_after
                            .store(self.offset(until), Ordering::Release);
                    }
                }
            }
            ctl.fetch = None;
        }
        tx.send_replace(Some(outcome));
    }

    /// Marks `token` fresh until its renewal point, with a timer on the
    /// current runtime to clear the mark. Without a runtime the mark is never
    /// set, and every use reads the clock.
    fn arm_fresh_timer(&self, token: &Arc<CachedToken>) {
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            if Instant::now() < token.refresh_at {
                token.fresh.store(true, Ordering::Relaxed);
                handle.spawn(fresh_until(Arc::downgrade(token), token.refresh_at));
            }
        }
    }

    /// One token request, bounded by the fetch timeout.
    async fn fetch_from_source(&self) -> Result<AccessToken, TokenError> {
        match tokio::time::timeout(self.settings.fetch_timeout, self.source.fetch_token()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(
                TokenError::new(TokenErrorKind::Timeout).with_message(format!(
                    "no complete answer within {:?}",
                    self.settings.fetch_timeout
                )),
            ),
        }
    }

    /// The expiry skew for a token of `lifetime`: up to a tenth of it.
    fn skew_for(&self, lifetime: Duration) -> Duration {
        self.settings.expiry_skew.min(lifetime / 10)
    }

    /// The refresh margin for a token of `lifetime`: up to half of it.
    fn margin_for(&self, lifetime: Duration) -> Duration {
        self.settings.refresh_margin.min(lifetime / 2)
    }

    /// Turns a fetched token into a cached one with its timings, all reckoned
    /// back from `expires_at` (for a token fetched here: the moment just
    /// before the request was sent, plus its lifetime).
    fn prepare(&self, token: AccessToken, expires_at: Instant) -> FetchResult {
        let value = token.expose_token();
        if value.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(
                TokenError::new(TokenErrorKind::InvalidResponse).with_message(
                    "`access_token` holds characters that cannot be sent in a header \
                 (only visible ASCII is allowed)",
                ),
            );
        }
        let scheme = &self.settings.auth_scheme;
        let text = if scheme.is_empty() {
            value.to_owned()
        } else {
            format!("{scheme} {value}")
        };
        let mut header = HeaderValue::try_from(text).map_err(|_| {
            TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message("`access_token` cannot be sent in a header")
        })?;
        header.set_sensitive(true);

        let lifetime = token.lifetime();
        let skew = self.skew_for(lifetime);
        let margin = self.margin_for(lifetime);
        // Up to a tenth of the margin (the store's freshness test counts on it).
        let jitter = margin.mul_f64(random_unit() / 10.0);
        let usable_until = expires_at - skew;
        let refresh_at = (expires_at - margin - jitter).min(usable_until);
        Ok(Arc::new(CachedToken {
            header,
            refresh_at,
            usable_until,
            expires_at,
            generation: self.generations.fetch_add(1, Ordering::Relaxed) + 1,
            token,
            renew_after: AtomicU64::new(0),
            fresh: AtomicBool::new(false),
        }))
    }

    /// The back-off after the `failures`-th failure in a row: the server's
    /// `Retry-After` when it gave one, else exponential from `backoff_min`,
    /// capped at `backoff_max`, with jitter (between half and all of it).
    fn backoff_delay(&self, failures: u32, retry_after: Option<Duration>) -> Duration {
        let s = &self.settings;
        if let Some(ra) = retry_after {
            return ra.clamp(s.backoff_min, MAX_RETRY_AFTER.max(s.backoff_min));
        }
        let exp = s
            .backoff_min
            .saturating_mul(1u32 << failures.saturating_sub(1).min(20))
            .min(s.backoff_max);
        exp.mul_f64(0.5 + random_unit() / 2.0).max(s.backoff_min)
    }
}

/// 128 random bits as hex, for lock values.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn random_hex() -> String {
    let bits = |_| (random_unit() * (1u64 << 53) as f64) as u64;
    format!("{:014x}{:014x}{:014x}", bits(0), bits(1), bits(2))
}

/// A random number in `[0, 1)`, from the standard library's per-process
/// random hash keys (jitter needs no better).
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests;
