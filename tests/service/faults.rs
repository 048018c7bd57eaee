//! Fault injection: for every way a token endpoint can misbehave, the caller
//! sees the right `TokenError` kind in bounded time, nothing panics, the
//! endpoint is not hammered, a still-usable token keeps serving, the layer
//! recovers by itself once the fault clears, and no secret or token leaks.

use crate::support;

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use support::chaos::{Chaos, Mode};
use support::*;
use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, TokenError, TokenErrorKind};

const FETCH_TIMEOUT: Duration = Duration::from_millis(500);
const BACKOFF: Duration = Duration::from_millis(100);

fn layer_for(url: &str) -> OAuthLayer {
    with_transport(
        OAuthLayer::builder()
            .token_url(url)
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .fetch_timeout(FETCH_TIMEOUT)
            .min_backoff(BACKOFF)
            .max_backoff(BACKOFF),
    )
    .build()
    .unwrap()
}

/// One request through the layer to an API that accepts anything.
async fn request(oauth: &OAuthLayer) -> Result<Response<Full<Bytes>>, BoxError> {
    let api = service_fn(|_: Request<Full<Bytes>>| async {
        Ok::<_, BoxError>(Response::new(Full::<Bytes>::default()))
    });
    ServiceBuilder::new()
        .layer(oauth.clone())
        .service(api)
        .oneshot(get("http://api.example/"))
        .await
}

fn token_error(err: BoxError) -> TokenError {
    match err.downcast::<TokenError>() {
        Ok(e) => *e,
        Err(other) => panic!("not a TokenError: {other}"),
    }
}

fn healthy() -> Mode {
    Mode::Healthy { lifetime: 3600 }
}

/// Runs one fault from a cold start and checks everything the suite
/// promises about it; returns the error the caller saw.
async fn cold_fault(mode: Mode, kind: TokenErrorKind) -> TokenError {
    let (_logs, captured) = capture_logs();
    let chaos = Chaos::start(CLIENT_SECRET, mode.clone()).await;
    let oauth = layer_for(&chaos.url());
    let mut shown = Vec::new();

    let started = Instant::now();
    let err = token_error(request(&oauth).await.unwrap_err());
    assert!(
        started.elapsed() < FETCH_TIMEOUT + Duration::from_secs(1),
        "{mode:?}: took {:?}",
        started.elapsed()
    );
    assert_eq!(err.kind(), kind, "{mode:?}: {err}");
    shown.push(format!("{err} {err:?}"));

    // No hammering: while backing off, requests fail at once, unsent.
    for _ in 0..20 {
        let fast = token_error(request(&oauth).await.unwrap_err());
        assert_eq!(fast.kind(), kind);
        assert!(fast.backing_off().is_some(), "{mode:?}");
        shown.push(format!("{fast} {fast:?}"));
    }
    assert_eq!(
        chaos.requests(),
        1,
        "{mode:?}: token requests while backing off"
    );

    // Recovery once the fault clears.
    chaos.set(healthy());
    let wait = err.retry_after().unwrap_or(BACKOFF).max(BACKOFF) + Duration::from_millis(50);
    tokio::time::sleep(wait).await;
    request(&oauth).await.unwrap();
    assert_eq!(chaos.requests(), 2, "{mode:?}");

    assert_no_leak(&chaos, &captured.text(), &shown);
    err
}

/// Neither the secret nor any token in logs or in what errors show.
fn assert_no_leak(chaos: &Chaos, logs: &str, shown: &[String]) {
    let everything = format!("{logs}\n{}", shown.join("\n"));
    assert!(
        !everything.contains(CLIENT_SECRET),
        "secret leaked:\n{everything}"
    );
    for token in chaos.issued() {
        assert!(!everything.contains(&token), "token leaked");
    }
}

fn status(status: u16, body: &str) -> Mode {
    Mode::Status {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.into(),
    }
}

const FAULT_503: &str = r#"{"fault":{"faultstring":"The Service is temporarily unavailable","detail":{"errorcode":"messaging.adaptors.http.flow.ServiceUnavailable"}}}"#;

#[tokio::test]
async fn server_errors() {
    for code in [500, 502, 503] {
        let e = cold_fault(status(code, FAULT_503), TokenErrorKind::Status).await;
        assert_eq!(e.status().unwrap().as_u16(), code);
        assert!(e.is_retryable());
        assert_eq!(
            e.error_code(),
            Some("messaging.adaptors.http.flow.ServiceUnavailable")
        );
    }
}

