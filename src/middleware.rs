//! [`OAuthMiddleware`]: the layer's tokens for reqwest, as a
//! [reqwest-middleware](https://docs.rs/reqwest-middleware) middleware
//! (feature `reqwest-middleware`). It shares its layer's caches: a program
//! that uses the layer and the middleware (or several middlewares from one
//! layer) makes one token request per token.
//!
//! A request's way through it: the token of its [`TokenParams`] (from the
//! request's extensions, `RequestBuilder::with_extension`) or the default
//! one, awaited through the cache's single flight; then the same steps as
//! the Tower service, through the same code (`service::authorize`): the
//! header, and for a DPoP-bound token a proof; the rest of the chain; the
//! answer read (a `401` or a gRPC `UNAUTHENTICATED` drops the refused
//! token, a DPoP nonce is kept); and the request sent once more when the
//! answer asks for it and its body can be cloned.

use std::sync::Arc;

use std::borrow::Cow;

use http::{Extensions, HeaderMap, Method, StatusCode, Uri};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::cache::TokenCache;
use crate::error::TokenError;
use crate::layer::OAuthLayer;
use crate::message::{Answer, Outgoing};
use crate::service::authorize::{authorize, put_proof, Answered, Sent, Step};
use crate::token::params::TokenParams;

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
/// - A `401` (or a gRPC `UNAUTHENTICATED`) drops the token that was sent
///   (rate-limited as the layer's own), and the request is sent once more
///   with a new token when its body can be cloned (`Request::try_clone`);
///   otherwise the `401` is returned and the next request gets the new
///   token. While the renewal is rate-limited the request would carry the
///   very token refused: the `401` is returned at once, not sent again.
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

impl Outgoing for Request {
    #[inline]
    fn headers(&self) -> &HeaderMap {
        Request::headers(self)
    }

    #[inline]
    fn headers_mut(&mut self) -> &mut HeaderMap {
        Request::headers_mut(self)
    }

    #[inline]
    fn method(&self) -> &Method {
        Request::method(self)
    }

    fn uri(&self) -> Option<Cow<'_, Uri>> {
        self.url().as_str().parse().ok().map(Cow::Owned)
    }
}

impl Answer for Response {
    #[inline]
    fn status(&self) -> StatusCode {
        Response::status(self)
    }

    #[inline]
    fn headers(&self) -> &HeaderMap {
        Response::headers(self)
    }
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
        if cache.placement().keeps(&req) {
            // The caller brought its own credential.
            return next.run(req, extensions).await;
        }
        // One more send, if the answer asks for it and the body allows.
        let again = req.try_clone();
        let (response, answered) = send(cache, req, extensions, next.clone()).await?;
        match (answered, again) {
            (Answered::Refused | Answered::UseNonce, Some(again)) => {
                if answered == Answered::Refused {
                    crate::telemetry::unauthorized_retry();
                }
                tracing::debug!(?answered, "sending the request once more");
                Ok(send(cache, again, extensions, next).await?.0)
            }
            _ => Ok(response),
        }
    }
}

/// Sends `req` with the token of `cache` (and its proof), and reads the
/// answer: the Tower service's steps, through the same code.
async fn send(
    cache: &Arc<TokenCache>,
    mut req: Request,
    extensions: &mut Extensions,
    next: Next<'_>,
) -> reqwest_middleware::Result<(Response, Answered)> {
    // The token at hand, checked against the clock, as the layer's hot path
    // takes it.
    let at_hand = {
        let current = cache.current().load();
        cache
            .check(current.as_deref(), tokio::time::Instant::now())
            .map(|token| authorize(&mut req, &cache, token))
    };
    let step = match at_hand {
        Some(step) => step,
        // None usable now: through the single flight.
        None => {
            let token = cache.token().await.map_err(failed)?;
            authorize(&mut req, &cache, &token)
        }
    };
    let sent = match step {
        Step::Send(sent) => sent,
        // A slow signer's proof comes with the token checked again.
        Step::Sign(proved, proof) => {
            put_proof(&mut req, proof.await.map_err(failed)?);
            Sent::Proved(proved)
        }
        Step::Fail(error) => return Err(failed(error)),
    };
    let mut response = next.run(req, extensions).await?;
    let answered = match &sent {
        Sent::Token(sent) => sent.answered(&mut response),
        Sent::Proved(proved) => proved.answered(&mut response),
    };
    Ok((response, answered))
}

/// A token error as the middleware chain's error.
fn failed(error: TokenError) -> reqwest_middleware::Error {
    reqwest_middleware::Error::middleware(error)
}
