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
///   with a new token when its body can be cloned (`Request::try_clone`).
///   Otherwise the `401` is returned and the next request gets the new
///   token. While the renewal is rate-limited the request would carry the
///   very token refused: the `401` is returned at once, not sent again.
///   [`resend(false)`](Self::resend) turns the resend off, and with it the
///   copy of each request it needs.
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
    /// Send a request once more when its answer asks for it.
    resend: bool,
}

impl OAuthMiddleware {
    /// Whether a request whose answer refused its token (or asked for a
    /// DPoP nonce) is sent once more, with a new token (or the nonce).
    /// Default: on.
    ///
    /// The resend needs a copy of every request, made before it is sent,
    /// whether or not the answer asks for it: its method, URL, version and
    /// timeout, its own headers (not the token's, put on anew), and its
    /// body when it can be cloned (`Request::try_clone`). This copy is most
    /// of what the middleware adds to a request: about 550 instructions and
    /// one allocation (the URL) for a request with neither body nor headers
    /// of its own, some 5 % of a request through a reqwest-middleware chain
    /// that never reaches the network (see BENCHMARKS.md). Off,
    /// no copy is made: a refusal is returned to the caller as it is, the
    /// refused token is dropped all the same, and the next request carries
    /// a new one.
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
    /// sharing this layer's tokens (feature `reqwest-middleware`); see
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
    /// A copy of `req` to send once more if the answer asks for it: with
    /// the resend on, and a body that can be cloned.
    #[inline]
    fn copy(&self, req: &Request, cache: &TokenCache) -> Option<Again> {
        if self.resend {
            Again::of(req, cache)
        } else {
            None
        }
    }
}

/// A request kept to be sent once more, if its answer asks for it. Kept
/// small (what is large or rare behind a box): it waits in the request's
/// future, which is moved as a whole.
enum Again {
    /// One with a body: reqwest's own copy (`Request::try_clone`).
    Whole(Box<Request>),
    /// One without (a `GET`, say): all that reqwest sends of it, made into
    /// a request only if it is sent; its headers, if it has any of its own.
    Bodiless {
        method: Method,
        url: reqwest::Url,
        headers: Option<Box<HeaderMap>>,
        version: Version,
        timeout: Option<Duration>,
    },
}

impl Again {
    /// A copy of `req`; `None` for a body that cannot be cloned (a stream).
    ///
    /// `Request::try_clone` also copies the request's extensions map, which
    /// reqwest keeps to itself and of which it reads only the timeout. It
    /// sets the timeout first, which allocates a map, then replaces the map
    /// by the copy: a third of what it costs (BENCHMARKS.md). A request
    /// without a body is copied by hand instead; `tests/clients/reqwest_middleware.rs`
    /// checks that both copies are sent alike.
    ///
    /// The headers `cache` puts on a request (its token's, a DPoP proof)
    /// are put on the copy anew when it is sent: a request that has no
    /// other header is copied with none, which allocates nothing.
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

/// Sends `req` with the token of `cache` (and its proof), as `step` says
/// (`None`: no token at hand, wait for the single flight's), reads the
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

/// Sends `again` once more, as the first answer asked, through [`send`]
/// with nothing kept to send again: counted and logged, out of line
/// (boxed: the future of every request stays small). Its answer is the
/// caller's, whatever it says (a refusal still drops the token, a nonce is
/// still kept).
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
