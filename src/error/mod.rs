//! Errors: [`TokenError`] when a token could not be had, and [`ConfigError`]
//! when the builder was given something it cannot use.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

mod config;

pub use self::config::{ConfigError, ConfigErrorKind};

/// The longest piece of server-provided text kept in a [`TokenError`], such as
/// an error code or description. Longer text is cut, so a proxy's HTML page
/// cannot flood a log.
pub(crate) const MAX_SERVER_TEXT: usize = 200;

/// What kind of failure a [`TokenError`] is.
///
/// More kinds may be added. Match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenErrorKind {
    /// The token request could not be sent or its response not received:
    /// connection refused or reset, DNS, TLS. Retrying later can help.
    Transport,
    /// The token request did not complete within the fetch timeout, or its
    /// answer arrived so late that the token in it had already run out.
    /// Retrying later can help.
    Timeout,
    /// The token endpoint answered with a status other than success, or with a
    /// redirect, which is never followed. See [`TokenError::status`],
    /// [`TokenError::error_code`] and [`TokenError::error_description`].
    Status,
    /// The token endpoint answered success, but the body is not a usable
    /// token response: not JSON, no `access_token`, a token that cannot be
    /// sent in a header, a body over the size limit.
    InvalidResponse,
    /// The token could not be fetched because of the runtime. There is no Tokio
    /// runtime, or one without timers (`enable_time()` missing), or one that
    /// shut down.
    Runtime,
    /// The token source, the transport or the token store panicked while
    /// fetching. The message holds the panic's text. The layer backs off as
    /// for any failure, and a usable token keeps serving meanwhile.
    Panic,
    /// A client assertion or a DPoP proof could not be signed: a
    /// [`JwsSigner`](crate::client_auth::JwsSigner), such as a KMS or an HSM, failed.
    /// Retrying later can help.
    Signing,
    /// This request cannot carry the token as it is, and fails alone. The layer
    /// and its token are untouched. A DPoP proof needs the request's absolute
    /// URI, with scheme and host, which this request lacks. Sending it again
    /// unchanged does not help.
    InvalidRequest,
    /// No token is usable at this moment, and one is being fetched in the
    /// background. Only the accessors that never wait return it, such as
    /// [`OAuthLayer::token_now`](crate::OAuthLayer::token_now). Asking again
    /// shortly gets the token, as does awaiting
    /// [`OAuthLayer::token`](crate::OAuthLayer::token).
    NotReady,
    /// The client's credential could not be read. A client assertion file or a
    /// client secret file may be missing, empty, unreadable, or not what it
    /// should hold. An assertion may have expired. Or the client secret
    /// function failed. The message names the file, never its content. Retrying
    /// later can help, once the platform renews the file.
    Credential,
    /// The layer's settings do not fit what a [protected
    /// resource](crate::OAuthLayerBuilder::protected_resource) asks. Either it
    /// names no authorization server this client may send its credential to, or
    /// it takes only DPoP-bound or certificate-bound tokens and the layer has
    /// no DPoP key or client certificate. The message says which setting is
    /// missing. Retrying does not help until the settings, or the resource's
    /// metadata, change.
    Configuration,
    /// The login behind the layer's [refresh token](crate::grant::RefreshToken) has
    /// ended. The token endpoint refused the refresh token as expired, revoked,
    /// or used before. No newer one is at hand, in memory or in the token
    /// store. The message says what the server said. A new login is needed:
    /// give its refresh token to
    /// [`OAuthLayer::replace_refresh_token`](crate::OAuthLayer::replace_refresh_token).
    /// The refused refresh token is never sent again, so retrying does not help
    /// until then. A layer with a [`Login`](crate::login::Login) logs in instead.
    LoginRequired,
    /// A person's [`Login`](crate::login::Login) did not end with a token. The person
    /// refused it, it timed out, or the server cannot be used for it: no
    /// authorization endpoint, PKCE without S256, an endpoint a browser may not
    /// be sent to. Or a callback failed a check, such as a wrong `iss`. The
    /// message says which. The next token request logs in again.
    LoginFailed,
    /// A logout token handed to
    /// [`OAuthLayer::back_channel_logout`](crate::OAuthLayer::back_channel_logout)
    /// failed a check: its signature, `typ`, `iss`, `aud`, its times, its
    /// event, `sub` or `sid`, a `nonce`, or a `jti` used before (a replay).
    /// The message says which. Nothing was signed out and nothing was
    /// marked used; the app answers the server `400 Bad Request`. Sending
    /// it again unchanged does not help.
    InvalidLogoutToken,
    /// A person was asked to approve a backchannel login on their device,
    /// and has not yet; the layer does not wait
    /// ([`Backchannel::wait(false)`](crate::login::Backchannel::wait)). The
    /// message says what the person was asked (the binding message).
    /// Send the request again after
    /// [`retry_after`](TokenError::retry_after): it asks the server once,
    /// and gets the token once the person approved; this process asks the
    /// person once per login and token target.
    ApprovalPending,
}

