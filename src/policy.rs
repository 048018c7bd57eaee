//! Every default and timing rule of a layer, as plain values and pure
//! functions: the settings' defaults, when a token is renewed, when it stops
//! being presented, how long to back off after a failure. No runtime, no
//! clock: every instant is an argument.

use std::time::Duration;

use tokio::time::Instant;

/// Default of [`OAuthLayerBuilder::refresh_margin`](crate::OAuthLayerBuilder::refresh_margin).
pub(crate) const DEFAULT_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);
/// Default of [`OAuthLayerBuilder::expiry_skew`](crate::OAuthLayerBuilder::expiry_skew).
pub(crate) const DEFAULT_EXPIRY_SKEW: Duration = Duration::from_secs(10);
/// Default of [`OAuthLayerBuilder::fetch_timeout`](crate::OAuthLayerBuilder::fetch_timeout).
pub(crate) const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`OAuthLayerBuilder::forced_renewal_interval`](crate::OAuthLayerBuilder::forced_renewal_interval).
pub(crate) const DEFAULT_FORCED_RENEWAL_INTERVAL: Duration = Duration::from_secs(10);
/// Default of [`OAuthLayerBuilder::min_backoff`](crate::OAuthLayerBuilder::min_backoff).
pub(crate) const DEFAULT_MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Default of [`OAuthLayerBuilder::max_backoff`](crate::OAuthLayerBuilder::max_backoff).
pub(crate) const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Default of [`OAuthLayerBuilder::max_token_slots`](crate::OAuthLayerBuilder::max_token_slots).
pub(crate) const DEFAULT_TOKEN_SLOTS: usize = 64;
/// Default of [`OAuthLayerBuilder::max_accounts`](crate::OAuthLayerBuilder::max_accounts).
pub(crate) const DEFAULT_MAX_ACCOUNTS: usize = 10_000;

/// The lifetime the product-information API gives a token whose response has no usable
/// `expires_in`: 60 minutes.
pub(crate) const DEFAULT_LIFETIME: Duration = Duration::from_secs(60 * 60);

/// Default of [`ClientAssertion::lifetime`](crate::client_auth::ClientAssertion::lifetime) and
/// [`OAuthLayerBuilder::assertion_lifetime`](crate::OAuthLayerBuilder::assertion_lifetime):
/// 60 seconds.
pub(crate) const DEFAULT_ASSERTION_LIFETIME: Duration = Duration::from_secs(60);

/// Default of [`ClientAssertion::clock_skew`](crate::client_auth::ClientAssertion::clock_skew) and
/// [`OAuthLayerBuilder::assertion_clock_skew`](crate::OAuthLayerBuilder::assertion_clock_skew):
/// 5 seconds.
pub(crate) const DEFAULT_ASSERTION_CLOCK_SKEW: Duration = Duration::from_secs(5);

/// Default of [`OAuthLayerBuilder::id_token_clock_skew`](crate::OAuthLayerBuilder::id_token_clock_skew):
/// 60 seconds.
pub(crate) const DEFAULT_ID_TOKEN_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// The longest any duration setting is taken to be: 24 hours. A longer one,
/// even `Duration::MAX`, is cut to this, so that no instant computed from a
/// setting can overflow.
pub(crate) const MAX_SETTING: Duration = Duration::from_secs(24 * 60 * 60);

/// While a renewal is under way, a request past the renewal point looks this
/// often whether the renewal is still alive. Its runtime may have shut down
/// under it. If it is not alive, the request starts another.
pub(crate) const RENEWAL_CHECK: Duration = Duration::from_millis(100);

/// How many fetch timeouts a fetch may take in all, beside
/// [`FETCH_BOUND_SLACK`]: a store's wait for its lock (two), the token
/// request (one), and the store's write (one).
const FETCH_BOUND_TIMEOUTS: u32 = 4;

