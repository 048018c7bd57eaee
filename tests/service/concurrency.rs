//! Concurrency and cancellation: a request that gives up does not take the
//! fetch with it, a fetch that dies does not leave others waiting, and an
//! inner service that panics leaves the layer sound.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use support::*;
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::OAuthLayer;

const HOUR: Duration = Duration::from_secs(3600);

fn api() -> tower::util::BoxCloneService<Request<Full<Bytes>>, Response<Full<Bytes>>, BoxError> {
    tower::util::BoxCloneService::new(service_fn(|req: Request<Full<Bytes>>| async move {
        if req.headers().contains_key("x-panic") {
            panic!("the inner service panicked");
        }
        Ok::<_, BoxError>(Response::new(Full::<Bytes>::default()))
    }))
}

#[tokio::test]
async fn a_request_timed_out_by_tower_does_not_cancel_the_fetch() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(300));
    let oauth = builder(&authority).build().unwrap();
    let impatient = ServiceBuilder::new()
        .timeout(Duration::from_millis(50))
        .layer(oauth.clone())
        .service(api());
    let patient = ServiceBuilder::new().layer(oauth.clone()).service(api());

    // The request that starts the fetch times out.
    let starter = tokio::spawn(impatient.clone().oneshot(get("http://api.example/")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Others started meanwhile wait for that same fetch.
    let waiters: Vec<_> = (0..10)
        .map(|_| tokio::spawn(patient.clone().oneshot(get("http://api.example/"))))
        .collect();
    let err = starter.await.unwrap().unwrap_err();
    assert!(err.is::<Elapsed>(), "{err}");
    for w in waiters {
        w.await.unwrap().unwrap();
    }
    assert_eq!(authority.token_requests(), 1);
    // Later requests, impatient ones included, get the token at once.
    impatient.oneshot(get("http://api.example/")).await.unwrap();
    assert_eq!(authority.token_requests(), 1);
}

#[test]
fn a_fetch_that_died_with_its_runtime_leaves_nobody_waiting() {
    let authority_rt = tokio::runtime::Runtime::new().unwrap();
    let authority = authority_rt.block_on(Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR));
    authority.set_delay(Duration::from_millis(500));
    let oauth = builder(&authority).build().unwrap();

    // Runtime A starts a fetch, then shuts down while it is under way.
    let a = tokio::runtime::Runtime::new().unwrap();
    let pending = {
        let oauth = oauth.clone();
        a.spawn(async move { oauth.token().await })
    };
    std::thread::sleep(Duration::from_millis(100));
    drop(a);
    drop(pending);

    // Runtime B is not stuck on the dead fetch: it starts its own.
    authority.set_delay(Duration::ZERO);
    let b = tokio::runtime::Runtime::new().unwrap();
    let token = b
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), oauth.token()).await })
        .expect("no hang")
        .unwrap();
    assert!(authority.accepts(token.expose_token()));
    assert_eq!(authority.token_requests(), 2);
}

#[tokio::test]
async fn a_panicking_inner_service_leaves_the_layer_sound() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth: OAuthLayer = builder(&authority).build().unwrap();
    let client = ServiceBuilder::new().layer(oauth.clone()).service(api());

    // A panic while the token is being fetched (the first request waits).
    let boom = || {
        Request::get("http://api.example/")
            .header("x-panic", "1")
            .body(Full::default())
            .unwrap()
    };
    let joined = tokio::spawn(client.clone().oneshot(boom())).await;
    assert!(joined.unwrap_err().is_panic());
    // And one on the warm path.
    let joined = tokio::spawn(client.clone().oneshot(boom())).await;
    assert!(joined.unwrap_err().is_panic());

    for _ in 0..10 {
        client
            .clone()
            .oneshot(get("http://api.example/"))
            .await
            .unwrap();
    }
    let stats = oauth.stats();
    assert_eq!(stats.token_requests, 1);
    assert!(stats.token_usable_for.is_some());
}
