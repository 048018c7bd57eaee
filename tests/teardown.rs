//! Layers come and go: a service that builds one per tenant gets all their
//! memory back when they are dropped, and tearing down many costs time in
//! proportion to their number. Live bytes are counted by a global
//! allocator, so these are exact tests, not timings (the one comparison of
//! times below is a ratio of two runs in the same process).

#[path = "support/services.rs"]
mod services;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use tower_oauth::OAuthLayer;

/// Counts the bytes allocated and not yet freed, process-wide.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::SeqCst);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The count is process-wide: the tests take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn layer() -> OAuthLayer {
    OAuthLayer::builder()
        .token_source(services::FixedToken)
        .build()
        .unwrap()
}

/// `n` tenants, each with a layer that fetches a token, has it refused
/// and fetches another, then is dropped.
async fn tenants(n: usize) {
    for _ in 0..n {
        let oauth = layer();
        oauth.token().await.unwrap();
        assert!(oauth.force_renewal());
        oauth.token().await.unwrap();
    }
    // Let the runtime run whatever the layers left scheduled.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[test]
fn dropped_layers_return_all_their_memory() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The first round grows what the runtime keeps for itself.
    rt.block_on(tenants(200));
    let before = LIVE.load(Ordering::SeqCst);
    rt.block_on(tenants(1000));
    let grown = LIVE.load(Ordering::SeqCst) - before;
    eprintln!("live bytes after 1000 more tenants: {grown:+}");
    // A kilobyte per tenant would be a megabyte; allow the runtime's own
    // bookkeeping a little room.
    assert!(grown < 16 * 1024, "{grown} bytes kept after 1000 tenants");
    assert_eq!(rt.metrics().num_alive_tasks(), 0);
}

#[cfg(feature = "reqwest")]
/// A token endpoint on 127.0.0.1 answering every request with a token, one
/// request per connection or kept alive, as the client likes.
async fn token_endpoint() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let body = r#"{"access_token":"t","expires_in":3600}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

#[cfg(feature = "reqwest")]
/// `n` layers on the built-in transport (a reqwest client each, with its
/// connection pool), each fetching one token from `url`, then dropped.
async fn transport_tenants(url: &str, n: usize) {
    for _ in 0..n {
        let oauth = OAuthLayer::builder()
            .token_url(url)
            .client_id("id")
            .client_secret("secret")
            .build()
            .unwrap();
        oauth.token().await.unwrap();
    }
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[cfg(feature = "reqwest")]
#[test]
fn dropped_layers_on_the_built_in_transport_return_all_their_memory() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(token_endpoint());
    rt.block_on(transport_tenants(&url, 300));
    let mut rounds = Vec::new();
    for _ in 0..4 {
        let before = LIVE.load(Ordering::SeqCst);
        rt.block_on(transport_tenants(&url, 1000));
        rounds.push(LIVE.load(Ordering::SeqCst) - before);
    }
    eprintln!("live bytes after each round of 1000 layers: {rounds:?}");
    // Measured: [37840, 0, -37232, 37232], a worker thread's buffer coming
    // and going. Steady growth of even 64 bytes a layer would be 256 KiB.
    let grown: isize = rounds.iter().sum();
    assert!(
        grown < 256 * 1024,
        "{grown} bytes kept after 4000 layers: {rounds:?}"
    );
    // Only the endpoint's accept loop is left, once the last connections
    // have seen their clients go: no connection, no fetch.
    rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(200)).await });
    assert_eq!(rt.metrics().num_alive_tasks(), 1);
}

/// Seconds to drop `n` live layers (built beforehand).
fn drop_time(n: usize) -> f64 {
    let layers: Vec<_> = (0..n).map(|_| layer()).collect();
    let start = Instant::now();
    drop(layers);
    start.elapsed().as_secs_f64()
}

#[test]
fn dropping_many_layers_takes_time_in_proportion() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    drop_time(1_000);
    // Ten times as many layers: about ten times the time. A scan of every
    // live layer on each drop would make it a hundred.
    let small = (0..3).map(|_| drop_time(5_000)).fold(f64::MAX, f64::min);
    let large = (0..3).map(|_| drop_time(50_000)).fold(f64::MAX, f64::min);
    let ratio = large / small;
    eprintln!("drop 5,000: {small:.4} s, 50,000: {large:.4} s, ratio {ratio:.1}");
    assert!(
        ratio < 30.0,
        "50,000 layers took {ratio:.0} times as long as 5,000"
    );
}
