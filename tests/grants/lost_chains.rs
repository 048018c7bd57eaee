//! A store that lost the refresh-token chain (a Redis restarted without
//! persistence, a token file removed), or holds one that does not open (a
//! replica with another sealing key): no replica sends a refresh token it
//! cannot know is the newest, at a server that revokes the login when a
//! retired one comes back; and a record that does not open is never
//! written over. Where the replicas hear the store's news (accounts on
//! Redis), the one that holds the newest copy writes it back, with the
//! account's links, and every replica goes on serving.

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

#[cfg(feature = "redis")]
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

    /// Alice and bob, logged in on two replicas that both refresh their
    /// chains (2 s access tokens); then Redis restarts empty, at once or
    /// after `outage`. For each person, the replica holding the newest
    /// chain writes it back, with the links to who signed in; both replicas
    /// go on serving both (never saying that a login is needed), and no
    /// retired refresh token is ever sent. A back-channel logout after the
    /// restart signs alice out everywhere, and bob stays.
    // The turn is held for the whole test on purpose: the other tests of
    // the binary wait on their own threads.
    #[allow(clippy::await_holding_lock)]
    async fn restarted_empty(outage: Duration) {
        let _quiet = support::quiet_turn();
        use crate::accounts::{builder, sign_in};
        use std::time::Instant;
        use support::login_server::{LoginServer, WEB_CLIENT};
        use tower_oauth::TokenParams;
        let mut redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(2)).await;
        let replica = || {
            builder(&server)
                .scope("openid read")
                .token_store(RedisStore::new(redis.url()).unwrap())
                .min_backoff(Duration::from_millis(100))
                .build()
                .unwrap()
        };
        let replicas = [replica(), replica()];
        sign_in(&replicas[0], &replicas[0], "alice-account", "alice").await;
        sign_in(&replicas[1], &replicas[1], "bob-account", "bob").await;
        let ask = |r: usize, account: &'static str| {
            let oauth = replicas[r].clone();
            async move {
                let params = TokenParams::new().account(account);
                oauth
                    .token_for(&params)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.kind())
            }
        };
        let pairs = [
            (0, "alice-account"),
            (1, "alice-account"),
            (0, "bob-account"),
            (1, "bob-account"),
        ];
        // Both serve both, through rotations on either replica.
        let until = Instant::now() + Duration::from_millis(4500);
        while Instant::now() < until {
            for (r, account) in pairs {
                ask(r, account).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let before = server.refreshes();
        assert!(before >= 2, "{before} refreshes before the restart");
        // Killed, down for `outage`, started again empty, while every 50 ms
        // each replica asks for each person's token: when each pair went
        // unserved, and never "no login".
        let killed = Instant::now();
        let restart = std::thread::spawn(move || {
            redis.stop();
            std::thread::sleep(outage);
            redis.restart();
            (redis, killed.elapsed())
        });
        let mut unserved = [None::<(Duration, Duration)>; 4];
        while killed.elapsed() < outage + Duration::from_secs(12) {
            for (i, (r, account)) in pairs.into_iter().enumerate() {
                if let Err(kind) = ask(r, account).await {
                    assert_ne!(kind, TokenErrorKind::LoginRequired, "{account} on {r}");
                    let at = killed.elapsed();
                    unserved[i] = Some((unserved[i].map_or(at, |(from, _)| from), at));
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_redis, back_at) = restart.join().unwrap();
        println!("Redis killed, and back empty {back_at:?} later");
        for (i, (r, account)) in pairs.into_iter().enumerate() {
            println!(
                "{account} on replica {r}: unserved (first and last failure after the kill) {:?}",
                unserved[i]
            );
            // Served again within 6 s of Redis's return, and served on for
            // 6 s since (three token lifetimes, on the chains written back).
            let last = unserved[i].map_or(Duration::ZERO, |(_, last)| last);
            assert!(
                last < back_at + Duration::from_secs(6),
                "{account} on {r}: {unserved:?}"
            );
        }
        assert!(
            server.refreshes() > before + 2,
            "no refresh after the restart"
        );
        assert!(server.violations().is_empty(), "{:?}", server.violations());
        // Within a minute of the loss, a logout that finds nobody is not
        // taken for done (a link may still come back); the server sends it
        // again.
        let nobody = (server.state.oidc).logout_token(
            &server.issuer(),
            WEB_CLIENT,
            Some("carol"),
            None,
            None,
        );
        let e = replicas[0].back_channel_logout(&nobody).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
        // The links were written back: a back-channel logout finds alice.
        let token = (server.state.oidc).logout_token(
            &server.issuer(),
            WEB_CLIENT,
            Some("alice"),
            None,
            None,
        );
        assert_eq!(replicas[1].back_channel_logout(&token).await.unwrap(), 1);
        for r in 0..2 {
            assert_eq!(
                ask(r, "alice-account").await,
                Err(TokenErrorKind::LoginRequired)
            );
            ask(r, "bob-account").await.unwrap();
        }
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_restarted_empty_keeps_both_people_served_on_both_replicas() {
        if !missing() {
            restarted_empty(Duration::ZERO).await;
        }
    }

    /// The same after 3 s down: longer than a replica's listing, but every
    /// word was heard up to the loss.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_back_empty_after_3_s_keeps_both_people_served_on_both_replicas() {
        if !missing() {
            restarted_empty(Duration::from_secs(3)).await;
        }
    }

    /// Two replicas on `redis` (back-off `min_backoff`), alice signed in on
    /// A; both serve her through rotations on either while they hear the
    /// news; then B makes the last rotation (its copy is the newest, and it
    /// knows so), and A takes that token from the store, its chain left
    /// older. The replicas, and alice's parameters.
    async fn b_holds_the_newest(
        redis: &RedisServer,
        server: &support::login_server::LoginServer,
        min_backoff: Duration,
    ) -> (OAuthLayer, OAuthLayer, tower_oauth::TokenParams) {
        use crate::accounts::{builder, sign_in};
        use std::time::Instant;
        let replica = || {
            builder(server)
                .token_store(RedisStore::new(redis.url()).unwrap())
                .min_backoff(min_backoff)
                .build()
                .unwrap()
        };
        let (a, b) = (replica(), replica());
        sign_in(&a, &a, "alice-account", "alice").await;
        let alice = tower_oauth::TokenParams::new().account("alice-account");
        let until = Instant::now() + Duration::from_millis(4500);
        while Instant::now() < until {
            a.token_for(&alice).await.unwrap();
            b.token_for(&alice).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(2100)).await;
        b.token_for(&alice).await.unwrap();
        a.token_for(&alice).await.unwrap();
        (a, b, alice)
    }

    /// A's refresh of alice's chain is out at the server (answered 1.5 s
    /// late) when Redis restarts empty. B's copy is the one A read (B wrote
    /// it), and the news told B that a newer one is coming: B sends nothing
    /// and waits,
    /// A writes its answer back, and both serve alice again; no refresh
    /// token is ever sent twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refresh_out_when_redis_restarts_empty_is_never_sent_again() {
        use std::time::Instant;
        use support::login_server::LoginServer;
        if missing() {
            return;
        }
        let mut redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(2)).await;
        let (a, b, alice) = b_holds_the_newest(&redis, &server, Duration::from_millis(100)).await;
        // Her token runs out; A's refresh is answered 1.5 s late.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        server.delay_tokens(Duration::from_millis(1500));
        let forms = server.token_forms().len();
        let out = {
            let (a, alice) = (a.clone(), alice.clone());
            tokio::spawn(async move { a.token_for(&alice).await.map(drop) })
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while server.token_forms().len() == forms {
            assert!(Instant::now() < deadline, "A sent no refresh");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        redis.stop();
        redis.restart();
        let _ = out.await.unwrap();
        server.delay_tokens(Duration::ZERO);
        // Both ask every 50 ms for 10 s: served again, and for the last 4 s.
        let restarted = Instant::now();
        let mut last_failure = [Duration::ZERO; 2];
        while restarted.elapsed() < Duration::from_secs(10) {
            for (i, oauth) in [&a, &b].into_iter().enumerate() {
                if oauth.token_for(&alice).await.is_err() {
                    last_failure[i] = restarted.elapsed();
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!("alice unserved on A and B until {last_failure:?} after the restart");
        assert!(
            last_failure.iter().all(|at| *at < Duration::from_secs(6)),
            "{last_failure:?}"
        );
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }

    /// Redis restarts empty; A, whose copy of alice's chain is older than
    /// B's, is asked first each time, and B at once after it. A is told to
    /// wait for the holder of the newest copy: that is A's own state, never
    /// a failure shared with B (which would hold B back, the one replica
    /// that can write the chain back, for as long as A keeps asking). B
    /// writes it back, and both serve alice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_replica_told_to_wait_never_holds_back_the_one_that_writes_back() {
        use std::time::Instant;
        use support::login_server::LoginServer;
        if missing() {
            return;
        }
        let mut redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(2)).await;
        // A failure shared by A would hold the fleet back for a second:
        // longer than between A's request and B's.
        let (a, b, alice) = b_holds_the_newest(&redis, &server, Duration::from_secs(1)).await;
        tokio::time::sleep(Duration::from_millis(2100)).await;
        redis.stop();
        redis.restart();
        let restarted = Instant::now();
        let mut b_served = false;
        while !b_served {
            assert!(
                restarted.elapsed() < Duration::from_secs(10),
                "B never wrote alice's chain back"
            );
            let from_a = a.token_for(&alice).await;
            assert!(from_a.is_err(), "A served alice before B wrote back");
            match b.token_for(&alice).await {
                Ok(_) => b_served = true,
                Err(e) => assert!(
                    !e.to_string().contains("reported by another replica"),
                    "B held back by A's failure: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A reads the chain B wrote back (once its own back-off is over).
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Err(e) = a.token_for(&alice).await {
            assert!(Instant::now() < deadline, "A never served alice again: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }

    /// Redis restarts empty, and alice signs out on B at once, before A
    /// has heard the store again (its listing was lost with the rest): the
    /// sign-out answers `Ok` only once A no longer presents her token from
    /// memory, and from then on neither replica serves her, whichever
    /// writes first (A's copy written back, or B's sign-out).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sign_out_just_after_redis_restarted_empty_holds_on_every_replica() {
        use crate::accounts::{builder, sign_in};
        use tower_oauth::TokenParams;
        if missing() {
            return;
        }
        let mut redis = RedisServer::start();
        let server = support::login_server::LoginServer::start(Duration::from_secs(60)).await;
        let replica = || {
            builder(&server)
                .token_store(RedisStore::new(redis.url()).unwrap())
                .build()
                .unwrap()
        };
        let (a, b) = (replica(), replica());
        sign_in(&a, &a, "alice-account", "alice").await;
        let alice = TokenParams::new().account("alice-account");
        a.token_for(&alice).await.unwrap();
        b.token_for(&alice).await.unwrap();
        redis.stop();
        redis.restart();
        // (The first calls after the restart may find their connections
        // dropped.)
        let mut signed_out = b.sign_out("alice-account").await;
        for _ in 0..20 {
            if signed_out.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            signed_out = b.sign_out("alice-account").await;
        }
        signed_out.unwrap();
        for _ in 0..40 {
            for (name, oauth) in [("A", &a), ("B", &b)] {
                let served = oauth.token_for(&alice).await;
                assert!(served.is_err(), "{name} served alice after her sign-out");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let e = a.token_for(&alice).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
        assert!(server.violations().is_empty(), "{:?}", server.violations());
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
