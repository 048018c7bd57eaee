//! [`OAuthMiddleware`]: the layer's tokens for reqwest, as a
//! [reqwest-middleware](https://docs.rs/reqwest-middleware) middleware
//! (feature `reqwest-middleware`). It shares its layer's caches: a program
//! that uses the layer and the middleware (or several middlewares from one
//! layer) makes one token request per token.
//!
//! A request's way through it: the token of its [`TokenParams`] (from the
//! request's extensions, `RequestBuilder::with_extension`) or the default
//! one, awaited through the cache's single flight; the header, and for a
//! DPoP-bound token a proof; the rest of the chain; then the answer read as
//! the layer reads it (a `401` drops the refused token, a DPoP nonce is
//! kept), and the request sent once more when the answer asks for it and
//! its body can be cloned.

use std::sync::Arc;

use http::Extensions;
use reqwest::{Request, Response, StatusCode};
use reqwest_middleware::{Middleware, Next};

use crate::cache::TokenCache;
use crate::error::TokenError;
use crate::layer::OAuthLayer;
use crate::params::TokenParams;

/// Puts the layer's token on every request of a
/// [`reqwest_middleware::ClientWithMiddleware`] (feature
/// `reqwest-middleware`): `Authorization: Bearer <token>`, or as the layer is
/// configured (its header, scheme, DPoP).
///
/// Made from an [`OAuthLayer`] with [`OAuthLayer::middleware`] (or `From`),
/// it shares the layer's token cache, single flight, renewal ahead,
/// back-off, token slots and store: what the layer does for a Tower stack,
/// the middleware does for reqwest.
///
/// - A request that carries [`TokenParams`] in its extensions
///   (`RequestBuilder::with_extension(params)`) gets the token of those
///   parameters, as through the layer. (The layer's
///   [`params_for`](crate::OAuthLayerBuilder::params_for) reads an
///   `http::Request`, which reqwest does not have: it is not consulted.)
/// - A `401` answer drops the token that was sent (rate-limited as the
///   layer's own), and the request is sent once more with a new token when
///   its body can be cloned (`Request::try_clone`); otherwise the `401` is
///   returned and the next request gets the new token.
/// - With [DPoP](crate::OAuthLayerBuilder::dpop), each request carries a
///   proof (`Authorization: DPoP`, `DPoP`), and a `401` asking for a nonce
///   is answered by sending the request once more with one.
///
/// ```
/// use reqwest_middleware::ClientBuilder;
/// use tower_oauth::OAuthLayer;
///
/// # fn main() -> Result<(), tower_oauth::ConfigError> {
/// # let _provider = rustls::crypto::ring::default_provider().install_default();
/// let oauth = OAuthLayer::builder()
///     .token_url("https://idp.example.com/oauth2/token")
///     .client_id("my-client")
///     .client_secret("my-secret")
///     .build()?;
/// let client = ClientBuilder::new(reqwest::Client::new())
///     .with(oauth.middleware())
///     .build();
/// // client.get("https://api.example.com/orders").send().await
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct OAuthMiddleware {
    layer: OAuthLayer,
}

impl OAuthLayer {
    /// A [reqwest-middleware](https://docs.rs/reqwest-middleware) middleware
    /// sharing this layer's tokens (feature `reqwest-middleware`); see
    /// [`OAuthMiddleware`].
    pub fn middleware(&self) -> OAuthMiddleware {
        OAuthMiddleware {
            layer: self.clone(),
        }
    }
}

impl From<OAuthLayer> for OAuthMiddleware {
    fn from(layer: OAuthLayer) -> Self {
        OAuthMiddleware { layer }
    }
}

/// What an answer said of the credential that was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// Nothing to do.
    Accepted,
    /// The token was refused (and dropped): send again with a new one.
    Refused,
    /// The API asked for a DPoP nonce (kept): send again with a new proof.
    UseNonce,
}

