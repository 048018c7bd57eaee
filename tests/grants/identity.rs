//! Who signed in: the ID token a web login's code brings, verified before
//! anything is kept, and the logouts from the server's side (RP-initiated,
//! back-channel). Against the loopback authorization server, whose ID tokens
//! and logout tokens `jsonwebtoken` signs (RustCrypto, keys by rcgen or
//! openssl): never the crate's own JOSE code. The hostile ones: `alg: none`,
//! HS256 keyed with the public key, an unknown `kid`, a wrong `iss`, `aud`,
//! `azp` or `nonce`, expired, `iat` ahead; logout tokens with a `nonce`,
//! without `events`, replayed, for another client, naming nobody.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Value};
use support::id_tokens::{claims_of, hs256, now, unsigned, Hook, SigningKey};
use support::keys::{Kind, TestKey};
use support::login_server::{LoginServer, WEB_CLIENT};
use tower_oauth::{OAuthLayer, TokenErrorKind, TokenParams};

use super::accounts::{builder, CALLBACK};

fn layer(server: &LoginServer) -> OAuthLayer {
    builder(server).scope("openid read").build().unwrap()
}

/// `user` signs in as `account`: what `finish_login` answered.
async fn sign_in(
    oauth: &OAuthLayer,
    account: &str,
    user: &str,
) -> Result<Option<tower_oauth::login::Identity>, tower_oauth::TokenError> {
    let url = oauth.begin_login(account, CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, user).await;
    oauth.finish_login(account, &callback).await
}

async fn token_of(oauth: &OAuthLayer, account: &str) -> Result<String, TokenErrorKind> {
    let params = TokenParams::new().account(account);
    oauth
        .token_for(&params)
        .await
        .map(|t| t.expose_token().to_owned())
        .map_err(|e| e.kind())
}

fn hook(f: impl Fn(&mut Value, &mut jsonwebtoken::Header) + Send + Sync + 'static) -> Hook {
    Box::new(f)
}

#[tokio::test]
async fn a_web_login_returns_the_verified_identity_and_keeps_it() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = layer(&server);
    let identity = sign_in(&oauth, "session-1", "alice")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(identity.subject(), "alice");
    assert_eq!(identity.issuer(), server.issuer());
    let sid = server.state.sids.lock().unwrap()["alice"].clone();
    assert_eq!(identity.session_id(), Some(sid.as_str()));
    assert_eq!(identity.claims()["email"], "alice@example.com");
    // The nonce the authorization request sent came back in the token.
    let asked = server.authorizations().pop().unwrap();
    let nonce = asked.get("nonce").expect("a nonce with openid");
    assert!(nonce.len() >= 43, "{nonce}");
    assert_eq!(claims_of(identity.id_token())["nonce"], nonce.as_str());
    assert!(!format!("{identity:?}").contains(identity.id_token()));
    // The identity comes back from the layer, through a layer for the
    // account, and from a replica that reads it from the store.
    let alice = oauth.for_account("session-1").unwrap();
    assert_eq!(alice.identity().await.unwrap().subject(), "alice");
    assert!(
        oauth.identity().await.is_none(),
        "the web app's own layer has no person"
    );
    assert!(token_of(&oauth, "session-1").await.is_ok());
    // The keys were read once for the login.
    assert_eq!(server.state.oidc.jwks_reads.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_login_without_openid_has_no_identity_and_sends_no_nonce() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).scope("read").build().unwrap();
    assert!(sign_in(&oauth, "s", "bob").await.unwrap().is_none());
    assert!(!server.authorizations()[0].contains_key("nonce"));
    assert_eq!(server.state.oidc.jwks_reads.load(Ordering::SeqCst), 0);
}

