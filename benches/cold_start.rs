//! Cold start as a user's burst makes it: a fresh layer behind
//! `tower::util::BoxCloneService` (as `tower::util` users and axum routers
//! hold a service), 1,000 or 10,000 tasks that each take a clone and send
//! one request at once, on a runtime with two workers, against a real
//! loopback token endpoint that answers after 20 ms. Timed from the
//! layer's construction until the last request completes. Beside it, in
//! the same run and in turns (`support/turns.rs`): a hand-written
//! refresher behind a tokio `RwLock` (`tests/support/refresher.rs`) in a
//! service of its own, and `middle`, whose authorizer fetches its token as
//! it is built. Every burst of the layer and of the refresher makes exactly
//! one token request (checked each time).
//!
//! `cargo bench --bench cold_start`; `-- <rounds>` to change the default
//! (31 rounds). It prints each contender's medians and fastest tenths at
//! 1,000 and 10,000 tasks, the cost of each task past the first thousand,
//! and the ratios to the refresher.

#[path = "../tests/support/authority.rs"]
mod authority;
#[path = "support/peers.rs"]
mod peers;
#[path = "../tests/support/provider.rs"]
mod provider;
#[path = "../tests/support/refresher.rs"]
mod refresher;
#[path = "../tests/support/serve.rs"]
mod serve;
#[path = "../tests/support/services.rs"]
mod services;
#[path = "support/turns.rs"]
mod turns;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use services::Noop;
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, Service, ServiceExt};

type Svc = BoxCloneService<Request<()>, Response<()>, BoxError>;

/// The two sizes of burst.
const SIZES: [usize; 2] = [1_000, 10_000];

/// `tasks` tasks at once, each running what `task` makes for it; returns
/// when the last has completed.
async fn spawn_each<F, Fut>(tasks: usize, task: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let handles: Vec<_> = (0..tasks).map(|_| tokio::spawn(task())).collect();
    for handle in handles {
        handle.await.unwrap();
    }
}

/// `tasks` tasks, each with its own clone of `svc`, one request each.
async fn burst(svc: Svc, tasks: usize) {
    spawn_each(tasks, || {
        let svc = svc.clone();
        async move {
            svc.oneshot(Request::new(())).await.unwrap();
        }
    })
    .await;
}

/// The hand-written refresher as a user puts it in front of a service:
/// the header from the refresher, then the inner service, in one boxed
/// future.
#[derive(Clone)]
struct RefresherService {
    refresher: Arc<refresher::Refresher>,
}

impl Service<Request<()>> for RefresherService {
    type Response = Response<()>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<()>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<()>) -> Self::Future {
        let refresher = Arc::clone(&self.refresher);
        Box::pin(async move {
            let req = refresher.authorize(req).await?;
            Ok(Noop.call(req).await?)
        })
    }
}

/// The contenders, each a cold start of `tasks` on a fresh instance.
const NAMES: [&str; 4] = ["refresher", "middle", "tower_oauth", "refresher_unboxed"];

struct Bench {
    rt: tokio::runtime::Runtime,
    /// The token endpoint of the layer and the refresher.
    authority: authority::Authority,
    /// `middle`'s (HTTP Basic, as its oauth2 client sends).
    basic: authority::Authority,
}

impl Bench {
    /// A fresh hand-written refresher for the layer's token endpoint.
    fn refresher(&self) -> Arc<refresher::Refresher> {
        Arc::new(refresher::Refresher::new(
            &self.authority.base_url(),
            "bench",
            "bench-secret",
        ))
    }

    fn cold_start(&self, contender: usize, tasks: usize) -> Duration {
        let before = self.authority.token_requests();
        let took = self.rt.block_on(async {
            let start = Instant::now();
            match contender {
                0 => {
                    let svc = RefresherService {
                        refresher: self.refresher(),
                    };
                    burst(BoxCloneService::new(svc), tasks).await;
                }
                1 => {
                    let url = url::Url::parse(&self.basic.token_url()).unwrap();
                    let authorizer = middle::BasicClientCredentialAuthorizer::basic_builder(
                        "bench",
                        "bench-secret",
                        url,
                    )
                    .build()
                    .await
                    .unwrap();
                    let svc = peers::middle(Noop, &authorizer).map_err(BoxError::from);
                    burst(BoxCloneService::new(svc), tasks).await;
                }
                2 => {
                    let svc = self.authority.layer().layer(Noop);
                    burst(BoxCloneService::new(svc), tasks).await;
                }
                _ => {
                    let refresher = self.refresher();
                    spawn_each(tasks, || {
                        let refresher = Arc::clone(&refresher);
                        async move {
                            let req = refresher.authorize(Request::new(())).await.unwrap();
                            Noop.call(req).await.unwrap();
                        }
                    })
                    .await;
                }
            }
            start.elapsed()
        });
        if contender != 1 {
            assert_eq!(
                self.authority.token_requests() - before,
                1,
                "one token request per cold burst"
            );
        }
        took
    }
}

fn main() {
    let (rounds, _) = turns::rounds_and_burst(31, 0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (authority, basic) = rt.block_on(async {
        let authority =
            authority::Authority::start("bench", "bench-secret", Duration::from_secs(3600)).await;
        let basic =
            authority::Authority::start("bench", "bench-secret", Duration::from_secs(3600)).await;
        basic.expect(authority::Style::Basic, &[]);
        (authority, basic)
    });
    // Token endpoints 20 ms away.
    authority.set_delay(Duration::from_millis(20));
    basic.set_delay(Duration::from_millis(20));
    let bench = Bench {
        rt,
        authority,
        basic,
    };

    // `COLD_START_ONLY=<contender>:<tasks>:<runs>` runs one contender
    // alone, to profile it (valgrind's callgrind, an allocation count).
    if let Ok(only) = std::env::var("COLD_START_ONLY") {
        let mut parts = only.split(':');
        let name = parts.next().unwrap_or_default();
        let contender = NAMES
            .iter()
            .position(|n| *n == name)
            .expect("a contender's name");
        let tasks = parts.next().map_or(10_000, |t| t.parse().unwrap());
        let runs = parts.next().map_or(1, |r| r.parse().unwrap());
        for _ in 0..runs {
            let took = bench.cold_start(contender, tasks);
            println!("{name}, {tasks} tasks: {:.2} ms", took.as_secs_f64() * 1e3);
        }
        return;
    }
    // Contender i at SIZES[j] is entry i * 2 + j; in turns, warmed up once.
    let count = NAMES.len() * SIZES.len();
    for i in 0..count {
        bench.cold_start(i / 2, SIZES[i % 2]);
    }
    let times = turns::take_turns(count, rounds, |i| {
        bench.cold_start(i / 2, SIZES[i % 2]).as_secs_f64() * 1e3
    });
    for (label, at) in [("medians", 2), ("fastest tenth", 10)] {
        println!("\ncold start, {rounds} rounds, {label}:");
        println!("| contender | 1,000 tasks | 10,000 tasks | each task past the first thousand | 10,000 × refresher |");
        println!("|---|---|---|---|---|");
        let ms = |i: usize| times[i][times[i].len() / at];
        for (c, name) in NAMES.iter().enumerate() {
            let (small, large) = (ms(c * 2), ms(c * 2 + 1));
            let per_task_us = (large - small) * 1e3 / (SIZES[1] - SIZES[0]) as f64;
            println!(
                "| {name} | {small:.2} ms | {large:.2} ms | {per_task_us:.3} µs | {:.3} |",
                large / ms(1)
            );
        }
    }
}
