//! Putting a token on a request, and reading what the API said of it.
//!
//! This is the one place a request gets its credential and its DPoP proof. It
//! does not matter which path the request took to the token: its layer's
//! default token or a slot's, at once or after a wait. Nor does it matter which
//! way it travels: the Tower service and the reqwest middleware both send
//! [`Outgoing`] requests, and both read their [`Answer`] here.

use std::sync::Arc;

use http::{HeaderValue, Method, StatusCode};

use crate::cache::{CacheRef, CachedToken, TokenCache};
use crate::error::TokenError;
use crate::message::challenge::{
    challenges, insufficient, insufficient_scope, insufficient_user_authentication,
};
use crate::message::{is_unauthorized, may_be_grpc, Answer, Outgoing};
use crate::support::boxed::BoxFuture;

/// How a sent token reaches its cache: a service instance's own [`CacheRef`]
/// (the Tower path), or the cache itself, borrowed for the request's whole
/// way (the middleware).
pub(crate) trait CacheHandle: Clone {
    /// The cache the token came from.
    fn cache(&self) -> &Arc<TokenCache>;
}

impl CacheHandle for Arc<CacheRef> {
    #[inline]
    fn cache(&self) -> &Arc<TokenCache> {
        &self.cache
    }
}

impl CacheHandle for &Arc<TokenCache> {
    #[inline]
    fn cache(&self) -> &Arc<TokenCache> {
        self
    }
}

/// What the API's answer said of the credential that was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenAnswer {
    /// Nothing to do (a refused DPoP proof is logged: a new token would
    /// not help).
    Accepted,
    /// The token was refused, and dropped from its cache (or replaced
    /// already): another one comes.
    Refused,
    /// The token was refused, and stays: its renewal is rate-limited, so
    /// the request would go again with the very token refused.
    RefusedAgain,
    /// The API asked for a DPoP nonce, which is kept: a new proof would
    /// carry it.
    UseNonce,
    /// The API asked for more scope (`403 insufficient_scope`), which the
    /// layer may add: a token with it comes.
    SteppedUp,
}

/// A token sent with a request: if the API refuses it, the cache drops it
/// (if it is still the current one) and fetches another. Two words, so
/// that the response future of a request that carries one stays small
/// (with a third, it grew past what the compiler moves inline).
#[derive(Debug)]
pub(crate) struct SentToken<L = Arc<CacheRef>> {
    cache_ref: L,
    /// The token's generation, and in the top bit whether the request
    /// [may be a gRPC call](crate::message::may_be_grpc): only then may a
    /// `200` answer be a gRPC refusal, which costs a header lookup to see.
    /// (A cache numbers its tokens from 1, one at a time: the top bit is
    /// never a generation's.)
    mark: u64,
}

/// The bit of [`SentToken::mark`] that says the request may be a gRPC call.
const GRPC: u64 = 1 << 63;

impl<L: CacheHandle> SentToken<L> {
    /// The token of `generation`, sent from `cache_ref`'s cache with a request
    /// of `method`.
    #[inline]
    pub(crate) fn new(cache_ref: L, generation: u64, method: &Method) -> Self {
        let grpc = if may_be_grpc(method) { GRPC } else { 0 };
        SentToken {
            cache_ref,
            mark: generation | grpc,
        }
    }

    /// The generation of the token sent.
    fn generation(&self) -> u64 {
        self.mark & !GRPC
    }

    /// Whether the request may be a gRPC call (see [`mark`](Self::mark)).
    fn grpc(&self) -> bool {
        self.mark & GRPC != 0
    }

    /// Reads the API's answer: a refused token (HTTP 401, gRPC
    /// `UNAUTHENTICATED`) is dropped from the cache, which fetches another.
    ///
    /// A refusal that sending again cannot help is marked on the answer
    /// ([`Answer::mark_no_new_token`]).
    #[inline]
    pub(crate) fn answered(&self, response: &mut impl Answer) -> TokenAnswer {
        if is_unauthorized(response, self.grpc()) {
            return self.refused(response);
        }
        if response.status() == StatusCode::FORBIDDEN {
            return self.forbidden(response);
        }
        TokenAnswer::Accepted
    }