/// Each hostile ID token fails the login with its reason, and nothing is
/// kept: the account has no token afterwards.
#[tokio::test]
async fn hostile_id_tokens_fail_the_login_and_keep_nothing() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let rsa = TestKey::new(Kind::Rsa(2048));
    let issuer = server.issuer();
    let now = now();
    let base =
        json!({"iss": issuer, "sub": "mallory", "aud": WEB_CLIENT, "iat": now, "exp": now + 300});
    type Case = (&'static str, Box<dyn Fn(&LoginServer)>, &'static str);
    let raw = |token: String| -> Box<dyn Fn(&LoginServer)> {
        Box::new(move |s: &LoginServer| {
            *s.state.oidc.raw_id_token.lock().unwrap() = Some(token.clone())
        })
    };
    fn with(
        f: impl Fn(&mut Value, &mut jsonwebtoken::Header) + Send + Sync + Copy + 'static,
    ) -> Box<dyn Fn(&LoginServer)> {
        Box::new(move |s: &LoginServer| *s.state.oidc.id_token_hook.lock().unwrap() = Some(hook(f)))
    }
    let cases: Vec<Case> = vec![
        ("alg none", raw(unsigned(&base)), "`none`"),
        (
            "HS256 keyed with the public key",
            raw(hs256(&base, rsa.public.as_bytes(), "key-1")),
            "HS256",
        ),
        (
            "a wrong iss",
            with(|c, _| c["iss"] = "https://evil.example".into()),
            "issuer",
        ),
        (
            "another client",
            with(|c, _| c["aud"] = "other-app".into()),
            "another client",
        ),
        (
            "two audiences, no azp",
            with(|c, _| c["aud"] = json!([WEB_CLIENT, "other-app"])),
            "azp",
        ),
        (
            "a wrong azp",
            with(|c, _| c["azp"] = "other-app".into()),
            "azp",
        ),
        (
            "a wrong nonce",
            with(|c, _| c["nonce"] = "not-the-nonce".into()),
            "nonce",
        ),
        (
            "no nonce",
            with(|c, _| {
                c.as_object_mut().unwrap().remove("nonce");
            }),
            "no `nonce`",
        ),
        (
            "expired",
            with(move |c, _| c["exp"] = (now - 3600).into()),
            "expired",
        ),
        (
            "iat ahead",
            with(move |c, _| c["iat"] = (now + 3600).into()),
            "future",
        ),
        ("a bad signature", with(|_, _| {}), "does not verify"),
    ];
    let total = cases.len();
    for (i, (name, set, says)) in cases.into_iter().enumerate() {
        *server.state.oidc.raw_id_token.lock().unwrap() = None;
        *server.state.oidc.id_token_hook.lock().unwrap() = None;
        set(&server);
        let oauth = layer(&server);
        let account = format!("account-{i}");
        if name == "a bad signature" {
            // Signed by a key of the same id the server does not hold.
            server
                .state
                .oidc
                .sign_unpublished(SigningKey::es256("key-1"));
        }
        let e = sign_in(&oauth, &account, "mallory").await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{name}: {e}");
        assert!(e.to_string().contains(says), "{name}: {e}");
        assert!(e.to_string().contains("ID token"), "{name}: {e}");
        // No token: the failed login's error, or no login at all.
        let kind = token_of(&oauth, &account).await.unwrap_err();
        assert!(
            matches!(
                kind,
                TokenErrorKind::LoginFailed | TokenErrorKind::LoginRequired
            ),
            "{name}: nothing kept, {kind:?}"
        );
        assert!(oauth
            .for_account(&account)
            .unwrap()
            .identity()
            .await
            .is_none());
    }
    assert_eq!(server.logins(), total);
}

#[tokio::test]
async fn an_unknown_kid_costs_one_read_of_the_keys_then_is_refused() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = layer(&server);
    sign_in(&oauth, "a", "alice").await.unwrap().unwrap();
    let oidc = &server.state.oidc;
    assert_eq!(oidc.jwks_reads.load(Ordering::SeqCst), 1);
    // A key the server never published.
    oidc.sign_unpublished(SigningKey::es256("made-up"));
    let e = sign_in(&oauth, "b", "bob").await.unwrap_err();
    assert!(e.to_string().contains("`made-up`"), "{e}");
    assert_eq!(oidc.jwks_reads.load(Ordering::SeqCst), 2, "one read again");
    // Another made-up key within the minute: no read at all.
    oidc.sign_unpublished(SigningKey::es256("made-up-2"));
    let e = sign_in(&oauth, "c", "carol").await.unwrap_err();
    assert!(e.to_string().contains("`made-up-2`"), "{e}");
    assert_eq!(oidc.jwks_reads.load(Ordering::SeqCst), 2, "rate-limited");
}

