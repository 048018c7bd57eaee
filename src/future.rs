//! [`ResponseFuture`]: waits for a token if it must, then for the inner
//! service's response, and reports a refused token to its cache.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use crate::authorize::{authorize, Link, Sent};
use crate::cache::{cut_off, Acquire, Flight, Landing, Waiter};
use crate::error::TokenError;
use crate::BoxError;

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
        // The inner service was called; `sent` names the token it carries
        // (none when the request kept its own credential).
        Calling {
            #[pin]
            fut: S::Future,
            sent: Option<Sent>,
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

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn calling(fut: S::Future, sent: Option<Sent>) -> Self {
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
enum Next<F> {
    Call(F, Sent),
    Fail(TokenError),
}

impl<S, B> Waiting<S, B>
where
    S: Service<Request<B>>,
{
    /// Sends the request with the flight's token, if it is still usable now;
    /// `None` when the request must ask the cache again.
    fn poll_flight(&mut self, cx: &mut Context<'_>) -> Poll<Option<Next<S::Future>>> {
        let Waiting {
            waiter,
            svc,
            req,
            link,
            ..
        } = self;
        Poll::Ready(match ready!(waiter.poll(cx)) {
            Landing::Done(Ok(token)) if token.timings.usable_at(Instant::now()) => {
                let (Some(mut svc), Some(mut req)) = (svc.take(), req.take()) else {
                    panic!("ResponseFuture polled after completion");
                };
                let sent = authorize(&mut req, link, token);
                Some(Next::Call(svc.call(req), sent))
            }
            Landing::Done(Err(error)) => Some(Next::Fail(error.clone())),
            // Cut off, or a token that ran out before this request woke.
            _ => None,
        })
    }

    /// Asks the cache again, on this request's own runtime: a token at once,
    /// an error, or (`None`) another flight to wait for.
    fn ask_again(&mut self) -> Option<Next<S::Future>> {
        self.asks += 1;
        if self.asks > MAX_ASKS {
            return Some(Next::Fail(cut_off()));
        }
        match self.link.0.acquire() {
            Acquire::Now(Ok(token)) => {
                let (Some(mut svc), Some(mut req)) = (self.svc.take(), self.req.take()) else {
                    panic!("ResponseFuture polled after completion");
                };
                let sent = authorize(&mut req, &self.link, &token);
                Some(Next::Call(svc.call(req), sent))
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

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Waiting { waiting } => {
                    let next = match ready!(waiting.poll_flight(cx)) {
                        Some(next) => next,
                        None => match waiting.ask_again() {
                            Some(next) => next,
                            None => continue,
                        },
                    };
                    match next {
                        Next::Call(fut, sent) => this.state.set(State::Calling {
                            fut,
                            sent: Some(sent),
                        }),
                        Next::Fail(error) => return Poll::Ready(Err(error.into())),
                    }
                }
                StateProj::Calling { fut, sent } => {
                    let response = ready!(fut.poll(cx)).map_err(Into::into)?;
                    if let Some(sent) = sent {
                        if crate::retry::is_unauthorized(&response) {
                            sent.refused();
                        }
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

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting { .. } => "waiting for a token",
            State::Calling { .. } => "calling the inner service",
            State::Failed { .. } => "failed",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}
