//! Sessions that survive failure: a back-channel logout that failed half-way
//! is done when the server sends it again (and refused once done); links
//! that find every session a logout names, and go with their accounts; a
//! login that fails keeps the one it would replace; a token file that does
//! not read is never written over. Against the loopback authorization
//! server, whose ID and logout tokens `jsonwebtoken` signs, and a token
//! store that fails on demand around a real `FileStore`.

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::id_tokens::Hook;
use support::login_server::{Approve, LoginServer, CLIENT, WEB_CLIENT};
use tower_oauth::login::{Identity, Login};
use tower_oauth::store::{AccountWatcher, FetchContext, FileStore, StoredToken, TokenStore};
use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenErrorKind, TokenParams};

use super::accounts::{builder, CALLBACK};

/// A `FileStore` that fails on demand: the next `fail_sign_outs`
/// sign-outs (a replica that did not confirm), every read of a chain
/// (`fail_chain_reads`), every read of links (`fail_link_reads`).
struct Flaky {
    inner: FileStore,
    fail_sign_outs: AtomicUsize,
    fail_chain_reads: AtomicBool,
    fail_link_reads: AtomicBool,
}

impl Flaky {
    fn new(name: &str) -> Arc<Flaky> {
        let file = support::scratch(name).join("tokens");
        Arc::new(Flaky {
            inner: FileStore::new(file).unwrap(),
            fail_sign_outs: AtomicUsize::new(0),
            fail_chain_reads: AtomicBool::new(false),
            fail_link_reads: AtomicBool::new(false),
        })
    }
}

fn failing<T: Send + 'static>(why: &str) -> BoxFuture<'static, Result<T, String>> {
    let why = why.to_owned();
    Box::pin(async move { Err(why) })
}

impl TokenStore for Flaky {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<StoredToken, TokenError>> {
        self.inner.get_or_fetch(ctx)
    }

    fn refused<'a>(&'a self, identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()> {
        self.inner.refused(identity, token)
    }

    fn keep_pending_login<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        self.inner.keep_pending_login(key, value, ttl)
    }

    fn take_pending_login<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        self.inner.take_pending_login(key)
    }

    fn signed_out<'a>(
        &'a self,
        account: &'a str,
        identities: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        let fail = self
            .fail_sign_outs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        match fail {
            true => failing("1 watching replica(s) did not say that they dropped the tokens"),
            false => self.inner.signed_out(account, identities),
        }
    }

    fn read_chain<'a>(&'a self, ctx: &'a FetchContext<'a>) -> BoxFuture<'a, Result<(), String>> {
        match self.fail_chain_reads.load(Ordering::SeqCst) {
            true => failing("the store did not answer"),
            false => self.inner.read_chain(ctx),
        }
    }

    fn link_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        self.inner.link_account(key, member, value, ttl)
    }

    fn linked_accounts<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<String>>, String>> {
        match self.fail_link_reads.load(Ordering::SeqCst) {
            true => failing("the store did not answer"),
            false => self.inner.linked_accounts(key),
        }
    }

    fn unlink_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        self.inner.unlink_account(key, member)
    }

    fn use_once<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<bool>, String>> {
        self.inner.use_once(key, ttl)
    }

    fn used_before<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        self.inner.used_before(key)
    }

    fn watch_accounts(&self, watcher: AccountWatcher) {
        self.inner.watch_accounts(watcher)
    }
}

/// `user` signs in as `account`.
async fn sign_in(oauth: &OAuthLayer, account: &str, user: &str) -> Option<Identity> {
    let url = oauth.begin_login(account, CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, user).await;
    oauth.finish_login(account, &callback).await.unwrap()
}

async fn token_of(oauth: &OAuthLayer, account: &str) -> Result<String, TokenErrorKind> {
    let params = TokenParams::new().account(account);
    oauth
        .token_for(&params)
        .await
        .map(|t| t.expose_token().to_owned())
        .map_err(|e| e.kind())
}

fn logout_token(server: &LoginServer, sub: Option<&str>, sid: Option<&str>) -> String {
    let issuer = server.issuer();
    (server.state.oidc).logout_token(&issuer, WEB_CLIENT, sub, sid, None)
}

fn hooked(
    server: &LoginServer,
    sub: &str,
    f: impl Fn(&mut Value, &mut jsonwebtoken::Header) + Send + Sync + 'static,
) -> String {
    let hook: Hook = Box::new(f);
    let issuer = server.issuer();
    (server.state.oidc).logout_token(&issuer, WEB_CLIENT, Some(sub), None, Some(&hook))
}

