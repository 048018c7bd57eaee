//! reqwest-middleware chains for the middleware benchmarks: a last
//! middleware that answers at once (no network), and the floor, a
//! middleware that adds a fixed `Authorization` header.
#![allow(dead_code)]

use http::{Extensions, HeaderValue};
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

use super::reqwest_client;

/// Answers every request with `200` and no body, without sending it.
pub struct Answer;

#[async_trait::async_trait]
impl Middleware for Answer {
    async fn handle(
        &self,
        _: Request,
        _: &mut Extensions,
        _: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        Ok(Response::from(http::Response::new("")))
    }
}

/// Adds a fixed `Authorization` header: the floor.
pub struct FixedHeader(pub HeaderValue);

#[async_trait::async_trait]
impl Middleware for FixedHeader {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, self.0.clone());
        next.run(req, extensions).await
    }
}

/// A client whose chain is `first`, then [`Answer`].
pub fn client(first: impl Middleware) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest_client::reqwest_client())
        .with(first)
        .with(Answer)
        .build()
}
