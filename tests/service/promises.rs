//! The cache's promises, each in the scenario where a user would find it
//! broken: no expired token ever sent, whatever the runtime and timing; a
//! failure of any kind backs off; nothing outlives its layer; recovery
//! within about a second of an outage. Over real HTTP on 127.0.0.1 wherever
//! the scenario involves the network.

use crate::support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use support::*;
use tokio::runtime::Runtime;
use tower::{service_fn, BoxError, Service, ServiceExt};
use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenErrorKind, TokenSource};

const HOUR: Duration = Duration::from_secs(3600);

/// An authority on a runtime of its own, so that the runtimes a test
/// starts and stops for the client never take it down.
fn authority_apart(lifetime: Duration) -> (Runtime, Authority) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let authority = rt.block_on(Authority::start(CLIENT_ID, CLIENT_SECRET, lifetime));
    (rt, authority)
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The `TokenError` inside a request's error.
fn token_error(e: &BoxError) -> &TokenError {
    e.downcast_ref::<TokenError>()
        .unwrap_or_else(|| panic!("not a TokenError: {e}"))
}

#[test]
fn no_expired_token_from_a_current_thread_runtime_entered_now_and_then() {
    // One-second tokens, a call every 1.2 s, on a runtime that only runs
    // while `block_on` does: a program's long-lived runtime entered now and
    // then, with one service kept across calls.
    let (_apart, authority) = authority_apart(Duration::from_secs(1));
    let oauth = builder(&authority).build().unwrap();
    let rt = current_thread();
    let mut svc = rt.block_on(async { client(&oauth) });
    let url = authority.api_url("/products");
    for call in 0..5 {
        let status = rt.block_on(async {
            let response = svc.ready().await.unwrap().call(get(&url)).await.unwrap();
            response.status()
        });
        assert_eq!(status, 200, "call {call}");
        std::thread::sleep(Duration::from_millis(1200));
    }
    assert_eq!(authority.api_refused(), 0, "an expired token was sent");
    assert!(authority.token_requests() >= 4);
}

#[tokio::test]
async fn a_token_that_arrives_already_expired_is_a_failure_not_a_header() {
    // A one-second token whose answer takes 1.5 s to arrive.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(1)).await;
    authority.set_stall_after_issue(Duration::from_millis(1500));
    let oauth = builder(&authority).build().unwrap();
    let url = authority.api_url("/products");
    let waiting: Vec<_> = (0..5)
        .map(|_| {
            let oauth = oauth.clone();
            let url = url.clone();
            tokio::spawn(async move { send(&oauth, &url).await })
        })
        .collect();
    for w in waiting {
        let err = w.await.unwrap().unwrap_err();
        let e = token_error(&err);
        assert_eq!(e.kind(), TokenErrorKind::Timeout, "{e}");
        assert!(
            e.to_string().contains("was over when its answer arrived"),
            "{e}"
        );
    }
    assert_eq!(
        authority.api_requests(),
        0,
        "the expired token reached the API"
    );
    // A failure like any other: backed off, not one request per request.
    for _ in 0..20 {
        let err = send(&oauth, &url).await.unwrap_err();
        assert!(token_error(&err).backing_off().is_some());
    }
    assert_eq!(authority.token_requests(), 1);
}

#[tokio::test]
async fn a_lifetime_that_rounds_to_zero_backs_off() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.push_faults([Fault {
        status: 200,
        body: r#"{"access_token":"tiny","token_type":"bearer","expires_in":1e-300}"#.into(),
        headers: vec![("content-type".into(), "application/json".into())],
    }]);
    let oauth = builder(&authority).build().unwrap();
    let url = authority.api_url("/products");
    let err = send(&oauth, &url).await.unwrap_err();
    assert_eq!(token_error(&err).kind(), TokenErrorKind::InvalidResponse);
    for _ in 0..20 {
        send(&oauth, &url).await.unwrap_err();
    }
    assert_eq!(
        authority.token_requests(),
        1,
        "one token request per request"
    );
    assert_eq!(authority.api_requests(), 0);
}

/// Hands out one token, then panics.
struct PanicsAfterOne(std::sync::atomic::AtomicUsize);

impl TokenSource for PanicsAfterOne {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            if n > 0 {
                panic!("the vault client broke");
            }
            Ok(AccessToken::new("only-token").with_expires_in(Duration::from_secs(2)))
        })
    }
}

#[tokio::test]
async fn a_panicking_token_source_backs_off_and_the_token_keeps_serving() {
    let oauth = OAuthLayer::builder()
        .token_source(PanicsAfterOne(Default::default()))
        .build()
        .unwrap();
    let api = tower::ServiceBuilder::new()
        .layer(oauth.clone())
        .service(service_fn(|_: http::Request<()>| async {
            Ok::<_, BoxError>(http::Response::new(()))
        }));
    api.clone().oneshot(http::Request::new(())).await.unwrap();
    // Past the renewal point (1 s): renewals panic, the token still serves.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for _ in 0..200 {
        api.clone().oneshot(http::Request::new(())).await.unwrap();
        tokio::task::yield_now().await;
    }
    let stats = oauth.stats();
    assert_eq!(stats.failed_token_requests, 1, "{stats:?}");
    assert!(stats.backing_off.is_some());
    // Once the token is over: the panic, reported, and a back-off.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let err = api
        .clone()
        .oneshot(http::Request::new(()))
        .await
        .unwrap_err();
    let err = token_error(&err);
    assert_eq!(err.kind(), TokenErrorKind::Panic, "{err}");
    assert!(err.to_string().contains("the vault client broke"), "{err}");
    for _ in 0..20 {
        api.clone()
            .oneshot(http::Request::new(()))
            .await
            .unwrap_err();
    }
    assert!(oauth.stats().token_requests <= 3, "{:?}", oauth.stats());
}

