//! A backchannel request the person was asked, kept in the token store (a
//! token file, Redis) at a real server, panva's oidc-provider
//! (`tests/servers/oidc_provider.mjs`, `CIBA=1`, whose test device
//! approves for alice 1.5 s after each request): another replica, or the
//! process after a restart, continues the same request, whether its
//! requests wait or not, and the person is asked once for one approval.

use crate::support;

use tower_oauth::login::{Backchannel, Login};
use tower_oauth::store::{FileStore, TokenStore};
use tower_oauth::{OAuthLayer, TokenErrorKind};

use super::backchannel::{agent_builder, asked, provider, until_decided, ASKED};

/// The `ciba-agent` client's layer at `base`, asking as `ask` says, its
/// tokens and pending requests in `store`: one replica of a fleet, or one
/// run of a process.
fn replica(base: &str, ask: Backchannel, store: impl TokenStore) -> OAuthLayer {
    agent_builder(base, Login::backchannel(ask))
        .token_store(store)
        .build()
        .unwrap()
}

fn alice(wait: bool) -> Backchannel {
    Backchannel::login_hint("alice")
        .binding_message(ASKED)
        .wait(wait)
}

/// Replica A asks alice without waiting; replica B, on the same store,
/// continues A's request (asked at once: still pending; then approved),
/// and a restarted process whose requests wait gets the token too: one
/// request in all.
async fn continued_on(base: &str, layer: impl Fn(Backchannel) -> OAuthLayer) {
    let before = asked(base).await.len();
    let a = layer(alice(false));
    let b = layer(alice(false));
    let e = a.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::ApprovalPending, "{e}");
    let e = b.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::ApprovalPending, "{e}");
    assert!(e.to_string().contains(ASKED), "{e}");
    assert_eq!(
        asked(base).await.len(),
        before + 1,
        "B sent a request of its own"
    );
    until_decided(|| b.token()).await.unwrap();
    assert_eq!(b.identity().await.unwrap().subject(), "alice");
    // A takes the login B finished from the store.
    a.token().await.unwrap();
    assert_eq!(asked(base).await.len(), before + 1, "alice asked twice");
}

/// A process asks alice without waiting, and stops; the same process
/// started again, whose requests wait, continues that request: alice is
/// asked once.
async fn continued_after_a_restart(base: &str, layer: impl Fn(Backchannel) -> OAuthLayer) {
    let before = asked(base).await.len();
    let first = layer(alice(false));
    let e = first.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::ApprovalPending, "{e}");
    drop(first);
    let again = layer(alice(true));
    again.token().await.unwrap();
    assert_eq!(again.identity().await.unwrap().subject(), "alice");
    assert_eq!(asked(base).await.len(), before + 1, "alice asked twice");
}

#[tokio::test]
async fn a_request_kept_in_a_token_file_is_continued_by_another_process() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    // A file each, so that the second begins with no login stored.
    let dir = support::scratch("backchannel-kept");
    let (first, second) = (dir.join("replicas"), dir.join("restarted"));
    continued_on(&base, |ask| {
        replica(&base, ask, FileStore::new(&first).unwrap())
    })
    .await;
    continued_after_a_restart(&base, |ask| {
        replica(&base, ask, FileStore::new(&second).unwrap())
    })
    .await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_request_kept_in_redis_is_continued_by_another_replica() {
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;
    if missing() {
        return;
    }
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let redis = RedisServer::start();
    continued_on(&base, |ask| {
        replica(&base, ask, RedisStore::new(redis.url()).unwrap())
    })
    .await;
    // Another Redis, so that the process begins with no login stored.
    let fresh = RedisServer::start();
    continued_after_a_restart(&base, |ask| {
        replica(&base, ask, RedisStore::new(fresh.url()).unwrap())
    })
    .await;
}

/// A token store that keeps nothing it is given: every write fails.
struct Failing;

impl TokenStore for Failing {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a tower_oauth::store::FetchContext<'a>,
    ) -> tower_oauth::BoxFuture<'a, Result<tower_oauth::store::StoredToken, tower_oauth::TokenError>>
    {
        Box::pin(ctx.fetch())
    }

    fn refused<'a>(
        &'a self,
        _identity: &'a str,
        _token: &'a tower_oauth::AccessToken,
    ) -> tower_oauth::BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn keep_pending_login<'a>(
        &'a self,
        _key: &'a str,
        _value: &'a str,
        _ttl: std::time::Duration,
    ) -> tower_oauth::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async { Err("the store is down".to_owned()) })
    }
}

/// The person was asked, and the store fails to keep the request: the
/// layer keeps it itself, the request says `ApprovalPending` (not a store
/// error), and a later request gets the approval; the person is asked once.
#[tokio::test]
async fn a_request_the_store_fails_to_keep_is_kept_by_the_layer() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let before = asked(&base).await.len();
    let oauth = replica(&base, alice(false), Failing);
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::ApprovalPending, "{e}");
    until_decided(|| oauth.token()).await.unwrap();
    assert_eq!(oauth.identity().await.unwrap().subject(), "alice");
    assert_eq!(asked(&base).await.len(), before + 1, "alice asked twice");
}

/// A token store that keeps no pending request itself (the layer's memory
/// does) and fails one read of them when told to.
#[derive(Default)]
struct FailsOneRead(std::sync::atomic::AtomicBool);

impl TokenStore for FailsOneRead {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a tower_oauth::store::FetchContext<'a>,
    ) -> tower_oauth::BoxFuture<'a, Result<tower_oauth::store::StoredToken, tower_oauth::TokenError>>
    {
        Box::pin(ctx.fetch())
    }

    fn refused<'a>(
        &'a self,
        _identity: &'a str,
        _token: &'a tower_oauth::AccessToken,
    ) -> tower_oauth::BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn take_pending_login<'a>(
        &'a self,
        _key: &'a str,
    ) -> tower_oauth::BoxFuture<'a, Result<Option<String>, String>> {
        let fails = self.0.swap(false, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            match fails {
                true => Err("the store did not answer".to_owned()),
                false => Ok(None),
            }
        })
    }
}

/// An API asks for a stronger sign-in (RFC 9470), and the login that
/// would ask for it fails for a moment (the store cannot be read): the
/// challenge stays for the next request, whose login asks the person for
/// it, instead of being dropped with the weaker token refreshed.
#[tokio::test]
async fn a_sign_in_challenge_outlives_a_login_that_failed_for_a_moment() {
    let Some(provider) = provider() else {
        return;
    };
    let base = provider.base.clone();
    let before = asked(&base).await.len();
    let store = std::sync::Arc::new(FailsOneRead::default());
    let oauth = replica(&base, alice(true), std::sync::Arc::clone(&store));
    oauth.token().await.unwrap();
    let (url, _api) = super::reauthentication::api(false).await;
    store.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = super::reauthentication::pay(&oauth, &url)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match super::reauthentication::pay(&oauth, &url).await {
            Ok(status) => break assert_eq!(status, 200),
            Err(e) if e.is_retryable() && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let requests = asked(&base).await;
    assert_eq!(requests.len(), before + 2, "{requests:?}");
    assert_eq!(requests[before + 1]["acr_values"], "urn:gold");
    assert_eq!(oauth.identity().await.unwrap().claims()["acr"], "urn:gold");
}