    /// A `403`: with an `insufficient_scope` challenge, and a layer that
    /// may add scopes, the token is asked for again with more scope.
    #[cold]
    #[inline(never)]
    fn forbidden(&self, response: &mut impl Answer) -> TokenAnswer {
        let cache = self.cache_ref.cache();
        if !cache.steps_up() {
            return TokenAnswer::Accepted;
        }
        let Some(asked) = insufficient_scope(response.headers()) else {
            return TokenAnswer::Accepted;
        };
        self.insufficient(response, Some(&asked))
    }

    /// The API said the token has too little scope (`insufficient_scope`,
    /// on a `403` or a `401`), asking for `asked`: a token with more scope
    /// comes if the layer may add it; else no token request is made (one
    /// with the same scope could not help), and the answer goes back marked
    /// as one that sending again cannot help.
    fn insufficient(&self, response: &mut impl Answer, asked: Option<&str>) -> TokenAnswer {
        let cache = self.cache_ref.cache();
        if !asked.is_some_and(|asked| cache.step_up(self.generation(), asked)) {
            response.mark_no_new_token();
            return TokenAnswer::RefusedAgain;
        }
        response.mark_stepped_up();
        TokenAnswer::SteppedUp
    }

    /// The API refused the token: its cache drops it, unless its renewal is
    /// rate-limited, when the answer goes back marked as one that sending
    /// again cannot help.
    #[cold]
    #[inline(never)]
    fn refused(&self, response: &mut impl Answer) -> TokenAnswer {
        // Not a token the API does not take: one with too little scope,
        // handled as on a `403`.
        if let Some(asked) = insufficient(response.headers()) {
            return self.insufficient(response, asked.as_deref());
        }
        // Nor one whose person signed in too long ago or too weakly (RFC
        // 9470): the person's login runs again asking for that, where the
        // layer has one that can; else the token stays, and neither a new
        // one nor the same request again can help: the answer goes back
        // with its challenge.
        if let Some((acr_values, max_age)) = insufficient_user_authentication(response.headers()) {
            let cache = self.cache_ref.cache();
            let asked = (acr_values.as_deref(), max_age.as_deref());
            if cache.reauthenticate(self.generation(), asked) {
                response.mark_stepped_up();
                return TokenAnswer::SteppedUp;
            }
            tracing::warn!(
                acr_values = acr_values.as_deref().unwrap_or_default(),
                max_age = max_age.as_deref().unwrap_or_default(),
                "the API asks for a stronger or more recent sign-in of the person \
                 (insufficient_user_authentication, RFC 9470), which this layer cannot \
                 meet (no person's login, one that cannot ask for it, or just asked); the \
                 answer goes back with the challenge, the token stays"
            );
            response.mark_no_new_token();
            return TokenAnswer::RefusedAgain;
        }
        let cache = self.cache_ref.cache();
        if cache.reads_refusals() {
            cache.refused_with(&challenges(response.headers()));
        }
        let Some(wait) = cache.refused(self.generation()) else {
            return TokenAnswer::Refused;
        };
        tracing::info!(
            ?wait,
            "the API refused the token again; the next renewal is rate-limited for this \
             long (forced_renewal_interval), so the refusal goes back to the caller as it is, \
             not sent again with the same token"
        );
        response.mark_no_new_token();
        TokenAnswer::RefusedAgain
    }
}

/// A DPoP-bound token sent with its proof for `target`: the answer may
/// also bring a nonce, or refuse only the proof.
#[derive(Debug)]
pub(crate) struct ProvedToken<L = Arc<CacheRef>> {
    sent: SentToken<L>,
    /// Where the request went, to keep the nonce its answer brings.
    target: crate::dpop::Htu,
}

impl<L: CacheHandle> ProvedToken<L> {
    /// Reads the API's answer as [`SentToken::answered`] does. Besides, a
    /// new nonce is kept, and a 401 that asks for a nonce or refuses only
    /// the proof leaves the token alone.
    #[inline(never)]
    pub(crate) fn answered(&self, response: &mut impl Answer) -> TokenAnswer {
        use crate::dpop::DpopAnswer;
        let target = &self.target;
        let cache = self.sent.cache_ref.cache();
        let Some(dpop) = &cache.placement().dpop else {
            return TokenAnswer::Accepted;
        };
        match dpop.answered(target, response, self.sent.grpc()) {
            DpopAnswer::Accepted if response.status() == StatusCode::FORBIDDEN => {
                self.sent.forbidden(response)
            }
            DpopAnswer::Accepted => TokenAnswer::Accepted,
            DpopAnswer::UseNonce => {
                cache.count_nonce_challenge();
                tracing::debug!(
                    origin = target.origin(),
                    "the API asked for a new DPoP nonce; the token stays"
                );
                TokenAnswer::UseNonce
            }
            DpopAnswer::InvalidProof => {
                tracing::warn!(
                    origin = target.origin(),
                    "the API refused the DPoP proof (invalid_dpop_proof), not the token; \
                     check this host's clock"
                );
                TokenAnswer::Accepted
            }
            DpopAnswer::Refused => self.sent.refused(response),
        }
    }
}

