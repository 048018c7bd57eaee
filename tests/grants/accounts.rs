//! Many people through one layer: each account's own login (begun and
//! finished by a web app's routes), its own tokens and chain, its sign-out
//! with revocation; and what an attacker would try: another account's
//! callback, a replayed or unknown one, ids chosen alike, and the store's
//! keys. Against the loopback authorization server, whose API answers with
//! the person each token was issued for.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::login_server::{LoginServer, WEB_CLIENT, WEB_SECRET};
use tower_oauth::{
    store::FileStore, OAuthLayer, OAuthLayerBuilder, TokenError, TokenErrorKind, TokenParams,
};

pub(super) const CALLBACK: &str = "http://127.0.0.1:9/callback";

pub(super) fn builder(server: &LoginServer) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .trusted_issuers([server.issuer()])
            .client_id(WEB_CLIENT)
            .client_secret(WEB_SECRET),
    )
}

/// `user` signs in as `account` through `begin` and `finish` (two layers:
/// replicas, or the same one twice), with a browser that approves at once.
pub(super) async fn sign_in(begin: &OAuthLayer, finish: &OAuthLayer, account: &str, user: &str) {
    let url = begin.begin_login(account, CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, user).await;
    finish.finish_login(account, &callback).await.unwrap();
}

/// One GET of the API as `account`: its status and the person the API saw,
/// or the layer's error.
async fn api_as(
    oauth: &OAuthLayer,
    server: &LoginServer,
    account: &str,
) -> Result<(u16, Option<String>), TokenError> {
    use tower::ServiceExt;
    let mut request = support::get(&server.api_url());
    request
        .extensions_mut()
        .insert(TokenParams::new().account(account));
    let response = match support::client(oauth).oneshot(request).await {
        Ok(response) => response,
        Err(e) => return Err(*e.downcast::<TokenError>().expect("a TokenError")),
    };
    let (status, body) = support::read(response).await;
    let user = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["user"].as_str().map(str::to_owned));
    Ok((status.as_u16(), user))
}

/// Layers that share one `FileStore` file (in a scratch folder `name`)
/// and nothing else, as processes do.
pub(super) fn on_one_file<'a>(server: &'a LoginServer, name: &str) -> impl Fn() -> OAuthLayer + 'a {
    let file = support::scratch(name).join("tokens");
    move || {
        builder(server)
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap()
    }
}

pub(super) fn token_requests(server: &LoginServer) -> usize {
    server.token_forms().len()
}

#[tokio::test]
async fn two_people_through_one_layer_each_get_their_own_token() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    sign_in(&oauth, &oauth, "alice@example.com", "alice").await;
    sign_in(&oauth, &oauth, "bob@example.com", "bob").await;
    for _ in 0..3 {
        assert_eq!(
            api_as(&oauth, &server, "alice@example.com").await.unwrap(),
            (200, Some("alice".into()))
        );
        assert_eq!(
            api_as(&oauth, &server, "bob@example.com").await.unwrap(),
            (200, Some("bob".into()))
        );
    }
    // One code exchange each, no refresh: the login's token serves.
    assert_eq!(server.logins(), 2);
    assert_eq!(token_requests(&server), 2);
    // The authorization requests: PKCE S256, state, the resource, the
    // scope; the exchanges authenticated as the web app (Basic).
    for asked in server.authorizations() {
        assert_eq!(asked["client_id"], WEB_CLIENT);
        assert_eq!(asked["code_challenge_method"], "S256");
        assert_eq!(asked["resource"], server.api_url());
        assert_eq!(asked["redirect_uri"], CALLBACK);
        assert!(asked["state"].len() >= 43);
    }
    for form in server.token_forms() {
        assert!(!form.contains_key("client_secret"));
        assert_eq!(form["grant_type"], "authorization_code");
    }
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    // Without an account, the layer's own token: this layer has none
    // (no login of its own), and an account that never signed in sends
    // nothing.
    let before = token_requests(&server);
    let e = api_as(&oauth, &server, "carol@example.com")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert!(!e.to_string().contains("carol"), "{e}");
    assert_eq!(token_requests(&server), before);
}

