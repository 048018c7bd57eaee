//! [`ResponseFuture`]: waits for a token (and a proof from a custom DPoP
//! signer) if it must, then for the inner service's response, and reports
//! what the API said of the token to its cache.
//!
//! The usual state, the inner service called with a bearer token at hand,
//! is the only one kept inline: the future is then the inner service's own
//! future and two words, moved and dropped as cheaply as it can be. Every
//! other state (waiting for a token, for a custom signer's proof, called
//! with a DPoP proof, failed) is one allocation out of line.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use super::authorize::{authorize, put_proof, NextStep, ProvedToken, Sent, SentToken};
use crate::cache::{cut_off, Acquire, CacheRef, CachedToken, FetchOutcome, Flight, Waiter};
use crate::error::TokenError;
use crate::support::boxed::BoxError;
use crate::support::boxed::BoxFuture;

/// How many times a waiting request asks again when the fetch it waited
/// for was cut off (its runtime shut down), or its token ran out before the
/// request woke.
const MAX_ASKS: u8 = 3;

pin_project! {
    /// The response future of [`OAuthService`](crate::OAuthService).
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<Request<B>>,
    {
        // The inner service was called; `sent` names the bearer token it
        // carries (none when the request kept its own credential).
        Calling {
            #[pin]
            fut: S::Future,
            sent: Option<SentToken>,
        },
        // Any other state, out of line.
        Other {
            other: OutOfLine<Other<S, B>>,
        },
    }
}

pin_project! {
    #[project = OtherProj]
    enum Other<S, B>
    where
        S: Service<Request<B>>,
    {
        // No usable token when called: wait for the shared fetch.
        Waiting {
            waiting: Waiting<S, B>,
        },
        // The request's DPoP proof is being signed by a custom signer.
        Signing {
            signing: Signing<S, B>,
        },
        // The inner service was called with a DPoP proof.
        Proving {
            #[pin]
            fut: S::Future,
            proved: ProvedToken,
        },
        // No token can be had now, or the inner service failed to become
        // ready after the wait.
        Failed {
            error: Option<BoxError>,
        },
    }
}

/// A state kept out of line, and dropped out of line too, so that the
/// usual state's drop stays a few instructions where it is dropped.
struct OutOfLine<T>(Option<Pin<Box<T>>>);

impl<T> OutOfLine<T> {
    /// The state, pinned in its box.
    fn get(&mut self) -> Pin<&mut T> {
        self.0
            .as_mut()
            .expect("ResponseFuture polled after completion")
            .as_mut()
    }
}

impl<T> Drop for OutOfLine<T> {
    fn drop(&mut self) {
        if let Some(boxed) = self.0.take() {
            drop_out_of_line(boxed);
        }
    }
}

#[inline(never)]
fn drop_out_of_line<T>(boxed: Pin<Box<T>>) {
    drop(boxed);
}

/// A request waiting for the shared fetch, holding a clone of the inner
/// service, made ready once the token is here: the wait holds none of the
/// inner service's capacity.
struct Waiting<S, B> {
    waiter: Waiter,
    asks: u8,
    /// The token had, while the inner service is made ready.
    token: Option<Arc<CachedToken>>,
    /// The ready service, the request, and the reference its token comes
    /// through, until the request is sent.
    held: Option<(S, Request<B>, Arc<CacheRef>)>,
}

/// A request whose DPoP proof a custom signer is making, holding the inner
/// service that was made ready for it.
struct Signing<S, B> {
    proof: BoxFuture<'static, Result<HeaderValue, TokenError>>,
    svc: S,
    req: Option<Request<B>>,
    proved: Option<ProvedToken>,
}

