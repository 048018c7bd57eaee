//! [`OAuthService`]: the middleware itself.

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::cache::{Acquire, TokenCache};
use crate::future::ResponseFuture;
use crate::layer::OAuthLayer;
use crate::BoxError;

/// Sets `Authorization: Bearer <token>` (or the header and scheme configured)
/// on every request and passes it to the inner service; built by
/// [`OAuthLayer`].
///
/// With a token at hand (the usual case) [`call`](Service::call) inserts the
/// header and calls the inner service at once: no lock, no allocation of its
/// own, no waiting. Without one, the request waits for the shared token
/// fetch; the inner service is called when the token arrives.
///
/// Errors are [`BoxError`]: the inner service's own errors, passed through,
/// or a [`TokenError`](crate::TokenError) when no token could be had.
///
/// A `401 Unauthorized` answer is returned to the caller unchanged; the token
/// that was sent is dropped (if it is still the current one) so that the
/// next request gets a new one. Such forced renewals are rate-limited; see
/// [`OAuthLayerBuilder::forced_renewal_interval`](crate::OAuthLayerBuilder::forced_renewal_interval).
#[must_use]
pub struct OAuthService<S> {
    inner: S,
    cache: Arc<TokenCache>,
}

impl<S> OAuthService<S> {
    /// Wraps `inner`, taking tokens from `layer`'s cache.
    pub fn new(inner: S, layer: OAuthLayer) -> Self {
        OAuthService {
            inner,
            cache: layer.cache,
        }
    }

    /// The same layer as [`OAuthLayer`]; here for symmetry with tower's
    /// middleware (`Timeout::layer`, ...).
    pub fn layer(layer: OAuthLayer) -> OAuthLayer {
        layer
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone> Clone for OAuthService<S> {
    fn clone(&self) -> Self {
        OAuthService {
            inner: self.inner.clone(),
            cache: Arc::clone(&self.cache),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for OAuthService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthService")
            .field("inner", &self.inner)
            .field("cache", &self.cache)
            .finish()
    }
}

impl<S, B, ResB> Service<Request<B>> for OAuthService<S>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = Response<ResB>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let settings = self.cache.settings();
        if settings.keep_existing && req.headers().contains_key(&settings.header_name) {
            // The caller brought its own credential: no token needed.
            let fut = self.inner.call(req);
            return ResponseFuture::calling(fut, None, Arc::clone(&self.cache));
        }
        let generation = self.cache.with_usable(|token| {
            req.headers_mut()
                .insert(settings.header_name.clone(), token.header.clone());
            token.generation
        });
        if generation.is_some() {
            let fut = self.inner.call(req);
            return ResponseFuture::calling(fut, generation, Arc::clone(&self.cache));
        }
        self.call_without_token(req)
    }
}

impl<S> OAuthService<S> {
    #[cold]
    fn call_without_token<B, ResB>(&mut self, mut req: Request<B>) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>, Response = Response<ResB>> + Clone,
        S::Error: Into<BoxError>,
    {
        let cache = Arc::clone(&self.cache);
        match self.cache.acquire() {
            Acquire::Now(Ok(token)) => {
                req.headers_mut().insert(
                    self.cache.settings().header_name.clone(),
                    token.header.clone(),
                );
                let fut = self.inner.call(req);
                ResponseFuture::calling(fut, Some(token.generation), cache)
            }
            Acquire::Now(Err(error)) => ResponseFuture::failed(error, cache),
            Acquire::Wait(rx) => {
                // The inner service was made ready for this request; take
                // that ready instance along and leave a clone in its place.
                let clone = self.inner.clone();
                let ready = mem::replace(&mut self.inner, clone);
                ResponseFuture::waiting(rx, ready, req, cache)
            }
        }
    }
}