#[tokio::test]
async fn a_key_rotation_at_the_server_costs_one_read() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = layer(&server);
    sign_in(&oauth, "a", "alice").await.unwrap().unwrap();
    let oidc = &server.state.oidc;
    oidc.rotate(SigningKey::es256("key-2"), true);
    let bob = sign_in(&oauth, "b", "bob").await.unwrap().unwrap();
    assert_eq!(bob.subject(), "bob");
    assert_eq!(oidc.jwks_reads.load(Ordering::SeqCst), 2);
    sign_in(&oauth, "c", "carol").await.unwrap().unwrap();
    assert_eq!(oidc.jwks_reads.load(Ordering::SeqCst), 2);
}

/// RS256, PS256, ES256, ES384 and EdDSA, each with an openssl key and
/// `jsonwebtoken`'s signature.
#[tokio::test]
async fn every_listed_algorithm_verifies() {
    use jsonwebtoken::Algorithm;
    for (alg, kind) in [
        (Algorithm::RS256, Kind::Rsa(2048)),
        (Algorithm::PS256, Kind::Rsa(2048)),
        (Algorithm::ES256, Kind::P256),
        (Algorithm::ES384, Kind::P384),
        (Algorithm::EdDSA, Kind::Ed25519),
    ] {
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let key = TestKey::new(kind);
        let name = format!("{alg:?}");
        server.state.oidc.rotate(
            SigningKey::from_pem(alg, &key.pkcs8, &key.jwk(kind), "k"),
            true,
        );
        server.set_metadata("id_token_signing_alg_values_supported", json!([name]));
        let oauth = layer(&server);
        let who = sign_in(&oauth, "a", "alice").await;
        assert_eq!(who.unwrap().unwrap().subject(), "alice", "{name}");
        // Not listed: refused, whatever the signature.
        server.set_metadata("id_token_signing_alg_values_supported", json!(["RS512"]));
        let e = sign_in(&layer(&server), "b", "bob").await.unwrap_err();
        assert!(e.to_string().contains("does not list"), "{name}: {e}");
    }
}

#[tokio::test]
async fn a_refresh_renews_the_id_token_for_the_same_person_only() {
    let server = LoginServer::start(Duration::from_secs(1)).await;
    let oauth = layer(&server);
    let first = sign_in(&oauth, "a", "alice").await.unwrap().unwrap();
    let first_token = token_of(&oauth, "a").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second_token = token_of(&oauth, "a").await.unwrap();
    assert_ne!(first_token, second_token, "refreshed");
    let alice = oauth.for_account("a").unwrap();
    let renewed = alice.identity().await.unwrap();
    assert_eq!(renewed.subject(), "alice");
    assert_ne!(
        renewed.id_token(),
        first.id_token(),
        "the refresh's ID token"
    );
    // A refresh whose ID token names another person is refused.
    *server.state.oidc.id_token_hook.lock().unwrap() =
        Some(hook(|c, _| c["sub"] = "mallory".into()));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let e = oauth
        .token_for(&TokenParams::new().account("a"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("another person"), "{e}");
    assert_eq!(alice.identity().await.unwrap().subject(), "alice");
}

#[tokio::test]
async fn rp_initiated_logout_gives_the_end_session_url_and_signs_out_here() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = layer(&server);
    let alice = sign_in(&oauth, "a", "alice").await.unwrap().unwrap();
    sign_in(&oauth, "b", "bob").await.unwrap().unwrap();
    let url = oauth
        .end_session_url("a", "https://app.example/signed-out")
        .await
        .unwrap();
    let parsed: url::Url = url.parse().unwrap();
    assert_eq!(parsed.path(), "/end_session");
    let q: std::collections::HashMap<String, String> = parsed.query_pairs().into_owned().collect();
    assert_eq!(q["id_token_hint"], alice.id_token());
    assert_eq!(q["client_id"], WEB_CLIENT);
    assert_eq!(
        q["post_logout_redirect_uri"],
        "https://app.example/signed-out"
    );
    assert!(!q.contains_key("state"), "no state that nothing checks");
    assert_eq!(
        token_of(&oauth, "a").await.unwrap_err(),
        TokenErrorKind::LoginRequired
    );
    assert!(token_of(&oauth, "b").await.is_ok());
    assert_eq!(server.revoked(), ["alice"]);
    let e = oauth
        .end_session_url("b", "javascript:alert(1)")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("post-logout redirect URI"), "{e}");
    assert!(
        token_of(&oauth, "b").await.is_ok(),
        "a refused URL signs nobody out"
    );
}