/// A logout whose sign-out of one account failed (a replica did not
/// confirm) says how many were signed out and how many failed; the
/// server's retry of the same token signs out the rest, and a replay after
/// that is refused. A store that cannot read the links, or an account's
/// identity, fails the logout rather than skipping; the retry does it.
#[tokio::test]
async fn a_back_channel_logout_that_failed_is_done_when_sent_again() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let store = Flaky::new("logout-retried");
    let oauth = builder(&server)
        .scope("openid read")
        .token_store(Arc::clone(&store))
        .build()
        .unwrap();
    for account in ["a1", "a2"] {
        sign_in(&oauth, account, "alice").await.unwrap();
    }
    let token = logout_token(&server, Some("alice"), None);
    store.fail_sign_outs.store(1, Ordering::SeqCst);
    let e = oauth.back_channel_logout(&token).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("signed out 1 account(s), and 1 failed"),
        "{text}"
    );
    assert!(text.contains("may send it again"), "{text}");
    // The server sends it again: the one that failed is signed out now.
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);
    for account in ["a1", "a2"] {
        assert_eq!(
            token_of(&oauth, account).await.unwrap_err(),
            TokenErrorKind::LoginRequired
        );
    }
    let e = oauth.back_channel_logout(&token).await.unwrap_err();
    assert!(e.to_string().contains("replay"), "{e}");

    // The links cannot be read: an error, then the retry works.
    sign_in(&oauth, "b", "bob").await.unwrap();
    let token = logout_token(&server, Some("bob"), None);
    store.fail_link_reads.store(true, Ordering::SeqCst);
    let e = oauth.back_channel_logout(&token).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Transport, "{e}");
    assert!(token_of(&oauth, "b").await.is_ok(), "nothing signed out");
    store.fail_link_reads.store(false, Ordering::SeqCst);
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);

    // An account's identity cannot be read: not a skip, an error.
    sign_in(&oauth, "c", "carol").await.unwrap();
    let token = logout_token(&server, Some("carol"), None);
    store.fail_chain_reads.store(true, Ordering::SeqCst);
    let e = oauth.back_channel_logout(&token).await.unwrap_err();
    assert!(e.to_string().contains("identity"), "{e}");
    assert!(e.to_string().contains("1 failed"), "{e}");
    store.fail_chain_reads.store(false, Ordering::SeqCst);
    assert!(token_of(&oauth, "c").await.is_ok(), "nothing signed out");
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);
    assert_eq!(
        token_of(&oauth, "c").await.unwrap_err(),
        TokenErrorKind::LoginRequired
    );
}

/// Logout tokens typed `JWT` (Keycloak before 25, Authentik before
/// 2025.12), or with no `typ`, are taken when they carry the back-channel
/// event and no nonce; another JWT type is refused. An `exp` at the end of
/// time is remembered for a bounded while, and nothing overflows.
#[tokio::test]
async fn logout_tokens_typed_jwt_are_taken_and_other_types_refused() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).scope("openid read").build().unwrap();
    for (account, user) in [("a", "alice"), ("b", "bob"), ("c", "carol"), ("d", "dave")] {
        sign_in(&oauth, account, user).await.unwrap();
    }
    let at_jwt = hooked(&server, "alice", |_, h| h.typ = Some("at+jwt".into()));
    let e = oauth.back_channel_logout(&at_jwt).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidLogoutToken);
    assert!(e.to_string().contains("typ"), "{e}");
    assert!(token_of(&oauth, "a").await.is_ok());
    let jwt = hooked(&server, "alice", |_, h| h.typ = Some("JWT".into()));
    assert_eq!(oauth.back_channel_logout(&jwt).await.unwrap(), 1);
    let untyped = hooked(&server, "bob", |_, h| h.typ = None);
    assert_eq!(oauth.back_channel_logout(&untyped).await.unwrap(), 1);
    // A `JWT` without the event is still refused.
    let bare = hooked(&server, "carol", |c, h| {
        h.typ = Some("JWT".into());
        c.as_object_mut().unwrap().remove("events");
    });
    assert!(oauth.back_channel_logout(&bare).await.is_err());
    assert!(token_of(&oauth, "c").await.is_ok());
    let forever = hooked(&server, "dave", |c, _| c["exp"] = u64::MAX.into());
    assert_eq!(oauth.back_channel_logout(&forever).await.unwrap(), 1);
    let e = oauth.back_channel_logout(&forever).await.unwrap_err();
    assert!(e.to_string().contains("replay"), "{e}");
}