#[tokio::test]
async fn rate_limits_with_and_without_retry_after() {
    let spike = r#"{"fault":{"faultstring":"Spike arrest violation. Allowed rate : 10ps","detail":{"errorcode":"policies.ratelimit.SpikeArrestViolation"}}}"#;
    let with = |value: String| Mode::Status {
        status: 429,
        headers: vec![("retry-after".into(), value)],
        body: spike.into(),
    };
    let e = cold_fault(with("1".into()), TokenErrorKind::Status).await;
    assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(
        e.error_code(),
        Some("policies.ratelimit.SpikeArrestViolation")
    );

    let at = SystemTime::now() + Duration::from_secs(2);
    let e = cold_fault(with(httpdate::fmt_http_date(at)), TokenErrorKind::Status).await;
    let after = e.retry_after().unwrap();
    assert!(
        after > Duration::ZERO && after <= Duration::from_secs(2),
        "{after:?}"
    );

    let e = cold_fault(status(429, spike), TokenErrorKind::Status).await;
    assert_eq!(e.retry_after(), None);
    assert!(e.is_retryable());
}

#[tokio::test]
async fn retry_after_holds_requests_back() {
    let chaos = Chaos::start(
        CLIENT_SECRET,
        Mode::Status {
            status: 429,
            headers: vec![("retry-after".into(), "1".into())],
            body: String::new(),
        },
    )
    .await;
    let oauth = layer_for(&chaos.url());
    request(&oauth).await.unwrap_err();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let e = token_error(request(&oauth).await.unwrap_err());
    // Well past the 100 ms back-off, still held back by Retry-After.
    assert!(e.backing_off().unwrap() > Duration::from_millis(200));
    assert_eq!(chaos.requests(), 1);
}

#[tokio::test]
async fn refused_credentials_in_each_error_shape() {
    let shapes = [
        (
            r#"{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}"#,
            "invalid_client",
            "ClientId is Invalid",
        ),
        (
            r#"{"fault":{"faultstring":"Invalid client identifier","detail":{"errorcode":"oauth.v2.InvalidClientIdentifier"}}}"#,
            "oauth.v2.InvalidClientIdentifier",
            "Invalid client identifier",
        ),
        (
            r#"{"error":"invalid_client","error_description":"Client authentication failed"}"#,
            "invalid_client",
            "Client authentication failed",
        ),
    ];
    for code in [400, 401] {
        for (body, error_code, text) in shapes {
            let e = cold_fault(status(code, body), TokenErrorKind::Status).await;
            assert_eq!(e.error_code(), Some(error_code));
            assert_eq!(e.error_description(), Some(text));
            assert!(!e.is_retryable());
        }
    }
}

#[tokio::test]
async fn html_and_xml_bodies() {
    let html = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
    let xml = r#"<?xml version="1.0"?><fault><faultstring>Gateway Timeout</faultstring></fault>"#;
    for body in [html, xml] {
        // As an error answer: a status error without a code.
        let e = cold_fault(status(502, body), TokenErrorKind::Status).await;
        assert_eq!(e.error_code(), None);
        // As a "success": not a token response.
        cold_fault(Mode::Ok(body.into()), TokenErrorKind::InvalidResponse).await;
    }
}

#[tokio::test]
async fn broken_bodies() {
    for body in ["", r#"{"access_token":"abc","expires_in":36"#, "null", "[]"] {
        cold_fault(Mode::Ok(body.into()), TokenErrorKind::InvalidResponse).await;
    }
}

#[tokio::test]
async fn oversized_bodies_are_cut_off() {
    let eight_mib = 8 * 1024 * 1024;
    for declared in [true, false] {
        let e = cold_fault(
            Mode::Huge {
                len: eight_mib,
                declared,
            },
            TokenErrorKind::InvalidResponse,
        )
        .await;
        assert!(e.to_string().contains("larger than 65536 bytes"), "{e}");
    }
}

#[tokio::test]
async fn stalls_and_silence_time_out() {
    for mode in [Mode::StallAfterHeaders, Mode::NeverAnswer] {
        let e = cold_fault(mode, TokenErrorKind::Timeout).await;
        assert!(e.is_retryable());
    }
}

#[tokio::test]
async fn a_reset_mid_response_is_a_transport_error() {
    let e = cold_fault(Mode::ResetMidResponse, TokenErrorKind::Transport).await;
    assert!(e.is_retryable());
}

#[tokio::test]
async fn connection_refused_is_a_transport_error_and_recovers() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let oauth = layer_for(&format!("http://127.0.0.1:{port}/token"));
    let started = Instant::now();
    let e = token_error(request(&oauth).await.unwrap_err());
    assert_eq!(e.kind(), TokenErrorKind::Transport);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(token_error(request(&oauth).await.unwrap_err())
        .backing_off()
        .is_some());
    // The endpoint comes up on that port: the layer recovers by itself.
    let chaos = Chaos::start_on(port, CLIENT_SECRET, healthy()).await;
    tokio::time::sleep(BACKOFF + Duration::from_millis(50)).await;
    request(&oauth).await.unwrap();
    assert_eq!(chaos.requests(), 1);
}

