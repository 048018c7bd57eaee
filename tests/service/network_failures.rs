//! What one process does when what surrounds it fails: a token store that
//! never answers (every wait still ends, with no other request coming), a
//! 401 during a renewal's back-off (fetched at once), an answer that does
//! not read (retried as a 503 is), and a concurrency limit under the layer
//! (a request waiting for a token holds none of its capacity).

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use support::chaos::{Chaos, Mode};
use support::*;
use tower::{service_fn, BoxError, Service, ServiceBuilder, ServiceExt};
use tower_oauth::store::{FetchContext, StoredToken, TokenStore};
use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenErrorKind};

/// Far beyond any bound the tests below expect: a wait that reaches it
/// never ends by itself.
const GUARD: Duration = Duration::from_secs(60);

fn token_error(err: BoxError) -> TokenError {
    match err.downcast::<TokenError>() {
        Ok(e) => *e,
        Err(other) => panic!("not a TokenError: {other}"),
    }
}

/// A token store that takes every call and never answers.
struct Silent;

impl TokenStore for Silent {
    fn get_or_fetch<'a>(
        &'a self,
        _ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<StoredToken, TokenError>> {
        Box::pin(std::future::pending())
    }

    fn refused<'a>(&'a self, _identity: &'a str, _token: &'a AccessToken) -> BoxFuture<'a, ()> {
        Box::pin(std::future::pending())
    }
}

/// One request, and `token()`, each alone (no other request comes to find
/// the fetch overdue), end with a `Timeout` by the fetch's own bound.
#[tokio::test]
async fn every_wait_on_a_store_that_never_answers_ends_by_the_fetch_s_bound() {
    let authority =
        support::authority::Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3600))
            .await;
    let oauth = support::builder(&authority)
        .fetch_timeout(Duration::from_millis(200))
        .token_store(Silent)
        .build()
        .unwrap();
    let api = service_fn(|_: Request<Full<Bytes>>| async {
        Ok::<_, BoxError>(Response::new(Full::<Bytes>::default()))
    });
    let request = ServiceBuilder::new()
        .layer(oauth.clone())
        .service(api)
        .oneshot(get("http://api.example/"));
    let error = tokio::time::timeout(GUARD, request)
        .await
        .expect("the request waited past every bound")
        .map(drop)
        .map_err(token_error)
        .unwrap_err();
    assert_eq!(error.kind(), TokenErrorKind::Timeout, "{error}");
    assert!(error.to_string().contains("the fetch's bound"), "{error}");
    // `token()` alone, after the back-off: the same.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let error = tokio::time::timeout(GUARD, oauth.token())
        .await
        .expect("token() waited past every bound")
        .unwrap_err();
    assert_eq!(error.kind(), TokenErrorKind::Timeout, "{error}");
    assert_eq!(authority.token_requests(), 0);
}

fn chaos_layer(chaos: &Chaos, backoff: Duration) -> OAuthLayer {
    with_transport(
        OAuthLayer::builder()
            .token_url(chaos.url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .fetch_timeout(Duration::from_secs(2))
            .min_backoff(backoff)
            .max_backoff(backoff)
            .refresh_margin(Duration::from_secs(1))
            .expiry_skew(Duration::from_millis(100))
            .forced_renewal_interval(Duration::from_millis(200)),
    )
    .build()
    .unwrap()
}

/// A renewal fails while the token still serves, and backs off for
/// seconds; the endpoint recovers; the API refuses the token in hand (a
/// 401, here `force_renewal`): the layer fetches at once, not after the
/// back-off. A pause the server asked for (`Retry-After`) is waited out.
#[tokio::test]
async fn a_401_during_a_renewal_s_back_off_fetches_at_once() {
    let chaos = Chaos::start(CLIENT_SECRET, Mode::Healthy { lifetime: 8 }).await;
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(chaos.url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .min_backoff(Duration::from_secs(3))
            .max_backoff(Duration::from_secs(60))
            .refresh_margin(Duration::from_secs(4))
            .expiry_skew(Duration::from_millis(100))
            .forced_renewal_interval(Duration::from_millis(200)),
    )
    .build()
    .unwrap();
    let first = oauth.token().await.unwrap();
    chaos.set(Mode::Status {
        status: 503,
        headers: vec![],
        body: "{}".into(),
    });
    // Past the renewal point (4 s ahead of expiry), the renewal fails.
    tokio::time::sleep(Duration::from_millis(4300)).await;
    let still = oauth.token().await.unwrap();
    assert_eq!(still.expose_token(), first.expose_token());
    for _ in 0..200 {
        if oauth.stats().backing_off.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let backing_off = oauth.stats().backing_off.expect("the renewal failed");
    assert!(backing_off > Duration::from_secs(2), "{backing_off:?}");
    // The endpoint is back; the API refuses the token.
    chaos.set(Mode::Healthy { lifetime: 3600 });
    assert!(oauth.force_renewal());
    let fresh = tokio::time::timeout(Duration::from_secs(10), oauth.token())
        .await
        .expect("waited out the back-off")
        .expect("a token, fetched at once");
    assert_ne!(fresh.expose_token(), first.expose_token());
}

/// A `Retry-After` from the endpoint holds even a forced renewal back.
#[tokio::test]
async fn a_forced_renewal_waits_out_a_retry_after() {
    let chaos = Chaos::start(CLIENT_SECRET, Mode::Healthy { lifetime: 3600 }).await;
    let oauth = chaos_layer(&chaos, Duration::from_millis(100));
    oauth.token().await.unwrap();
    chaos.set(Mode::Status {
        status: 503,
        headers: vec![("retry-after".into(), "60".into())],
        body: "{}".into(),
    });
    assert!(oauth.force_renewal());
    // The forced renewal's fetch fails and sets the server's pause.
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_secs(60)), "{e}");
    let asked = chaos.requests();
    tokio::time::sleep(Duration::from_millis(300)).await;
    oauth.force_renewal();
    let e = oauth.token().await.unwrap_err();
    assert!(e.retry_after().is_some(), "{e}");
    assert_eq!(
        chaos.requests(),
        asked,
        "a request inside the server's pause"
    );
}

