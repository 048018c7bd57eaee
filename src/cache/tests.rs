//! Paused-time tests of the cache: timings, single flight, renewal ahead,
//! back-off and the 401 rate limit, exact to the instant.

use std::collections::VecDeque;
use std::sync::atomic::AtomicUsize;

use http::StatusCode;

use super::*;

/// A scripted token source: each fetch takes the next step (or repeats the
/// last one), after its delay.
#[derive(Clone, Default)]
struct Script {
    steps: Arc<Mutex<VecDeque<Scripted>>>,
    calls: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct Scripted {
    delay: Duration,
    answer: Result<Duration, TokenError>,
}

impl Script {
    fn then_ok(self, lifetime: Duration) -> Self {
        self.then(Duration::ZERO, Ok(lifetime))
    }

    fn then_err(self, e: TokenError) -> Self {
        self.then(Duration::ZERO, Err(e))
    }

    fn then(self, delay: Duration, answer: Result<Duration, TokenError>) -> Self {
        self.steps
            .lock()
            .unwrap()
            .push_back(Scripted { delay, answer });
        self
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl TokenSource for Script {
    fn fetch_token(&self) -> crate::support::boxed::BoxFuture<'_, Result<AccessToken, TokenError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let step = {
            let mut steps = self.steps.lock().unwrap();
            if steps.len() > 1 {
                steps.pop_front().unwrap()
            } else {
                steps.front().cloned().expect("script is empty")
            }
        };
        Box::pin(async move {
            if !step.delay.is_zero() {
                tokio::time::sleep(step.delay).await;
            }
            step.answer
                .map(|lifetime| AccessToken::new(format!("token-{n}")).with_expires_in(lifetime))
        })
    }
}

fn placement() -> Placement {
    Placement {
        header_name: http::header::AUTHORIZATION,
        auth_scheme: "Bearer".into(),
        keep_existing: false,
        dpop: None,
    }
}

fn cache(script: &Script) -> Arc<TokenCache> {
    with_source(script.clone())
}

fn with_source(source: impl TokenSource) -> Arc<TokenCache> {
    let supply = super::TokenSupply {
        source: Arc::new(source),
        store: None,
        chain: None,
    };
    TokenCache::new(
        supply,
        Policy::default(),
        placement(),
        None,
        None,
        Default::default(),
        None,
    )
}

const HOUR: Duration = Duration::from_secs(3600);

fn status_error(status: u16, retry_after: Option<Duration>) -> TokenError {
    TokenError::new(TokenErrorKind::Status).with_status(
        StatusCode::from_u16(status).unwrap(),
        Some("invalid_client".into()),
        Some("bad credentials".into()),
        retry_after,
    )
}

/// What a request would get: the usable token, or the outcome of waiting.
async fn get(cache: &Arc<TokenCache>) -> FetchResult {
    if let Some(g) = usable(cache) {
        return Ok(cache
            .current
            .load_full()
            .filter(|c| c.generation == g)
            .unwrap());
    }
    cache.token().await
}

/// The hot path now: the generation of the token a request would carry.
fn usable(cache: &Arc<TokenCache>) -> Option<u64> {
    let current = cache.current.load();
    cache
        .check(current.as_deref(), Instant::now())
        .map(|t| t.generation)
}

/// Moves paused time on and lets the timers and tasks it wakes run.
async fn advance(by: Duration) {
    tokio::time::advance(by).await;
    settle().await;
}

/// Lets spawned fetches run to their next wait.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn header(t: &CachedToken) -> &str {
    t.header.to_str().unwrap()
}

#[tokio::test(start_paused = true)]
async fn concurrent_cold_start_makes_one_request() {
    let script = Script::default().then(Duration::from_millis(300), Ok(HOUR));
    let cache = cache(&script);
    let tasks: Vec<_> = (0..500)
        .map(|_| {
            let cache = Arc::clone(&cache);
            tokio::spawn(async move { get(&cache).await.unwrap().generation })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 1);
    }
    assert_eq!(script.calls(), 1);
    let t = cache.current.load_full().unwrap();
    assert_eq!(header(&t), "Bearer token-0");
    assert!(t.header.is_sensitive());
}

