//! End to end: the layer in a real hyper-util client stack, against a real
//! loopback token endpoint and protected API.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use support::*;
use tower::ServiceExt;
use tower_oauth::{OAuthLayer, TokenError, TokenErrorKind};

const HOUR: Duration = Duration::from_secs(3600);

fn token_error(err: &tower_oauth::BoxError) -> &TokenError {
    err.downcast_ref::<TokenError>()
        .unwrap_or_else(|| panic!("not a TokenError: {err}"))
}

#[tokio::test]
async fn the_token_request_is_exactly_the_specifications() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let resp = send(&oauth, &authority.api_url("/products/42"))
        .await
        .unwrap();
    let (status, body) = read(resp).await;
    assert_eq!(status, 200, "{body}");
    // POST, form content type, no query, body byte for byte with the
    // secret's `+`, `/` and `=` unencoded: the authority accepted it.
    assert_eq!(authority.violations(), Vec::<String>::new());
    assert_eq!(authority.token_requests(), 1);
    assert_eq!(authority.presented().len(), 1);
}

#[tokio::test]
async fn token_url_is_used_exactly_as_given() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    // A token URL means a standard server: HTTP Basic by default.
    authority.expect(authority::Style::Basic, &[]);
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(authority.token_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    let resp = send(&oauth, &authority.api_url("/x")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn wrong_credentials_are_a_status_error_with_the_endpoints_code() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).client_secret("wrong").build().unwrap();
    let err = send(&oauth, &authority.api_url("/x")).await.unwrap_err();
    let e = token_error(&err);
    assert_eq!(e.kind(), TokenErrorKind::Status);
    assert_eq!(e.status(), Some(http::StatusCode::UNAUTHORIZED));
    assert_eq!(e.error_code(), Some("invalid_client"));
    assert_eq!(e.error_description(), Some("ClientId is Invalid"));
    assert!(!e.is_retryable());
    // The API was never called without a token.
    assert_eq!(authority.api_requests(), 0);
}

#[tokio::test]
async fn concurrent_cold_start_causes_one_token_request() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(200));
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let client = client.clone();
            let url = authority.api_url(&format!("/products/{i}"));
            tokio::spawn(async move { client.oneshot(get(&url)).await.unwrap().status() })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    assert_eq!(authority.token_requests(), 1);
    assert_eq!(authority.api_requests(), 200);
    let stats = oauth.stats();
    assert_eq!(stats.token_requests, 1);
    assert_eq!(stats.failed_token_requests, 0);
    assert!(stats.waited_for_token >= 1 && stats.waited_for_token <= 200);
    assert!(stats.token_usable_for.unwrap() > Duration::from_secs(3000));
}

#[tokio::test]
async fn clones_of_the_layer_share_one_token() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let a = client(&oauth);
    let b = client(&oauth);
    for svc in [a.clone(), b.clone(), a, b] {
        let resp = svc.oneshot(get(&authority.api_url("/x"))).await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    assert_eq!(authority.token_requests(), 1);
    let presented = authority.presented();
    assert!(presented.iter().all(|t| t == &presented[0]));
}

#[tokio::test]
async fn short_tokens_are_renewed_ahead_and_never_refused() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(4500);
    let mut n = 0;
    while tokio::time::Instant::now() < deadline {
        let resp = client
            .clone()
            .oneshot(get(&authority.api_url("/p")))
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(authority.api_refused(), 0);
    // A 2 s token renews at about 0.9 to 1 s: four to five tokens in 4.5 s.
    let fetched = authority.token_requests();
    assert!((3..=6).contains(&fetched), "{fetched} token requests");
    assert!(n > 50);
    // Every renewal after the first token was ahead of expiry.
    assert_eq!(oauth.stats().renewals_ahead as usize, fetched - 1);
}

#[tokio::test]
async fn a_revoked_token_gets_its_401_through_and_is_replaced() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let send = || client.clone().oneshot(get(&authority.api_url("/p")));
    assert_eq!(send().await.unwrap().status(), 200);
    authority.revoke_all();
    let (status, body) = read(send().await.unwrap()).await;
    assert_eq!(status, 401);
    assert!(body.contains("keymanagement.service.invalid_access_token"));
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(authority.token_requests(), 2);
    let presented = authority.presented();
    assert_ne!(presented[0], presented[1]);
    assert_eq!(oauth.stats().forced_renewals, 1);
}

#[tokio::test]
async fn an_api_that_refuses_every_token_causes_no_storm() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    // A token the API refuses again and again (revoked after each issue).
    for _ in 0..50 {
        authority.revoke_all();
        let resp = client
            .clone()
            .oneshot(get(&authority.api_url("/p")))
            .await
            .unwrap();
        assert!(resp.status() == 200 || resp.status() == 401);
    }
    // One initial fetch and one forced renewal within the 10 s interval.
    assert_eq!(authority.token_requests(), 2);
}

#[tokio::test]
async fn the_request_passes_through_untouched() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let req = http::Request::put(authority.api_url("/products/7?lang=en&x=a%20b"))
        .header("x-echo", "kept")
        .header(http::header::AUTHORIZATION, "Bearer stale")
        .body(Full::new(Bytes::from_static(b"0123456789")))
        .unwrap();
    let (status, body) = read(client.oneshot(req).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        r#"{"method":"PUT","path":"/api/products/7","query":"lang=en&x=a%20b","echo":"kept","body_len":10}"#
    );
    // The stale header was replaced by the layer's token.
    assert_ne!(authority.presented()[0], "stale");
}