#[tokio::test]
async fn a_redirect_elsewhere_never_carries_the_secret() {
    let elsewhere = Chaos::start(CLIENT_SECRET, healthy()).await;
    let e = cold_fault(
        Mode::Status {
            status: 307,
            headers: vec![("location".into(), elsewhere.url())],
            body: String::new(),
        },
        TokenErrorKind::Status,
    )
    .await;
    assert_eq!(e.status().unwrap().as_u16(), 307);
    assert_eq!(elsewhere.requests(), 0);
    assert_eq!(elsewhere.saw_secret(), 0);
}

#[tokio::test]
async fn odd_lifetimes() {
    // Accepted: missing, null or non-numeric means 60 minutes; huge is cut to 24 h.
    for (expires_in, usable_at_most) in [
        ("", 3600),
        (r#","expires_in":null"#, 3600),
        (r#","expires_in":"soon""#, 3600),
        (r#","expires_in":1e30"#, 86_400),
        (r#","expires_in":"99999999999999999999""#, 86_400),
    ] {
        let chaos = Chaos::start(
            CLIENT_SECRET,
            Mode::Ok(format!(r#"{{"access_token":"odd"{expires_in}}}"#)),
        )
        .await;
        let oauth = layer_for(&chaos.url());
        request(&oauth).await.unwrap();
        let usable = oauth.stats().token_usable_for.unwrap();
        assert!(
            usable <= Duration::from_secs(usable_at_most),
            "{expires_in}: {usable:?}"
        );
        assert!(
            usable > Duration::from_secs(usable_at_most) - Duration::from_secs(15),
            "{expires_in}: {usable:?}"
        );
    }
    // Refused: zero or negative.
    for expires_in in ["0", "-1", r#""-3600""#] {
        cold_fault(
            Mode::Ok(format!(
                r#"{{"access_token":"odd","expires_in":{expires_in}}}"#
            )),
            TokenErrorKind::InvalidResponse,
        )
        .await;
    }
}

#[tokio::test]
async fn unusable_tokens() {
    for token in [
        r#""""#,
        r#""with\nnewline""#,
        r#""bell\u0007""#,
        r#""caf\u00e9""#,
        r#""two words""#,
        "42",
        "null",
    ] {
        cold_fault(
            Mode::Ok(format!(r#"{{"access_token":{token},"expires_in":3600}}"#)),
            TokenErrorKind::InvalidResponse,
        )
        .await;
    }
}

/// With a usable token in hand, a failing endpoint costs nothing: the token
/// keeps serving until it is no longer usable, renewals are retried only
/// after each back-off, then requests fail with the fault's kind, and the
/// layer recovers when the endpoint does.
async fn warm_fault(mode: Mode, kind: TokenErrorKind) {
    let (_logs, captured) = capture_logs();
    let chaos = Chaos::start(CLIENT_SECRET, Mode::Healthy { lifetime: 2 }).await;
    let oauth = layer_for(&chaos.url());
    request(&oauth).await.unwrap();
    chaos.set(mode.clone());

    // Until about 1.8 s (usable_until), every request succeeds.
    let start = Instant::now();
    let mut served = 0;
    while start.elapsed() < Duration::from_millis(1500) {
        request(&oauth)
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        served += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(served > 50);
    // Renewals began at about 1 s; each failure backs off 100 ms (a stall
    // takes its 500 ms time-out first).
    let renewals = chaos.requests() - 1;
    assert!((1..=7).contains(&renewals), "{mode:?}: {renewals} renewals");

    // Past the usable point: the fault's error.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let e = token_error(request(&oauth).await.unwrap_err());
    assert_eq!(e.kind(), kind, "{mode:?}");

    chaos.set(healthy());
    tokio::time::sleep(FETCH_TIMEOUT + BACKOFF).await;
    request(&oauth).await.unwrap();
    assert_no_leak(&chaos, &captured.text(), &[format!("{e} {e:?}")]);
}

#[tokio::test]
async fn a_usable_token_keeps_serving_through_faults() {
    warm_fault(status(503, FAULT_503), TokenErrorKind::Status).await;
    warm_fault(Mode::Ok("<html/>".into()), TokenErrorKind::InvalidResponse).await;
    warm_fault(Mode::NeverAnswer, TokenErrorKind::Timeout).await;
    warm_fault(Mode::ResetMidResponse, TokenErrorKind::Transport).await;
}
