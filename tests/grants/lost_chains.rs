//! A store that lost the refresh-token chain (a Redis restarted without
//! persistence, a token file removed), or holds one that does not open (a
//! replica with another sealing key): no replica sends a refresh token it
//! cannot know is the newest, at a server that revokes the login when a
//! retired one comes back; and a record that does not open is never
//! written over.

use crate::support;

use std::time::Duration;

use support::refresh_server::RefreshServer;
use tower_oauth::store::{FileStore, TokenStore};
use tower_oauth::{grant::RefreshToken, OAuthLayer, TokenErrorKind};

/// A replica refreshing `initial` at `server` through `store`.
fn replica(server: &RefreshServer, initial: &str, store: impl TokenStore) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id("cli-app")
            .refresh_token(RefreshToken::new(initial))
            .min_backoff(Duration::from_millis(100)),
    )
    .token_store(store)
    .build()
    .unwrap()
}

/// A refreshes, then (once A's token ran out) B refreshes with the token A
/// stored: A's memory now holds a retired refresh token, B's the newest.
async fn a_then_b(server: &RefreshServer, a: &OAuthLayer, b: &OAuthLayer) {
    a.token().await.unwrap();
    // Access tokens of 1 s: usable for 0.9 s.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    b.token().await.unwrap();
    assert_eq!(server.refreshes(), 2);
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

/// After the loss, each replica answers "no login" without a token request,
/// and the login stands at the server.
async fn neither_sends(server: &RefreshServer, initial: &str, replicas: [&OAuthLayer; 2]) {
    for oauth in replicas {
        // (The first call after a Redis restart may find its connection
        // dropped: `Transport`, and the next one connects again.)
        let mut e = oauth.token().await.unwrap_err();
        for _ in 0..20 {
            if e.kind() != TokenErrorKind::Transport {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            e = oauth.token().await.unwrap_err();
        }
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
        assert!(e.to_string().contains("no longer holds"), "{e}");
    }
    assert_eq!(server.refreshes(), 2, "a refresh token was sent");
    assert_eq!(server.reuses(), 0);
    assert!(!server.is_revoked(initial));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_removed_makes_no_process_send_an_old_refresh_token() {
    let dir = support::scratch("lost-chain-file");
    let file = dir.join("tokens");
    let server = RefreshServer::start(Duration::from_secs(1)).await;
    let initial = server.login();
    let a = replica(&server, &initial, FileStore::new(&file).unwrap());
    let b = replica(&server, &initial, FileStore::new(&file).unwrap());
    a_then_b(&server, &a, &b).await;
    std::fs::remove_file(&file).unwrap();
    neither_sends(&server, &initial, [&a, &b]).await;
    let _ = std::fs::remove_dir_all(dir);
}

mod on_redis {
    use super::*;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    /// Redis restarts empty, as one without persistence does: A, whose
    /// memory holds the refresh token B rotated since, is asked first.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_restarted_empty_makes_no_replica_send_an_old_refresh_token() {
        if missing() {
            return;
        }
        let mut redis = RedisServer::start();
        let server = RefreshServer::start(Duration::from_secs(1)).await;
        let initial = server.login();
        let a = replica(&server, &initial, RedisStore::new(redis.url()).unwrap());
        let b = replica(&server, &initial, RedisStore::new(redis.url()).unwrap());
        a_then_b(&server, &a, &b).await;
        redis.stop();
        redis.restart();
        neither_sends(&server, &initial, [&a, &b]).await;
    }

    /// A replica sealing with another key finds a chain it cannot open: an
    /// error naming why, no refresh, and the record left byte for byte.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_chain_that_does_not_open_is_an_error_and_left_as_it_is() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = RefreshServer::start(Duration::from_secs(1)).await;
        let initial = server.login();
        let a = replica(&server, &initial, RedisStore::new(redis.url()).unwrap());
        a.token().await.unwrap();
        let mut con = redis.connection();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*:chain").query(&mut con).unwrap();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let before: String = redis::cmd("GET").arg(&keys[0]).query(&mut con).unwrap();
        let other_key = RedisStore::new(redis.url())
            .unwrap()
            .encryption_key([7; 32]);
        let c = replica(&server, &initial, other_key);
        let e = c.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
        assert!(e.to_string().contains("does not open"), "{e}");
        assert_eq!(server.refreshes(), 1, "no refresh over it");
        let after: String = redis::cmd("GET").arg(&keys[0]).query(&mut con).unwrap();
        assert_eq!(before, after, "written over");
        assert_eq!(server.reuses(), 0);
    }
}