impl TokenErrorKind {
    /// The kind as a short, stable code, such as `transport` or
    /// `invalid_response`. A store records it, and a metric's label says it.
    pub(crate) fn code(self) -> &'static str {
        match self {
            TokenErrorKind::Transport => "transport",
            TokenErrorKind::Timeout => "timeout",
            TokenErrorKind::Status => "status",
            TokenErrorKind::InvalidResponse => "invalid_response",
            TokenErrorKind::Runtime => "runtime",
            TokenErrorKind::Panic => "panic",
            TokenErrorKind::Signing => "signing",
            TokenErrorKind::InvalidRequest => "invalid_request",
            TokenErrorKind::NotReady => "not_ready",
            TokenErrorKind::Credential => "credential",
            TokenErrorKind::Configuration => "configuration",
            TokenErrorKind::LoginRequired => "login_required",
            TokenErrorKind::LoginFailed => "login_failed",
            TokenErrorKind::InvalidLogoutToken => "invalid_logout_token",
            TokenErrorKind::ApprovalPending => "approval_pending",
        }
    }

    /// The kind whose [`code`](Self::code) is `code`.
    pub(crate) fn from_code(code: &str) -> Option<Self> {
        [
            TokenErrorKind::Transport,
            TokenErrorKind::Timeout,
            TokenErrorKind::Status,
            TokenErrorKind::InvalidResponse,
            TokenErrorKind::Runtime,
            TokenErrorKind::Panic,
            TokenErrorKind::Signing,
            TokenErrorKind::InvalidRequest,
            TokenErrorKind::NotReady,
            TokenErrorKind::Credential,
            TokenErrorKind::Configuration,
            TokenErrorKind::LoginRequired,
            TokenErrorKind::LoginFailed,
            TokenErrorKind::InvalidLogoutToken,
            TokenErrorKind::ApprovalPending,
        ]
        .into_iter()
        .find(|kind| kind.code() == code)
    }

    fn as_str(self) -> &'static str {
        match self {
            TokenErrorKind::Transport => "token request failed",
            TokenErrorKind::Timeout => "token request timed out",
            TokenErrorKind::Status => "token endpoint refused the request",
            TokenErrorKind::InvalidResponse => "token endpoint sent an unusable response",
            TokenErrorKind::Runtime => "token fetch did not run",
            TokenErrorKind::Panic => "token fetch panicked",
            TokenErrorKind::Signing => "signature could not be made",
            TokenErrorKind::InvalidRequest => "request cannot carry the token",
            TokenErrorKind::NotReady => "no token is usable yet",
            TokenErrorKind::Credential => "client credential could not be read",
            TokenErrorKind::Configuration => "layer settings do not fit the protected resource",
            TokenErrorKind::LoginRequired => "a new login is needed",
            TokenErrorKind::LoginFailed => "the login did not complete",
            TokenErrorKind::InvalidLogoutToken => "the logout token was refused",
            TokenErrorKind::ApprovalPending => "the person has not approved yet",
        }
    }
}

