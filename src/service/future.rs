//! [`ResponseFuture`]: waits for a token (and a proof from a custom DPoP
//! signer) if it must, then for the inner service's response, and reports
//! what the API said of the token to its cache.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use super::authorize::{authorize, put_proof, SentToken, Step};
use crate::cache::{cut_off, Acquire, Flight, Landing, Link, Waiter};
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
        // No usable token when called: wait for the shared fetch. Boxed, so
        // that the common state below keeps the future small.
        Waiting {
            waiting: Box<Waiting<S, B>>,
        },
        // The request's DPoP proof is being signed by a custom signer.
        Signing {
            signing: Box<Signing<S, B>>,
        },
        // The inner service was called; `sent` names the token it carries
        // (none when the request kept its own credential).
        Calling {
            #[pin]
            fut: S::Future,
            sent: Option<SentToken>,
        },
        // No token can be had now.
        Failed {
            error: Option<TokenError>,
        },
    }
}

/// A request waiting for the shared fetch, holding the inner service that
/// was made ready for it.
struct Waiting<S, B> {
    waiter: Waiter,
    asks: u8,
    svc: Option<S>,
    req: Option<Request<B>>,
    link: Arc<Link>,
}

/// A request whose DPoP proof a custom signer is making, holding the inner
/// service that was made ready for it.
struct Signing<S, B> {
    proof: BoxFuture<'static, Result<HeaderValue, TokenError>>,
    svc: S,
    req: Option<Request<B>>,
    sent: Option<SentToken>,
}