/// What a fetch's bound allows beyond its fetch timeouts: the store's
/// margins on its waits and the retries of a chain's save.
const FETCH_BOUND_SLACK: Duration = Duration::from_secs(4);

/// Default of [`OAuthLayerBuilder::refresh_answer_timeout`](crate::OAuthLayerBuilder::refresh_answer_timeout).
pub(crate) const DEFAULT_REFRESH_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// A steady retry comes after this share of `min_backoff`, plus up to
/// [`STEADY_SPREAD`] of it by jitter. It applies when no token serves and the
/// failure can heal. It always comes before `min_backoff` has passed, so that
/// requests recover within `min_backoff` of the endpoint's return.
const STEADY_LOW: f64 = 0.8;
/// See [`STEADY_LOW`].
const STEADY_SPREAD: f64 = 0.15;

/// The longest `Retry-After` honoured. A longer one is cut to this.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);

/// The timing settings of a layer.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    pub(crate) refresh_margin: Duration,
    pub(crate) expiry_skew: Duration,
    pub(crate) fetch_timeout: Duration,
    /// How long a refresh request, once sent, is awaited to its answer: at
    /// least the fetch timeout.
    pub(crate) refresh_answer_timeout: Duration,
    pub(crate) forced_renewal_interval: Duration,
    pub(crate) min_backoff: Duration,
    pub(crate) max_backoff: Duration,
}

/// The instants of one token's life. The crate docs' diagram shows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timings {
    /// From here on a request starts a renewal in the background.
    pub(crate) refresh_at: Instant,
    /// From here on the token is never presented.
    pub(crate) usable_until: Instant,
    /// When the issuer says the token runs out.
    pub(crate) expires_at: Instant,
}

impl Timings {
    /// Whether the token may be presented at `now`.
    #[inline]
    pub(crate) fn usable_at(&self, now: Instant) -> bool {
        now < self.usable_until
    }

    /// How much longer the token may be presented after `now`.
    pub(crate) fn usable_for(&self, now: Instant) -> Duration {
        self.usable_until.saturating_duration_since(now)
    }
}

/// Why a fetch failed, as the back-off rule needs to know it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failure {
    /// Failed fetches in a row, this one included, so at least 1.
    pub(crate) in_a_row: u32,
    /// The endpoint's `Retry-After`, if it sent one.
    pub(crate) retry_after: Option<Duration>,
    /// Whether the failure can heal by itself, so that a quick retry may
    /// succeed. 5xx, 429, time-outs and transport errors can.
    pub(crate) can_heal: bool,
    /// When the token still serving stops being usable; `None` when no
    /// usable token serves meanwhile.
    pub(crate) serving_until: Option<Instant>,
}

/// The builder's defaults.
impl Default for Policy {
    fn default() -> Self {
        Policy {
            refresh_margin: DEFAULT_REFRESH_MARGIN,
            expiry_skew: DEFAULT_EXPIRY_SKEW,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            refresh_answer_timeout: DEFAULT_REFRESH_ANSWER_TIMEOUT,
            forced_renewal_interval: DEFAULT_FORCED_RENEWAL_INTERVAL,
            min_backoff: DEFAULT_MIN_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }
}

impl Policy {
    /// The expiry skew for a token of `lifetime`: up to a tenth of it.
    pub(crate) fn skew_for(&self, lifetime: Duration) -> Duration {
        self.expiry_skew.min(lifetime / 10)
    }

    /// The refresh margin for a token of `lifetime`: up to half of it.
    pub(crate) fn margin_for(&self, lifetime: Duration) -> Duration {
        self.refresh_margin.min(lifetime / 2)
    }

    /// The largest jitter added to the margin: a tenth of it.
    fn max_jitter(&self, lifetime: Duration) -> Duration {
        self.margin_for(lifetime) / 10
    }