#[tokio::test]
async fn callbacks_of_another_account_replayed_or_unknown_change_nothing() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    let alice_url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let _bob_url = oauth.begin_login("bob", CALLBACK).await.unwrap();
    let alice_callback = LoginServer::sign_in(&alice_url, "alice").await;
    // Bob's session presents Alice's callback: refused, nothing exchanged,
    // and Alice's pending login is still there.
    let e = oauth
        .finish_login("bob", &alice_callback)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert_eq!(server.logins(), 0);
    assert_eq!(
        api_as(&oauth, &server, "bob").await.unwrap_err().kind(),
        TokenErrorKind::LoginRequired
    );
    oauth.finish_login("alice", &alice_callback).await.unwrap();
    assert_eq!(server.logins(), 1);
    // Replayed: the pending login was taken, nothing is exchanged again.
    let e = oauth
        .finish_login("alice", &alice_callback)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    // Unknown, missing, and overlong states.
    for callback in [
        format!("{CALLBACK}?code=forged&state=forged"),
        format!("{CALLBACK}?code=forged"),
        format!("{CALLBACK}?code=x&state={}", "s".repeat(20_000)),
    ] {
        let e = oauth.finish_login("alice", &callback).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    }
    assert_eq!(server.logins(), 1);
    assert_eq!(token_requests(&server), 1);
    assert_eq!(
        api_as(&oauth, &server, "alice").await.unwrap(),
        (200, Some("alice".into()))
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn a_refused_login_and_a_wrong_iss_end_only_that_login() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    server.approve(support::login_server::Approve::Deny);
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    let e = oauth.finish_login("alice", &callback).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert!(e.to_string().contains("access_denied"), "{e}");
    server.approve(support::login_server::Approve::WrongIss);
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    let e = oauth.finish_login("alice", &callback).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert_eq!(token_requests(&server), 0);
    // A redirect URI a browser must not be sent to.
    for bad in [
        "javascript:alert(1)",
        "http://app.example/callback",
        "/callback",
    ] {
        let e = oauth.begin_login("alice", bad).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{bad}");
    }
}

#[tokio::test]
async fn sign_out_revokes_and_ends_that_account_only() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    sign_in(&oauth, &oauth, "alice", "alice").await;
    sign_in(&oauth, &oauth, "bob", "bob").await;
    assert_eq!(api_as(&oauth, &server, "alice").await.unwrap().0, 200);
    oauth.sign_out("alice").await.unwrap();
    assert_eq!(server.revoked(), ["alice"]);
    let before = token_requests(&server);
    let e = api_as(&oauth, &server, "alice").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert_eq!(token_requests(&server), before, "no token request");
    assert_eq!(
        api_as(&oauth, &server, "bob").await.unwrap(),
        (200, Some("bob".into()))
    );
    // Alice signs in again.
    sign_in(&oauth, &oauth, "alice", "alice").await;
    assert_eq!(
        api_as(&oauth, &server, "alice").await.unwrap(),
        (200, Some("alice".into()))
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn a_refused_refresh_token_ends_that_account_only() {
    let server = LoginServer::start(Duration::from_millis(1200)).await;
    let oauth = builder(&server)
        .refresh_margin(Duration::from_millis(200))
        .build()
        .unwrap();
    sign_in(&oauth, &oauth, "alice", "alice").await;
    sign_in(&oauth, &oauth, "bob", "bob").await;
    server.retire_refresh_of("alice");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let e = api_as(&oauth, &server, "alice").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert_eq!(
        api_as(&oauth, &server, "bob").await.unwrap(),
        (200, Some("bob".into()))
    );
    assert_eq!(server.refreshes_of("bob"), 1);
}

#[tokio::test]
async fn ids_chosen_alike_never_share_a_token() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    // Ids that differ in a byte, a prefix, case, a separator, Unicode
    // normalization, or that are empty.
    let ids = [
        "a", "a\0", "A", "a ", "ab", "", "é", "e\u{301}", "a:b", "a\nb",
    ];
    for (i, id) in ids.iter().enumerate() {
        sign_in(&oauth, &oauth, id, &format!("user{i}")).await;
    }
    for _ in 0..2 {
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                api_as(&oauth, &server, id).await.unwrap(),
                (200, Some(format!("user{i}"))),
                "{id:?}"
            );
        }
    }
}