/// After 65 logins of one person (an account each, as the web_app
/// example makes), a logout by `sub` finds the 64 newest: the oldest link
/// alone went. A login whose ID token had no `sid` is found by a token
/// naming both; a refreshed ID token without `sid` keeps the login's.
#[tokio::test]
async fn a_logout_finds_every_session_it_names() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let store = Flaky::new("links-bounded");
    let oauth = builder(&server)
        .scope("openid read")
        .token_store(Arc::clone(&store))
        .build()
        .unwrap();
    for n in 0..65 {
        sign_in(&oauth, &format!("login-{n}"), "alice")
            .await
            .unwrap();
    }
    let token = logout_token(&server, Some("alice"), None);
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 64);
    assert!(token_of(&oauth, "login-0").await.is_ok(), "the oldest link");
    assert_eq!(
        token_of(&oauth, "login-64").await.unwrap_err(),
        TokenErrorKind::LoginRequired
    );

    // Bob's login's ID token has no `sid`; the token names a session and him.
    *server.state.oidc.id_token_hook.lock().unwrap() = Some(Box::new(|c: &mut Value, _| {
        c.as_object_mut().unwrap().remove("sid");
    }));
    sign_in(&oauth, "bob", "bob").await.unwrap();
    *server.state.oidc.id_token_hook.lock().unwrap() = None;
    let token = logout_token(&server, Some("bob"), Some("sid-at-the-server"));
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);
    // Another session of Carol's is not hers to end.
    sign_in(&oauth, "carol", "carol").await.unwrap();
    let token = logout_token(&server, Some("carol"), Some("another-session"));
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 0);
    assert!(token_of(&oauth, "carol").await.is_ok());
}

/// A refresh whose ID token has no `sid` keeps the login's for matching:
/// a logout by that session still finds the account.
#[tokio::test]
async fn a_refreshed_id_token_without_sid_keeps_the_session() {
    let server = LoginServer::start(Duration::from_secs(1)).await;
    let oauth = builder(&server).scope("openid read").build().unwrap();
    let first = sign_in(&oauth, "a", "alice").await.unwrap();
    let sid = first.session_id().unwrap().to_owned();
    *server.state.oidc.id_token_hook.lock().unwrap() = Some(Box::new(|c: &mut Value, _| {
        c.as_object_mut().unwrap().remove("sid");
    }));
    let before = token_of(&oauth, "a").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_ne!(token_of(&oauth, "a").await.unwrap(), before, "refreshed");
    let alice = oauth.for_account("a").unwrap();
    assert_eq!(alice.identity().await.unwrap().session_id(), Some(&*sid));
    let token = logout_token(&server, None, Some(&sid));
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);
}

/// Links go with their accounts: after a sign-out, a logout by the
/// person finds only the account still signed in, and the token file
/// holds no link of the one signed out.
#[tokio::test]
async fn a_sign_out_removes_the_account_s_links() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let file = support::scratch("links-unlinked").join("tokens");
    let oauth = builder(&server)
        .scope("openid read")
        .token_store(FileStore::new(&file).unwrap())
        .build()
        .unwrap();
    sign_in(&oauth, "a1", "alice").await.unwrap();
    let links = || {
        let text = std::fs::read_to_string(&file).unwrap();
        let whole: Value = serde_json::from_str(&text).unwrap();
        let entries = whole["entries"].as_object().unwrap().clone();
        entries
            .iter()
            .filter(|(k, _)| k.ends_with(":accounts"))
            .map(|(_, e)| {
                let members: Value = serde_json::from_str(e["value"].as_str().unwrap()).unwrap();
                members.as_object().unwrap().len()
            })
            .sum::<usize>()
    };
    assert_eq!(links(), 2, "by sub and by sid");
    oauth.sign_out("a1").await.unwrap();
    assert_eq!(links(), 0, "gone with the sign-out");
}