#[tokio::test]
async fn a_failing_endpoint_backs_off_and_fails_fast() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.push_faults([fault(
        503,
        r#"{"fault":{"faultstring":"Service Unavailable","detail":{"errorcode":"messaging.adaptors.http.flow.ServiceUnavailable"}}}"#,
    )]);
    let oauth = builder(&authority)
        .min_backoff(Duration::from_millis(400))
        .build()
        .unwrap();
    let client = client(&oauth);
    let send = || client.clone().oneshot(get(&authority.api_url("/p")));
    let err = send().await.unwrap_err();
    let e = token_error(&err);
    assert_eq!(e.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(
        e.error_code(),
        Some("messaging.adaptors.http.flow.ServiceUnavailable")
    );
    assert!(e.is_retryable());
    // While backing off: the same error at once, and no token request.
    for _ in 0..20 {
        let err = send().await.unwrap_err();
        let e = token_error(&err);
        assert_eq!(e.kind(), TokenErrorKind::Status);
        assert!(e.backing_off().is_some());
    }
    assert_eq!(authority.token_requests(), 1);
    let stats = oauth.stats();
    assert_eq!(stats.failed_token_requests, 1);
    assert!(stats.backing_off.is_some());
    assert!(stats.token_usable_for.is_none());
    // Recovered once the back-off is over (400 ms, jittered up to 600 ms).
    tokio::time::sleep(Duration::from_millis(650)).await;
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(authority.token_requests(), 2);
}

#[tokio::test]
async fn retry_after_from_the_endpoint_is_honoured() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let mut f = fault(
        429,
        r#"{"fault":{"faultstring":"Spike arrest violation","detail":{"errorcode":"policies.ratelimit.SpikeArrestViolation"}}}"#,
    );
    f.headers.push(("retry-after".into(), "2".into()));
    authority.push_faults([f]);
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let err = client
        .clone()
        .oneshot(get(&authority.api_url("/p")))
        .await
        .unwrap_err();
    assert_eq!(
        token_error(&err).retry_after(),
        Some(Duration::from_secs(2))
    );
    let err = client
        .clone()
        .oneshot(get(&authority.api_url("/p")))
        .await
        .unwrap_err();
    let left = token_error(&err).backing_off().unwrap();
    assert!(left > Duration::from_millis(1500), "{left:?}");
    assert_eq!(authority.token_requests(), 1);
}

#[tokio::test]
async fn fetch_timeout_bounds_a_stalled_endpoint() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_secs(30));
    let oauth = builder(&authority)
        .fetch_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = client(&oauth);
    let started = std::time::Instant::now();
    let err = client
        .oneshot(get(&authority.api_url("/p")))
        .await
        .unwrap_err();
    assert_eq!(token_error(&err).kind(), TokenErrorKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let elsewhere = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let mut f = fault(307, "");
    f.headers.push(("location".into(), elsewhere.token_url()));
    authority.push_faults([f]);
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    let err = client
        .oneshot(get(&authority.api_url("/p")))
        .await
        .unwrap_err();
    let e = token_error(&err);
    assert_eq!(e.status(), Some(http::StatusCode::TEMPORARY_REDIRECT));
    assert!(e.to_string().contains("redirects are not followed"));
    assert_eq!(elsewhere.token_requests(), 0);
}

#[tokio::test]
async fn an_oversized_or_unusable_answer_is_refused() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let huge = format!(r#"{{"access_token":"{}"}}"#, "a".repeat(100 * 1024));
    authority.push_faults([
        fault(200, &huge),
        fault(200, "<html>gateway</html>"),
        fault(200, r#"{"access_token":"has\nnewline"}"#),
    ]);
    let oauth = builder(&authority)
        .min_backoff(Duration::from_millis(10))
        .max_backoff(Duration::from_millis(10))
        .build()
        .unwrap();
    let client = client(&oauth);
    for _ in 0..3 {
        let err = client
            .clone()
            .oneshot(get(&authority.api_url("/p")))
            .await
            .unwrap_err();
        assert_eq!(token_error(&err).kind(), TokenErrorKind::InvalidResponse);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resp = client.oneshot(get(&authority.api_url("/p"))).await.unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_dropped_request_does_not_cancel_the_fetch() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.set_delay(Duration::from_millis(300));
    let oauth = builder(&authority).build().unwrap();
    let client = client(&oauth);
    // The first request gives up while the token is being fetched.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        client.clone().oneshot(get(&authority.api_url("/p"))),
    )
    .await;
    assert!(gave_up.is_err());
    // A second one started meanwhile still gets the token of that fetch.
    let resp = client
        .clone()
        .oneshot(get(&authority.api_url("/p")))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    authority.set_delay(Duration::ZERO);
    let resp = client.oneshot(get(&authority.api_url("/p"))).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(authority.token_requests(), 1);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_transport_error() {
    // Bind then drop: the port is closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let api = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(format!("http://127.0.0.1:{port}"))
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    let client = client(&oauth);
    let err = client.oneshot(get(&api.api_url("/p"))).await.unwrap_err();
    let e = token_error(&err);
    assert_eq!(e.kind(), TokenErrorKind::Transport);
    assert!(e.is_retryable());
    assert!(!format!("{e} {e:?}").contains(CLIENT_SECRET));
}