/// A failure to obtain an access token.
///
/// The service built by [`OAuthLayer`](crate::OAuthLayer) returns
/// [`tower::BoxError`](https://docs.rs/tower/latest/tower/type.BoxError.html);
/// when the failure is about the token, that box holds a `TokenError`:
///
/// ```
/// # use tower_oauth::{TokenError, TokenErrorKind};
/// # fn handle(err: Box<dyn std::error::Error + Send + Sync>) {
/// match err.downcast_ref::<TokenError>() {
///     Some(e) if e.kind() == TokenErrorKind::Status => {
///         eprintln!("credentials refused: {e}; retry helps: {}", e.is_retryable())
///     }
///     Some(e) => eprintln!("no token: {e}"),
///     None => eprintln!("the request itself failed: {err}"),
/// }
/// # }
/// ```
///
/// A `TokenError` is cheap to clone: one fetch's error is handed to every
/// request that waited for it. Neither `Debug` nor `Display` ever shows the
/// client secret or a token: text the token endpoint sent is scrubbed of the
/// secret and cut to a bounded length.
#[derive(Clone)]
pub struct TokenError {
    inner: Arc<Inner>,
}

struct Inner {
    kind: TokenErrorKind,
    status: Option<StatusCode>,
    error_code: Option<String>,
    error_description: Option<String>,
    retry_after: Option<Duration>,
    message: Option<String>,
    backing_off: Option<Duration>,
    origin: ErrorOrigin,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

/// Where an error comes from, which says how the layer treats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorOrigin {
    /// This layer's own token request (or its source): the usual case.
    Here,
    /// Reported by another replica through a token store, not a token
    /// request of this layer's.
    AnotherReplica,
    /// This layer's own answer about a person's login, not a failure of a
    /// server's: never backed off, never shared through a store.
    LoginState,
    /// A token endpoint's success answer that does not read (a gateway's
    /// page with 200, an error body, `expires_in` 0): retried as a 503 is.
    UnreadableAnswer,
    /// This replica's own copy of what a store holds (its chain older than
    /// the newest one, a record this version does not read, a lock that ran
    /// out under it), not an answer every replica would get: backed off
    /// here, never shared through a store, since another replica may be the
    /// one to mend it.
    ThisReplica,
}

impl TokenError {
    fn from_inner(inner: Inner) -> Self {
        TokenError {
            inner: Arc::new(inner),
        }
    }

    /// An error of `kind` caused by `source`: for [`TokenSource`](crate::TokenSource)
    /// implementations. `source`'s text becomes part of this error's
    /// `Display`: keep secrets out of it.
    pub fn custom(
        kind: TokenErrorKind,
        source: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self::new(kind).with_source(source)
    }

    pub(crate) fn new(kind: TokenErrorKind) -> Self {
        Self::from_inner(Inner {
            kind,
            status: None,
            error_code: None,
            error_description: None,
            retry_after: None,
            message: None,
            backing_off: None,
            origin: ErrorOrigin::Here,
            source: None,
        })
    }