impl<S, B> Signing<S, B>
where
    S: Service<Request<B>>,
{
    /// Sends the request once its proof is signed.
    fn poll_signed(&mut self, cx: &mut Context<'_>) -> Poll<Next<S, B>> {
        let proof = ready!(self.proof.as_mut().poll(cx));
        let (Some(mut req), Some(proved)) = (self.req.take(), self.proved.take()) else {
            panic!("ResponseFuture polled after completion");
        };
        Poll::Ready(match proof {
            Ok(proof) => {
                put_proof(&mut req, proof);
                Next::Call(self.svc.call(req), Sent::Proved(proved))
            }
            Err(error) => Next::Fail(error.into()),
        })
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn other(other: Other<S, B>) -> Self {
        ResponseFuture {
            state: State::Other {
                other: OutOfLine(Some(Box::pin(other))),
            },
        }
    }

    pub(crate) fn signing(
        proof: BoxFuture<'static, Result<HeaderValue, TokenError>>,
        svc: S,
        req: Request<B>,
        proved: ProvedToken,
    ) -> Self {
        Self::other(Other::Signing {
            signing: Signing {
                proof,
                svc,
                req: Some(req),
                proved: Some(proved),
            },
        })
    }

    /// The inner service called with `sent` (none: the request kept its
    /// own credential).
    #[inline]
    pub(crate) fn calling(fut: S::Future, sent: Option<Sent>) -> Self {
        match sent {
            Some(Sent::Proved(proved)) => Self::other(Other::Proving { fut, proved }),
            Some(Sent::Token(sent)) => Self::bearer(fut, Some(sent)),
            None => Self::bearer(fut, None),
        }
    }

    /// The inner service called with a bearer token (or none).
    #[inline]
    pub(crate) fn bearer(fut: S::Future, sent: Option<SentToken>) -> Self {
        ResponseFuture {
            state: State::Calling { fut, sent },
        }
    }

    pub(crate) fn failed(error: impl Into<BoxError>) -> Self {
        Self::other(Other::Failed {
            error: Some(error.into()),
        })
    }

    pub(crate) fn waiting(
        flight: Arc<Flight>,
        svc: S,
        req: Request<B>,
        cache_ref: Arc<CacheRef>,
    ) -> Self {
        Self::other(Other::Waiting {
            waiting: Waiting {
                waiter: Waiter::new(flight),
                asks: 0,
                token: None,
                held: Some((svc, req, cache_ref)),
            },
        })
    }
}

/// What a waiting request does once it has a token, or none. Made once
/// per request that waited, and moved at once into the future's state
/// (boxed there): a large variant costs nothing to keep inline.
#[allow(clippy::large_enum_variant)]
enum Next<S, B>
where
    S: Service<Request<B>>,
{
    Call(S::Future, Sent),
    Sign(Signing<S, B>),
    /// No token, or the inner service's readiness failed.
    Fail(BoxError),
}

impl<S, B> Next<S, B>
where
    S: Service<Request<B>>,
{
    /// Puts `token` on `req` and goes on as its step says.
    fn send(
        (mut svc, mut req, cache_ref): (S, Request<B>, Arc<CacheRef>),
        token: &crate::cache::CachedToken,
    ) -> Self {
        match authorize(&mut req, cache_ref, token) {
            NextStep::Send(sent) => Next::Call(svc.call(req), sent),
            NextStep::Sign(proved, proof) => Next::Sign(Signing {
                proof,
                svc,
                req: Some(req),
                proved: Some(proved),
            }),
            NextStep::Fail(error) => Next::Fail(error.into()),
        }
    }
}

impl<S, B> Waiting<S, B>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
{
    /// Sends the request with the flight's token, once the inner service is
    /// ready; `None` when the request must ask the cache again.
    fn poll_flight(&mut self, cx: &mut Context<'_>) -> Poll<Option<Next<S, B>>> {
        if self.token.is_none() {
            self.token = Some(match ready!(self.waiter.poll(cx)) {
                FetchOutcome::Done(Ok(token)) if token.timings.usable_at(Instant::now()) => {
                    Arc::clone(token)
                }
                FetchOutcome::Done(Err(error)) => {
                    return Poll::Ready(Some(Next::Fail(error.clone().into())))
                }
                // Cut off, or a token that ran out before this request woke.
                _ => return Poll::Ready(None),
            });
        }
        self.poll_send(cx)
    }

    /// Sends the request with the token in hand once the inner service is
    /// ready, if that token is still the cache's and still usable: while
    /// the service was not ready, the token may have run out, or been
    /// dropped (a 401, a sign-out). `None`: ask the cache again.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Option<Next<S, B>>> {
        let Some((svc, _, cache_ref)) = &mut self.held else {
            panic!("ResponseFuture polled after completion");
        };
        if let Err(error) = ready!(svc.poll_ready(cx)) {
            return Poll::Ready(Some(Next::Fail(error.into())));
        }
        let token = self
            .token
            .take()
            .expect("ResponseFuture polled after completion");
        let current = cache_ref
            .cache
            .current()
            .load()
            .as_ref()
            .is_some_and(|c| c.generation == token.generation);
        if !current || !token.timings.usable_at(Instant::now()) {
            return Poll::Ready(None);
        }
        Poll::Ready(Some(Next::send(take(&mut self.held), &token)))
    }

    /// Asks the cache again, on this request's own runtime: a token at once,
    /// an error, or (`None`) another flight to wait for.
    fn ask_again(&mut self) -> Option<Next<S, B>> {
        self.asks += 1;
        if self.asks > MAX_ASKS {
            return Some(Next::Fail(cut_off().into()));
        }
        let Some((_, _, cache_ref)) = &self.held else {
            panic!("ResponseFuture polled after completion");
        };
        match cache_ref.cache.acquire() {
            // Sent once the inner service is ready (`poll_send`).
            Acquire::Now(Ok(token)) => {
                self.token = Some(token);
                None
            }
            Acquire::Now(Err(error)) => Some(Next::Fail(error.into())),
            Acquire::Wait(flight) => {
                // The old waiter leaves its flight as it is replaced.
                self.waiter = Waiter::new(flight);
                None
            }
        }
    }
}