#[tokio::test(start_paused = true)]
async fn a_token_is_reused_until_its_renewal_point() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    advance(Duration::from_secs(3000)).await;
    for _ in 0..1000 {
        assert_eq!(usable(&cache), Some(first.generation));
    }
    assert_eq!(script.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn timings_follow_the_design() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let sent = Instant::now();
    let t = get(&cache).await.unwrap();
    let t = t.timings;
    assert_eq!(t.expires_at, sent + HOUR);
    assert_eq!(t.usable_until, sent + HOUR - Duration::from_secs(10));
    // Margin 300 s, jitter up to a tenth of it.
    assert!(t.refresh_at <= sent + HOUR - Duration::from_secs(300));
    assert!(t.refresh_at >= sent + HOUR - Duration::from_secs(330));
}

#[tokio::test(start_paused = true)]
async fn margins_are_clamped_for_short_tokens() {
    let script = Script::default().then_ok(Duration::from_secs(4));
    let cache = cache(&script);
    let sent = Instant::now();
    let t = get(&cache).await.unwrap().timings;
    // Skew up to a tenth of the lifetime, margin up to half of it.
    assert_eq!(t.usable_until, sent + Duration::from_millis(3600));
    assert!(t.refresh_at <= sent + Duration::from_secs(2));
    assert!(t.refresh_at >= sent + Duration::from_millis(1800));
}

