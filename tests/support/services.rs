//! Stand-ins shared by the benchmarks and the allocation test: an inner
//! service that answers at once, and a token source with a fixed token.

#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use tower::Service;
use tower_oauth::{AccessToken, BoxFuture, TokenError, TokenSource};

/// A no-op inner service: answers at once, costs nothing of its own.
#[derive(Clone, Copy, Debug)]
pub struct Noop;

impl Service<Request<()>> for Noop {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = Ready<Result<Response<()>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<()>) -> Self::Future {
        drop(req);
        ready(Ok(Response::new(())))
    }
}

/// The token of [`FixedToken`].
pub const FIXED_TOKEN: &str = "MTQ0NjJkZmQ5OTM2NDE1ZTZjNGZmZjI3";

/// A token source that hands out [`FIXED_TOKEN`], valid for an hour.
#[derive(Debug)]
pub struct FixedToken;

impl TokenSource for FixedToken {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async {
            Ok(AccessToken::new(FIXED_TOKEN).with_expires_in(Duration::from_secs(3600)))
        })
    }
}
