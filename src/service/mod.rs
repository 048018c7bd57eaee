//! [`OAuthService`]: the middleware itself, and a request's way through it.
//!
//! `call` reads top to bottom, the usual request first. A layer is "plain"
//! when it puts its token in `Authorization`, replaces a request's own
//! header, and chooses no token slot. On such a layer, a request without
//! extensions takes the default token from the instance's own [`View`],
//! before the token's renewal point. One load tells the view its token is
//! still the current one. One comparison with the clock says it may be sent
//! as it is, the check [`TokenCache::check`](crate::cache::TokenCache::check)
//! makes.
//!
//! Any other request takes the long way, out of line:
//!
//! - One that selects a [token slot](crate::slots) takes the slot's cache.
//! - One that brings its own credential, with `keep_existing_header`, goes on
//!   untouched.
//! - Any other gets the default token, through the view or the cache.
//!   [`authorize()`] places it on the request, and the inner service is called.
//!
//! Without a usable token, the request waits in its [`ResponseFuture`] for the
//! shared fetch, in [`TokenCache::acquire`](crate::cache::TokenCache::acquire).
//!
//! The files: `future` holds that future. `authorize` is the one place a
//! token and its DPoP proof go on a request, and where the answer is read.
//! `view` is the instance's view.

pub(crate) mod authorize;
mod future;
pub(crate) mod other_clients;
mod view;

pub use self::future::ResponseFuture;

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::AUTHORIZATION;
use http::{Request, Response};
use tower_service::Service;

use tokio::time::Instant;

use self::authorize::{authorize, put_header, NextStep, Sent, SentToken};
use self::view::View;
use crate::cache::{Acquire, CacheRef};
use crate::slots::routes::destination_of;
use crate::slots::Slots;
use crate::support::boxed::BoxError;
use crate::token::params::TokenParams;

/// Sets `Authorization: Bearer <token>` (or the header and scheme configured)
/// on every request and passes it to the inner service. Built by
/// [`OAuthLayer`](crate::OAuthLayer).
///
/// With a token at hand (the usual case) [`call`](Service::call) inserts the
/// header and calls the inner service at once: no lock, no waiting, and no
/// allocation of its own but one per token: the instance's own copy of the
/// header value, made at the second request that finds a new token, so that
/// threads, each with its own clone of the service, never count references
/// on one shared value. Without one, the request waits for the shared token
/// fetch. The inner service is called when the token arrives.
///
/// Errors are [`BoxError`]: the inner service's own errors, passed through,
/// or a [`TokenError`](crate::TokenError) when no token could be had.
///
/// A `401 Unauthorized` answer is returned to the caller unchanged. The token
/// that was sent is dropped (if it is still the current one) so that the
/// next request gets a new one. Such forced renewals are rate-limited. See
/// [`OAuthLayerBuilder::forced_renewal_interval`](crate::OAuthLayerBuilder::forced_renewal_interval).
#[must_use]
pub struct OAuthService<S> {
    inner: S,
    /// This instance's reference to the layer's cache (see [`CacheRef`]): the one
    /// it was made with, shared, until its view makes its own copy of the
    /// token's header value; from then on its own.
    cache_ref: Arc<CacheRef>,
    /// This instance's view of the layer's current token, with its own
    /// copy of the header value.
    view: View,
    /// The layer's token slots.
    slots: Arc<Slots>,
}

impl<S> OAuthService<S> {
    /// An instance on `cache_ref` (to the layer's default token's cache), with
    /// its view of the current token. The reference is shared until the view
    /// makes its own copy of a token's header value (its second request
    /// that finds the token), which makes the instance a reference of its own
    /// too: an instance made for one request allocates nothing.
    pub(crate) fn on(inner: S, cache_ref: Arc<CacheRef>, slots: Arc<Slots>) -> Self {
        let cache = &cache_ref.cache;
        OAuthService {
            inner,
            view: View::new(cache.epoch(), cache.placement().plain() && !slots.chooses()),
            cache_ref,
            slots,
        }
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
    /// A new instance on the same layer, allocating nothing of its own.
    /// Its view of the token starts empty: its first request takes the
    /// token's shared header value; its second makes its own copy, and its
    /// own reference to the layer, which the response future of each of
    /// its requests then shares, so that threads using different instances
    /// never contend for one reference count (see BENCHMARKS.md).
    fn clone(&self) -> Self {
        Self::on(
            self.inner.clone(),
            Arc::clone(&self.cache_ref),
            Arc::clone(&self.slots),
        )
    }
}

impl<S: fmt::Debug> fmt::Debug for OAuthService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthService")
            .field("inner", &self.inner)
            .field("cache", &self.cache_ref.cache)
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