#[async_trait::async_trait]
impl Middleware for OAuthMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let slot;
        let cache = match extensions.get::<TokenParams>() {
            Some(params) => {
                slot = self.layer.cache_for(params).map_err(failed)?;
                &slot
            }
            None => self.layer.default_cache(),
        };
        let placement = cache.placement();
        if placement.keep_existing && req.headers().contains_key(&placement.header_name) {
            // The caller brought its own credential.
            return next.run(req, extensions).await;
        }
        // One more send, if the answer asks for it and the body allows.
        let again = req.try_clone();
        let (response, answer) = send(cache, req, extensions, next.clone()).await?;
        match (answer, again) {
            (Answer::Refused | Answer::UseNonce, Some(again)) => {
                if answer == Answer::Refused {
                    crate::telemetry::unauthorized_retry();
                }
                tracing::debug!(?answer, "sending the request once more");
                Ok(send(cache, again, extensions, next).await?.0)
            }
            _ => Ok(response),
        }
    }
}

/// Sends `req` with the token of `cache` (and its proof), and reads the
/// answer as the layer does.
async fn send(
    cache: &Arc<TokenCache>,
    mut req: Request,
    extensions: &mut Extensions,
    next: Next<'_>,
) -> reqwest_middleware::Result<(Response, Answer)> {
    // The token at hand, checked against the clock, as the layer's hot path
    // takes it: no reference taken on it, only its header and generation.
    let at_hand = {
        let current = cache.current().load();
        cache
            .check(current.as_deref(), tokio::time::Instant::now())
            .filter(|token| !token.needs_proof())
            .map(|token| (token.header.clone(), token.generation))
    };
    let (header, generation) = match at_hand {
        Some(at_hand) => at_hand,
        None => {
            // None usable now (or a DPoP-bound one): through the single
            // flight.
            let token = cache.token().await.map_err(failed)?;
            if token.needs_proof() {
                req.headers_mut()
                    .insert(cache.placement().header_name.clone(), token.header.clone());
                return send_with_proof(cache, &token, req, extensions, next).await;
            }
            (token.header.clone(), token.generation)
        }
    };
    req.headers_mut()
        .insert(cache.placement().header_name.clone(), header);
    let response = next.run(req, extensions).await?;
    let answer = if response.status() == StatusCode::UNAUTHORIZED {
        cache.refused(generation);
        Answer::Refused
    } else {
        Answer::Accepted
    };
    Ok((response, answer))
}

/// [`send`] for a DPoP-bound token: the request's proof, then the answer's
/// nonce and verdict.
async fn send_with_proof(
    cache: &Arc<TokenCache>,
    token: &crate::cache::CachedToken,
    mut req: Request,
    extensions: &mut Extensions,
    next: Next<'_>,
) -> reqwest_middleware::Result<(Response, Answer)> {
    use crate::dpop::{Proof, Verdict, DPOP};
    use crate::error::TokenErrorKind;
    let (Some(dpop), Some(ath)) = (&cache.placement().dpop, &token.ath) else {
        return Err(failed(TokenError::new(TokenErrorKind::InvalidRequest)));
    };
    // The proof names the method and URI: the same for an `http` request.
    let head = http::Request::builder()
        .method(req.method().clone())
        .uri(req.url().as_str())
        .body(())
        .map_err(|e| failed(TokenError::custom(TokenErrorKind::InvalidRequest, e)))?;
    let (proof, target) = dpop
        .prove(&head, ath, token.timings.usable_until)
        .map_err(failed)?;
    let proof = match proof {
        Proof::Ready(value) => value,
        // A slow signer's proof comes with the token checked again.
        Proof::Signing(signing) => signing.await.map_err(failed)?,
    };
    req.headers_mut().insert(DPOP, proof);
    let response = next.run(req, extensions).await?;
    // The verdict reads the status and headers only.
    let mut view = http::Response::new(());
    *view.status_mut() = response.status();
    *view.headers_mut() = response.headers().clone();
    let answer = match dpop.answered(&target, &view) {
        Verdict::Accepted | Verdict::InvalidProof => Answer::Accepted,
        Verdict::UseNonce => Answer::UseNonce,
        Verdict::Refused => {
            cache.refused(token.generation);
            Answer::Refused
        }
    };
    Ok((response, answer))
}

/// A token error as the middleware chain's error.
fn failed(error: TokenError) -> reqwest_middleware::Error {
    reqwest_middleware::Error::middleware(error)
}
