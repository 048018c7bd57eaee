//! [`Stats`]: what a layer has done, for health checks and dashboards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A snapshot of a layer's counters and token state, from
/// [`OAuthLayer::stats`](crate::OAuthLayer::stats). Reading it takes a few
/// relaxed atomic loads, one clock read and a brief lock that requests do not
/// take on their hot path. The counters count since the layer was built,
/// across all its clones (and, in `OAuthLayer::stats`, all its token slots).
///
/// For the load a fleet puts on the identity provider, sum
/// [`token_requests`](Self::token_requests) over the replicas: it counts
/// what each replica itself sent, never a token a store handed it.
///
/// ```
/// # async fn example(oauth: tower_oauth::OAuthLayer) {
/// let stats = oauth.stats();
/// let healthy = stats.token_usable_for.is_some() || stats.backing_off.is_none();
/// println!(
///     "{} fetches ({} failed), {} sent to the token endpoint, {} renewed ahead, \
///      {} forced; healthy: {healthy}",
///     stats.fetches,
///     stats.failed_token_requests,
///     stats.token_requests,
///     stats.renewals_ahead,
///     stats.forced_renewals
/// );
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Token requests this replica sent to the token endpoint (or asked of
    /// its [`TokenSource`](crate::TokenSource)): one per fetch it made
    /// itself. A fetch a [token store](crate::OAuthLayerBuilder::token_store)
    /// served with another replica's token is not one, so summed over the
    /// replicas this is what the endpoint received. (A request the layer
    /// sends again at once within one, for a DPoP nonce or a refused
    /// assertion's other audience, is part of it.)
    pub token_requests: u64,
    /// Fetches the layer's caches started, each ended by a token (from the
    /// endpoint, or a store), or a failure: without a store, the same as
    /// [`token_requests`](Self::token_requests).
    pub fetches: u64,
    /// Fetches that failed (any kind).
    pub failed_token_requests: u64,
    /// Renewals started ahead of expiry, while the current token still served.
    pub renewals_ahead: u64,
    /// Tokens dropped because the API refused them (401 or gRPC
    /// UNAUTHENTICATED) or [`force_renewal`](crate::OAuthLayer::force_renewal)
    /// was called.
    pub forced_renewals: u64,
    /// Requests (and [`token`](crate::OAuthLayer::token) calls) that had to
    /// wait for a token request.
    pub waited_for_token: u64,
    /// API answers (`401` with `WWW-Authenticate: DPoP
    /// error="use_dpop_nonce"`) that asked for a new DPoP nonce. The token
    /// stayed. Such a request is resent by
    /// [`RetryUnauthorized`](crate::RetryUnauthorized).
    pub dpop_nonce_challenges: u64,
    /// With a [token store](crate::OAuthLayerBuilder::token_store): fetches
    /// the store served with a token another replica had fetched.
    pub store_took_shared: u64,
    /// Fetches for which this replica asked the token endpoint for the
    /// whole fleet (it held the store's fetch lock).
    pub store_fetched_for_fleet: u64,
    /// Fetches that waited while another replica fetched.
    pub store_waited: u64,
    /// Fetches made without the store because it did not answer.
    pub store_fell_back: u64,
    /// How much longer the current token may be presented; `None` without a
    /// usable token.
    pub token_usable_for: Option<Duration>,
    /// How much longer the layer backs off after a failure; `None` when it
    /// does not.
    pub backing_off: Option<Duration>,
}

impl Stats {
    /// Adds `other`'s counters to these.
    pub(crate) fn add(&mut self, other: &Stats) {
        self.token_requests += other.token_requests;
        self.fetches += other.fetches;
        self.failed_token_requests += other.failed_token_requests;
        self.renewals_ahead += other.renewals_ahead;
        self.forced_renewals += other.forced_renewals;
        self.waited_for_token += other.waited_for_token;
        self.dpop_nonce_challenges += other.dpop_nonce_challenges;
        self.store_took_shared += other.store_took_shared;
        self.store_fetched_for_fleet += other.store_fetched_for_fleet;
        self.store_waited += other.store_waited;
        self.store_fell_back += other.store_fell_back;
    }
}

/// The counters behind [`Stats`]. Touched only off the hot path.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) fetches: AtomicU64,
    pub(crate) failed_token_requests: AtomicU64,
    pub(crate) renewals_ahead: AtomicU64,
    pub(crate) forced_renewals: AtomicU64,
    pub(crate) waited_for_token: AtomicU64,
    pub(crate) dpop_nonce_challenges: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            token_requests: 0,
            fetches: get(&self.fetches),
            failed_token_requests: get(&self.failed_token_requests),
            renewals_ahead: get(&self.renewals_ahead),
            forced_renewals: get(&self.forced_renewals),
            waited_for_token: get(&self.waited_for_token),
            dpop_nonce_challenges: get(&self.dpop_nonce_challenges),
            store_took_shared: 0,
            store_fetched_for_fleet: 0,
            store_waited: 0,
            store_fell_back: 0,
            token_usable_for: None,
            backing_off: None,
        }
    }
}