    // Always inlined: the usual request's whole way is a few loads and
    // compares, and a call of its own would cost a quarter of it.
    #[inline(always)]
    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        // The token's expiry is checked against the clock on every use.
        let now = Instant::now();
        // The usual request: no slot to choose, nothing of its own to
        // keep, the default token before its renewal point, which the
        // instance's view stands for (`TokenCache::check`).
        let Some(params) = req.extensions().get::<TokenParams>() else {
            if let Some(header) = self.view.plain_bearer(&mut self.cache_ref, now) {
                req.headers_mut().insert(AUTHORIZATION, header.clone());
                let sent = self.view.sent(&self.cache_ref, req.method());
                return ResponseFuture::bearer(self.inner.call(req), Some(sent));
            }
            if self.slots.chooses() {
                return self.call_in_slot(req, now);
            }
            return self.call_other(req, now);
        };
        // A request that names its parameters (an account, an API): its
        // slot, found while the extension is at hand.
        if self.cache_ref.cache.placement().keeps(&req) {
            return ResponseFuture::bearer(self.inner.call(req), None);
        }
        let chosen = self.slots.by_params(params);
        // The usual case goes on here, with the request where it is.
        match self.authorize_chosen(&mut req, now, chosen) {
            Ok(sent) => ResponseFuture::calling(self.inner.call(req), Some(Sent::Token(sent))),
            Err(other) => self.call_otherwise(req, other),
        }
    }
}

/// What a request with a chosen slot does next.
enum Chosen {
    /// Its token is on: send it (or prove it first).
    Step(NextStep),
    /// No usable token: take the cache's way.
    Acquire(Arc<CacheRef>),
    Failed(crate::error::TokenError),
}

impl<S> OAuthService<S> {
    /// Any other request: one that brought its own credential, may select
    /// a token slot, or takes a token the view cannot serve.
    #[inline(never)]
    fn call_other<B, ResB>(&mut self, mut req: Request<B>, now: Instant) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>, Response = Response<ResB>> + Clone,
        S::Error: Into<BoxError>,
    {
        if self.cache_ref.cache.placement().keeps(&req) {
            // The caller brought its own credential: no token needed.
            return ResponseFuture::bearer(self.inner.call(req), None);
        }
        if let Some(header) = self.view.bearer(&mut self.cache_ref, now) {
            let sent = put_header(
                &mut req,
                Arc::clone(&self.cache_ref),
                header.clone(),
                self.view.generation(),
            );
            return ResponseFuture::bearer(self.inner.call(req), Some(sent));
        }
        // A token past its renewal point, a DPoP-bound one, an account's
        // past the store's last word, or none.
        if self.cache_ref.cache.guarded() {
            self.view.heard_again(&self.cache_ref.cache);
        }
        if let Some(token) = self.cache_ref.cache.check(self.view.token(), now) {
            let step = authorize(&mut req, Arc::clone(&self.cache_ref), token);
            return self.send(step, req);
        }
        self.acquire_on(Arc::clone(&self.cache_ref), req)
    }

    /// A request that may select a token slot: the slot's token if it has
    /// one usable now, else as for the default token, on the slot's cache.
    #[inline(never)]
    fn call_in_slot<B, ResB>(&mut self, mut req: Request<B>, now: Instant) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>, Response = Response<ResB>> + Clone,
        S::Error: Into<BoxError>,
    {
        if self.cache_ref.cache.placement().keeps(&req) {
            return ResponseFuture::bearer(self.inner.call(req), None);
        }
        let slots = &self.slots;
        let chosen = match req.extensions().get::<TokenParams>() {
            Some(params) => slots.by_params(params),
            // A protected resource's own token (`protected_resources`),
            // else what params_for chooses from the request's head.
            None => match slots.routed(|| destination_of(req.uri())) {
                Some(routed) => Some(routed),
                None => {
                    let (parts, body) = req.into_parts();
                    let chosen = slots.chosen(&parts);
                    req = Request::from_parts(parts, body);
                    chosen
                }
            },
        };
        match self.authorize_chosen(&mut req, now, chosen) {
            Ok(sent) => self.send(NextStep::Send(Sent::Token(sent)), req),
            Err(other) => self.call_otherwise(req, other),
        }
    }