/// A person's login that fails (the person denies it at the server) keeps
/// the one it would replace: its refresh token and who signed in, here and
/// in another process on the same file. After the server refused the
/// chain's refresh token, nobody is signed in.
#[tokio::test]
async fn a_failed_login_keeps_the_session_it_would_replace() {
    let server = LoginServer::start(Duration::from_secs(1)).await;
    let file = support::scratch("login-kept").join("tokens");
    let person = || {
        support::with_transport(
            OAuthLayer::builder()
                .protected_resource(server.api_url())
                .client_id(CLIENT)
                .scope("openid read")
                .login(Login::user_agent(LoginServer::user_agent()).automatic(false)),
        )
        .token_store(FileStore::new(&file).unwrap())
        .build()
        .unwrap()
    };
    let cli = person();
    cli.login().await.unwrap();
    assert_eq!(cli.identity().await.unwrap().subject(), "person");
    server.approve(Approve::Deny);
    let e = cli.login().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert_eq!(cli.identity().await.unwrap().subject(), "person");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cli.token().await.expect("refreshed with the kept chain");
    let other = person();
    assert!(other.login_status().await.is_signed_in());
    other.token().await.expect("the file kept the chain");
    assert_eq!(server.logins(), 1);
    // The server ends the login: nobody is signed in any more.
    server.revoke_all();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        cli.token().await.unwrap_err().kind(),
        TokenErrorKind::LoginRequired
    );
    assert!(cli.identity().await.is_none());
}

/// A token file that is too large, cut short, or of another format
/// version fails the token request with an error that names the file and
/// says why; the file is left as it was.
#[tokio::test]
async fn a_token_file_that_does_not_read_is_never_written_over() {
    let server = support::authority::Authority::start(
        support::CLIENT_ID,
        support::CLIENT_SECRET,
        Duration::from_secs(3600),
    )
    .await;
    let dir = support::scratch("file-fails-closed");
    let own = serde_json::json!({"format": "tower-oauth/file-store/1", "entries": {}}).to_string();
    let large = format!(
        "{{\"format\":\"tower-oauth/file-store/1\",\"entries\":{{\"pad\":{{\"value\":\"{}\"}}}}}}",
        "x".repeat(17 * 1024 * 1024)
    );
    let cases = [
        ("large", large, "over the 16777216-byte bound"),
        ("cut", own[..own.len() - 3].to_owned(), "cut short"),
        (
            "version",
            own.replace("file-store/1", "file-store/2"),
            "tower-oauth/file-store/2",
        ),
        ("garbage", "<html>".to_owned(), "does not parse"),
    ];
    for (name, text, says) in cases {
        let file = dir.join(name);
        std::fs::write(&file, &text).unwrap();
        let oauth = support::builder(&server)
            .token_store(FileStore::new(&file).unwrap())
            .build()
            .unwrap();
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Transport, "{name}: {e}");
        let message = e.to_string();
        assert!(message.contains(says), "{name}: {message}");
        assert!(
            message.contains(&*file.to_string_lossy()),
            "{name}: {message}"
        );
        assert!(
            std::fs::read_to_string(&file).unwrap() == text,
            "{name}: untouched"
        );
    }
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    /// The keys matching `pattern`.
    fn keys(con: &mut redis::Connection, pattern: &str) -> Vec<String> {
        redis::cmd("KEYS").arg(pattern).query(con).unwrap()
    }

    /// On Redis, links go with their accounts' sign-outs and the link
    /// hashes empty out; every key the store writes (tokens, chains,
    /// links, marks, the watchers' list) has an expiry.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_key_expires_and_links_go_with_their_accounts() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let oauth = builder(&server)
            .scope("openid read")
            .token_store(RedisStore::new(redis.url()).unwrap())
            .build()
            .unwrap();
        for account in ["a1", "a2"] {
            sign_in(&oauth, account, "alice").await.unwrap();
            assert!(token_of(&oauth, account).await.is_ok());
        }
        let mut con = redis.connection();
        let members = |con: &mut redis::Connection| -> i64 {
            keys(con, "*:accounts")
                .iter()
                .map(|k| redis::cmd("HLEN").arg(k).query::<i64>(con).unwrap())
                .sum()
        };
        // By `sub` (two accounts) and by each one's `sid`.
        assert_eq!(members(&mut con), 4);
        // A logout token used, to mark its `jti`.
        sign_in(&oauth, "b", "bob").await.unwrap();
        let token = logout_token(&server, Some("bob"), None);
        assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);
        for key in keys(&mut con, "*") {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
            assert!(ttl > 0, "{key} has no expiry ({ttl})");
        }
        oauth.sign_out("a1").await.unwrap();
        assert_eq!(members(&mut con), 2, "a1's links went");
        oauth.sign_out("a2").await.unwrap();
        assert_eq!(members(&mut con), 0, "a2's links went");
        assert!(keys(&mut con, "*:accounts").is_empty());
    }

    /// On a real Redis Cluster, accounts are linked (one script on the
    /// node that owns the link's keys, no `MULTI`), and a back-channel
    /// logout taken by another replica finds and signs out both.
    #[cfg(feature = "redis-cluster")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn links_on_a_redis_cluster() {
        if missing() {
            return;
        }
        let cluster =
            tokio::task::spawn_blocking(|| support::redis_cluster::RedisCluster::start(3, 0))
                .await
                .unwrap();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let replica = || {
            builder(&server)
                .scope("openid read")
                .token_store(RedisStore::cluster(cluster.urls()).unwrap())
                .build()
                .unwrap()
        };
        let (a, b) = (replica(), replica());
        for account in ["a1", "a2"] {
            sign_in(&a, account, "alice").await.unwrap();
            assert!(token_of(&a, account).await.is_ok());
        }
        let token = logout_token(&server, Some("alice"), None);
        assert_eq!(b.back_channel_logout(&token).await.unwrap(), 2);
        for account in ["a1", "a2"] {
            assert_eq!(
                token_of(&a, account).await.unwrap_err(),
                TokenErrorKind::LoginRequired
            );
        }
    }
}

