//! The builder's settings: when tokens are renewed, and how failures back off.

use std::time::Duration;

use super::OAuthLayerBuilder;

/// When tokens are renewed and how long a token request may take. How
/// failures back off. Every duration is taken up to
/// 24 hours.
impl OAuthLayerBuilder {
    /// How long before expiry a request starts renewing the token in the
    /// background. The request goes on at once with the current token. A small
    /// random part, up to a tenth of the margin, is added, so that many clients
    /// do not renew in step. Honoured up to half the token's lifetime.
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 5 minutes.
    pub fn refresh_margin(mut self, refresh_margin: Duration) -> Self {
        self.refresh_margin = Some(refresh_margin);
        self
    }

    /// How long before expiry a token is no longer presented, to allow for
    /// clock drift and the request's time in flight. Honoured up to a tenth of
    /// the token's lifetime.
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 10 seconds.
    pub fn expiry_skew(mut self, expiry_skew: Duration) -> Self {
        self.expiry_skew = Some(expiry_skew);
        self
    }

    /// How far the clocks of this host and the authorization server may
    /// differ when an ID token's or a logout token's `exp` and `iat` are
    /// checked (OpenID Connect Core 1.0 section 3.1.3.7). At most 5 minutes.
    ///
    /// Default: 60 seconds.
    pub fn id_token_clock_skew(mut self, skew: Duration) -> Self {
        self.id_token_clock_skew = Some(skew);
        self
    }

    /// The longest a token request may take, from connecting to reading the
    /// last byte of the answer. Separate from any time-out on the requests it
    /// serves. Must be more than zero.
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 10 seconds.
    pub fn fetch_timeout(mut self, fetch_timeout: Duration) -> Self {
        self.fetch_timeout = Some(fetch_timeout);
        self
    }

    /// How long a refresh request, once sent, is awaited to its answer,
    /// past [`fetch_timeout`](Self::fetch_timeout) if need be. A server
    /// that rotates refresh tokens retires the one sent when the request
    /// arrives; its answer carries the only copy of the new one. Dropped,
    /// the next refresh would send the retired one, and a server with reuse
    /// detection (RFC 9700 section 4.14.2) would revoke the login. So the
    /// answer is awaited on a task of its own, with the chain's turn (and a
    /// store's lock) held: no other refresh is sent meanwhile, here or on
    /// another replica. Requests waiting for the token get a `Timeout` by
    /// the fetch's own bound (four fetch timeouts and 4 s); the answer, when
    /// it comes, is kept: its refresh token stored, its access token served
    /// by the next fetch. It bounds the whole refresh (the request, its
    /// DPoP retry, an ID token's check). Taken as at least the fetch timeout.
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 60 seconds.
    pub fn refresh_answer_timeout(mut self, timeout: Duration) -> Self {
        self.refresh_answer_timeout = Some(timeout);
        self
    }

    /// After the API answers `401 Unauthorized`, the token that was sent is
    /// dropped and a new one fetched, at most once per this interval. A 401
    /// within the interval after such a renewal leaves the token in place. So
    /// an API that refuses every token costs one token request per interval,
    /// not one per request. That happens, for instance, when the application is
    /// not subscribed to the API.
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 10 seconds.
    pub fn forced_renewal_interval(mut self, interval: Duration) -> Self {
        self.forced_renewal_interval = Some(interval);
        self
    }

    /// The first delay after a failed token request before another is made.
    /// Each further failure in a row doubles it, with jitter, up to
    /// [`max_backoff`](Self::max_backoff). While no token serves and the
    /// failure can heal, retries come steadily instead, a little before each
    /// `min_backoff`: at 0.8 to 0.95 of it. So requests recover within
    /// `min_backoff` of the endpoint's return. Failures that can heal are 5xx,
    /// 429, time-outs, transport errors and answers that do not read (an
    /// HTML page with status 200, an error body, `expires_in` 0). A `Retry-After` from the endpoint
    /// takes precedence, up to one hour. Must be more than zero.
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 1 second.
    pub fn min_backoff(mut self, delay: Duration) -> Self {
        self.min_backoff = Some(delay);
        self
    }

    /// The longest delay between failed token requests, without
    /// `Retry-After`. Must be at least [`min_backoff`](Self::min_backoff).
    ///
    /// Anything longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 60 seconds.
    pub fn max_backoff(mut self, delay: Duration) -> Self {
        self.max_backoff = Some(delay);
        self
    }
}
