//! [`OAuthMiddleware`]: the layer's tokens for reqwest, as a
//! [reqwest-middleware](https://docs.rs/reqwest-middleware) middleware, with
//! feature `reqwest-middleware`.
//!
//! It shares its layer's caches. A program that uses the layer and the
//! middleware, or several middlewares from one layer, makes one token request
//! per token.
//!
//! A request's way through it:
//!
//! 1. It takes the token of its [`TokenParams`], from the request's extensions
//!    as `RequestBuilder::with_extension` puts them, or else the default one.
//!    It awaits the token through the cache's single flight.
//! 2. It takes the same steps as the Tower service, through the same code in
//!    `service::authorize`: the header, and for a DPoP-bound token a proof.
//! 3. The rest of the chain sends it.
//! 4. It reads the answer. A `401` or a gRPC `UNAUTHENTICATED` drops the
//!    refused token, and a DPoP nonce is kept.
//! 5. It sends the request once more when the answer asks for it and its body
//!    can be cloned.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use std::time::Duration;

use http::{Extensions, HeaderMap, Method, StatusCode, Uri, Version};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::cache::TokenCache;
use crate::error::TokenError;
use crate::layer::OAuthLayer;
use crate::message::{Answer, Outgoing};
use crate::service::authorize::{NextStep, Sent, TokenAnswer};
use crate::service::other_clients::{after_waiting, at_hand, ready_to_send};
use crate::token::params::TokenParams;

/// Puts the layer's token on every request of a
/// [`reqwest_middleware::ClientWithMiddleware`], with feature
/// `reqwest-middleware`. The token goes in `Authorization: Bearer <token>`, or
/// as the layer is configured: its header, its scheme, DPoP.
///
/// Make it from an [`OAuthLayer`] with [`OAuthLayer::middleware`], or with
/// `From`. It shares the layer's token cache, single flight, renewal ahead,
/// back-off, token slots and store. What the layer does for a Tower stack, the
/// middleware does for reqwest.
///
/// - A request that carries [`TokenParams`] in its extensions gets the token of
///   those parameters, as through the layer. Put them there with
///   `RequestBuilder::with_extension(params)`. The layer's
///   [`params_for`](crate::OAuthLayerBuilder::params_for) reads an
///   `http::Request`, which reqwest does not have, so the middleware does not
///   consult it.
/// - A `401`, or a gRPC `UNAUTHENTICATED`, drops the token that was sent. The
///   drop is rate-limited, as the layer's own. The request is sent once more
///   with a new token when its body can be cloned with `Request::try_clone`.
///   Otherwise the `401` is returned, and the next request gets the new token.
///   While the renewal is rate-limited, the request would carry the very token
///   refused. So the `401` is returned at once, not sent again.
///   [`resend(false)`](Self::resend) turns the resend off, and with it the copy
///   of each request it needs.
/// - With [DPoP](crate::OAuthLayerBuilder::dpop), each request carries a proof,
///   in `Authorization: DPoP` and `DPoP`. A `401` that asks for a nonce is
///   answered by sending the request once more with one.
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
    /// Send a request once more when its answer asks for it.
    resend: bool,
}

impl OAuthMiddleware {
    /// Whether a request is sent once more when its answer refused its token,
    /// or asked for a DPoP nonce. It is sent with a new token, or with the
    /// nonce.
    ///
    /// The resend needs a copy of every request, made before it is sent,
    /// whether or not the answer asks for it. The copy holds its method, URL,
    /// version and timeout, and its own headers. The token's headers are put on
    /// anew. It holds the body when the body can be cloned, with
    /// `Request::try_clone`. This copy is most of what the middleware adds to a
    /// request, as BENCHMARKS.md measures. A request with neither body nor
    /// headers of its own costs one allocation, for the URL.
    ///
    /// Off, no copy is made. A refusal is returned to the caller as it is. The
    /// refused token is dropped all the same, and the next request carries a
    /// new one.
    ///
    /// Default: on.
    ///
    /// ```
    /// # fn main() -> Result<(), tower_oauth::ConfigError> {
    /// # let oauth = tower_oauth::OAuthLayer::builder()
    /// #     .token_url("https://idp.example.com/oauth2/token")
    /// #     .client_id("my-client")
    /// #     .client_secret("my-secret")
    /// #     .build()?;
    /// // The caller retries on its own (reqwest-retry, say): no copies.
    /// let middleware = oauth.middleware().resend(false);
    /// # Ok(()) }
    /// ```
    pub fn resend(mut self, on: bool) -> Self {
        self.resend = on;
        self
    }
}

