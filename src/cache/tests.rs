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
    steps: Arc<Mutex<VecDeque<Step>>>,
    calls: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct Step {
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
        self.steps.lock().unwrap().push_back(Step { delay, answer });
        self
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl TokenSource for Script {
    fn fetch_token(&self) -> crate::transport::BoxFuture<'_, Result<AccessToken, TokenError>> {
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

fn settings() -> Settings {
    Settings {
        refresh_margin: Duration::from_secs(300),
        expiry_skew: Duration::from_secs(10),
        fetch_timeout: Duration::from_secs(10),
        forced_renewal_interval: Duration::from_secs(10),
        backoff_min: Duration::from_secs(1),
        backoff_max: Duration::from_secs(60),
        header_name: http::header::AUTHORIZATION,
        auth_scheme: "Bearer".into(),
        keep_existing: false,
    }
}

fn cache(script: &Script) -> Arc<TokenCache> {
    cache_with(script, settings())
}

fn cache_with(script: &Script, settings: Settings) -> Arc<TokenCache> {
    TokenCache::new(Arc::new(script.clone()), settings, None, None)
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
    if let Some(t) = cache.with_usable(|t| t.generation) {
        return Ok(cache
            .current
            .load_full()
            .filter(|c| c.generation == t)
            .unwrap());
    }
    match cache.acquire() {
        Acquire::Now(r) => r,
        Acquire::Wait(rx) => crate::future::wait_for(rx).await,
    }
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
        assert_eq!(cache.with_usable(|t| t.generation), Some(first.generation));
    }
    assert_eq!(script.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn timings_follow_the_design() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let sent = Instant::now();
    let t = get(&cache).await.unwrap();
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
    let t = get(&cache).await.unwrap();
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
        fn fetch_token(&self) -> crate::transport::BoxFuture<'_, Result<AccessToken, TokenError>> {
            Box::pin(async { AccessToken::from_json(br#"{"access_token":"x"}"#) })
        }
    }
    let cache = TokenCache::new(Arc::new(Bare), settings(), None, None);
    let sent = Instant::now();
    let t = get(&cache).await.unwrap();
    assert_eq!(t.expires_at, sent + HOUR);
}

#[tokio::test(start_paused = true)]
async fn renewal_ahead_does_not_make_requests_wait() {
    let script = Script::default()
        .then_ok(HOUR)
        .then(Duration::from_secs(2), Ok(HOUR));
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    // Timers have millisecond resolution: 1 ms past the renewal point.
    advance(first.refresh_at - Instant::now() + Duration::from_millis(1)).await;
    // Past the renewal point: every request goes on with the current token,
    // and exactly one renewal starts.
    for _ in 0..100 {
        assert_eq!(cache.with_usable(|t| t.generation), Some(first.generation));
    }
    settle().await;
    assert_eq!(script.calls(), 2);
    advance(Duration::from_secs(1)).await;
    assert_eq!(cache.with_usable(|t| t.generation), Some(first.generation));
    advance(Duration::from_millis(1001)).await;
    settle().await;
    assert_eq!(
        cache.with_usable(|t| t.generation),
        Some(first.generation + 1)
    );
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
    advance(first.refresh_at - Instant::now() + Duration::from_millis(1)).await;
    assert_eq!(cache.with_usable(|t| t.generation), Some(first.generation));
    settle().await;
    assert_eq!(script.calls(), 2);
    settle().await;
    // The renewal failed; the token still serves, and no request retries at
    // once.
    for _ in 0..100 {
        assert_eq!(cache.with_usable(|t| t.generation), Some(first.generation));
    }
    settle().await;
    assert_eq!(script.calls(), 2);
    // After the back-off (at most the minimum, 1 s), the next request renews.
    advance(Duration::from_secs(1)).await;
    assert_eq!(cache.with_usable(|t| t.generation), Some(first.generation));
    settle().await;
    assert_eq!(script.calls(), 3);
    assert_eq!(
        cache.with_usable(|t| t.generation),
        Some(first.generation + 1)
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_token_is_never_presented() {
    let script = Script::default()
        .then_ok(HOUR)
        .then_err(status_error(503, None));
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    advance(first.usable_until - Instant::now()).await;
    assert_eq!(cache.with_usable(|t| t.generation), None);
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
        let nominal = Duration::from_secs(1 << (n - 1)).min(Duration::from_secs(60));
        assert!(left <= nominal && left >= nominal / 2, "{n}: {left:?}");
        if n > 2 && n < 7 {
            // Doubling with jitter of at most half: never below the delay
            // two failures back.
            assert!(left >= previous, "{n}: {left:?} after {previous:?}");
        }
        previous = nominal / 4;
        for _ in 0..50 {
            get(&cache).await.unwrap_err();
        }
        assert_eq!(script.calls(), expected_calls);
        advance(left).await;
    }
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
    advance(Duration::from_secs(1)).await;
    get(&cache).await.unwrap_err();
    advance(Duration::from_secs(2)).await;
    let t = get(&cache).await.unwrap();
    advance(t.usable_until - Instant::now()).await;
    get(&cache).await.unwrap_err();
    let left = get(&cache).await.unwrap_err().backing_off().unwrap();
    assert!(left <= Duration::from_secs(1), "{left:?}");
}

#[tokio::test(start_paused = true)]
async fn refusal_drops_the_current_token_once_and_is_rate_limited() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let first = get(&cache).await.unwrap();
    // A hundred concurrent 401s for the same token: one drop, one fetch.
    for _ in 0..100 {
        cache.refused_generation(first.generation);
    }
    let second = get(&cache).await.unwrap();
    assert_eq!(second.generation, first.generation + 1);
    assert_eq!(script.calls(), 2);
    // A late 401 for the old token changes nothing.
    cache.refused_generation(first.generation);
    assert_eq!(cache.with_usable(|t| t.generation), Some(second.generation));
    // The new token is refused too, within the interval: kept, no request.
    advance(Duration::from_secs(9)).await;
    cache.refused_generation(second.generation);
    assert_eq!(cache.with_usable(|t| t.generation), Some(second.generation));
    settle().await;
    assert_eq!(script.calls(), 2);
    // Past the interval, a refusal renews again.
    advance(Duration::from_secs(1)).await;
    cache.refused_generation(second.generation);
    assert_eq!(cache.with_usable(|t| t.generation), None);
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
        cache.refused_generation(t.generation);
        advance(Duration::from_millis(10)).await;
    }
    // 60 s / 10 s interval, plus the first fetch.
    assert!(script.calls() <= 7, "{}", script.calls());
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_does_not_cancel_the_fetch() {
    let script = Script::default().then(Duration::from_secs(1), Ok(HOUR));
    let cache = cache(&script);
    let Acquire::Wait(rx) = cache.acquire() else {
        panic!("expected to wait")
    };
    drop(rx);
    settle().await;
    advance(Duration::from_secs(1)).await;
    settle().await;
    assert!(cache.with_usable(|t| t.generation).is_some());
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
            ) -> crate::transport::BoxFuture<'_, Result<AccessToken, TokenError>> {
                let t = AccessToken::new(self.0.clone());
                Box::pin(async move { Ok(t) })
            }
        }
        let cache = TokenCache::new(Arc::new(Fixed(bad.clone())), settings(), None, None);
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

#[tokio::test(start_paused = true)]
async fn the_fresh_mark_is_cleared_at_the_renewal_point() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let t = get(&cache).await.unwrap();
    settle().await;
    assert!(t.fresh.load(Ordering::Relaxed));
    advance(t.refresh_at - Instant::now() - Duration::from_millis(1)).await;
    assert!(t.fresh.load(Ordering::Relaxed));
    advance(Duration::from_millis(2)).await;
    assert!(!t.fresh.load(Ordering::Relaxed));
}