#[tokio::test]
async fn a_panicking_transport_backs_off() {
    let transport = service_fn(|_: http::Request<Full<Bytes>>| async {
        if true {
            panic!("connection pool corrupted");
        }
        Ok::<_, BoxError>(http::Response::new(Full::<Bytes>::default()))
    });
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).transport(transport).build().unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Panic);
    assert!(
        err.to_string().contains("connection pool corrupted"),
        "{err}"
    );
    for _ in 0..20 {
        assert!(oauth.token().await.unwrap_err().backing_off().is_some());
    }
    assert_eq!(oauth.stats().token_requests, 1);
}

#[test]
fn a_renewal_cut_off_by_a_runtime_shutdown_is_restarted_ahead_of_expiry() {
    // Four-second tokens: renewed from 1.8 to 2 s on, usable until 3.6 s.
    let (_apart, authority) = authority_apart(Duration::from_secs(4));
    // Kept for the life of the program, used from one runtime after another.
    static LAYER: std::sync::OnceLock<OAuthLayer> = std::sync::OnceLock::new();
    let oauth = LAYER.get_or_init(|| builder(&authority).build().unwrap());
    let url = authority.api_url("/products");

    let first_runtime = current_thread();
    let start = Instant::now();
    let first = first_runtime
        .block_on(oauth.token())
        .unwrap()
        .expose_token()
        .to_owned();
    std::thread::sleep(Duration::from_millis(2050));
    // The next request starts a renewal, which is slow, and the runtime it
    // runs on shuts down under it.
    authority.set_delay(Duration::from_secs(1));
    let status = first_runtime.block_on(async { send(oauth, &url).await.unwrap().status() });
    assert_eq!(status, 200);
    drop(first_runtime);
    authority.set_delay(Duration::ZERO);

    let next_runtime = current_thread();
    let waited_before = oauth.stats().waited_for_token;
    let renewed_at = next_runtime.block_on(async {
        loop {
            assert_eq!(send(oauth, &url).await.unwrap().status(), 200);
            if oauth.token().await.unwrap().expose_token() != first {
                break start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_millis(3600),
                "not renewed before the token ran out"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(renewed_at < Duration::from_millis(3000), "{renewed_at:?}");
    assert_eq!(
        oauth.stats().waited_for_token,
        waited_before,
        "a request waited"
    );
    assert_eq!(authority.api_refused(), 0);
}

#[test]
fn nothing_of_a_layer_outlives_it() {
    let (_apart, authority) = authority_apart(HOUR);
    let rt = current_thread();
    let metrics = rt.metrics();
    rt.block_on(async {
        // A service that builds a layer per tenant, each fetching, being
        // told its token was refused, and fetching again.
        for _ in 0..20 {
            let oauth = builder(&authority).build().unwrap();
            oauth.token().await.unwrap();
            assert!(oauth.force_renewal());
            oauth.token().await.unwrap();
            drop(oauth);
        }
        // Connections of the dropped token clients close on their own
        // schedule; none of our tasks stays.
        let deadline = Instant::now() + Duration::from_secs(5);
        while metrics.num_alive_tasks() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(metrics.num_alive_tasks(), 0, "tasks outlived their layer");
    });
    assert_eq!(authority.token_requests(), 40);
}

#[test]
fn a_runtime_without_timers_fails_fast_and_says_why() {
    let (_apart, authority) = authority_apart(HOUR);
    let oauth = builder(&authority).build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let started = Instant::now();
    let err = rt.block_on(oauth.token()).unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Runtime, "{err}");
    assert!(err.to_string().contains("enable_time()"), "{err}");
    // Fast: no fetch timeout waited out, and the next ask backs off.
    assert!(started.elapsed() < Duration::from_secs(2));
    let again = rt.block_on(oauth.token()).unwrap_err();
    assert!(again.backing_off().is_some(), "{again}");
    assert_eq!(authority.token_requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_recover_within_about_a_second_of_an_outage() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let outage = Duration::from_secs(3);
    authority.fail_for(outage);
    let outage_ends = Instant::now() + outage;
    let oauth = builder(&authority).build().unwrap();
    let url = authority.api_url("/products");
    // Steady load: a request every 5 ms until one succeeds.
    let recovered = loop {
        if send(&oauth, &url).await.is_ok() {
            break Instant::now();
        }
        assert!(Instant::now() < outage_ends + Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let requests = authority.token_requests();
    let late = recovered.saturating_duration_since(outage_ends);
    // About one token request per second during the outage (1 to 1.5 s
    // apart), and a token within 1.5 s of the endpoint coming back (plus
    // room for a busy machine's scheduling; the old exponential back-off
    // took 3.3 s here).
    assert!((3..=5).contains(&requests), "{requests} token requests");
    assert!(late < Duration::from_secs(2), "recovered {late:?} late");
}