/// A token endpoint behind a gateway answers 200 with an HTML page, then
/// recovers: the layer retries on the steady schedule of a 503 (within
/// `min_backoff`), not on the exponential one that climbs to `max_backoff`.
#[tokio::test]
async fn an_answer_that_does_not_read_is_retried_as_a_503_is() {
    for page in [
        "<html><body>502 Bad Gateway</body></html>",
        r#"{"error":"temporarily_unavailable"}"#,
        r#"{"access_token":"x","token_type":"Bearer","expires_in":0}"#,
    ] {
        let chaos = Chaos::start(CLIENT_SECRET, Mode::Ok(page.to_owned())).await;
        let oauth = with_transport(
            OAuthLayer::builder()
                .token_url(chaos.url())
                .client_id(CLIENT_ID)
                .client_secret(CLIENT_SECRET)
                .min_backoff(Duration::from_millis(200))
                .max_backoff(Duration::from_secs(60)),
        )
        .build()
        .unwrap();
        // Five failures in a row: the exponential back-off would be 3.2 s
        // and more by now; the steady one stays under 200 ms.
        for _ in 0..5 {
            let error = oauth.token().await.unwrap_err();
            assert_eq!(
                error.kind(),
                TokenErrorKind::InvalidResponse,
                "{page}: {error}"
            );
            let left = oauth.stats().backing_off.unwrap_or_default();
            assert!(
                left <= Duration::from_millis(200),
                "{page}: backing off {left:?}"
            );
            tokio::time::sleep(left + Duration::from_millis(10)).await;
        }
        chaos.set(Mode::Healthy { lifetime: 3600 });
        let left = oauth.stats().backing_off.unwrap_or_default();
        tokio::time::sleep(left + Duration::from_millis(10)).await;
        oauth.token().await.unwrap();
    }
}

/// A concurrency limit of one under the layer: while one request waits for
/// its token (the endpoint holds its answer), another that brings its own
/// credential goes through. (Every cold start's request, in the other
/// tests, is made ready again once its token is here.)
#[tokio::test]
async fn a_request_waiting_for_a_token_holds_no_capacity_of_the_inner_service() {
    let chaos = Chaos::start(CLIENT_SECRET, Mode::NeverAnswer).await;
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(chaos.url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .keep_existing_header(true)
            .fetch_timeout(GUARD),
    )
    .build()
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let api = service_fn(move |_: Request<Full<Bytes>>| {
        seen.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, BoxError>(Response::new(Full::<Bytes>::default())) }
    });
    let mut service = ServiceBuilder::new()
        .layer(oauth.clone())
        .concurrency_limit(1)
        .service(api);
    // The first request waits for a token: the endpoint does not answer.
    let waiting = service
        .ready()
        .await
        .unwrap()
        .call(get("http://api.example/"));
    let waiting = tokio::spawn(waiting);
    for _ in 0..100 {
        if chaos.requests() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(chaos.requests(), 1, "the token request is out");
    // A request with its own credential needs no token, only capacity.
    let mut own = get("http://api.example/");
    own.headers_mut().insert(
        http::header::AUTHORIZATION,
        "Bearer its-own".parse().unwrap(),
    );
    // (Its fetch's bound is far longer: the first request holds on.)
    let answered = tokio::time::timeout(Duration::from_secs(20), async {
        service.ready().await.unwrap().call(own).await
    })
    .await
    .expect("the waiting request held the only permit");
    assert_eq!(answered.unwrap().status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(!waiting.is_finished(), "still waiting for its token");
    waiting.abort();
}
