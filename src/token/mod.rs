//! What a token is. [`AccessToken`] is a token and what the token endpoint said
//! about it, read from the endpoint's answer in `endpoint::answer`.
//! `UsableToken`, here, is a token usable now. `params` holds `TokenParams`,
//! what a token is requested for, and `details` the authorization details
//! (RFC 9396) among them. `identity` says what makes two tokens
//! interchangeable.

pub(crate) mod details;
pub(crate) mod identity;
pub(crate) mod params;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The longest lifetime taken from `expires_in`. Longer claims are cut to this,
/// so an absurd value renews daily rather than never.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest access token taken: 16 KiB. Servers and proxies commonly cap
/// a request's headers at 8 to 16 KiB, so a longer one would fail at the API
/// on every request.
pub(crate) const MAX_TOKEN_LEN: usize = 16 * 1024;

/// A token usable at this moment, as
/// [`OAuthLayer::token_now`](crate::OAuthLayer::token_now) gives it. It holds
/// the token, and the header value a request carries, marked sensitive: `Bearer
/// <token>`, or as the layer is configured. It says how much longer the token
/// may be presented. `Debug` never shows the token.
#[derive(Clone)]
pub struct UsableToken {
    pub(crate) token: AccessToken,
    pub(crate) header: http::HeaderValue,
    pub(crate) usable_for: Duration,
}

impl UsableToken {
    /// The token and what the endpoint said about it.
    pub fn token(&self) -> &AccessToken {
        &self.token
    }

    /// The value of the header a request carries it in, marked
    /// [sensitive](http::HeaderValue::set_sensitive). It is `Bearer <token>`,
    /// or it uses the layer's
    /// [`auth_scheme`](crate::OAuthLayerBuilder::auth_scheme). For a DPoP-bound
    /// token, it is `DPoP <token>`, and each request also needs a proof of its
    /// own, from [`DpopKey::proof`](crate::dpop::DpopKey::proof).
    pub fn header_value(&self) -> &http::HeaderValue {
        &self.header
    }

    /// How much longer it may be presented, from the moment it was handed out.
    /// The layer's expiry skew is already taken off.
    pub fn usable_for(&self) -> Duration {
        self.usable_for
    }
}

impl fmt::Debug for UsableToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UsableToken")
            .field("token", &self.token)
            .field("header_value", &"[redacted]")
            .field("usable_for", &self.usable_for)
            .finish()
    }
}

use crate::policy::DEFAULT_LIFETIME;

/// An access token and what the token endpoint said about it. It is the access
/// token response of the product-information API's authentication interface,
/// section 2.
///
/// Only `access_token` is required of a response. Every other field is
/// optional, numbers may come as strings, and unknown fields are ignored.
///
/// `Debug` never shows the token itself. Reach it with
/// [`expose_token`](AccessToken::expose_token).
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::AccessToken;
///
/// let body = br#"{"access_token":"abc","token_type":"BearerToken","expires_in":"3599",
///                 "developer.email":"dev@example.com","issued_at":"1582220284531"}"#;
/// let token = AccessToken::from_json(body).unwrap();
/// assert_eq!(token.expose_token(), "abc");
/// assert_eq!(token.expires_in(), Some(Duration::from_secs(3599)));
/// assert_eq!(token.developer_email(), Some("dev@example.com"));
/// assert!(!format!("{token:?}").contains("abc"));
/// ```
#[derive(Clone)]
pub struct AccessToken {
    pub(crate) access_token: String,
    pub(crate) token_type: Option<String>,
    pub(crate) expires_in: Option<Duration>,
    pub(crate) scope: Option<String>,
    pub(crate) application_name: Option<String>,
    pub(crate) developer_email: Option<String>,
    pub(crate) issued_at: Option<String>,
    pub(crate) client_id: Option<String>,
    /// The lifetime read from the token itself (a JWT's `exp`), when the
    /// response had no `expires_in`.
    pub(crate) exp_lifetime: Option<Duration>,
    /// The server's advice on when to renew (`refresh_in`).
    pub(crate) refresh_in: Option<Duration>,
    /// When the request that brought it was sent, where that came well after
    /// its fetch began (a person's login): its lifetime counts from here.
    pub(crate) sent_at: Option<tokio::time::Instant>,
    /// What the server granted it for (RFC 9396), checked.
    pub(crate) authorization_details: Option<Arc<Value>>,
}

/// Two tokens are equal when the server said the same of them; when each was
/// fetched does not count.
impl PartialEq for AccessToken {
    fn eq(&self, other: &Self) -> bool {
        self.access_token == other.access_token
            && self.token_type == other.token_type
            && self.expires_in == other.expires_in
            && self.scope == other.scope
            && self.application_name == other.application_name
            && self.developer_email == other.developer_email
            && self.issued_at == other.issued_at
            && self.client_id == other.client_id
            && self.exp_lifetime == other.exp_lifetime
            && self.refresh_in == other.refresh_in
            && self.authorization_details == other.authorization_details
    }
}

impl Eq for AccessToken {}