/// What a waiting request holds, taken to be sent.
fn take<T>(held: &mut Option<T>) -> T {
    held.take().expect("ResponseFuture polled after completion")
}

impl<S, B, ResB> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<ResB>, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        // The usual case first, and alone: the inner service called with
        // the token at hand. The other states are out of line.
        if let StateProj::Calling { fut, sent } = this.state.as_mut().project() {
            return Self::poll_calling(fut, sent, cx);
        }
        Self::poll_other(this.state, cx)
    }
}

impl<S, B, ResB> ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    /// The inner service's answer, read for the bearer token it carried
    /// (none: the request kept its own credential).
    #[inline]
    fn poll_calling(
        fut: Pin<&mut S::Future>,
        sent: &Option<SentToken>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response<ResB>, BoxError>> {
        let mut response = ready!(fut.poll(cx)).map_err(Into::into)?;
        if let Some(sent) = sent {
            sent.answered(&mut response);
        }
        Poll::Ready(Ok(response))
    }

    /// Polls a request in any state but the usual one: waiting for a token,
    /// for its DPoP proof, called with one, or failed.
    #[inline(never)]
    fn poll_other(
        mut state: Pin<&mut State<S, B>>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response<ResB>, BoxError>> {
        loop {
            let other = match state.as_mut().project() {
                StateProj::Calling { fut, sent } => return Self::poll_calling(fut, sent, cx),
                StateProj::Other { other } => other.get().project(),
            };
            let next = match other {
                OtherProj::Waiting { waiting } => match ready!(waiting.poll_flight(cx)) {
                    Some(next) => next,
                    None => match waiting.ask_again() {
                        Some(next) => next,
                        None => continue,
                    },
                },
                OtherProj::Signing { signing } => ready!(signing.poll_signed(cx)),
                OtherProj::Proving { fut, proved } => {
                    let mut response = ready!(fut.poll(cx)).map_err(Into::into)?;
                    proved.answered(&mut response);
                    return Poll::Ready(Ok(response));
                }
                OtherProj::Failed { error } => {
                    let error = error
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Err(error));
                }
            };
            state.set(State::after(next));
        }
    }
}

impl<S, B> State<S, B>
where
    S: Service<Request<B>>,
{
    /// The state a request goes on in.
    fn after(next: Next<S, B>) -> Self {
        match next {
            Next::Call(fut, sent) => ResponseFuture::calling(fut, Some(sent)).state,
            Next::Sign(signing) => ResponseFuture::other(Other::Signing { signing }).state,
            Next::Fail(error) => ResponseFuture::failed(error).state,
        }
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Calling { .. } => "calling the inner service",
            State::Other { other } => match other.0.as_deref() {
                Some(Other::Waiting { .. }) => "waiting for a token",
                Some(Other::Signing { .. }) => "waiting for its DPoP proof",
                Some(Other::Proving { .. }) => "calling the inner service with a DPoP proof",
                Some(Other::Failed { .. }) | None => "failed",
            },
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