/// A token sent with a request, with a DPoP proof or without.
#[derive(Debug)]
pub(crate) enum Sent<L = Arc<CacheRef>> {
    /// A bearer token (or the layer's scheme).
    Token(SentToken<L>),
    /// A DPoP-bound token with its proof.
    Proved(ProvedToken<L>),
}

/// What a request needs before it goes on.
pub(crate) enum NextStep<L = Arc<CacheRef>> {
    /// Nothing: send it.
    Send(Sent<L>),
    /// Its DPoP proof, which a custom signer is making: put it on the
    /// request with [`put_proof`], then send.
    Sign(
        ProvedToken<L>,
        BoxFuture<'static, Result<HeaderValue, TokenError>>,
    ),
    /// It cannot carry the token. It fails alone.
    Fail(TokenError),
}

/// Puts `token` on `req`, replacing a header of that name, with a DPoP
/// proof when the token is bound to the layer's key. Says what the request
/// needs next. `cache_ref` goes with the request to its answer.
#[inline]
pub(crate) fn authorize<R: Outgoing, L: CacheHandle>(
    req: &mut R,
    cache_ref: L,
    token: &CachedToken,
) -> NextStep<L> {
    if let (Some(dpop), Some(ath)) = (&cache_ref.cache().placement().dpop, &token.ath) {
        let sent = bearer(req, cache_ref.clone(), token);
        return prove(dpop, req, ath, sent, token.timings.usable_until);
    }
    NextStep::Send(Sent::Token(bearer(req, cache_ref, token)))
}

/// Puts `token` on `req`, replacing a header of that name, and names what
/// was sent: all a request needs unless its token is DPoP-bound
/// ([`CachedToken::needs_proof`]).
#[inline]
pub(crate) fn bearer<R: Outgoing, L: CacheHandle>(
    req: &mut R,
    cache_ref: L,
    token: &CachedToken,
) -> SentToken<L> {
    put_header(req, cache_ref, token.header.clone(), token.generation)
}

/// Puts `header`, the header value of the token of `generation` (or a
/// service instance's copy of it), on `req`, replacing a header of that
/// name, and names what was sent.
#[inline]
pub(crate) fn put_header<R: Outgoing, L: CacheHandle>(
    req: &mut R,
    cache_ref: L,
    header: HeaderValue,
    generation: u64,
) -> SentToken<L> {
    cache_ref.cache().placement().put(req.headers_mut(), header);
    SentToken::new(cache_ref, generation, req.method())
}

/// Puts the DPoP proof a custom signer made for `req` on it ([`NextStep::Sign`]).
#[inline]
pub(crate) fn put_proof(req: &mut impl Outgoing, proof: HeaderValue) {
    req.headers_mut().insert(crate::dpop::DPOP, proof);
}

/// Adds the DPoP proof of `req` (see [`crate::dpop`]), for a token usable
/// until `usable_until`.
#[inline(never)]
fn prove<R: Outgoing, L>(
    dpop: &crate::dpop::Dpop,
    req: &mut R,
    ath: &str,
    sent: SentToken<L>,
    usable_until: tokio::time::Instant,
) -> NextStep<L> {
    use crate::dpop::Proof;
    match dpop.prove(req, ath, usable_until) {
        Ok((Proof::Ready(value), target)) => {
            put_proof(req, value);
            NextStep::Send(Sent::Proved(ProvedToken { sent, target }))
        }
        Ok((Proof::Signing(signing), target)) => {
            NextStep::Sign(ProvedToken { sent, target }, signing)
        }
        Err(error) => NextStep::Fail(error),
    }
}