#[tokio::test]
async fn idle_accounts_leave_memory_and_come_back_from_the_store() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("accounts-evicted");
    let oauth = builder(&server)
        .token_store(FileStore::new(dir.join("tokens")).unwrap())
        .max_accounts(2)
        .build()
        .unwrap();
    let accounts: Vec<String> = (0..6).map(|i| format!("person-{i}@example.com")).collect();
    for (i, account) in accounts.iter().enumerate() {
        sign_in(&oauth, &oauth, account, &format!("user{i}")).await;
    }
    let before = token_requests(&server);
    for _ in 0..3 {
        for (i, account) in accounts.iter().enumerate() {
            assert_eq!(
                api_as(&oauth, &server, account).await.unwrap(),
                (200, Some(format!("user{i}")))
            );
        }
    }
    assert_eq!(
        token_requests(&server),
        before,
        "each came back from the store"
    );
    // The file holds neither the ids nor any token in clear.
    let file = std::fs::read_to_string(dir.join("tokens")).unwrap();
    for account in &accounts {
        assert!(!file.contains(account.as_str()));
    }
    // Each token the server issued, whole: the file is base64, in which a
    // short prefix such as `at-` may appear by chance.
    let tokens = server.issued_tokens();
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|t| !file.contains(t.as_str())));
    // Without a store, an account that leaves memory loses its login.
    let alone = builder(&server).max_accounts(1).build().unwrap();
    sign_in(&alone, &alone, "x", "x").await;
    sign_in(&alone, &alone, "y", "y").await;
    let e = api_as(&alone, &server, "x").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
}

#[tokio::test]
async fn a_layer_bound_to_an_account_sends_its_token_without_naming_it() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    sign_in(&oauth, &oauth, "alice", "alice").await;
    sign_in(&oauth, &oauth, "bob", "bob").await;
    let alice = oauth.for_account("alice").unwrap();
    let plain = |layer: &OAuthLayer| {
        let (layer, url) = (layer.clone(), server.api_url());
        async move {
            let response = support::send(&layer, &url).await;
            match response {
                Ok(response) => {
                    let (status, body) = support::read(response).await;
                    let v: Value = serde_json::from_str(&body).unwrap_or_default();
                    Ok((status.as_u16(), v["user"].as_str().map(str::to_owned)))
                }
                Err(e) => Err(e.downcast::<TokenError>().unwrap().kind()),
            }
        }
    };
    for _ in 0..3 {
        assert_eq!(plain(&alice).await, Ok((200, Some("alice".into()))));
    }
    // Parameters without an account select the bound account's tokens;
    // a request that names an account gets that account's.
    assert_eq!(
        api_as(&alice, &server, "bob").await.unwrap(),
        (200, Some("bob".into()))
    );
    let token = alice
        .token_for(&TokenParams::new().resource(server.api_url()))
        .await
        .unwrap();
    assert_eq!(
        server
            .state
            .users
            .lock()
            .unwrap()
            .get(token.expose_token())
            .cloned(),
        Some("alice".into())
    );
    assert_eq!(server.logins(), 2, "no login but the two");
    // Signed out through the layer: the bound layer sends nothing more.
    oauth.sign_out("alice").await.unwrap();
    let before = token_requests(&server);
    assert_eq!(plain(&alice).await, Err(TokenErrorKind::LoginRequired));
    assert_eq!(token_requests(&server), before);
    assert_eq!(
        plain(&oauth.for_account("bob").unwrap()).await,
        Ok((200, Some("bob".into())))
    );
}

/// A store that holds, for each store key, a token named after the key: so
/// a token shows which identity it was kept under.
#[derive(Default)]
struct ByKey(std::sync::Mutex<std::collections::HashSet<String>>);

impl tower_oauth::store::TokenStore for ByKey {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a tower_oauth::store::FetchContext<'a>,
    ) -> tower_oauth::BoxFuture<'a, Result<tower_oauth::store::StoredToken, TokenError>> {
        self.0.lock().unwrap().insert(ctx.identity().to_owned());
        let token = tower_oauth::AccessToken::new(format!("for-{}", ctx.identity()))
            .with_expires_in(Duration::from_secs(3600));
        Box::pin(async move {
            Ok(tower_oauth::store::StoredToken {
                token,
                usable_for: Duration::from_secs(3600),
            })
        })
    }

    fn refused<'a>(
        &'a self,
        _: &'a str,
        _: &'a tower_oauth::AccessToken,
    ) -> tower_oauth::BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_hundred_thousand_accounts_stay_within_max_accounts_and_apart() {
    let store = std::sync::Arc::new(ByKey::default());
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server)
        .token_store(std::sync::Arc::clone(&store))
        .max_accounts(1_000)
        .build()
        .unwrap();
    let mut tokens = std::collections::HashMap::new();
    for i in 0..100_000 {
        let account = TokenParams::new().account(format!("person-{i}@example.com"));
        let token = oauth.token_for(&account).await.unwrap();
        assert!(oauth.accounts_in_memory() <= 1_000);
        tokens.insert(i, token.expose_token().to_owned());
    }
    // 100,000 accounts, 100,000 keys: none shared.
    assert_eq!(store.0.lock().unwrap().len(), 100_000);
    // The first ones left memory long ago, and come back with their own.
    for i in [0, 1, 500, 99_999] {
        let account = TokenParams::new().account(format!("person-{i}@example.com"));
        let token = oauth.token_for(&account).await.unwrap();
        assert_eq!(token.expose_token(), tokens[&i]);
    }
    assert_eq!(token_requests(&server), 0);
}