#[tokio::test(start_paused = true)]
async fn missing_lifetime_means_sixty_minutes() {
    #[derive(Clone)]
    struct Bare;
    impl TokenSource for Bare {
        fn fetch_token(
            &self,
        ) -> crate::support::boxed::BoxFuture<'_, Result<AccessToken, TokenError>> {
            Box::pin(async { AccessToken::from_json(br#"{"access_token":"x"}"#) })
        }
    }
    let cache = with_source(Bare);
    let sent = Instant::now();
    let t = get(&cache).await.unwrap();
    assert_eq!(t.timings.expires_at, sent + HOUR);
}

#[tokio::test(start_paused = true)]
async fn renewal_ahead_does_not_make_requests_wait() {
    let script = Script::default()
        .then_ok(HOUR)
        .then(Duration::from_secs(2), Ok(HOUR));
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    // Timers have millisecond resolution: 1 ms past the renewal point.
    advance(first.timings.refresh_at - Instant::now() + Duration::from_millis(1)).await;
    // Past the renewal point: every request goes on with the current token,
    // and exactly one renewal starts.
    for _ in 0..100 {
        assert_eq!(usable(&cache), Some(first.generation));
    }
    settle().await;
    assert_eq!(script.calls(), 2);
    advance(Duration::from_secs(1)).await;
    assert_eq!(usable(&cache), Some(first.generation));
    advance(Duration::from_millis(1001)).await;
    settle().await;
    assert_eq!(usable(&cache), Some(first.generation + 1));
    assert_eq!(script.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn failed_renewal_keeps_the_token_serving_and_retries_after_backoff() {
    let script = Script::default()
        .then_ok(HOUR)
        .then_err(status_error(503, None))
        .then_ok(HOUR);
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    // Timers have millisecond resolution: 1 ms past the renewal point.
    advance(first.timings.refresh_at - Instant::now() + Duration::from_millis(1)).await;
    assert_eq!(usable(&cache), Some(first.generation));
    settle().await;
    assert_eq!(script.calls(), 2);
    settle().await;
    // The renewal failed; the token still serves, and no request retries at
    // once.
    for _ in 0..100 {
        assert_eq!(usable(&cache), Some(first.generation));
    }
    settle().await;
    assert_eq!(script.calls(), 2);
    // After the back-off (the minimum, 1 s, jittered up to 1.5 s), the next
    // request renews.
    advance(Duration::from_millis(1500)).await;
    assert_eq!(usable(&cache), Some(first.generation));
    settle().await;
    assert_eq!(script.calls(), 3);
    assert_eq!(usable(&cache), Some(first.generation + 1));
}

#[tokio::test(start_paused = true)]
async fn an_expired_token_is_never_presented() {
    let script = Script::default()
        .then_ok(HOUR)
        .then_err(status_error(503, None));
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    advance(first.timings.usable_until - Instant::now()).await;
    assert_eq!(usable(&cache), None);
    let err = get(&cache).await.unwrap_err();
    assert_eq!(err.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(err.backing_off(), None);
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_fail_fast_meanwhile() {
    let script = Script::default().then_err(status_error(401, None));
    let cache = cache(&script);
    let mut expected_calls = 0;
    let mut previous = Duration::ZERO;
    for n in 1..=8u32 {
        let err = get(&cache).await.unwrap_err();
        expected_calls += 1;
        assert_eq!(script.calls(), expected_calls);
        assert_eq!(err.kind(), TokenErrorKind::Status);
        assert_eq!(err.backing_off(), None);

        // Meanwhile: the last error at once, kind kept, no request.
        let fast = get(&cache).await.unwrap_err();
        assert_eq!(fast.kind(), TokenErrorKind::Status);
        let left = fast.backing_off().expect("backing off");
        // Doubling from 1 s, jittered up by at most half, within 60 s (at
        // the cap: 40 s to 60 s).
        let low = Duration::from_secs(1 << (n - 1)).min(Duration::from_secs(40));
        let high = low.mul_f64(1.5).min(Duration::from_secs(60));
        assert!(left >= low && left <= high, "{n}: {left:?}");
        if n < 7 {
            // Never below the longest delay of the failure before.
            assert!(left >= previous, "{n}: {left:?} after {previous:?}");
        }
        previous = high;
        for _ in 0..50 {
            get(&cache).await.unwrap_err();
        }
        assert_eq!(script.calls(), expected_calls);
        advance(left).await;
    }
}

#[tokio::test(start_paused = true)]
async fn no_login_is_never_backed_off_and_a_login_serves_the_next_request() {
    let no_login =
        || TokenError::new(TokenErrorKind::LoginRequired).with_message("account abc has no login");
    let script = Script::default()
        .then_err(no_login())
        .then_err(no_login())
        .then_err(no_login())
        .then_ok(HOUR);
    let account = cache(&script);
    // Each "no login" is asked anew, at once: never a back-off, and no
    // failure count that grows.
    for n in 1..=3 {
        let err = get(&account).await.unwrap_err();
        assert_eq!(err.kind(), TokenErrorKind::LoginRequired);
        assert_eq!(err.backing_off(), None);
        assert_eq!(script.calls(), n);
        assert_eq!(account.stats().backing_off, None);
    }
    // The person logged in meanwhile: the very next request is served.
    get(&account).await.unwrap();
    assert_eq!(script.calls(), 4);
    // A server's failure after it still backs off as ever, from 1 s.
    let failing = Script::default()
        .then_err(no_login())
        .then_err(status_error(500, None));
    let other = cache(&failing);
    get(&other).await.unwrap_err();
    get(&other).await.unwrap_err();
    let left = get(&other).await.unwrap_err().backing_off().unwrap();
    assert!(left <= Duration::from_millis(1500), "{left:?}");
    assert_eq!(failing.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let script = Script::default()
        .then_err(status_error(429, Some(Duration::from_secs(30))))
        .then_ok(HOUR);
    let cache = cache(&script);
    get(&cache).await.unwrap_err();
    advance(Duration::from_millis(29_999)).await;
    let err = get(&cache).await.unwrap_err();
    assert_eq!(err.backing_off(), Some(Duration::from_millis(1)));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(30)));
    assert!(err.is_retryable());
    advance(Duration::from_millis(1)).await;
    get(&cache).await.unwrap();
    assert_eq!(script.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn success_resets_the_backoff() {
    let script = Script::default()
        .then_err(status_error(500, None))
        .then_err(status_error(500, None))
        .then_ok(Duration::from_secs(60))
        .then_err(status_error(500, None));
    let cache = cache(&script);
    get(&cache).await.unwrap_err();
    advance(Duration::from_millis(1500)).await;
    get(&cache).await.unwrap_err();
    advance(Duration::from_millis(1500)).await;
    let t = get(&cache).await.unwrap();
    advance(t.timings.usable_until - Instant::now()).await;
    get(&cache).await.unwrap_err();
    let left = get(&cache).await.unwrap_err().backing_off().unwrap();
    assert!(left < Duration::from_millis(1500), "{left:?}");
}

#[tokio::test(start_paused = true)]
async fn refusal_drops_the_current_token_once_and_is_rate_limited() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    // A hundred concurrent 401s for the same token: one drop, one fetch.
    for _ in 0..100 {
        cache.refused(first.generation);
    }
    let second = get(&cache).await.unwrap();
    assert_eq!(second.generation, first.generation + 1);
    assert_eq!(script.calls(), 2);
    // A late 401 for the old token changes nothing.
    cache.refused(first.generation);
    assert_eq!(usable(&cache), Some(second.generation));
    // The new token is refused too, within the interval: kept, no request.
    advance(Duration::from_secs(9)).await;
    cache.refused(second.generation);
    assert_eq!(usable(&cache), Some(second.generation));
    settle().await;
    assert_eq!(script.calls(), 2);
    // Past the interval, a refusal renews again.
    advance(Duration::from_secs(1)).await;
    cache.refused(second.generation);
    assert_eq!(usable(&cache), None);
    assert_eq!(get(&cache).await.unwrap().generation, second.generation + 1);
    assert_eq!(script.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn an_api_refusing_every_token_costs_one_fetch_per_interval() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    // One minute of requests every 10 ms, each answered 401.
    for _ in 0..6000 {
        let t = get(&cache).await.unwrap();
        cache.refused(t.generation);
        advance(Duration::from_millis(10)).await;
    }
    // 60 s / 10 s interval, plus the first fetch.
    assert!(script.calls() <= 7, "{}", script.calls());
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_does_not_cancel_the_fetch() {
    let script = Script::default().then(Duration::from_secs(1), Ok(HOUR));
    let cache = cache(&script);
    let Acquire::Wait(flight) = cache.acquire() else {
        panic!("expected to wait")
    };
    drop(flight);
    settle().await;
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert!(usable(&cache).is_some());
    assert_eq!(script.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_slow_endpoint_times_out() {
    let script = Script::default()
        .then(Duration::from_secs(30), Ok(HOUR))
        .then_ok(HOUR);
    let cache = cache(&script);
    let start = Instant::now();
    let err = get(&cache).await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Timeout);
    assert!(err.is_retryable());
    assert_eq!(Instant::now() - start, Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn a_token_that_cannot_be_a_header_is_refused() {
    for bad in ["with\nnewline", "with space", "caf\u{e9}", "nul\0"] {
        let bad = bad.to_owned();
        struct Fixed(String);
        impl TokenSource for Fixed {
            fn fetch_token(
                &self,
            ) -> crate::support::boxed::BoxFuture<'_, Result<AccessToken, TokenError>> {
                let t = AccessToken::new(self.0.clone());
                Box::pin(async move { Ok(t) })
            }
        }
        let cache = with_source(Fixed(bad.clone()));
        let err = get(&cache).await.unwrap_err();
        assert_eq!(err.kind(), TokenErrorKind::InvalidResponse, "{bad:?}");
        assert!(!format!("{err} {err:?}").contains(&bad));
    }
}

#[test]
fn no_runtime_is_an_error_not_a_panic() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    match cache.acquire() {
        Acquire::Now(Err(e)) => assert_eq!(e.kind(), TokenErrorKind::Runtime),
        _ => panic!("expected a runtime error"),
    }
}

/// A source whose every fetch panics after handing out `good` tokens.
struct Panicky {
    good: usize,
    calls: Arc<AtomicUsize>,
}

impl TokenSource for Panicky {
    fn fetch_token(&self) -> crate::support::boxed::BoxFuture<'_, Result<AccessToken, TokenError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n < self.good {
                return Ok(AccessToken::new(format!("token-{n}")).with_expires_in(HOUR));
            }
            panic!("the vault client broke");
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_source_backs_off_and_a_usable_token_keeps_serving() {
    let calls = Arc::new(AtomicUsize::new(0));
    let cache = with_source(Panicky {
        good: 1,
        calls: Arc::clone(&calls),
    });
    let first = get(&cache).await.unwrap();
    advance(first.timings.refresh_at - Instant::now() + Duration::from_millis(1)).await;
    // The renewal panics: recorded as a failure, the token still serves.
    for _ in 0..100 {
        assert_eq!(usable(&cache), Some(first.generation));
        settle().await;
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "one renewal, then back-off"
    );
    assert_eq!(cache.stats().failed_token_requests, 1);
    assert!(cache.stats().backing_off.is_some());

    // Without a usable token: one panicking fetch, then the error at once.
    advance(first.timings.usable_until - Instant::now()).await;
    let before = calls.load(Ordering::SeqCst);
    let err = get(&cache).await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Panic);
    assert!(err.to_string().contains("the vault client broke"), "{err}");
    for _ in 0..50 {
        let again = get(&cache).await.unwrap_err();
        assert!(again.backing_off().is_some());
    }
    assert_eq!(calls.load(Ordering::SeqCst), before + 1);
}

#[tokio::test(start_paused = true)]
async fn a_token_that_ran_out_before_it_arrived_is_a_failure() {
    // A 1 s token whose answer takes 1.5 s.
    let script = Script::default()
        .then(Duration::from_millis(1500), Ok(Duration::from_secs(1)))
        .then_ok(HOUR);
    let cache = cache(&script);
    let err = get(&cache).await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Timeout);
    assert!(
        err.to_string().contains("was over when its answer arrived"),
        "{err}"
    );
    assert!(cache.current.load().is_none(), "never installed");
    // Backed off: no request per request.
    for _ in 0..20 {
        assert!(get(&cache).await.unwrap_err().backing_off().is_some());
    }
    assert_eq!(script.calls(), 1);
    // Once the back-off is over, the next fetch succeeds.
    advance(Duration::from_millis(1500)).await;
    get(&cache).await.unwrap();
    assert_eq!(script.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_of_zero_is_a_failure_that_backs_off() {
    let script = Script::default().then_ok(Duration::ZERO);
    let cache = cache(&script);
    get(&cache).await.unwrap_err();
    for _ in 0..20 {
        get(&cache).await.unwrap_err();
    }
    assert_eq!(script.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_that_can_heal_is_retried_steadily_and_recovery_is_quick() {
    let script = Script::default();
    for _ in 0..30 {
        script.clone().then_err(status_error(503, None));
    }
    let script = script.then_ok(HOUR);
    let cache = cache(&script);
    // Thirty failures in a row: the delay never grows, and stays under the
    // minimum back-off (1 s), so recovery takes less than that.
    for n in 1..=30 {
        get(&cache).await.unwrap_err();
        assert_eq!(script.calls(), n);
        let left = get(&cache).await.unwrap_err().backing_off().unwrap();
        assert!(left >= Duration::from_millis(800), "{n}: {left:?}");
        assert!(left < Duration::from_millis(950), "{n}: {left:?}");
        advance(left).await;
    }
    // The endpoint is back: the very next request gets a token.
    get(&cache).await.unwrap();
    assert_eq!(script.calls(), 31);
}

#[tokio::test(start_paused = true)]
async fn refused_credentials_back_off_exponentially_even_without_a_token() {
    let script = Script::default().then_err(status_error(400, None));
    let cache = cache(&script);
    for _ in 0..5 {
        get(&cache).await.unwrap_err();
        let left = get(&cache).await.unwrap_err().backing_off().unwrap();
        advance(left).await;
    }
    // The sixth failure in a row: 32 s or more, although no token serves.
    get(&cache).await.unwrap_err();
    let left = get(&cache).await.unwrap_err().backing_off().unwrap();
    assert!(left >= Duration::from_secs(32), "{left:?}");
    assert_eq!(script.calls(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_back_off_ends_when_the_token_does() {
    let script = Script::default()
        .then_ok(Duration::from_secs(100))
        .then_err(status_error(503, None));
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    // Renewals fail while the token serves: the back-off grows...
    let mut failures = 0;
    while Instant::now() < first.timings.usable_until {
        usable(&cache);
        settle().await;
        failures = cache.stats().failed_token_requests;
        advance(Duration::from_millis(100)).await;
    }
    assert!(failures >= 3, "{failures}");
    // ...but once the token is over, the next request fetches at once.
    let before = script.calls();
    get(&cache).await.unwrap_err();
    assert_eq!(script.calls(), before + 1);
}

#[tokio::test(start_paused = true)]
async fn the_first_retry_of_many_layers_is_spread() {
    let mut delays = Vec::new();
    for _ in 0..20 {
        let script = Script::default().then_err(status_error(401, None));
        let cache = cache(&script);
        get(&cache).await.unwrap_err();
        delays.push(cache.stats().backing_off.unwrap());
    }
    delays.sort();
    assert!(delays[0] >= Duration::from_secs(1));
    assert!(delays[19] < Duration::from_millis(1500));
    assert!(
        delays[19] - delays[0] > Duration::from_millis(100),
        "{delays:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_reference_stops_the_fetch_and_frees_everything() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let script = Script::default().then(Duration::from_secs(5), Ok(HOUR));
    let cache = cache(&script);
    let weak = Arc::downgrade(&cache);
    let Acquire::Wait(flight) = cache.acquire() else {
        panic!("expected to wait")
    };
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), 1);
    drop(cache);
    settle().await;
    assert_eq!(metrics.num_alive_tasks(), 0, "the fetch task is gone");
    assert!(weak.upgrade().is_none(), "the cache is freed");
    let mut slot = None;
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(matches!(
        flight.poll_outcome(&mut slot, &mut cx),
        std::task::Poll::Ready(FetchOutcome::CutOff)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_flight_is_replaced_by_the_next_request() {
    let script = Script::default()
        .then(Duration::from_secs(5), Ok(HOUR))
        .then_ok(HOUR);
    let cache = cache(&script);
    let Acquire::Wait(first) = cache.acquire() else {
        panic!("expected to wait")
    };
    settle().await;
    // As if its runtime had shut down: the task is gone.
    cache.control().abort();
    let second = get(&cache).await.unwrap();
    assert_eq!(script.calls(), 2);
    assert_eq!(second.token.expose_token(), "token-1");
    drop(first);
}

#[tokio::test(start_paused = true)]
async fn the_servers_refresh_advice_brings_the_renewal_forward() {
    struct Advised(Arc<AtomicUsize>);
    impl TokenSource for Advised {
        fn fetch_token(
            &self,
        ) -> crate::support::boxed::BoxFuture<'_, Result<AccessToken, TokenError>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(AccessToken::new(format!("token-{n}"))
                    .with_expires_in(HOUR)
                    .with_refresh_in(Duration::from_secs(2400)))
            })
        }
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let cache = with_source(Advised(Arc::clone(&calls)));
    let first = get(&cache).await.unwrap();
    advance(Duration::from_secs(2399)).await;
    usable(&cache);
    settle().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    advance(Duration::from_secs(1)).await;
    assert_eq!(usable(&cache), Some(first.generation));
    settle().await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "renewed at the advised 40 minutes"
    );
}