/// The logout tokens a server double posts: each hostile one changes
/// nothing and says why; the right one signs its person's accounts out,
/// once.
#[tokio::test]
async fn back_channel_logout_tokens_checked_and_used_once() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = layer(&server);
    for (account, user) in [("a1", "alice"), ("a2", "alice"), ("b", "bob")] {
        sign_in(&oauth, account, user).await.unwrap().unwrap();
    }
    let issuer = server.issuer();
    let oidc = &server.state.oidc;
    let sid = server.state.sids.lock().unwrap()["alice"].clone();
    let hostile: Vec<(&str, String, &str)> = vec![
        (
            "a nonce",
            oidc.logout_token(
                &issuer,
                WEB_CLIENT,
                Some("alice"),
                None,
                Some(&hook(|c, _| c["nonce"] = "n".into())),
            ),
            "nonce",
        ),
        (
            "no events",
            oidc.logout_token(
                &issuer,
                WEB_CLIENT,
                Some("alice"),
                None,
                Some(&hook(|c, _| {
                    c.as_object_mut().unwrap().remove("events");
                })),
            ),
            "events",
        ),
        (
            "another client",
            oidc.logout_token(&issuer, "other-app", Some("alice"), None, None),
            "another client",
        ),
        (
            "nobody",
            oidc.logout_token(&issuer, WEB_CLIENT, None, None, None),
            "names nobody",
        ),
        (
            "another issuer",
            oidc.logout_token(
                "https://evil.example",
                WEB_CLIENT,
                Some("alice"),
                None,
                None,
            ),
            "issuer",
        ),
        (
            "an ID token",
            oidc.id_token(&issuer, WEB_CLIENT, "alice", Some("n"), &sid),
            "events",
        ),
        (
            "expired",
            oidc.logout_token(
                &issuer,
                WEB_CLIENT,
                Some("alice"),
                None,
                Some(&hook(|c, _| c["exp"] = (now() - 3600).into())),
            ),
            "expired",
        ),
        (
            "no jti",
            oidc.logout_token(
                &issuer,
                WEB_CLIENT,
                Some("alice"),
                None,
                Some(&hook(|c, _| {
                    c.as_object_mut().unwrap().remove("jti");
                })),
            ),
            "jti",
        ),
        (
            "alg none",
            unsigned(&claims_of(&oidc.logout_token(
                &issuer,
                WEB_CLIENT,
                Some("alice"),
                None,
                None,
            ))),
            "`none`",
        ),
    ];
    for (name, token, says) in hostile {
        let e = oauth.back_channel_logout(&token).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidLogoutToken, "{name}: {e}");
        assert!(e.to_string().contains(says), "{name}: {e}");
        for account in ["a1", "a2", "b"] {
            assert!(
                token_of(&oauth, account).await.is_ok(),
                "{name}: {account} untouched"
            );
        }
    }
    // By person: both of Alice's accounts, not Bob's.
    let token = oidc.logout_token(&issuer, WEB_CLIENT, Some("alice"), None, None);
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 2);
    for account in ["a1", "a2"] {
        assert_eq!(
            token_of(&oauth, account).await.unwrap_err(),
            TokenErrorKind::LoginRequired
        );
    }
    assert!(token_of(&oauth, "b").await.is_ok());
    // Replayed: refused, though it would sign out nobody now.
    let e = oauth.back_channel_logout(&token).await.unwrap_err();
    assert!(e.to_string().contains("replay"), "{e}");
    // By session: Bob's, through the server's own end of it.
    assert_eq!(
        oauth
            .back_channel_logout(&oidc.logout_token(
                &issuer,
                WEB_CLIENT,
                None,
                Some("sid-unknown"),
                None
            ))
            .await
            .unwrap(),
        0
    );
    let bob_sid = server.state.sids.lock().unwrap()["bob"].clone();
    let token = oidc.logout_token(&issuer, WEB_CLIENT, None, Some(&bob_sid), None);
    assert_eq!(oauth.back_channel_logout(&token).await.unwrap(), 1);
    assert_eq!(
        token_of(&oauth, "b").await.unwrap_err(),
        TokenErrorKind::LoginRequired
    );
}

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;

    /// The back-channel logout a third replica takes (one that never served
    /// the person) signs the person out on the two that did; its replay on
    /// another replica is refused; another person is served throughout.
    /// Nothing of who signed in is in Redis in clear.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_back_channel_logout_on_one_replica_signs_out_on_both() {
        if missing() {
            return;
        }
        let redis = RedisServer::start();
        let server = LoginServer::start(Duration::from_secs(60)).await;
        let replica = || {
            builder(&server)
                .scope("openid read")
                .token_store(RedisStore::new(redis.url()).unwrap())
                .build()
                .unwrap()
        };
        let (a, b) = (replica(), replica());
        sign_in(&a, "alice-session", "alice")
            .await
            .unwrap()
            .unwrap();
        sign_in(&b, "bob-session", "bob").await.unwrap().unwrap();
        for replica in [&a, &b] {
            assert!(token_of(replica, "alice-session").await.is_ok());
            assert!(token_of(replica, "bob-session").await.is_ok());
        }
        // B reads Alice's identity from the store.
        let alice = b
            .for_account("alice-session")
            .unwrap()
            .identity()
            .await
            .unwrap();
        assert_eq!(alice.subject(), "alice");
        let issuer = server.issuer();
        let token = server.state.oidc.logout_token(
            &issuer,
            WEB_CLIENT,
            Some("alice"),
            alice.session_id(),
            None,
        );
        // Taken by a third replica that never served Alice: it finds her
        // account through the store.
        let c = replica();
        assert_eq!(c.back_channel_logout(&token).await.unwrap(), 1);
        for replica in [&a, &b] {
            assert_eq!(
                token_of(replica, "alice-session").await.unwrap_err(),
                TokenErrorKind::LoginRequired
            );
            assert!(token_of(replica, "bob-session").await.is_ok());
        }
        let e = a.back_channel_logout(&token).await.unwrap_err();
        assert!(e.to_string().contains("replay"), "{e}");
        assert!(token_of(&c, "bob-session").await.is_ok());
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut redis.connection())
            .unwrap();
        let mut con = redis.connection();
        for key in keys {
            assert!(!key.contains("alice"), "{key}");
            let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).unwrap();
            let values: Vec<String> = match kind.as_str() {
                "hash" => redis::cmd("HVALS").arg(&key).query(&mut con).unwrap(),
                "string" => vec![redis::cmd("GET").arg(&key).query(&mut con).unwrap()],
                _ => Vec::new(),
            };
            for value in values {
                assert!(!value.contains("alice"), "{key}: {value}");
            }
        }
    }
}