    /// The timings of a token of `lifetime` that runs out at `expires_at`.
    /// `jitter`, in `[0, 1)`, moves its renewal point earlier by up to a tenth
    /// of the margin, so that many clients do not renew in step. The server's
    /// `refresh_in` advice moves it earlier still. It never moves it before
    /// half the lifetime, the same bound as the margin's.
    pub(crate) fn timings(
        &self,
        lifetime: Duration,
        expires_at: Instant,
        jitter: f64,
        refresh_in: Option<Duration>,
    ) -> Timings {
        let usable_until = expires_at - self.skew_for(lifetime);
        let ahead = self.margin_for(lifetime) + self.max_jitter(lifetime).mul_f64(jitter);
        let mut refresh_at = (expires_at - ahead).min(usable_until);
        if let Some(advice) = refresh_in {
            let issued = expires_at - lifetime;
            refresh_at = refresh_at.min(issued + advice.max(lifetime / 2));
        }
        Timings {
            refresh_at,
            usable_until,
            expires_at,
        }
    }

    /// How long a token of `lifetime` may be presented, `elapsed` after its
    /// request was sent: its lifetime less the skew and the time gone.
    pub(crate) fn usable_for(&self, lifetime: Duration, elapsed: Duration) -> Duration {
        lifetime
            .saturating_sub(self.skew_for(lifetime))
            .saturating_sub(elapsed)
    }

    /// When a token of `lifetime` that may be presented for `usable_for`
    /// after `now` runs out: the inverse of [`usable_for`](Self::usable_for).
    pub(crate) fn expires_at(
        &self,
        lifetime: Duration,
        now: Instant,
        usable_for: Duration,
    ) -> Instant {
        now + usable_for + self.skew_for(lifetime)
    }

    /// Whether a shared token of `lifetime`, usable for `usable_for` more, is
    /// fresh enough to take. It is when no replica is past its renewal point
    /// yet: the margin plus the largest jitter, less the skew. So the first
    /// replica there renews for all, and the others find the new token.
    pub(crate) fn is_fresh(&self, lifetime: Duration, usable_for: Duration) -> bool {
        let ahead = self.margin_for(lifetime) + self.max_jitter(lifetime);
        usable_for > ahead.saturating_sub(self.skew_for(lifetime))
    }

    /// The longest a fetch may take in all, through a store: its wait for
    /// the store's lock, the token request and the store's write. A request
    /// waiting for the fetch gets a `Timeout` by then, whatever the store
    /// or the endpoint does, and whether or not other requests come. A
    /// refresh already sent is still awaited past it, on its own task.
    pub(crate) fn fetch_bound(&self) -> Duration {
        self.fetch_timeout
            .saturating_mul(FETCH_BOUND_TIMEOUTS)
            .saturating_add(FETCH_BOUND_SLACK)
    }

    /// How long a refresh request, once sent, is awaited: the answer may
    /// carry the only copy of a rotated refresh token.
    pub(crate) fn refresh_answer_bound(&self) -> Duration {
        self.refresh_answer_timeout.max(self.fetch_timeout)
    }

    /// How long everyone sharing a token holds back after a failure. It is the
    /// endpoint's `Retry-After`, at least the minimum back-off and at most an
    /// hour. Without one, it is the minimum back-off.
    pub(crate) fn hold_after(&self, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(after) => after.clamp(self.min_backoff, MAX_RETRY_AFTER.max(self.min_backoff)),
            None => self.min_backoff,
        }
    }