impl OAuthLayer {
    /// A [reqwest-middleware](https://docs.rs/reqwest-middleware) middleware
    /// that shares this layer's tokens, with feature `reqwest-middleware`. See
    /// [`OAuthMiddleware`].
    pub fn middleware(&self) -> OAuthMiddleware {
        OAuthMiddleware::from(self.clone())
    }
}

impl From<OAuthLayer> for OAuthMiddleware {
    fn from(layer: OAuthLayer) -> Self {
        OAuthMiddleware {
            layer,
            resend: true,
        }
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

/// The future [`Middleware::handle`] returns.
type Handled<'a> = Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'a>>;

impl Middleware for OAuthMiddleware {
    // Written out rather than through `async_trait`: the usual request (the
    // default token at hand) is decided before the one allocation the trait
    // asks for, and that allocation holds only what reading the answer
    // needs (see BENCHMARKS.md).
    fn handle<'s, 'e, 'n, 'a>(
        &'s self,
        mut req: Request,
        extensions: &'e mut Extensions,
        next: Next<'n>,
    ) -> Handled<'a>
    where
        's: 'a,
        'e: 'a,
        'n: 'a,
        Self: 'a,
    {
        let chosen = match extensions.get::<TokenParams>() {
            Some(params) => Some(self.layer.cache_for(params)),
            // A protected resource's own token (`protected_resources`).
            None => self.layer.cache_at(|| destination(req.url())),
        };
        if let Some(slot) = chosen {
            return Box::pin(async move {
                let slot = slot.map_err(failed)?;
                if slot.placement().keeps(&req) {
                    return next.run(req, extensions).await;
                }
                let again = self.copy(&req, &slot);
                let step = at_hand(&slot, &mut req);
                send(&slot, req, again, step, extensions, next).await
            });
        }
        let cache = self.layer.default_cache();
        if cache.placement().keeps(&req) {
            // The caller brought its own credential.
            return next.run(req, extensions);
        }
        match at_hand(cache, &mut req) {
            // Nothing to send again: the answer is read, and goes back.
            Some(NextStep::Send(sent)) if !self.resend => {
                let sending = next.run(req, extensions);
                Box::pin(async move {
                    let mut response = sending.await?;
                    sent.answered(&mut response);
                    Ok(response)
                })
            }
            // The answer read, and a copy sent if it asks for it (the copy
            // made in the future, where it stays).
            Some(NextStep::Send(Sent::Token(sent))) => Box::pin(async move {
                let again = Again::of(&req, cache);
                let mut response = next.clone().run(req, extensions).await?;
                let answered = sent.answered(&mut response);
                let Some(again) = again.filter(|_| answered.asks_again()) else {
                    return Ok(response);
                };
                drop(response);
                resend(cache, answered, again, extensions, next).await
            }),
            step => {
                let again = self.copy(&req, cache);
                Box::pin(send(cache, req, again, step, extensions, next))
            }
        }
    }
}

impl OAuthMiddleware {
    /// A copy of `req` to send once more if the answer asks for it. There is
    /// one when the resend is on and the body can be cloned.
    #[inline]
    fn copy(&self, req: &Request, cache: &TokenCache) -> Option<Again> {
        if self.resend {
            Again::of(req, cache)
        } else {
            None
        }
    }
}

/// A request kept to be sent once more, if its answer asks for it. It waits in
/// the request's future, which is moved as a whole, so it is kept small: what
/// is large or rare sits behind a box.
enum Again {
    /// One with a body: reqwest's own copy, from `Request::try_clone`.
    Whole(Box<Request>),
    /// One without a body, such as a `GET`: all that reqwest sends of it, made
    /// into a request only if it is sent, with its own headers if it has any.
    Bodiless {
        method: Method,
        url: reqwest::Url,
        headers: Option<Box<HeaderMap>>,
        version: Version,
        timeout: Option<Duration>,
    },
}

impl Again {
    /// A copy of `req`, or `None` for a body that cannot be cloned, such as a
    /// stream.
    ///
    /// `Request::try_clone` also copies the request's extensions map. Reqwest
    /// keeps that map to itself, and reads only the timeout from it.
    /// `try_clone` sets the timeout first, which allocates a map, then replaces
    /// the map by the copy. That is a third of what it costs, as BENCHMARKS.md
    /// shows. So a request without a body is copied by hand instead.
    /// `tests/clients/reqwest_middleware.rs` checks that both copies are sent
    /// alike.
    ///
    /// The headers `cache` puts on a request, its token's and a DPoP proof, are
    /// put on the copy anew when it is sent. A request that has no other header
    /// is copied with none, which allocates nothing.
    fn of(req: &Request, cache: &TokenCache) -> Option<Again> {
        if req.body().is_some() {
            return req.try_clone().map(|req| Again::Whole(Box::new(req)));
        }
        let name = &cache.placement().header_name;
        let headers = req.headers();
        let only_ours = headers.keys().all(|n| n == name || n == crate::dpop::DPOP);
        Some(Again::Bodiless {
            method: req.method().clone(),
            url: req.url().clone(),
            headers: (!only_ours).then(|| Box::new(headers.clone())),
            version: req.version(),
            timeout: req.timeout().copied(),
        })
    }

    /// The request to send.
    fn into_request(self) -> Request {
        match self {
            Again::Whole(req) => *req,
            Again::Bodiless {
                method,
                url,
                headers,
                version,
                timeout,
            } => {
                let mut req = Request::new(method, url);
                if let Some(headers) = headers {
                    *req.headers_mut() = *headers;
                }
                *req.version_mut() = version;
                if timeout.is_some() {
                    *req.timeout_mut() = timeout;
                }
                req
            }
        }
    }
}

/// Sends `req` with the token of `cache`, and its proof, as `step` says. `None`
/// means no token is at hand: wait for the single flight's. Then reads the
/// answer, and sends `again` once more if the answer asks for it.
async fn send(
    cache: &Arc<TokenCache>,
    mut req: Request,
    again: Option<Again>,
    step: Option<NextStep<&Arc<TokenCache>>>,
    extensions: &mut Extensions,
    next: Next<'_>,
) -> reqwest_middleware::Result<Response> {
    let step = match step {
        Some(step) => step,
        // Out of line (boxed: this future stays small).
        None => Box::pin(after_waiting(cache, &mut req))
            .await
            .map_err(failed)?,
    };
    let sent = ready_to_send(step, &mut req).await.map_err(failed)?;
    let mut response = next.clone().run(req, extensions).await?;
    let answered = sent.answered(&mut response);
    let Some(again) = again.filter(|_| answered.asks_again()) else {
        return Ok(response);
    };
    drop(response);
    resend(cache, answered, again, extensions, next).await
}

/// Sends `again` once more, as the first answer asked. It goes through [`send`]
/// with nothing kept to send again, counted and logged. It runs out of line,
/// boxed, so that the future of every request stays small. Its answer is the
/// caller's, whatever it says. A refusal still drops the token, and a nonce is
/// still kept.
fn resend<'a>(
    cache: &'a Arc<TokenCache>,
    answered: TokenAnswer,
    again: Again,
    extensions: &'a mut Extensions,
    next: Next<'a>,
) -> Handled<'a> {
    if answered == TokenAnswer::Refused {
        crate::telemetry::unauthorized_retry();
    }
    tracing::debug!(?answered, "sending the request once more");
    let mut req = again.into_request();
    // The copy may carry the first send's proof: the new token gets its
    // own, or (no longer bound) none.
    if cache.placement().dpop.is_some() {
        req.headers_mut().remove(crate::dpop::DPOP);
    }
    let step = at_hand(cache, &mut req);
    Box::pin(send(cache, req, None, step, extensions, next))
}

/// Where `url` points, as the layer's protected resources are matched.
fn destination(url: &reqwest::Url) -> Option<crate::slots::routes::Destination<'_>> {
    Some(crate::slots::routes::Destination {
        scheme: url.scheme(),
        host: url.host_str()?,
        port: url.port_or_known_default()?,
        path: url.path(),
    })
}

/// A token error as the middleware chain's error.
fn failed(error: TokenError) -> reqwest_middleware::Error {
    reqwest_middleware::Error::middleware(error)
}
