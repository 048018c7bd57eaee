//! The contenders the warm path is measured against, besides tower-http's
//! `SetRequestHeader` with a fixed value: the same fixed header behind an
//! exact expiry check (one read of the clock per request, the floor of any
//! layer that never sends an expired token), and `middle`, the closest peer,
//! driven as its users drive it: its authorizer's `authorization_header()`
//! in a small `map_request` layer.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::AUTHORIZATION;
use http::{Request, Response, StatusCode};
use middle::Authorizer;
use serde_json::json;
use tower::util::{MapRequest, MapResponse};

use super::provider::Provider;
use super::services::fixed_header;

/// `inner` behind a fixed `Authorization` value that is checked against
/// the clock on every request, as an exact cache must: the header goes on
/// only while `Instant::now()` is before its expiry.
pub fn exact_clock<S>(inner: S) -> MapRequest<S, impl FnMut(Request<()>) -> Request<()> + Clone>
where
    S: tower::Service<Request<()>>,
{
    let header = fixed_header();
    let until = Instant::now() + Duration::from_secs(3600);
    MapRequest::new(inner, move |mut req: Request<()>| {
        if Instant::now() < until {
            req.headers_mut().insert(AUTHORIZATION, header.clone());
        }
        req
    })
}

/// [`exact_clock`] that also reads each answer, as a layer that drops a
/// refused token must: a handle per request (tower's `MapResponse` clones
/// its closure, and with it an `Arc`, into each response future), a
/// wrapper future, and the status read. The floor of a layer that reads
/// answers; `middle` reads none.
#[allow(clippy::type_complexity)]
pub fn exact_clock_reading<S>(
    inner: S,
) -> MapResponse<
    MapRequest<S, impl FnMut(Request<()>) -> Request<()> + Clone>,
    impl FnOnce(Response<()>) -> Response<()> + Clone,
>
where
    S: tower::Service<Request<()>, Response = Response<()>>,
{
    let refused = Arc::new(AtomicBool::new(false));
    MapResponse::new(exact_clock(inner), move |response: Response<()>| {
        if response.status() == StatusCode::UNAUTHORIZED {
            refused.store(true, Ordering::Relaxed);
        }
        response
    })
}

/// `middle`'s client-credentials authorizer, its token fetched from a
/// loopback endpoint (`provider`, kept alive by the caller with `rt`, where
/// its refresh task runs).
pub fn middle_authorizer(
    rt: &tokio::runtime::Runtime,
) -> (Provider, middle::BasicClientCredentialAuthorizer) {
    rt.block_on(async {
        let provider = Provider::start(
            "/token",
            json!({"token_type": "Bearer", "expires_in": 3600}),
            |_| Ok(()),
        )
        .await;
        let url = url::Url::parse(&provider.url("/token")).unwrap();
        let authorizer =
            middle::BasicClientCredentialAuthorizer::basic_builder("bench", "bench-secret", url)
                .build()
                .await
                .unwrap();
        (provider, authorizer)
    })
}

/// `inner` with `middle`'s header on every request: its
/// `authorization_header()` (a read lock, a clock read, an `Arc` clone) in
/// a `map_request` layer.
pub fn middle<S>(
    inner: S,
    authorizer: &middle::BasicClientCredentialAuthorizer,
) -> MapRequest<S, impl FnMut(Request<()>) -> Request<()> + Clone>
where
    S: tower::Service<Request<()>>,
{
    let authorizer = authorizer.clone();
    MapRequest::new(inner, move |mut req: Request<()>| {
        let header = authorizer
            .authorization_header()
            .expect("middle has its token");
        req.headers_mut().insert(AUTHORIZATION, (*header).clone());
        req
    })
}