    /// The back-off after `failure`, with `jitter` in `[0, 1)`:
    ///
    /// - A `Retry-After` is honoured as it is. See
    ///   [`hold_after`](Self::hold_after).
    /// - With no usable token and a failure that can heal, a steady retry comes
    ///   a little before each `min_backoff`, at 0.8 to 0.95 of it, jittered. So
    ///   requests recover within `min_backoff` of the endpoint's return, at
    ///   about one token request per `min_backoff` meanwhile.
    /// - Otherwise the back-off is exponential: `min_backoff` doubled per
    ///   failure in a row, up to `max_backoff`. This covers refused
    ///   credentials, and a renewal while a token still serves. A renewal's
    ///   back-off never outlasts the token.
    ///
    /// Jitter spreads an exponential delay between the nominal delay and half
    /// as much again. At the cap, it spreads it between two thirds of
    /// `max_backoff` and all of it. The delay stays within `[min_backoff,
    /// max_backoff]`. So replicas that fail together do not retry together,
    /// from the first retry on.
    pub(crate) fn backoff(&self, failure: &Failure, jitter: f64) -> Duration {
        if failure.retry_after.is_some() {
            return self.hold_after(failure.retry_after);
        }
        if failure.can_heal && failure.serving_until.is_none() {
            return self
                .min_backoff
                .mul_f64(STEADY_LOW + STEADY_SPREAD * jitter);
        }
        let doublings = failure.in_a_row.saturating_sub(1).min(20);
        let nominal = self.min_backoff.saturating_mul(1 << doublings);
        let (min, max) = (self.min_backoff, self.max_backoff);
        let low = nominal.min(max.mul_f64(2.0 / 3.0)).max(min);
        let high = low.mul_f64(1.5).min(max).max(low);
        low + (high - low).mul_f64(jitter)
    }