/// An HMAC-signed ID token is checked only with the secret of a client
/// that authenticates with one: a `private_key_jwt` client refuses it,
/// whatever its key file holds (here, the very bytes the server keyed the
/// HMAC with).
#[tokio::test]
async fn an_hmac_id_token_is_refused_by_a_client_without_a_secret() {
    use support::id_tokens::SigningKey;
    use support::keys::{Kind, TestKey};
    use tower_oauth::client_auth::Algorithm;
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let key = TestKey::new(Kind::P256);
    let file = support::scratch("hmac-keyfile").join("client-key.pem");
    std::fs::write(&file, &key.pkcs8).unwrap();
    server.set_metadata(
        "id_token_signing_alg_values_supported",
        serde_json::json!(["HS256"]),
    );
    server.state.oidc.rotate(
        SigningKey {
            alg: jsonwebtoken::Algorithm::HS256,
            key: jsonwebtoken::EncodingKey::from_secret(key.pkcs8.trim().as_bytes()),
            public_jwk: serde_json::json!({"kty": "oct", "kid": "hmac"}),
        },
        true,
    );
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .trusted_issuers([server.issuer()])
            .client_id(WEB_CLIENT)
            .private_key_file(&file, Algorithm::Es256, None)
            .scope("openid read"),
    )
    .build()
    .unwrap();
    let url = oauth.begin_login("a", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    let e = oauth.finish_login("a", &callback).await.unwrap_err();
    assert!(e.to_string().contains("an HMAC"), "{e}");
    assert!(oauth.for_account("a").unwrap().identity().await.is_none());
}

/// The token file stays small by itself: what ran out (a pending login
/// here, as tokens, links and marks of used logout tokens do) goes at the
/// next write, whichever entry it writes.
#[tokio::test]
async fn a_token_file_prunes_what_ran_out_at_each_write() {
    let file = support::scratch("file-prunes").join("tokens");
    let store = FileStore::new(&file).unwrap();
    let entries = || -> Vec<String> {
        let whole: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        whole["entries"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    store
        .keep_pending_login("short", "v", Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(entries().len(), 1);
    store
        .use_once("mark", Duration::from_secs(2))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    store
        .keep_pending_login("long", "v", Duration::from_secs(3600))
        .await
        .unwrap();
    let left = entries();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with("long"), "{left:?}");
}

/// A client the login registered (RFC 7591) with a secret of its own
/// checks the server's HS256 ID tokens with that secret.
#[tokio::test]
async fn a_registered_client_s_own_secret_checks_its_hmac_id_tokens() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server.set_metadata(
        "id_token_signing_alg_values_supported",
        serde_json::json!(["HS256"]),
    );
    server.set_metadata(
        "token_endpoint_auth_methods_supported",
        serde_json::json!(["client_secret_basic"]),
    );
    server
        .state
        .registers_confidential
        .store(true, Ordering::SeqCst);
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .scope("openid read")
            .login(Login::user_agent(LoginServer::user_agent())),
    )
    .build()
    .unwrap();
    oauth.login().await.unwrap();
    assert_eq!(server.registrations().len(), 1);
    assert_eq!(oauth.identity().await.unwrap().subject(), "person");
}