#[tokio::test]
async fn processes_on_one_file_finish_each_others_logins_and_see_a_sign_out() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let process = on_one_file(&server, "accounts-processes");
    let (a, b) = (process(), process());
    sign_in(&a, &b, "alice", "alice").await;
    assert_eq!(
        api_as(&a, &server, "alice").await.unwrap(),
        (200, Some("alice".into()))
    );
    // The pending login was taken from the file: no replay on either.
    let url = a.begin_login("bob", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "bob").await;
    b.finish_login("bob", &callback).await.unwrap();
    for oauth in [&a, &b] {
        let e = oauth.finish_login("bob", &callback).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    }
    assert_eq!(token_requests(&server), 2);
    // A sign-out on B: a third process, which has nothing in memory, reads
    // the ended chain and sends nothing.
    b.sign_out("alice").await.unwrap();
    let before = token_requests(&server);
    let e = api_as(&process(), &server, "alice").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert_eq!(token_requests(&server), before);
    assert_eq!(server.revoked(), ["alice"]);
}

/// Replicas on a real redis-server: a login begun on one and finished on
/// another, a sign-out on one seen by the others, and many accounts on
/// three replicas, each refreshed once a lifetime for the fleet.
#[cfg(feature = "redis")]
mod redis_fleet {
    use super::*;
    use std::sync::Arc;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    fn replicas(
        server: &LoginServer,
        redis: &RedisServer,
        n: usize,
        max: usize,
    ) -> Vec<OAuthLayer> {
        (0..n)
            .map(|_| {
                builder(server)
                    .token_store(RedisStore::new(redis.url()).unwrap())
                    .max_accounts(max)
                    .refresh_margin(Duration::from_millis(500))
                    .build()
                    .unwrap()
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_login_begun_on_one_replica_finishes_on_another_and_signs_out_everywhere() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let fleet = replicas(&server, &redis, 2, 100);
        let (a, b) = (&fleet[0], &fleet[1]);
        sign_in(a, b, "alice", "alice").await;
        sign_in(b, a, "bob", "bob").await;
        for oauth in [a, b] {
            assert_eq!(
                api_as(oauth, &server, "alice").await.unwrap(),
                (200, Some("alice".into()))
            );
            assert_eq!(
                api_as(oauth, &server, "bob").await.unwrap(),
                (200, Some("bob".into()))
            );
        }
        // One exchange each; the other replica took the stored token.
        assert_eq!(token_requests(&server), 2);
        // A callback taken on one replica cannot be replayed on the other.
        let url = a.begin_login("carol", CALLBACK).await.unwrap();
        let callback = LoginServer::sign_in(&url, "carol").await;
        b.finish_login("carol", &callback).await.unwrap();
        let e = a.finish_login("carol", &callback).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
        // Sign-out on B: revoked once, and A sends Alice's token no more
        // once it answered.
        b.sign_out("alice").await.unwrap();
        assert_eq!(server.revoked(), ["alice"]);
        let before = token_requests(&server);
        let e = api_as(a, &server, "alice").await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
        assert_eq!(
            api_as(b, &server, "alice").await.unwrap_err().kind(),
            TokenErrorKind::LoginRequired
        );
        assert_eq!(token_requests(&server), before, "no token request");
        for oauth in [a, b] {
            assert_eq!(
                api_as(oauth, &server, "bob").await.unwrap(),
                (200, Some("bob".into()))
            );
        }
        // Redis holds no account id and no token in clear (each token the
        // server issued looked for, whole: sealed values are base64, in
        // which any short prefix may appear by chance).
        let mut con = redis.connection();
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
        let tokens = server.issued_tokens();
        assert!(!tokens.is_empty());
        for key in keys {
            assert!(!key.contains("alice") && !key.contains("bob"), "{key}");
            let value: Option<String> = redis::cmd("GET").arg(&key).query(&mut con).unwrap_or(None);
            let value = value.unwrap_or_default();
            assert!(tokens.iter().all(|t| !value.contains(t.as_str())), "{key}");
            assert!(
                !value.contains("alice") && !value.contains("verifier"),
                "{key}"
            );
        }
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }

    /// `TOWER_OAUTH_ACCOUNTS` accounts (default 1,000; 10,000 is a few
    /// minutes on two cores) on three replicas that each keep at most a
    /// quarter in memory, for at least two token lifetimes and three rounds:
    /// every request answered as its own person, and at most one refresh per
    /// account per lifetime.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_accounts_on_three_replicas_refresh_once_a_lifetime() {
        if missing() {
            return;
        }
        let accounts: usize = std::env::var("TOWER_OAUTH_ACCOUNTS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1_000);
        let redis = RedisServer::start();
        // Longer than a round over every account (about 1.4 ms an account
        // on two cores, debug build): each account is asked for several
        // times a lifetime, from every replica.
        let lifetime = Duration::from_millis((accounts as u64 * 2).max(4_000));
        let server = LoginServer::start(lifetime).await;
        let fleet = Arc::new(replicas(&server, &redis, 3, accounts / 4));
        let used_memory = || {
            let info: String = redis::cmd("INFO")
                .arg("memory")
                .query(&mut redis.connection())
                .unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap()
        };
        let before = used_memory();
        for i in 0..accounts {
            let (begin, finish) = (&fleet[i % 3], &fleet[(i + 1) % 3]);
            sign_in(begin, finish, &format!("person-{i}"), &format!("user{i}")).await;
        }
        assert_eq!(server.logins(), accounts);
        let per_account = (used_memory() - before) / accounts as u64;
        // Rounds over every account, from 24 tasks (8 a replica, each its
        // share of the accounts, on another replica each round), until two
        // lifetimes and three rounds have passed. What is asserted counts
        // what the promise is about (refreshes per account per lifetime,
        // tokens reused, each person's own), not rounds against the clock.
        let started = std::time::Instant::now();
        let mut rounds = 0;
        while started.elapsed() < 2 * lifetime || rounds < 3 {
            let mut tasks = Vec::new();
            for t in 0..24 {
                let (fleet, api) = (Arc::clone(&fleet), server.api_url());
                tasks.push(tokio::spawn(async move {
                    let mut wrong = Vec::new();
                    for i in (t..accounts).step_by(24) {
                        // Twice back to back, on two replicas: the second
                        // takes the token the first had, whatever the
                        // machine's speed.
                        for hop in 0..2 {
                            let oauth = &fleet[(t + rounds + hop) % 3];
                            let account = format!("person-{i}");
                            match api_via(oauth, &api, &account).await {
                                Ok(Some(user)) if user == format!("user{i}") => {}
                                other => wrong.push(format!("{account}: {other:?}")),
                            }
                        }
                    }
                    wrong
                }));
            }
            for task in tasks {
                let wrong = task.await.unwrap();
                assert!(wrong.is_empty(), "{:?}", &wrong[..wrong.len().min(5)]);
            }
            rounds += 1;
        }
        let lifetimes = (started.elapsed().as_secs_f64() / lifetime.as_secs_f64()).ceil() as usize;
        let most = (0..accounts)
            .map(|i| server.refreshes_of(&format!("user{i}")))
            .max()
            .unwrap();
        eprintln!(
            "{accounts} accounts, 3 replicas: {rounds} rounds in {:?}, {} refreshes, at most {most} \
             for one account in {lifetimes} lifetimes; {per_account} bytes of Redis memory an \
             idle account",
            started.elapsed(),
            server.refreshes()
        );
        // Tokens are reused: every request had a twin right after it, on
        // another replica, which a token request for each would double.
        let requests = rounds * accounts * 2;
        assert!(
            server.refreshes() <= requests / 2,
            "{} refreshes for {requests} requests: tokens were not reused",
            server.refreshes()
        );
        assert!(
            per_account < 4096,
            "{per_account} bytes an account in Redis"
        );
        assert!(
            most <= lifetimes,
            "an account refreshed {most} times in {lifetimes} lifetimes"
        );
        assert!(
            server.violations().is_empty(),
            "{:?}",
            &server.violations()[..1]
        );
    }

    /// One GET of the API as `account` through `oauth`: the person the API
    /// saw.
    async fn api_via(
        oauth: &OAuthLayer,
        api: &str,
        account: &str,
    ) -> Result<Option<String>, String> {
        use tower::ServiceExt;
        let mut request = support::get(api);
        request
            .extensions_mut()
            .insert(TokenParams::new().account(account));
        let response = support::client(oauth)
            .oneshot(request)
            .await
            .map_err(|e| e.to_string())?;
        let (status, body) = support::read(response).await;
        if status != 200 {
            return Err(format!("HTTP {status}"));
        }
        Ok(serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["user"].as_str().map(str::to_owned)))
    }
}