    /// When to try again after `failure` at `now`. It is after its
    /// [`backoff`](Self::backoff), but no later than the moment the token still
    /// serving runs out, unless the endpoint asked for longer. So requests left
    /// without a token do not wait out a renewal's longer back-off.
    pub(crate) fn retry_at(&self, failure: &Failure, now: Instant, jitter: f64) -> Instant {
        let at = now + self.backoff(failure, jitter);
        match failure.serving_until {
            Some(until) if failure.retry_after.is_none() => at.min(until.max(now)),
            _ => at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);
    const SEC: Duration = Duration::from_secs(1);

    fn policy() -> Policy {
        Policy::default()
    }

    fn failure(in_a_row: u32, can_heal: bool) -> Failure {
        Failure {
            in_a_row,
            retry_after: None,
            can_heal,
            serving_until: None,
        }
    }

    #[test]
    fn an_hour_token_is_renewed_five_minutes_ahead_and_dropped_ten_seconds_ahead() {
        let t0 = Instant::now();
        let p = policy();
        let t = p.timings(HOUR, t0 + HOUR, 0.0, None);
        assert_eq!(t.expires_at, t0 + HOUR);
        assert_eq!(t.usable_until, t0 + HOUR - 10 * SEC);
        assert_eq!(t.refresh_at, t0 + HOUR - 300 * SEC);
        // The largest jitter moves the renewal point a tenth of the margin.
        let t = p.timings(HOUR, t0 + HOUR, 0.999_999, None);
        assert!(t.refresh_at > t0 + HOUR - 330 * SEC);
        assert!(t.refresh_at < t0 + HOUR - 329 * SEC);
        assert!(t.usable_at(t0 + HOUR - 11 * SEC));
        assert!(!t.usable_at(t0 + HOUR - 10 * SEC));
    }

    #[test]
    fn short_tokens_keep_most_of_their_life() {
        let t0 = Instant::now();
        let t = policy().timings(4 * SEC, t0 + 4 * SEC, 0.0, None);
        // Skew up to a tenth of the lifetime, margin up to half of it.
        assert_eq!(t.usable_until, t0 + Duration::from_millis(3600));
        assert_eq!(t.refresh_at, t0 + 2 * SEC);
    }

    #[test]
    fn the_servers_refresh_advice_is_taken_down_to_half_the_lifetime() {
        let t0 = Instant::now();
        let p = policy();
        let advised = |r| p.timings(HOUR, t0 + HOUR, 0.0, Some(r)).refresh_at;
        assert_eq!(advised(1200 * SEC), t0 + 1800 * SEC);
        assert_eq!(advised(2400 * SEC), t0 + 2400 * SEC);
        // Later than the layer's own renewal point: the layer's stands.
        assert_eq!(advised(3500 * SEC), t0 + 3300 * SEC);
    }

    #[test]
    fn usable_time_and_expiry_are_inverse() {
        let p = policy();
        let now = Instant::now();
        let usable = p.usable_for(HOUR, 2 * SEC);
        assert_eq!(usable, HOUR - 12 * SEC);
        assert_eq!(p.expires_at(HOUR, now, usable), now + HOUR - 2 * SEC);
        assert_eq!(p.usable_for(SEC, 5 * SEC), Duration::ZERO);
    }

    #[test]
    fn a_shared_token_is_fresh_until_any_replica_may_renew_it() {
        let p = policy();
        // Margin 300 s plus jitter 30 s, less the skew 10 s.
        assert!(p.is_fresh(HOUR, 321 * SEC));
        assert!(!p.is_fresh(HOUR, 320 * SEC));
    }

    #[test]
    fn retry_after_is_honoured_up_to_an_hour() {
        let p = policy();
        let with = |after| Failure {
            retry_after: Some(after),
            ..failure(5, true)
        };
        assert_eq!(p.backoff(&with(30 * SEC), 0.5), 30 * SEC);
        assert_eq!(p.backoff(&with(Duration::ZERO), 0.5), SEC);
        assert_eq!(p.backoff(&with(10 * HOUR), 0.5), HOUR);
        assert_eq!(p.hold_after(None), SEC);
    }

    #[test]
    fn the_first_retry_is_jittered() {
        let p = policy();
        assert_eq!(p.backoff(&failure(1, false), 0.0), SEC);
        assert_eq!(
            p.backoff(&failure(1, false), 0.5),
            Duration::from_millis(1250)
        );
        assert!(p.backoff(&failure(1, false), 0.999) < Duration::from_millis(1500));
    }

    #[test]
    fn refused_credentials_back_off_exponentially_within_bounds() {
        let p = policy();
        for n in 1..=40 {
            let nominal = (SEC * (1 << (n - 1).min(20))).min(40 * SEC);
            let low = p.backoff(&failure(n, false), 0.0);
            let high = p.backoff(&failure(n, false), 0.999_999);
            assert_eq!(low, nominal, "{n}");
            assert!(high <= Duration::from_secs(60) && high >= low, "{n}");
        }
        // At the cap the delays still spread: 40 s to 60 s.
        assert_eq!(p.backoff(&failure(9, false), 0.0), 40 * SEC);
        assert!(p.backoff(&failure(9, false), 0.999) > 59 * SEC);
    }

    #[test]
    fn a_failure_that_can_heal_retries_steadily_while_no_token_serves() {
        let p = policy();
        for n in [1, 2, 10, 1000] {
            // A little before each second: recovered within a second.
            assert_eq!(
                p.backoff(&failure(n, true), 0.0),
                Duration::from_millis(800)
            );
            let d = p.backoff(&failure(n, true), 0.999_999);
            assert!(
                d > Duration::from_millis(949) && d < Duration::from_millis(950),
                "{n}: {d:?}"
            );
        }
        // While a token still serves, a renewal backs off exponentially.
        let renewing = Failure {
            serving_until: Some(Instant::now() + HOUR),
            ..failure(4, true)
        };
        assert_eq!(p.backoff(&renewing, 0.0), 8 * SEC);
        // ...but never past the moment that token runs out.
        let now = Instant::now();
        let ending = Failure {
            serving_until: Some(now + 3 * SEC),
            ..renewing
        };
        assert_eq!(p.retry_at(&ending, now, 0.0), now + 3 * SEC);
        assert_eq!(p.retry_at(&renewing, now, 0.0), now + 8 * SEC);
    }

    #[test]
    fn a_tiny_range_still_holds() {
        let p = Policy {
            min_backoff: SEC,
            max_backoff: SEC,
            ..policy()
        };
        for n in [1, 5] {
            assert_eq!(p.backoff(&failure(n, false), 0.9), SEC);
        }
    }
}
