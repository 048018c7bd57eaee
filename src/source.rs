//! The token source seam: the [`TokenSource`] trait every token comes
//! through (the client-credentials request is one), and [`ask_counted`],
//! one call to a source bounded by the fetch timeout, counted, with a panic
//! turned into an error.

use std::any::Any;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use crate::endpoint::check_token;
use crate::endpoint::TokenRequest;
use crate::endpoint::{Discovery, ResourceSource};
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::support::boxed::BoxFuture;
use crate::token::AccessToken;

/// Anything that can produce an access token: the seam for another grant, a
/// vault, a sidecar, or a test double.
///
/// An [`OAuthLayer`](crate::OAuthLayer) built with
/// [`OAuthLayerBuilder::token_source`](crate::OAuthLayerBuilder::token_source)
/// keeps all its caching, single flight, renewal ahead, back-off and 401
/// handling for the source; the source only fetches. The layer calls it at
/// most once at a time, on a task of its own, under
/// [`fetch_timeout`](crate::OAuthLayerBuilder::fetch_timeout).
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenErrorKind, TokenSource};
///
/// /// Tokens from a file a sidecar keeps fresh.
/// struct FromFile(std::path::PathBuf);
///
/// impl TokenSource for FromFile {
///     fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
///         Box::pin(async move {
///             let token = tokio::fs::read_to_string(&self.0)
///                 .await
///                 .map_err(|e| TokenError::custom(TokenErrorKind::Transport, e))?;
///             Ok(AccessToken::new(token.trim()).with_expires_in(Duration::from_secs(300)))
///         })
///     }
/// }
///
/// let oauth = OAuthLayer::builder()
///     .token_source(FromFile("/run/secrets/token".into()))
///     .build()
///     .unwrap();
/// ```
pub trait TokenSource: Send + Sync + 'static {
    /// Fetches a new token.
    ///
    /// # Errors
    ///
    /// A [`TokenError`] saying what went wrong. Its
    /// [`retry_after`](TokenError::retry_after) sets the back-off.
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>>;
}

/// The client-credentials request to a token URL.
impl TokenSource for TokenRequest {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        self.fetch()
    }
}

/// The client-credentials request to the endpoint an issuer names.
impl TokenSource for Discovery {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        self.fetch()
    }
}

/// The metadata of a protected resource, then the client-credentials
/// request to the endpoint of the server it names.
impl TokenSource for ResourceSource {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        self.fetch()
    }
}

/// One request to `source`, bounded by `timeout`, counted in `sent` and
/// reported (by outcome, with its duration) to the metrics as a token
/// request. A panic of the source is an error, and so is a token that
/// cannot be sent as it is ([`check_token`]): before anything caches or
/// shares it.
pub(crate) async fn ask_counted(
    source: &dyn TokenSource,
    timeout: Duration,
    sent: &AtomicU64,
) -> Result<AccessToken, TokenError> {
    sent.fetch_add(1, Ordering::Relaxed);
    let started = tokio::time::Instant::now();
    let outcome = caught("token source", async {
        match tokio::time::timeout(timeout, source.fetch_token()).await {
            Ok(outcome) => {
                let token = outcome?;
                check_token(token.expose_token(), token.token_type())?;
                Ok(token)
            }
            Err(_) => Err(TokenError::new(TokenErrorKind::Timeout)
                .with_message(format!("no complete answer within {timeout:?}"))),
        }
    })
    .await;
    crate::telemetry::token_request(&outcome, started.elapsed());
    outcome
}

/// Runs `fut`. A panic inside it becomes an error, and `fut` is not polled
/// again.
pub(crate) async fn caught<T>(
    what: &str,
    fut: impl Future<Output = Result<T, TokenError>>,
) -> Result<T, TokenError> {
    let mut fut = pin!(fut);
    poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(payload) => Poll::Ready(Err(panicked(what, payload.as_ref()))),
        },
    )
    .await
}

/// The error for a panic with `payload` inside the `what`.
fn panicked(what: &str, payload: &(dyn Any + Send)) -> TokenError {
    let text = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    if text.contains("timers are disabled") {
        // `tokio::time::timeout` on a runtime built without its time driver.
        return TokenError::new(TokenErrorKind::Runtime).with_message(
            "the Tokio runtime this layer fetches on has no timers, which bound every token \
             request: build it with `enable_time()` or `enable_all()`",
        );
    }
    TokenError::new(TokenErrorKind::Panic)
        .with_message(format!("the {what} panicked: {}", clip(text)))
}