    /// A request with its slot `chosen` (`None`: the default token): the
    /// slot's bearer token put on it if it has one usable now (what was sent,
    /// small enough to come back in registers), else what to do.
    #[inline(never)]
    fn authorize_chosen<B>(
        &self,
        req: &mut Request<B>,
        now: Instant,
        chosen: Option<Result<Arc<CacheRef>, crate::error::TokenError>>,
    ) -> Result<SentToken, Chosen> {
        let cache_ref = match chosen {
            // The default token, through the reference's own load: the slot
            // path's, rather than a second copy of `call`'s.
            None => Arc::clone(&self.cache_ref),
            Some(Err(error)) => return Err(Chosen::Failed(error)),
            Some(Ok(cache_ref)) => cache_ref,
        };
        let current = cache_ref.cache.current().load();
        match cache_ref.cache.check(current.as_deref(), now) {
            // A bearer token in `Authorization`: put on as the usual
            // request's is.
            Some(token) if token.ath.is_none() && cache_ref.cache.placement().plain() => {
                req.headers_mut()
                    .insert(AUTHORIZATION, token.header.clone());
                Ok(SentToken::new(cache_ref, token.generation, req.method()))
            }
            Some(token) => Err(Chosen::Step(authorize(req, cache_ref, token))),
            None => Err(Chosen::Acquire(cache_ref)),
        }
    }

    /// A request [`authorize_chosen`](Self::authorize_chosen) did not send:
    /// its DPoP proof to make, the fetch to wait for, or its error.
    #[inline(never)]
    fn call_otherwise<B, ResB>(&mut self, req: Request<B>, chosen: Chosen) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>, Response = Response<ResB>> + Clone,
        S::Error: Into<BoxError>,
    {
        match chosen {
            Chosen::Step(step) => self.send(step, req),
            Chosen::Acquire(cache_ref) => self.acquire_on(cache_ref, req),
            Chosen::Failed(error) => ResponseFuture::failed(error),
        }
    }

    /// A token from `cache_ref`'s cache at once, an error, or the fetch under way
    /// to wait for.
    fn acquire_on<B, ResB>(
        &mut self,
        cache_ref: Arc<CacheRef>,
        mut req: Request<B>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>, Response = Response<ResB>> + Clone,
        S::Error: Into<BoxError>,
    {
        match cache_ref.cache.acquire() {
            Acquire::Now(Ok(token)) => {
                let step = authorize(&mut req, cache_ref, &token);
                self.send(step, req)
            }
            Acquire::Now(Err(error)) => ResponseFuture::failed(error),
            Acquire::Wait(flight) => {
                // Waiting for a token holds none of the inner service's
                // capacity: the service made ready for this request is let
                // go (a concurrency limit's permit with it), and a clone is
                // made ready again once the token is here.
                let ready = self.take_ready();
                let svc = ready.clone();
                drop(ready);
                ResponseFuture::waiting(flight, svc, req, cache_ref)
            }
        }
    }

    /// Sends a request as `step` says: at once, after a custom signer has
    /// made its DPoP proof, or not at all.
    #[inline(always)]
    fn send<B>(&mut self, step: NextStep, req: Request<B>) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        match step {
            NextStep::Send(sent) => ResponseFuture::calling(self.inner.call(req), Some(sent)),
            NextStep::Sign(proved, proof) => {
                let ready = self.take_ready();
                ResponseFuture::signing(proof, ready, req, proved)
            }
            NextStep::Fail(error) => ResponseFuture::failed(error),
        }
    }

    /// The inner service that was made ready for this request, to take
    /// along. A clone takes its place.
    fn take_ready(&mut self) -> S
    where
        S: Clone,
    {
        let clone = self.inner.clone();
        mem::replace(&mut self.inner, clone)
    }
}
