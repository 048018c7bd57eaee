//! Soak: two worker threads, thousands of tasks, tokens of 2 s, twenty
//! seconds of steady traffic over real HTTP. Zero errors, zero 401s, and
//! about one token request per token lifetime.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::*;
use tokio::time::Instant;
use tower::ServiceExt;

const TASKS: usize = 2000;
const RUN: Duration = Duration::from_secs(20);
const LIFETIME: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_seconds_of_traffic_with_two_second_tokens() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, LIFETIME).await;
    // Renew 300 ms before expiry: about one token request per lifetime.
    let oauth = builder(&authority)
        .refresh_margin(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = client(&oauth);
    let ok = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));

    let start = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let client = client.clone();
            let url = authority.api_url(&format!("/products/{i}"));
            let (ok, refused, failed) = (ok.clone(), refused.clone(), failed.clone());
            tokio::spawn(async move {
                // Spread the tasks over the first second.
                tokio::time::sleep(Duration::from_micros((i as u64 * 1_000_000) / TASKS as u64))
                    .await;
                while start.elapsed() < RUN {
                    match client.clone().oneshot(get(&url)).await {
                        Ok(r) if r.status() == 200 => ok.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => refused.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }

    let (ok, refused, failed) = (
        ok.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    );
    let token_requests = authority.token_requests();
    println!("soak: {ok} ok, {refused} refused, {failed} failed, {token_requests} token requests");
    assert_eq!(refused, 0, "401s during the soak");
    assert_eq!(failed, 0, "errors during the soak");
    assert!(ok >= TASKS * 15, "{ok} requests");
    // 20 s of 2 s tokens renewed about 1.6 s in: 12 or 13 token requests.
    let lifetimes = RUN.as_secs_f64() / LIFETIME.as_secs_f64();
    assert!(
        (token_requests as f64) >= lifetimes && (token_requests as f64) <= lifetimes * 1.5,
        "{token_requests} token requests for {lifetimes} lifetimes"
    );
    assert_eq!(authority.api_refused(), 0);
    assert_eq!(oauth.stats().failed_token_requests, 0);
}