/// A CLI's person: the login (a user agent here) checks the ID token with
/// the nonce it sent, and `identity` says who signed in, in this process and
/// in another on the same file; a logout forgets it.
#[tokio::test]
async fn a_person_s_login_says_who_signed_in_here_and_in_another_process() {
    use support::login_server::CLIENT;
    use tower_oauth::{login::Login, store::FileStore};
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let file = support::scratch("identity-person").join("tokens");
    let person = || {
        support::with_transport(
            OAuthLayer::builder()
                .protected_resource(server.api_url())
                .client_id(CLIENT)
                .scope("openid read")
                .login(Login::user_agent(LoginServer::user_agent())),
        )
        .token_store(FileStore::new(&file).unwrap())
        .build()
        .unwrap()
    };
    let cli = person();
    assert!(cli.identity().await.is_none(), "no one yet");
    cli.login().await.unwrap();
    let who = cli.identity().await.unwrap();
    assert_eq!(who.subject(), "person");
    assert_eq!(who.issuer(), server.issuer());
    let nonce = server.authorizations()[0]["nonce"].clone();
    // OpenID Connect Core section 11: `offline_access` with `prompt=consent`.
    assert!(server.authorizations()[0]["scope"].contains("offline_access"));
    assert_eq!(server.authorizations()[0]["prompt"], "consent");
    assert_eq!(claims_of(who.id_token())["nonce"], nonce.as_str());
    let other = person();
    assert_eq!(other.identity().await.unwrap().subject(), "person");
    cli.logout().await.unwrap();
    assert!(cli.identity().await.is_none());
    assert!(other.identity().await.is_none(), "the file's chain ended");
}

