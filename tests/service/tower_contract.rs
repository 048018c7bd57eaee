//! The Tower contract, with tower-test's mock as the inner service and a real
//! loopback token endpoint: readiness, back-pressure, the ready instance
//! taken into the future, errors passed through.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use support::*;
use tower_test::mock;

type Req = Request<Full<Bytes>>;
type Resp = Response<Full<Bytes>>;

macro_rules! assert_pending {
    ($e:expr) => {
        assert!(matches!($e, std::task::Poll::Pending), "expected Pending")
    };
}

async fn started() -> Authority {
    Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3600)).await
}

#[tokio::test]
async fn readiness_is_the_inner_services() {
    let authority = started().await;
    let oauth = builder(&authority).build().unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(oauth);

    handle.allow(0);
    assert_pending!(svc.poll_ready());
    handle.allow(1);
    assert!(matches!(svc.poll_ready(), std::task::Poll::Ready(Ok(()))));
}

#[tokio::test]
async fn a_request_waits_for_the_token_then_reaches_the_ready_inner_service() {
    let authority = started().await;
    authority.set_delay(Duration::from_millis(100));
    let oauth = builder(&authority).build().unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(oauth);

    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let fut = svc.call(
        Request::get("http://api.example/x")
            .body(Full::default())
            .unwrap(),
    );
    let fut = tokio::spawn(fut);
    let (req, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .expect("the request reached the inner service")
        .unwrap();
    let auth = req.headers()[http::header::AUTHORIZATION].clone();
    assert!(auth.to_str().unwrap().starts_with("Bearer tok"));
    assert!(auth.is_sensitive());
    send.send_response(Response::new(Full::new(Bytes::from_static(b"ok"))));
    let resp = fut.await.unwrap().unwrap();
    assert_eq!(resp.status(), 200);

    // The instance left behind is a clone that was never made ready: the
    // service asks the inner one again before the next call (tower-test's mock
    // panics on a call without readiness).
    handle.allow(0);
    assert_pending!(svc.poll_ready());
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let fut = tokio::spawn(
        svc.call(
            Request::get("http://api.example/y")
                .body(Full::default())
                .unwrap(),
        ),
    );
    let (req, send) = handle.next_request().await.unwrap();
    assert_eq!(req.uri().path(), "/y");
    send.send_response(Response::new(Full::default()));
    fut.await.unwrap().unwrap();
    assert_eq!(authority.token_requests(), 1);
}

#[tokio::test]
async fn back_pressure_holds_while_the_inner_service_is_busy() {
    let authority = started().await;
    let oauth = builder(&authority).build().unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(oauth);

    // Warm the token first: then a call reaches the inner service at once.
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let warm = tokio::spawn(svc.call(Request::get("http://a/0").body(Full::default()).unwrap()));
    let (_, send) = handle.next_request().await.unwrap();
    send.send_response(Response::new(Full::default()));
    warm.await.unwrap().unwrap();

    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let first = tokio::spawn(svc.call(Request::get("http://a/1").body(Full::default()).unwrap()));
    // Budget used: not ready until the inner service allows more.
    assert_pending!(svc.poll_ready());
    let (_, send) = handle.next_request().await.unwrap();
    send.send_response(Response::new(Full::default()));
    first.await.unwrap().unwrap();
    assert_pending!(svc.poll_ready());
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
}

#[tokio::test]
async fn inner_errors_pass_through_unchanged() {
    let authority = started().await;
    let oauth = builder(&authority).build().unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(oauth);

    // From poll_ready.
    handle.send_error("inner not ready: broken");
    match svc.poll_ready() {
        std::task::Poll::Ready(Err(e)) => assert_eq!(e.to_string(), "inner not ready: broken"),
        other => panic!("expected an error, got {other:?}"),
    }

    // From the call.
    let (mut svc, mut handle) =
        mock::spawn_layer::<Req, Resp, _>(builder(&authority).build().unwrap());
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let fut = tokio::spawn(svc.call(Request::get("http://a/").body(Full::default()).unwrap()));
    let (_, send) = handle.next_request().await.unwrap();
    send.send_error("upstream reset");
    let err = fut.await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "upstream reset");
    assert!(err.downcast_ref::<tower_oauth::TokenError>().is_none());
}

#[tokio::test]
async fn a_token_failure_does_not_call_the_inner_service() {
    let authority = started().await;
    let oauth = builder(&authority).client_secret("wrong").build().unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(oauth);
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let err = svc
        .call(Request::get("http://a/").body(Full::default()).unwrap())
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<tower_oauth::TokenError>().is_some());
    // Nothing reached the inner service.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), handle.next_request())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_account_without_a_login_fails_alone_and_keeps_the_instance_ready() {
    let authority = started().await;
    let oauth = builder(&authority).build().unwrap();
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(oauth);
    handle.allow(2);
    assert!(svc.poll_ready().is_ready());
    let mut req = Request::get("http://a/").body(Full::default()).unwrap();
    req.extensions_mut()
        .insert(tower_oauth::TokenParams::new().account("nobody"));
    let err = svc.call(req).await.unwrap_err();
    let err = err.downcast_ref::<tower_oauth::TokenError>().unwrap();
    assert_eq!(err.kind(), tower_oauth::TokenErrorKind::LoginRequired);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), handle.next_request())
            .await
            .is_err(),
        "nothing reached the inner service"
    );
    // The instance is ready again, and the layer's own token still flows.
    assert!(svc.poll_ready().is_ready());
    let fut = tokio::spawn(svc.call(Request::get("http://a/").body(Full::default()).unwrap()));
    let (_, send) = handle.next_request().await.unwrap();
    send.send_response(Response::new(Full::default()));
    assert_eq!(fut.await.unwrap().unwrap().status(), 200);
}

#[test]
fn the_layer_service_and_future_are_send_and_sync_where_the_inner_ones_are() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<tower_oauth::OAuthLayer>();
    send_sync::<tower_oauth::OAuthService<HyperClient>>();
    send::<tower_oauth::ResponseFuture<HyperClient, Full<Bytes>>>();
    send_sync::<tower_oauth::TokenError>();
    send_sync::<tower_oauth::ConfigError>();
    send_sync::<tower_oauth::AccessToken>();
    // Clone is one reference count: the layer is a single Arc.
    assert_eq!(
        std::mem::size_of::<tower_oauth::OAuthLayer>(),
        std::mem::size_of::<usize>()
    );
}