#[test]
fn a_token_outliving_its_runtime_falls_back_to_the_clock() {
    let script = Script::default().then_ok(HOUR);
    let cache = cache(&script);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let t = rt.block_on(async {
        let t = get(&cache).await.unwrap();
        settle().await;
        t
    });
    assert!(t.fresh.load(Ordering::Relaxed));
    drop(rt);
    // The timer went with its runtime, and cleared the mark as it went.
    assert!(!t.fresh.load(Ordering::Relaxed));
    assert_eq!(cache.with_usable(|t| t.generation), Some(t.generation));
}

#[tokio::test(start_paused = true)]
async fn a_late_timer_is_caught_by_the_clock_sample() {
    let script = Script::default().then_ok(HOUR).then_ok(HOUR);
    let cache = cache(&script);
    let t = get(&cache).await.unwrap();
    advance(t.usable_until - Instant::now() + Duration::from_millis(1)).await;
    // As if the timer had not run (its runtime not driving timers).
    t.fresh.store(true, Ordering::Relaxed);
    // Without a clock read the mark is trusted...
    assert_eq!(
        cache.check_usable(Some(&t), false, |t| t.generation),
        Some(t.generation)
    );
    // ...the sampled clock read sees the token is past its usable point, and
    // clears the mark.
    assert_eq!(cache.check_usable(Some(&t), true, |t| t.generation), None);
    assert!(!t.fresh.load(Ordering::Relaxed));
    assert_eq!(cache.check_usable(Some(&t), false, |t| t.generation), None);
}

#[tokio::test(start_paused = true)]
async fn a_service_reads_the_clock_on_its_first_request_and_every_sixteenth() {
    use tower::{Service, ServiceExt};
    let script = Script::default().then_ok(HOUR);
    let layer = crate::OAuthLayer {
        cache: cache(&script),
    };
    let inner = tower::service_fn(|_: http::Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(()))
    });
    let mut svc = crate::OAuthService::new(inner, layer.clone());
    let call = |svc: &mut crate::OAuthService<_>| {
        let fut = svc.call(http::Request::new(()));
        async move { fut.await.unwrap() }
    };
    svc.ready().await.unwrap();
    call(&mut svc).await;
    let t = layer.cache.current.load_full().unwrap();
    advance(t.usable_until - Instant::now() + Duration::from_millis(1)).await;

    // A late timer: the token is past its usable point but still marked.
    t.fresh.store(true, Ordering::Relaxed);
    // A new clone reads the clock on its first request: no expired token.
    let mut clone = svc.clone();
    clone.ready().await.unwrap();
    call(&mut clone).await;
    assert_eq!(script.calls(), 2);

    // The first instance catches it within the sample too.
    let t = layer.cache.current.load_full().unwrap();
    advance(t.usable_until - Instant::now() + Duration::from_millis(1)).await;
    t.fresh.store(true, Ordering::Relaxed);
    let mut trusted = 0;
    while script.calls() == 2 {
        svc.ready().await.unwrap();
        call(&mut svc).await;
        trusted += 1;
        assert!(
            trusted <= CLOCK_SAMPLE,
            "no clock read in {trusted} requests"
        );
    }
}
