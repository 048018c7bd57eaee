//! Renewal under load: with a token endpoint that takes 200 ms to answer and
//! tokens of 2 s (renewed about every second), steady traffic from two
//! workers never waits for a renewal. Each request's latency is classified
//! by whether a token request was in flight when it started; the maximum
//! inside renewal windows is compared with the maximum outside them, in the
//! same run.
//!
//! `cargo bench --bench renewal`
//!
//! Not a criterion benchmark: what matters is the maximum latency, not the
//! mean, so it prints the distribution itself.

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/services.rs"]
mod services;

use std::time::{Duration, Instant};

use http::Request;
use services::Noop;
use tower::{Layer, ServiceExt};

const DELAY: Duration = Duration::from_millis(200);
const RUN: Duration = Duration::from_secs(6);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let authority =
            authority::Authority::start("bench", "bench-secret", Duration::from_secs(2)).await;
        authority.set_delay(DELAY);
        let oauth = authority.layer();
        let svc = oauth.layer(Noop);
        // Warm: the first token is fetched before the clock starts.
        svc.clone().oneshot(Request::new(())).await.unwrap();
        let warm_requests = authority.token_requests();

        let start = Instant::now();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let svc = svc.clone();
                tokio::spawn(async move {
                    // Reserved up front: growing it mid-run would show as latency.
                    let mut samples = Vec::with_capacity(12_000_000);
                    while start.elapsed() < RUN {
                        let t = Instant::now();
                        svc.clone().oneshot(Request::new(())).await.unwrap();
                        samples.push((t, t.elapsed()));
                        tokio::task::yield_now().await;
                    }
                    samples
                })
            })
            .collect();
        let mut samples = Vec::new();
        for w in workers {
            samples.extend(w.await.unwrap());
        }

        let windows: Vec<(Instant, Instant)> = authority.token_request_times()[warm_requests..]
            .iter()
            .map(|&t| (t, t + DELAY + Duration::from_millis(5)))
            .collect();
        let (mut inside, mut outside): (Vec<_>, Vec<_>) = (Vec::new(), Vec::new());
        for (at, latency) in samples {
            if windows.iter().any(|(from, to)| at >= *from && at <= *to) {
                inside.push(latency);
            } else {
                outside.push(latency);
            }
        }
        inside.sort();
        outside.sort();
        println!(
            "renewal under load: {} renewals in {:?}, token endpoint answers in {:?}",
            windows.len(),
            RUN,
            DELAY
        );
        println!(
            "{:<24} {:>10} {:>10} {:>10} {:>10} {:>12}",
            "requests", "count", "p50", "p99", "p99.9", "max"
        );
        for (name, set) in [("outside renewal", &outside), ("during renewal", &inside)] {
            println!(
                "{:<24} {:>10} {:>10.1?} {:>10.1?} {:>10.1?} {:>12.1?}",
                name,
                set.len(),
                percentile(set, 0.5),
                percentile(set, 0.99),
                percentile(set, 0.999),
                set.last().copied().unwrap_or_default()
            );
        }
        let max_in = inside.last().copied().unwrap_or_default();
        let max_out = outside.last().copied().unwrap_or_default();
        println!(
            "max during / max outside: {:.2}; no request waited for the token endpoint: {}",
            max_in.as_secs_f64() / max_out.as_secs_f64(),
            max_in < DELAY / 2
        );
        assert!(windows.len() >= 3, "expected several renewals");
        assert!(max_in < DELAY / 2, "a request waited for a renewal");
    });
}