impl AccessToken {
    /// A token with no metadata. Its lifetime is the product-information API's
    /// 60 minutes unless [`with_expires_in`](AccessToken::with_expires_in)
    /// says otherwise.
    pub fn new(access_token: impl Into<String>) -> Self {
        AccessToken {
            access_token: access_token.into(),
            token_type: None,
            expires_in: None,
            scope: None,
            application_name: None,
            developer_email: None,
            issued_at: None,
            client_id: None,
            exp_lifetime: None,
            refresh_in: None,
            sent_at: None,
            authorization_details: None,
        }
    }

    /// Sets the lifetime the issuer announced.
    #[must_use]
    pub fn with_expires_in(mut self, expires_in: Duration) -> Self {
        self.expires_in = Some(expires_in);
        self
    }

    /// Sets the server's advice on when to renew the token, its `refresh_in`.
    #[must_use]
    pub fn with_refresh_in(mut self, refresh_in: Duration) -> Self {
        self.refresh_in = Some(refresh_in);
        self
    }

    /// The token itself: a bearer credential. Handle it as a secret.
    pub fn expose_token(&self) -> &str {
        &self.access_token
    }

    /// `token_type` as sent, such as `bearer`, `Bearer` or `BearerToken`.
    pub fn token_type(&self) -> Option<&str> {
        self.token_type.as_deref()
    }

    /// The lifetime the issuer announced in `expires_in`, cut to 24 hours.
    /// `None` when the response had none, or an unreadable one. The layer then
    /// uses the product-information API's 60 minutes.
    pub fn expires_in(&self) -> Option<Duration> {
        self.expires_in
    }

    /// The lifetime the layer uses: [`expires_in`](AccessToken::expires_in), or
    /// the product-information API's 60 minutes without it. A JWT access token,
    /// by RFC 9068, may carry an `exp` claim that comes earlier. Then the
    /// lifetime is the time to its `exp`, cut to 24 hours. The `exp` is
    /// reckoned from the server's `Date`. It is read, not verified, since the
    /// client is not the token's audience. A JWT whose `exp` is already past is
    /// no token: the layer reports an error for it.
    pub fn lifetime(&self) -> Duration {
        let lifetime = match (self.expires_in, self.exp_lifetime) {
            (Some(announced), Some(exp)) => announced.min(exp),
            (announced, exp) => announced.or(exp).unwrap_or(DEFAULT_LIFETIME),
        };
        // A token source's own `with_expires_in` is held to the same bound.
        lifetime.min(MAX_LIFETIME)
    }

    /// `refresh_in`, where the server sends it: its advice on when to renew.
    /// The layer renews then if that is earlier than its own renewal point,
    /// but never before half the token's lifetime.
    pub fn refresh_in(&self) -> Option<Duration> {
        self.refresh_in.map(|r| r.min(MAX_LIFETIME))
    }

    /// `scope`. May be empty.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// `application_name`: the name of the client application.
    pub fn application_name(&self) -> Option<&str> {
        self.application_name.as_deref()
    }

    /// `developer.email`: the e-mail address of the application's developer.
    pub fn developer_email(&self) -> Option<&str> {
        self.developer_email.as_deref()
    }

    /// `issued_at` as sent: milliseconds since the Unix epoch, as digits.
    ///
    /// Informational only: expiry is reckoned on the local monotonic clock
    /// from the moment the request was sent, never from this value.
    pub fn issued_at(&self) -> Option<&str> {
        self.issued_at.as_deref()
    }

    /// [`issued_at`](AccessToken::issued_at) as a time, when it is a number of
    /// milliseconds.
    pub fn issued_at_time(&self) -> Option<SystemTime> {
        let ms: u64 = self.issued_at.as_deref()?.trim().parse().ok()?;
        UNIX_EPOCH.checked_add(Duration::from_millis(ms))
    }

    /// `client_id`: the identifier of the calling client.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    /// The authorization details the server granted the token for
    /// (RFC 9396, `authorization_details` in its answer): a JSON array of
    /// objects, each with its `type`. A layer's token always has those its
    /// request asked for (the same objects, in any order of members) or,
    /// where it asked for none, none: a token the server granted otherwise
    /// is refused before it is cached or used. `Debug` shows only their
    /// types.
    ///
    /// ```
    /// use tower_oauth::AccessToken;
    ///
    /// let body = br#"{"access_token":"abc","authorization_details":
    ///                 [{"type":"payment_initiation","amount":"25 EUR"}]}"#;
    /// let token = AccessToken::from_json(body).unwrap();
    /// let details = token.authorization_details().unwrap();
    /// assert_eq!(details[0]["type"], "payment_initiation");
    /// ```
    pub fn authorization_details(&self) -> Option<&Value> {
        self.authorization_details.as_deref()
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("access_token", &"[redacted]")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .field("application_name", &self.application_name)
            .field("developer_email", &self.developer_email)
            .field("issued_at", &self.issued_at)
            .field("client_id", &self.client_id)
            .field("refresh_in", &self.refresh_in)
            .field(
                "authorization_details",
                &self.authorization_details.as_deref().map(details::types),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_token() {
        let t = AccessToken::new("very-secret-token");
        assert!(!format!("{t:?}").contains("very-secret-token"));
    }
}