impl<S, B> Signing<S, B>
where
    S: Service<Request<B>>,
{
    /// Sends the request once its proof is signed.
    fn poll_signed(&mut self, cx: &mut Context<'_>) -> Poll<Next<S, B>> {
        let proof = ready!(self.proof.as_mut().poll(cx));
        let (Some(mut req), Some(sent)) = (self.req.take(), self.sent.take()) else {
            panic!("ResponseFuture polled after completion");
        };
        Poll::Ready(match proof {
            Ok(proof) => {
                put_proof(&mut req, proof);
                Next::Call(self.svc.call(req), sent)
            }
            Err(error) => Next::Fail(error),
        })
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn signing(
        proof: BoxFuture<'static, Result<HeaderValue, TokenError>>,
        svc: S,
        req: Request<B>,
        sent: SentToken,
    ) -> Self {
        ResponseFuture {
            state: State::Signing {
                signing: Box::new(Signing {
                    proof,
                    svc,
                    req: Some(req),
                    sent: Some(sent),
                }),
            },
        }
    }

    pub(crate) fn calling(fut: S::Future, sent: Option<SentToken>) -> Self {
        ResponseFuture {
            state: State::Calling { fut, sent },
        }
    }

    pub(crate) fn failed(error: TokenError) -> Self {
        ResponseFuture {
            state: State::Failed { error: Some(error) },
        }
    }

    pub(crate) fn waiting(flight: Arc<Flight>, svc: S, req: Request<B>, link: Arc<Link>) -> Self {
        ResponseFuture {
            state: State::Waiting {
                waiting: Box::new(Waiting {
                    waiter: Waiter::new(flight),
                    asks: 0,
                    svc: Some(svc),
                    req: Some(req),
                    link,
                }),
            },
        }
    }
}

/// What a waiting request does once it has a token, or none.
enum Next<S, B>
where
    S: Service<Request<B>>,
{
    Call(S::Future, SentToken),
    Sign(Box<Signing<S, B>>),
    Fail(TokenError),
}

impl<S, B> Next<S, B>
where
    S: Service<Request<B>>,
{
    /// Puts `token` on `req` and goes on as its step says.
    fn send(
        mut svc: S,
        mut req: Request<B>,
        link: &Arc<Link>,
        token: &crate::cache::CachedToken,
    ) -> Self {
        match authorize(&mut req, link, token) {
            Step::Send(sent) => Next::Call(svc.call(req), sent),
            Step::Sign(sent, proof) => Next::Sign(Box::new(Signing {
                proof,
                svc,
                req: Some(req),
                sent: Some(sent),
            })),
            Step::Fail(error) => Next::Fail(error),
        }
    }
}

impl<S, B> Waiting<S, B>
where
    S: Service<Request<B>>,
{
    /// The ready service and the request, taken to be sent.
    fn take(&mut self) -> (S, Request<B>) {
        let (Some(svc), Some(req)) = (self.svc.take(), self.req.take()) else {
            panic!("ResponseFuture polled after completion");
        };
        (svc, req)
    }

    /// Sends the request with the flight's token, if it is still usable now;
    /// `None` when the request must ask the cache again.
    fn poll_flight(&mut self, cx: &mut Context<'_>) -> Poll<Option<Next<S, B>>> {
        Poll::Ready(match ready!(self.waiter.poll(cx)) {
            Landing::Done(Ok(token)) if token.timings.usable_at(Instant::now()) => {
                let token = Arc::clone(token);
                let (svc, req) = self.take();
                Some(Next::send(svc, req, &self.link, &token))
            }
            Landing::Done(Err(error)) => Some(Next::Fail(error.clone())),
            // Cut off, or a token that ran out before this request woke.
            _ => None,
        })
    }

    /// Asks the cache again, on this request's own runtime: a token at once,
    /// an error, or (`None`) another flight to wait for.
    fn ask_again(&mut self) -> Option<Next<S, B>> {
        self.asks += 1;
        if self.asks > MAX_ASKS {
            return Some(Next::Fail(cut_off()));
        }
        match self.link.cache.acquire() {
            Acquire::Now(Ok(token)) => {
                let (svc, req) = self.take();
                Some(Next::send(svc, req, &self.link, &token))
            }
            Acquire::Now(Err(error)) => Some(Next::Fail(error)),
            Acquire::Wait(flight) => {
                // The old waiter leaves its flight as it is replaced.
                self.waiter = Waiter::new(flight);
                None
            }
        }
    }
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
        // the token at hand. Waiting, signing and failing are out of line.
        if let StateProj::Calling { fut, sent } = this.state.as_mut().project() {
            let mut response = ready!(fut.poll(cx)).map_err(Into::into)?;
            if let Some(sent) = sent {
                sent.answered(&mut response);
            }
            return Poll::Ready(Ok(response));
        }
        Self::poll_before_calling(this.state, cx)
    }
}

impl<S, B, ResB> ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    /// Polls a request that is not yet calling the inner service: waiting
    /// for a token, for its DPoP proof, or failed.
    #[inline(never)]
    fn poll_before_calling(
        mut state: Pin<&mut State<S, B>>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Response<ResB>, BoxError>> {
        loop {
            match state.as_mut().project() {
                StateProj::Waiting { waiting } => {
                    let next = match ready!(waiting.poll_flight(cx)) {
                        Some(next) => next,
                        None => match waiting.ask_again() {
                            Some(next) => next,
                            None => continue,
                        },
                    };
                    state.set(State::after(next));
                }
                StateProj::Signing { signing } => {
                    let next = ready!(signing.poll_signed(cx));
                    state.set(State::after(next));
                }
                StateProj::Calling { fut, sent } => {
                    let mut response = ready!(fut.poll(cx)).map_err(Into::into)?;
                    if let Some(sent) = sent {
                        sent.answered(&mut response);
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Failed { error } => {
                    let error = error
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Err(error.into()));
                }
            }
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
            Next::Call(fut, sent) => State::Calling {
                fut,
                sent: Some(sent),
            },
            Next::Sign(signing) => State::Signing { signing },
            Next::Fail(error) => State::Failed { error: Some(error) },
        }
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting { .. } => "waiting for a token",
            State::Signing { .. } => "waiting for its DPoP proof",
            State::Calling { .. } => "calling the inner service",
            State::Failed { .. } => "failed",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
