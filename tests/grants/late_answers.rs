//! A refresh answered after the fetch timeout, at a server that rotates
//! refresh tokens when the request arrives and revokes the login when a
//! retired one comes back: the answer carries the only copy of the new
//! refresh token. It is awaited and kept, with the chain's turn held: in one
//! layer, between two layers on one `FileStore`, and between two replicas on
//! a real Redis, whose lock is kept alive while its holder works.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use support::refresh_server::RefreshServer;
use tower_oauth::store::{FileStore, TokenStore};
use tower_oauth::{grant::RefreshToken, OAuthLayer, OAuthLayerBuilder};
use tower_oauth::{TokenError, TokenErrorKind};

fn builder(server: &RefreshServer, initial: &str, fetch_timeout: Duration) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id("cli-app")
            .refresh_token(RefreshToken::new(initial))
            .fetch_timeout(fetch_timeout)
            .min_backoff(Duration::from_millis(100)),
    )
}

/// Until the server has taken `n` refreshes (and rotated for each).
async fn refreshes_reach(server: &RefreshServer, n: usize) {
    for _ in 0..1000 {
        if server.refreshes() >= n {
            // The handler reads its delay in the same step: past it now.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server never took refresh {n}");
}

/// Each refresh sent the refresh token the one before it got, starting
/// with the login's: none was sent twice.
fn sent_in_order(server: &RefreshServer) {
    let (sent, issued) = (server.sent(), server.issued());
    assert_eq!(sent, issued[..sent.len()].to_vec());
}

/// A few tokens over more than a lifetime of the access token: each a refresh
/// that must send the newest refresh token.
async fn keeps_refreshing(oauth: &OAuthLayer) -> Result<(), TokenError> {
    for _ in 0..8 {
        oauth.token().await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answered_after_the_fetch_timeout_is_kept() {
    let server = RefreshServer::start(Duration::from_secs(3)).await;
    let initial = server.login();
    server.state.delay_ms.store(2500, Ordering::SeqCst);
    let oauth = builder(&server, &initial, Duration::from_secs(1))
        .build()
        .unwrap();
    // Answered 2.5 s after the server rotated: awaited, within the fetch's
    // bound, and kept.
    let first = oauth.token().await;
    server.state.delay_ms.store(0, Ordering::SeqCst);
    first.expect("the late answer's token");
    keeps_refreshing(&oauth).await.unwrap();
    assert_eq!(server.reuses(), 0, "a retired refresh token was sent");
    assert!(!server.is_revoked(&initial));
    assert!(server.refreshes() >= 3);
}

/// Past the fetch's own bound (four fetch timeouts and 4 s), the request
/// gets its `Timeout`; the refresh goes on, and its answer is kept when it
/// comes: the next request sends the new refresh token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_answered_past_the_fetch_s_bound_is_kept_all_the_same() {
    let server = RefreshServer::start(Duration::from_secs(3)).await;
    let initial = server.login();
    server.state.delay_ms.store(6000, Ordering::SeqCst);
    let oauth = builder(&server, &initial, Duration::from_millis(200))
        .build()
        .unwrap();
    let waiting = tokio::spawn({
        let oauth = oauth.clone();
        async move { oauth.token().await }
    });
    refreshes_reach(&server, 1).await;
    server.state.delay_ms.store(0, Ordering::SeqCst);
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(error.kind(), TokenErrorKind::Timeout, "{error}");
    // The answer comes 6 s after the request; then a token, from the
    // newest refresh token.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    keeps_refreshing(&oauth).await.unwrap();
    assert_eq!(server.reuses(), 0, "a retired refresh token was sent");
    assert!(!server.is_revoked(&initial));
}

/// Two layers sharing `store()`'s store: A's refresh is answered 2.5 s
/// late; B asks while it is out, waits for the store's lock (kept alive on
/// Redis), and then takes A's token rather than send the retired refresh
/// token.
async fn two_share_a_late_answer<S: TokenStore>(store: impl Fn() -> S) {
    let server = RefreshServer::start(Duration::from_secs(3)).await;
    let initial = server.login();
    server.state.delay_ms.store(2500, Ordering::SeqCst);
    let layer = || {
        builder(&server, &initial, Duration::from_secs(1))
            .token_store(store())
            .build()
            .unwrap()
    };
    let (a, b) = (layer(), layer());
    let first = tokio::spawn({
        let a = a.clone();
        async move { a.token().await }
    });
    refreshes_reach(&server, 1).await;
    server.state.delay_ms.store(0, Ordering::SeqCst);
    let second = b.token().await;
    assert_eq!(server.reuses(), 0, "B sent the retired refresh token");
    second.expect("B's token, A's");
    first.await.unwrap().expect("A's late answer");
    sent_in_order(&server);
    keeps_refreshing(&b).await.unwrap();
    keeps_refreshing(&a).await.unwrap();
    assert_eq!(server.reuses(), 0, "a retired refresh token was sent");
    assert!(!server.is_revoked(&initial));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_layers_on_one_file_wait_for_a_late_answer_and_share_it() {
    let dir = support::scratch("late-answer-file");
    let file = dir.join("tokens");
    two_share_a_late_answer(|| FileStore::new(&file).unwrap()).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    /// Past the lock's first time to live (the fetch timeout and a second):
    /// A keeps it alive while it waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_wait_for_a_late_answer_and_share_it() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        two_share_a_late_answer(|| RedisStore::new(redis.url()).unwrap()).await;
    }
}
