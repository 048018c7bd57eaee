//! Recovery after an outage of the token endpoint, under load: the endpoint
//! answers 503 for 3 s (and for 120 s) from the start, while two workers
//! send a request every 5 ms each with no token yet. Reported for the layer
//! and for a hand-written `RwLock` refresher that retries on every request
//! (`tests/support/refresher.rs`), measured in the same run:
//!
//! - token requests made during the outage (fewer is kinder to a failing
//!   endpoint);
//! - time from the endpoint's return to the first request that succeeds.
//!
//! `cargo bench --bench recovery` (both outages, about 2.5 minutes), or
//! `cargo bench --bench recovery -- 3` for the short one only.
//!
//! Not a criterion benchmark: each figure is one event per run.

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "../tests/support/refresher.rs"]
mod refresher;
#[path = "../tests/support/services.rs"]
mod services;

use std::time::{Duration, Instant};

use http::Request;
use services::Noop;
use tower::{Layer, ServiceExt};

const WORKERS: usize = 2;
const PACE: Duration = Duration::from_millis(5);

#[derive(Clone, Copy, Debug)]
enum Client {
    Layer,
    Refresher,
}

/// One outage: (token requests during it, time from its end to the first
/// success).
async fn outage(client: Client, outage: Duration) -> (usize, Duration) {
    let authority =
        authority::Authority::start("bench", "bench-secret", Duration::from_secs(3600)).await;
    authority.fail_for(outage);
    let ends = Instant::now() + outage;
    let oauth = authority.layer();
    let svc = oauth.layer(Noop);
    let refresher = refresher::Refresher::new(&authority.base_url(), "bench", "bench-secret");
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let svc = svc.clone();
            let refresher = refresher.clone();
            tokio::spawn(async move {
                // Long enough for a back-off of a minute (max_backoff) to end.
                let deadline = ends + Duration::from_secs(70);
                while Instant::now() < deadline {
                    let ok = match client {
                        Client::Layer => svc.clone().oneshot(Request::new(())).await.is_ok(),
                        Client::Refresher => refresher.header().await.is_ok(),
                    };
                    if ok {
                        return Some(Instant::now());
                    }
                    tokio::time::sleep(PACE).await;
                }
                None
            })
        })
        .collect();
    let mut first = None::<Instant>;
    for w in workers {
        if let Some(at) = w.await.unwrap() {
            first = Some(first.map_or(at, |f| f.min(at)));
        }
    }
    let first = first.expect("no request succeeded within 70 s of the endpoint's return");
    let during = authority
        .token_request_times()
        .iter()
        .filter(|t| **t < ends)
        .count();
    (during, first.saturating_duration_since(ends))
}

fn main() {
    let mut outages: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if outages.is_empty() {
        outages = vec![3, 120];
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| outage | client | token requests during the outage | first success after the endpoint's return |");
    println!("|---|---|---|---|");
    for secs in outages {
        for client in [Client::Layer, Client::Refresher] {
            let (during, late) = rt.block_on(outage(client, Duration::from_secs(secs)));
            println!(
                "| {secs} s | {client:?} | {during} | {:.0} ms |",
                late.as_secs_f64() * 1000.0
            );
        }
    }
}