    fn map_inner(self, f: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(shared) => Inner {
                kind: shared.kind,
                status: shared.status,
                error_code: shared.error_code.clone(),
                error_description: shared.error_description.clone(),
                retry_after: shared.retry_after,
                message: shared.message.clone(),
                backing_off: shared.backing_off,
                origin: shared.origin,
                // The source cannot be cloned; keep its text.
                source: shared
                    .source
                    .as_ref()
                    .map(|s| Box::<dyn StdError + Send + Sync>::from(s.to_string())),
            },
        };
        f(&mut inner);
        Self::from_inner(inner)
    }

    /// Sets the message. Whatever it holds, its control characters are
    /// escaped and its length bounded, so no text a server slipped into it
    /// can forge log lines or flood a log.
    pub(crate) fn with_message(self, message: impl Into<String>) -> Self {
        let message = cut(&escape_controls(&message.into()), MAX_MESSAGE);
        self.map_inner(|i| i.message = Some(message))
    }

    pub(crate) fn with_source(self, source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        let source = source.into();
        self.map_inner(|i| i.source = Some(source))
    }

    pub(crate) fn with_status(
        self,
        status: StatusCode,
        code: Option<String>,
        description: Option<String>,
        retry_after: Option<Duration>,
    ) -> Self {
        self.map_inner(|i| {
            i.status = Some(status);
            i.error_code = code.map(|c| clip(&c));
            i.error_description = description.map(|d| clip(&d));
            i.retry_after = retry_after;
        })
    }

    /// The same error with the OAuth `error` code a server sent another
    /// way than in a token response (a login's callback).
    pub(crate) fn with_error_code(self, code: &str) -> Self {
        let code = clip(code);
        self.map_inner(|i| i.error_code = Some(code))
    }

    /// Whether the server's `error` says it does not take the client:
    /// `invalid_client` or `unauthorized_client` (RFC 6749 sections
    /// 4.1.2.1 and 5.2).
    pub(crate) fn refuses_client(&self) -> bool {
        matches!(
            self.error_code(),
            Some("invalid_client" | "unauthorized_client")
        )
    }

    /// Whether this is another replica's failure read from a token store.
    pub(crate) fn is_reported_by_another(&self) -> bool {
        self.inner.origin == ErrorOrigin::AnotherReplica
    }

    /// Whether this is the state of a person's login rather than a
    /// server's failure: "no login"
    /// ([`LoginRequired`](TokenErrorKind::LoginRequired)), or a callback
    /// that logged nobody in here. Never backed off, never shared.
    pub(crate) fn is_login_state(&self) -> bool {
        self.inner.origin == ErrorOrigin::LoginState
            || self.inner.kind == TokenErrorKind::LoginRequired
    }

    /// The same error, marked as the state of a person's login (see
    /// [`is_login_state`](Self::is_login_state)).
    pub(crate) fn marked_login_state(self) -> Self {
        self.map_inner(|i| i.origin = ErrorOrigin::LoginState)
    }

    /// Whether this is a token endpoint's success answer that does not
    /// read, which a gateway or a deployment under way gives for a while:
    /// retried on the schedule of a 503.
    pub(crate) fn is_unreadable_answer(&self) -> bool {
        self.inner.origin == ErrorOrigin::UnreadableAnswer
    }

    /// Whether this failure is this replica's own (see
    /// [`marked_this_replica`](Self::marked_this_replica)): never shared.
    pub(crate) fn is_this_replicas(&self) -> bool {
        self.inner.origin == ErrorOrigin::ThisReplica
    }

    /// The same error, marked as this replica's own: it comes from its copy
    /// of what a store holds, and another replica's copy may serve (a
    /// replica that holds the newest chain writes it back, which a shared
    /// failure would hold back).
    pub(crate) fn marked_this_replica(self) -> Self {
        self.map_inner(|i| i.origin = ErrorOrigin::ThisReplica)
    }

    /// The same error, marked as an answer that does not read (see
    /// [`is_unreadable_answer`](Self::is_unreadable_answer)).
    pub(crate) fn marked_unreadable(self) -> Self {
        self.map_inner(|i| i.origin = ErrorOrigin::UnreadableAnswer)
    }

    /// The detail after the kind in `Display`: the message, or else the
    /// source's text.
    pub(crate) fn detail(&self) -> Option<String> {
        let i = &self.inner;
        i.message
            .clone()
            .or_else(|| i.source.as_ref().map(|s| s.to_string()))
    }

    /// The same error, marked as returned while the layer backs off for `left`.
    pub(crate) fn during_backoff(&self, left: Duration) -> Self {
        self.clone().map_inner(|i| i.backing_off = Some(left))
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> TokenErrorKind {
        self.inner.kind
    }

    /// The HTTP status the token endpoint answered with, for
    /// [`TokenErrorKind::Status`].
    pub fn status(&self) -> Option<StatusCode> {
        self.inner.status
    }

    /// The endpoint's error code, such as `invalid_client`. It is read from any
    /// of the error body shapes in use: `{"error": ..}`, `{"ErrorCode": ..}`,
    /// or `{"fault": {"detail": {"errorcode": ..}}}`.
    pub fn error_code(&self) -> Option<&str> {
        self.inner.error_code.as_deref()
    }

    /// The endpoint's human-readable error text, cut to a bounded length. It is
    /// read from `error_description`, `Error` or `fault.faultstring`.
    pub fn error_description(&self) -> Option<&str> {
        self.inner.error_description.as_deref()
    }

    /// The delay the endpoint asked for with `Retry-After`, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// `Some(left)` when this error was returned without a new token request,
    /// because the layer is backing off after this failure. `left` is how long
    /// the back-off still lasts.
    pub fn backing_off(&self) -> Option<Duration> {
        self.inner.backing_off
    }

    /// Whether trying again later can help.
    ///
    /// True for transport failures, time-outs, an approval not given yet,
    /// and the statuses that signal a passing condition: 408, 429 and 5xx. False for refused credentials, such
    /// as 400, 401 and 403, for unusable responses, and for runtime failures.
    pub fn is_retryable(&self) -> bool {
        match self.inner.kind {
            TokenErrorKind::Transport
            | TokenErrorKind::Timeout
            | TokenErrorKind::Signing
            | TokenErrorKind::NotReady
            | TokenErrorKind::Credential
            | TokenErrorKind::ApprovalPending => true,
            TokenErrorKind::Status => self.inner.status.is_some_and(|s| {
                s == StatusCode::REQUEST_TIMEOUT
                    || s == StatusCode::TOO_MANY_REQUESTS
                    || s.is_server_error()
            }),
            TokenErrorKind::InvalidResponse
            | TokenErrorKind::Runtime
            | TokenErrorKind::Panic
            | TokenErrorKind::InvalidRequest
            | TokenErrorKind::Configuration
            | TokenErrorKind::LoginRequired
            | TokenErrorKind::LoginFailed
            | TokenErrorKind::InvalidLogoutToken => false,
        }
    }
}

