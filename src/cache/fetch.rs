//! [`Fetcher`]: one token request as the fetch task makes it: from the
//! token source, or through the token store, bounded by the fetch timeout,
//! and with a panic in either turned into an error rather than a task that
//! dies without a word.

use std::any::Any;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::time::Instant;

use super::timings::Policy;
use crate::client::TokenSource;
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::store::{FetchContext, TokenStore};
use crate::token::AccessToken;

/// What the fetch task needs, and nothing of the cache: so that a fetch
/// under way never keeps a dropped layer alive.
pub(crate) struct Fetcher {
    pub(crate) source: Arc<dyn TokenSource>,
    /// See [`StoreUse`].
    pub(crate) store: Option<StoreUse>,
    pub(crate) policy: Policy,
    /// What the store did for this layer's fetches.
    pub(crate) fleet: crate::store::FleetCounters,
}

/// A store shared with other replicas, this layer's identity in it, and the
/// key derived from the client's credential for sealing what it keeps.
pub(crate) type StoreUse = (Arc<dyn TokenStore>, String, Option<[u8; 32]>);

/// Until when the layer's token in hand may be presented, if it may be now.
pub(crate) type ServingUntil<'a> = dyn Fn() -> Option<Instant> + Send + Sync + 'a;

/// A token just fetched, and when it runs out.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) token: AccessToken,
    pub(crate) expires_at: Instant,
}

impl Fetcher {
    /// A new token: from the store when there is one (telling it first that
    /// `refused` was refused, and letting it ask until when the token in
    /// hand serves), else from the source.
    pub(crate) async fn fetch(
        &self,
        refused: Option<AccessToken>,
        serving_until: &ServingUntil<'_>,
    ) -> Result<Fetched, TokenError> {
        let Some((store, identity, sealing_key)) = &self.store else {
            // Reckoned from the moment before the request was sent.
            let sent_at = Instant::now();
            let token = self.ask_source().await?;
            let expires_at = sent_at + token.lifetime();
            return Ok(Fetched { token, expires_at });
        };
        caught("token store", async {
            if let Some(refused) = &refused {
                store.refused(identity, refused).await;
            }
            let ctx = FetchContext {
                identity,
                fetcher: self,
                sealing_key: sealing_key.as_ref(),
                serving_until,
            };
            let shared = store.get_or_fetch(&ctx).await?;
            let lifetime = shared.token.lifetime();
            let expires_at = self
                .policy
                .expires_at(lifetime, Instant::now(), shared.usable_for);
            Ok(Fetched {
                token: shared.token,
                expires_at,
            })
        })
        .await
    }

    /// One request to the source, bounded by the fetch timeout.
    pub(crate) async fn ask_source(&self) -> Result<AccessToken, TokenError> {
        let timeout = self.policy.fetch_timeout;
        caught("token source", async {
            match tokio::time::timeout(timeout, self.source.fetch_token()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(TokenError::new(TokenErrorKind::Timeout)
                    .with_message(format!("no complete answer within {timeout:?}"))),
            }
        })
        .await
    }
}

/// Runs `fut`; a panic inside it becomes an error, and `fut` is not polled
/// again.
async fn caught<T>(
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
