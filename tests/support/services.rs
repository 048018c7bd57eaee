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

    #[inline]
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    // Inlined wherever the compiler can: a contender's cost should not
    // depend on whether the stand-in happened to be inlined beside it.
    #[inline]
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

/// One request through `svc`, the way a caller drives it: readiness, call,
/// the response future polled once, which must complete (a warm path never
/// waits).
#[inline]
pub fn drive<S>(svc: &mut S, cx: &mut Context<'_>)
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    use std::future::Future;
    assert!(svc.poll_ready(cx).is_ready());
    let req = Request::get("http://api.example/products/42")
        .body(())
        .unwrap();
    let fut = std::pin::pin!(svc.call(req));
    match fut.poll(cx) {
        Poll::Ready(r) => {
            std::hint::black_box(r.unwrap());
        }
        Poll::Pending => panic!("the warm path must not wait"),
    }
}

/// A layer on [`FixedToken`] with its token already fetched. Keep `rt`
/// alive while the layer is used: the token's timer runs there.
pub fn warm_layer(rt: &tokio::runtime::Runtime) -> tower_oauth::OAuthLayer {
    let oauth = tower_oauth::OAuthLayer::builder()
        .token_source(FixedToken)
        .build()
        .unwrap();
    rt.block_on(oauth.token()).unwrap();
    oauth
}

/// The fixed header a `SetRequestHeader` baseline inserts: the same token,
/// built at run time as a configured token would be.
pub fn fixed_header() -> http::HeaderValue {
    http::HeaderValue::from_str(&format!("Bearer {FIXED_TOKEN}")).unwrap()
}

/// A token endpoint that answers every request at once with
/// [`FIXED_TOKEN`] of `token_type` (`Bearer`, or `DPoP` for a layer with
/// DPoP on).
pub fn token_endpoint(
    token_type: &'static str,
) -> impl Service<
    Request<bytes::Bytes>,
    Response = Response<http_body_util::Full<bytes::Bytes>>,
    Error = Infallible,
    Future = impl Send,
> + Clone
       + Send {
    tower::service_fn(move |_req: Request<bytes::Bytes>| async move {
        let body = format!(
            r#"{{"access_token":"{FIXED_TOKEN}","token_type":"{token_type}","expires_in":3600}}"#
        );
        Ok::<_, Infallible>(Response::new(http_body_util::Full::from(body)))
    })
}

/// A layer whose requests choose among `n` token slots in turn (by
/// `params_for`), every slot's token already fetched. Keep `rt` alive while
/// the layer is used.
pub fn warm_slots_layer(rt: &tokio::runtime::Runtime, n: usize) -> tower_oauth::OAuthLayer {
    use std::cell::Cell;
    thread_local! {
        // Each thread takes the slots in turn on its own count, so that the
        // benchmark adds no shared write of its own.
        static NEXT: Cell<usize> = const { Cell::new(0) };
    }
    let params: Vec<tower_oauth::TokenParams> = (0..n)
        .map(|i| tower_oauth::TokenParams::new().resource(format!("urn:api:{i}")))
        .collect();
    let chosen = params.clone();
    let oauth = tower_oauth::OAuthLayer::builder()
        .token_url("https://login.example/oauth2/token")
        .client_id("bench-client")
        .client_secret("bench-secret")
        .transport(token_endpoint("Bearer"))
        .params_for(move |_| {
            let i = NEXT.with(|next| {
                next.set(next.get() + 1);
                next.get()
            });
            Some(chosen[i % n].clone())
        })
        .build()
        .unwrap();
    for p in &params {
        rt.block_on(oauth.token_for(p)).unwrap();
    }
    oauth
}

/// A layer with DPoP on `key`, its token already fetched. Keep `rt` alive
/// while the layer is used.
#[cfg(feature = "reqwest")]
pub fn warm_dpop_layer(
    rt: &tokio::runtime::Runtime,
    key: tower_oauth::dpop::DpopKey,
) -> tower_oauth::OAuthLayer {
    let oauth = tower_oauth::OAuthLayer::builder()
        .token_url("https://login.example/oauth2/token")
        .client_id("bench-client")
        .client_secret("bench-secret")
        .transport(token_endpoint("DPoP"))
        .dpop(key)
        .build()
        .unwrap();
    rt.block_on(oauth.token()).unwrap();
    oauth
}

/// A request extension of the size and cost of [`tower_oauth::TokenParams`]
/// (one reference-counted pointer) that the layer ignores: what a request
/// that names an account costs its caller, besides the layer.
#[derive(Clone)]
pub struct Tag(pub std::sync::Arc<str>);

/// [`drive`], with `extension` cloned into the request's extensions.
#[inline]
pub fn drive_with<S, T>(svc: &mut S, cx: &mut Context<'_>, extension: &T)
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
    T: Clone + Send + Sync + 'static,
{
    use std::future::Future;
    assert!(svc.poll_ready(cx).is_ready());
    let mut req = Request::get("http://api.example/products/42")
        .body(())
        .unwrap();
    req.extensions_mut().insert(extension.clone());
    let fut = std::pin::pin!(svc.call(req));
    match fut.poll(cx) {
        Poll::Ready(r) => {
            std::hint::black_box(r.unwrap());
        }
        Poll::Pending => panic!("the warm path must not wait"),
    }
}

/// A store that hands out [`FIXED_TOKEN`] for any identity: every account
/// comes back from it with a token, as from a fleet's Redis.
pub struct HandingOut;

impl tower_oauth::store::TokenStore for HandingOut {
    fn get_or_fetch<'a>(
        &'a self,
        _ctx: &'a tower_oauth::store::FetchContext<'a>,
    ) -> BoxFuture<'a, Result<tower_oauth::store::StoredToken, TokenError>> {
        Box::pin(async {
            Ok(tower_oauth::store::StoredToken {
                token: AccessToken::new(FIXED_TOKEN).with_expires_in(Duration::from_secs(3600)),
                usable_for: Duration::from_secs(3600),
            })
        })
    }

    fn refused<'a>(&'a self, _: &'a str, _: &'a AccessToken) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// A layer for `n` accounts, every one's token in memory (from
/// [`HandingOut`]), and the accounts' parameters. Keep `rt` alive while the
/// layer is used.
pub fn warm_accounts_layer(
    rt: &tokio::runtime::Runtime,
    n: usize,
) -> (tower_oauth::OAuthLayer, Vec<tower_oauth::TokenParams>) {
    let oauth = tower_oauth::OAuthLayer::builder()
        .token_url("https://login.example/oauth2/token")
        .client_id("bench-client")
        .client_secret("bench-secret")
        .transport(token_endpoint("Bearer"))
        .token_store(HandingOut)
        .max_accounts(n)
        .build()
        .unwrap();
    let accounts: Vec<tower_oauth::TokenParams> = (0..n)
        .map(|i| tower_oauth::TokenParams::new().account(format!("person-{i}@example.com")))
        .collect();
    rt.block_on(async {
        for account in &accounts {
            oauth.token_for(account).await.unwrap();
        }
    });
    (oauth, accounts)
}