/// What a token store sets on the errors it shares.
impl TokenError {
    /// Sets how long the endpoint, or another replica, asks to wait.
    pub(crate) fn with_retry_after(self, after: Duration) -> Self {
        self.map_inner(|i| i.retry_after = Some(after))
    }

    /// The same error, marked as another replica's failure read back from a
    /// token store. The layer waits out what is left of the fleet's hold, its
    /// [`retry_after`](Self::retry_after). It does not count the error as a
    /// failure of its own.
    pub(crate) fn reported_by_another(self) -> Self {
        self.map_inner(|i| i.origin = ErrorOrigin::AnotherReplica)
    }
}

/// `text` from a server, trimmed, and cut to [`MAX_SERVER_TEXT`] bytes. Its
/// control characters are escaped, such as `\r`, `\n` and `\u{1b}`, so it
/// cannot forge a log line or a terminal sequence.
pub(crate) fn clip(text: &str) -> String {
    cut(&escape_controls(text.trim()), MAX_SERVER_TEXT)
}

/// `text` with every control character escaped as Rust writes it, such as `\r`,
/// `\n`, `\t` and `\u{1b}`. The rest stays as it is.
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` cut to at most `max` bytes, on a character boundary, with `...` where
/// it was cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The longest message a [`TokenError`] keeps. Messages name server text, each
/// piece clipped, inside a sentence of ours.
const MAX_MESSAGE: usize = 2048;

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.write_str(i.kind.as_str())?;
        if let Some(status) = i.status {
            write!(f, " with HTTP {status}")?;
        }
        match (&i.error_code, &i.error_description) {
            (Some(c), Some(d)) => write!(f, " ({c}: {d})")?,
            (Some(t), None) | (None, Some(t)) => write!(f, " ({t})")?,
            (None, None) => {}
        }
        // The message, when there is one, already tells the source's story.
        if let Some(m) = &i.message {
            write!(f, ": {m}")?;
        } else if let Some(s) = &i.source {
            write!(f, ": {s}")?;
        }
        if let Some(after) = i.retry_after {
            write!(f, "; retry after {:.1}s", after.as_secs_f64())?;
        }
        if let Some(left) = i.backing_off {
            write!(
                f,
                "; no new token request for {:.1}s (backing off)",
                left.as_secs_f64()
            )?;
        }
        Ok(())
    }
}

impl fmt::Debug for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        let mut d = f.debug_struct("TokenError");
        d.field("kind", &i.kind);
        if let Some(s) = i.status {
            d.field("status", &s);
        }
        if let Some(c) = &i.error_code {
            d.field("error_code", c);
        }
        if let Some(c) = &i.error_description {
            d.field("error_description", c);
        }
        if let Some(r) = i.retry_after {
            d.field("retry_after", &r);
        }
        if let Some(m) = &i.message {
            d.field("message", m);
        }
        if let Some(b) = i.backing_off {
            d.field("backing_off", &b);
        }
        if let Some(s) = &i.source {
            d.field("source", &s.to_string());
        }
        d.finish()
    }
}

impl StdError for TokenError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .source
            .as_ref()
            .map(|s| &**s as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_status_code_and_text() {
        let e = TokenError::new(TokenErrorKind::Status).with_status(
            StatusCode::UNAUTHORIZED,
            Some("invalid_client".into()),
            Some("ClientId is Invalid".into()),
            None,
        );
        assert_eq!(
            e.to_string(),
            "token endpoint refused the request with HTTP 401 Unauthorized \
             (invalid_client: ClientId is Invalid)"
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn retryable_by_status() {
        let with = |s: u16| {
            TokenError::new(TokenErrorKind::Status).with_status(
                StatusCode::from_u16(s).unwrap(),
                None,
                None,
                None,
            )
        };
        assert!(with(429).is_retryable());
        assert!(with(503).is_retryable());
        assert!(with(500).is_retryable());
        assert!(!with(400).is_retryable());
        assert!(!with(302).is_retryable());
        assert!(TokenError::new(TokenErrorKind::Timeout).is_retryable());
    }

    #[test]
    fn server_text_is_clipped() {
        let long = "x".repeat(10_000);
        let e = TokenError::new(TokenErrorKind::Status).with_status(
            StatusCode::BAD_REQUEST,
            Some("bad".into()),
            Some(format!("wrong {long}")),
            None,
        );
        assert!(e.error_description().unwrap().len() <= MAX_SERVER_TEXT + 3);
    }

    #[test]
    fn every_kind_reads_back_from_its_code() {
        for code in [
            "transport",
            "timeout",
            "status",
            "invalid_response",
            "runtime",
            "panic",
            "signing",
            "invalid_request",
            "not_ready",
            "credential",
            "configuration",
            "login_required",
            "login_failed",
            "invalid_logout_token",
        ] {
            assert_eq!(TokenErrorKind::from_code(code).unwrap().code(), code);
        }
        assert_eq!(TokenErrorKind::from_code("other"), None);
    }

    #[test]
    fn backing_off_keeps_kind_and_says_so() {
        let e = TokenError::new(TokenErrorKind::Timeout);
        let b = e.during_backoff(Duration::from_millis(1500));
        assert_eq!(b.kind(), TokenErrorKind::Timeout);
        assert_eq!(b.backing_off(), Some(Duration::from_millis(1500)));
        assert!(b
            .to_string()
            .ends_with("no new token request for 1.5s (backing off)"));
        assert_eq!(e.backing_off(), None);
    }
}
