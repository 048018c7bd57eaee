//! Putting a token on a request, and naming what was sent: the one place a
//! request gets its credential (and its DPoP proof), whichever path it took
//! to the token (its layer's default token or a slot's, at once or after a
//! wait), and reads what the API said of it.

use std::sync::Arc;

use http::{HeaderValue, Request, Response};

use crate::boxed::BoxFuture;
use crate::cache::{CachedToken, Link};
use crate::error::TokenError;

/// A token sent with a request: if the API refuses it, the cache drops it
/// (if it is still the current one) and fetches another.
#[derive(Debug)]
pub(crate) struct SentToken {
    link: Arc<Link>,
    generation: u64,
    /// Where a request with a DPoP proof went, to keep the nonce its answer
    /// brings.
    target: Option<crate::dpop::Htu>,
}

impl SentToken {
    /// Reads the API's answer: a refused token (HTTP 401, gRPC
    /// `UNAUTHENTICATED`) is dropped from the cache, which fetches another;
    /// with DPoP, a new nonce is kept, and a 401 that asks for a nonce or
    /// refuses only the proof leaves the token alone.
    #[inline]
    pub(crate) fn answered<B>(&self, response: &Response<B>) {
        if let Some(target) = &self.target {
            return self.answered_with_proof(target, response);
        }
        if crate::refusal::is_unauthorized(response) {
            self.link.cache.refused(self.generation);
        }
    }

    /// [`answered`](Self::answered), for a request that carried a DPoP
    /// proof for `target`.
    #[inline(never)]
    fn answered_with_proof<B>(&self, target: &crate::dpop::Htu, response: &Response<B>) {
        use crate::dpop::Verdict;
        let Some(dpop) = &self.link.cache.placement().dpop else {
            return;
        };
        match dpop.answered(target, response) {
            Verdict::Accepted => {}
            Verdict::UseNonce => {
                self.link.cache.count_nonce_challenge();
                tracing::debug!(
                    origin = target.origin(),
                    "the API asked for a new DPoP nonce; the token stays"
                );
            }
            Verdict::InvalidProof => {
                tracing::warn!(
                    origin = target.origin(),
                    "the API refused the DPoP proof (invalid_dpop_proof), not the token; \
                     check this host's clock"
                );
            }
            Verdict::Refused => self.link.cache.refused(self.generation),
        }
    }
}

/// What a request needs before it goes to the inner service.
pub(crate) enum Step {
    /// Nothing: send it.
    Send(SentToken),
    /// Its DPoP proof, which a custom signer is making: put it in the
    /// [`DPOP`](crate::dpop::DPOP) header, then send.
    Sign(
        SentToken,
        BoxFuture<'static, Result<HeaderValue, TokenError>>,
    ),
    /// It cannot carry the token; it fails alone.
    Fail(TokenError),
}

/// Puts `token` on `req`, replacing a header of that name, with a DPoP
/// proof when the token is bound to the layer's key; says what the request
/// needs next.
#[inline]
pub(crate) fn authorize<B>(req: &mut Request<B>, link: &Arc<Link>, token: &CachedToken) -> Step {
    if let (Some(dpop), Some(ath)) = (&link.cache.placement().dpop, &token.ath) {
        let sent = bearer(req, link, token);
        return prove(dpop, req, ath, sent, token.timings.usable_until);
    }
    Step::Send(bearer(req, link, token))
}

/// Puts `token` on `req`, replacing a header of that name, and names what
/// was sent: all a request needs unless its token is DPoP-bound
/// ([`CachedToken::needs_proof`]).
#[inline]
pub(crate) fn bearer<B>(req: &mut Request<B>, link: &Arc<Link>, token: &CachedToken) -> SentToken {
    req.headers_mut().insert(
        link.cache.placement().header_name.clone(),
        token.header.clone(),
    );
    SentToken {
        link: Arc::clone(link),
        generation: token.generation,
        target: None,
    }
}

/// Puts the DPoP proof a custom signer made for `req` on it ([`Step::Sign`]).
#[inline]
pub(crate) fn put_proof<B>(req: &mut Request<B>, proof: HeaderValue) {
    // Without DPoP no step signs, and there is no proof to put.
    req.headers_mut().insert(crate::dpop::DPOP, proof);
}

/// Adds the DPoP proof of `req` (see [`crate::dpop`]), for a token usable
/// until `usable_until`.
#[inline(never)]
fn prove<B>(
    dpop: &crate::dpop::Dpop,
    req: &mut Request<B>,
    ath: &str,
    mut sent: SentToken,
    usable_until: tokio::time::Instant,
) -> Step {
    use crate::dpop::Proof;
    match dpop.prove(req, ath, usable_until) {
        Ok((Proof::Ready(value), target)) => {
            req.headers_mut().insert(crate::dpop::DPOP, value);
            sent.target = Some(target);
            Step::Send(sent)
        }
        Ok((Proof::Signing(signing), target)) => {
            sent.target = Some(target);
            Step::Sign(sent, signing)
        }
        Err(error) => Step::Fail(error),
    }
}
