//! [`ResponseFuture`]: waits for a token if it must, then for the inner
//! service's response.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::sync::watch;
use tower_service::Service;

use crate::cache::{CachedToken, Sent, TokenCache};
use crate::error::{TokenError, TokenErrorKind};
use crate::transport::BoxFuture;
use crate::BoxError;

type FetchResult = Result<Arc<CachedToken>, TokenError>;

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
    wait: BoxFuture<'static, FetchResult>,
    svc: Option<S>,
    req: Option<Request<B>>,
    cache: Arc<TokenCache>,
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

    pub(crate) fn waiting(
        rx: watch::Receiver<Option<FetchResult>>,
        svc: S,
        req: Request<B>,
        cache: Arc<TokenCache>,
    ) -> Self {
        ResponseFuture {
            state: State::Waiting {
                waiting: Box::new(Waiting {
                    wait: Box::pin(wait_for(rx)),
                    svc: Some(svc),
                    req: Some(req),
                    cache,
                }),
            },
        }
    }
}

/// Waits for the outcome of a fetch under way.
pub(crate) async fn wait_for(mut rx: watch::Receiver<Option<FetchResult>>) -> FetchResult {
    match rx.wait_for(Option::is_some).await {
        Ok(outcome) => outcome
            .as_ref()
            .cloned()
            .unwrap_or_else(|| Err(fetch_died())),
        Err(_) => Err(fetch_died()),
    }
}

fn fetch_died() -> TokenError {
    TokenError::new(TokenErrorKind::Runtime)
        .with_message("the token fetch task ended without an answer (runtime shutting down?)")
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
                    let token = match ready!(waiting.wait.as_mut().poll(cx)) {
                        Ok(token) => token,
                        Err(error) => return Poll::Ready(Err(error.into())),
                    };
                    let (Some(mut svc), Some(mut req)) = (waiting.svc.take(), waiting.req.take())
                    else {
                        panic!("ResponseFuture polled after completion");
                    };
                    req.headers_mut().insert(
                        waiting.cache.settings().header_name.clone(),
                        token.header.clone(),
                    );
                    let sent = Some(waiting.cache.sent(&token));
                    let fut = svc.call(req);
                    this.state.set(State::Calling { fut, sent });
                }
                StateProj::Calling { fut, sent } => {
                    let response = ready!(fut.poll(cx)).map_err(Into::into)?;
                    if let Some(sent) = *sent {
                        if crate::retry::is_unauthorized(&response) {
                            TokenCache::refused(sent);
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