/// An HMAC the server lists verifies with the app's own secret, and only
/// with it.
#[tokio::test]
async fn an_hmac_id_token_verifies_with_the_client_secret_only() {
    use support::login_server::WEB_SECRET;
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server.set_metadata("id_token_signing_alg_values_supported", json!(["HS256"]));
    server.state.oidc.rotate(
        SigningKey {
            alg: jsonwebtoken::Algorithm::HS256,
            key: jsonwebtoken::EncodingKey::from_secret(WEB_SECRET.as_bytes()),
            public_jwk: json!({"kty": "oct", "kid": "hmac"}),
        },
        true,
    );
    let oauth = layer(&server);
    let who = sign_in(&oauth, "a", "alice").await.unwrap().unwrap();
    assert_eq!(who.subject(), "alice");
    server.state.oidc.rotate(
        SigningKey {
            alg: jsonwebtoken::Algorithm::HS256,
            key: jsonwebtoken::EncodingKey::from_secret(b"another secret"),
            public_jwk: json!({"kty": "oct", "kid": "hmac"}),
        },
        true,
    );
    let e = sign_in(&oauth, "b", "bob").await.unwrap_err();
    assert!(e.to_string().contains("does not verify"), "{e}");
}

/// Two processes on one `FileStore` file: a logout token the second takes
/// finds the account the first signed in, and its replay on the first is
/// refused.
#[tokio::test]
async fn a_back_channel_logout_through_a_file_store_reaches_the_other_process() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let file = support::scratch("identity-file").join("tokens");
    let process = || {
        builder(&server)
            .scope("openid read")
            .token_store(tower_oauth::store::FileStore::new(&file).unwrap())
            .build()
            .unwrap()
    };
    let (first, second) = (process(), process());
    sign_in(&first, "alice-session", "alice")
        .await
        .unwrap()
        .unwrap();
    sign_in(&first, "bob-session", "bob")
        .await
        .unwrap()
        .unwrap();
    let token =
        server
            .state
            .oidc
            .logout_token(&server.issuer(), WEB_CLIENT, Some("alice"), None, None);
    assert_eq!(second.back_channel_logout(&token).await.unwrap(), 1);
    let e = first.back_channel_logout(&token).await.unwrap_err();
    assert!(e.to_string().contains("replay"), "{e}");
    assert!(second
        .for_account("alice-session")
        .unwrap()
        .identity()
        .await
        .is_none());
    assert_eq!(
        token_of(&second, "alice-session").await.unwrap_err(),
        TokenErrorKind::LoginRequired
    );
    assert!(token_of(&second, "bob-session").await.is_ok());
    // The file holds no one's name in clear.
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("alice") && !text.contains("bob"), "{text}");
}
