//! A request's way to its token for callers outside the Tower service (the
//! reqwest middleware, the MCP client), with the cache itself as the
//! handle: the token at hand or awaited from the single flight, its proof,
//! and what the answer said; through `authorize`, as the service's.
#![cfg_attr(
    not(any(feature = "reqwest-middleware", feature = "mcp")),
    allow(dead_code)
)]

use std::sync::Arc;

use crate::cache::TokenCache;
use crate::error::TokenError;
use crate::message::{Answer, Outgoing};
use crate::service::authorize::{authorize, put_proof, CacheHandle, NextStep, Sent, TokenAnswer};

/// Puts the token of `cache` at hand (and its proof) on `req`, if it may be
/// sent now; `None`: none is, wait with [`after_waiting`].
#[inline]
pub(crate) fn at_hand<'c, R: Outgoing>(
    cache: &'c Arc<TokenCache>,
    req: &mut R,
) -> Option<NextStep<&'c Arc<TokenCache>>> {
    let current = cache.current().load();
    cache
        .check(current.as_deref(), tokio::time::Instant::now())
        .map(|token| authorize(req, cache, token))
}

/// Puts the token of `cache` on `req` once the cache's single flight has
/// one.
pub(crate) async fn after_waiting<'c, R: Outgoing>(
    cache: &'c Arc<TokenCache>,
    req: &mut R,
) -> Result<NextStep<&'c Arc<TokenCache>>, TokenError> {
    let token = cache.token().await?;
    Ok(authorize(req, cache, &token))
}

/// What `req` was sent with, once `step` is done: at once, or after a slow
/// signer's proof.
pub(crate) async fn ready_to_send<'c, R: Outgoing>(
    step: NextStep<&'c Arc<TokenCache>>,
    req: &mut R,
) -> Result<Sent<&'c Arc<TokenCache>>, TokenError> {
    match step {
        NextStep::Send(sent) => Ok(sent),
        NextStep::Sign(proved, proof) => {
            put_proof(req, proof.await?);
            Ok(Sent::Proved(proved))
        }
        NextStep::Fail(error) => Err(error),
    }
}

impl<L: CacheHandle> Sent<L> {
    /// What the API's answer said of the credential sent (the Tower
    /// service's future reads each kind in its own state).
    #[inline]
    pub(crate) fn answered(&self, response: &mut impl Answer) -> TokenAnswer {
        match self {
            Sent::Token(sent) => sent.answered(response),
            Sent::Proved(proved) => proved.answered(response),
        }
    }
}

impl TokenAnswer {
    /// Whether sending the request once more would carry what the answer
    /// asked for: a new token (or one with more scope), or the nonce.
    pub(crate) fn asks_again(self) -> bool {
        matches!(
            self,
            TokenAnswer::Refused | TokenAnswer::UseNonce | TokenAnswer::SteppedUp
        )
    }
}
