//! What a hostile token endpoint, a shared Redis and a log reader can do, as
//! black-box scenarios against servers on 127.0.0.1 and a real
//! `redis-server`: each test is one scenario of SECURITY.md.

mod support;

use std::time::{Duration, Instant};

use support::*;
use tower_oauth::{OAuthLayer, TokenErrorKind};

const HOUR: Duration = Duration::from_secs(3600);

/// A JWT with these claims (unsigned: a client never verifies one).
fn jwt(claims: &str) -> String {
    use base64::Engine;
    let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.c2ln",
        enc(r#"{"alg":"RS256","typ":"at+jwt"}"#),
        enc(claims)
    )
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Answers the token endpoint sends instead of a token, each a class of
/// failure: a token that cannot go into a header, one too long for one, an
/// expired JWT, a body that is no token, a passing outage, refused
/// credentials.
fn failure_classes() -> Vec<(&'static str, Fault)> {
    let expired = jwt(&format!(r#"{{"sub":"svc","exp":{}}}"#, unix_now() - 3600));
    vec![
        (
            "CR/LF in the token",
            fault(
                200,
                r#"{"access_token":"abc\r\nX-Forged: 1","expires_in":3600}"#,
            ),
        ),
        (
            "a token over 16 KiB",
            fault(
                200,
                &format!(
                    r#"{{"access_token":"{}","expires_in":3600}}"#,
                    "a".repeat(17 * 1024)
                ),
            ),
        ),
        (
            "a JWT already expired",
            fault(200, &format!(r#"{{"access_token":"{expired}"}}"#)),
        ),
        (
            "a token_type with a space",
            fault(200, r#"{"access_token":"abc","token_type":"Bearer x"}"#),
        ),
        ("not JSON", fault(200, "<html>maintenance</html>")),
        ("503", fault(503, r#"{"error":"temporarily_unavailable"}"#)),
        (
            "400 invalid_client",
            fault(400, r#"{"error":"invalid_client"}"#),
        ),
    ]
}

/// A layer that received an unusable token reports it, never sends it, and
/// takes the next good one after its back-off.
#[tokio::test]
async fn an_unusable_answer_is_an_error_and_never_reaches_the_api() {
    for (class, answer) in failure_classes() {
        let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
        authority.push_faults([answer]);
        let oauth = builder(&authority)
            .min_backoff(Duration::from_millis(50))
            .build()
            .unwrap();
        let url = authority.api_url("/data");
        let e = send(&oauth, &url).await.unwrap_err();
        let e = e.downcast_ref::<tower_oauth::TokenError>().unwrap();
        if answer_is_unusable(class) {
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{class}: {e}");
        }
        assert_eq!(authority.api_requests(), 0, "{class}: nothing was sent");
        let started = Instant::now();
        let response = loop {
            match send(&oauth, &url).await {
                Ok(response) => break response,
                Err(_) => {
                    assert!(started.elapsed() < Duration::from_secs(1), "{class}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        assert_eq!(response.status(), 200, "{class}");
        assert_eq!(authority.token_requests(), 2, "{class}");
    }
}

fn answer_is_unusable(class: &str) -> bool {
    !matches!(class, "503" | "400 invalid_client")
}

#[cfg(feature = "redis")]
mod fleet {
    use super::*;
    use redis::Commands;
    use support::redis_server::RedisServer;
    use tower_oauth::RedisStore;

    /// A token source that always gives the same token.
    struct Fixed(&'static str);

    impl tower_oauth::TokenSource for Fixed {
        fn fetch_token(
            &self,
        ) -> tower_oauth::BoxFuture<'_, Result<tower_oauth::AccessToken, tower_oauth::TokenError>>
        {
            let token = tower_oauth::AccessToken::new(self.0);
            Box::pin(async move { Ok(token) })
        }
    }

    fn replica(authority: &Authority, redis: &str, prefix: &str) -> OAuthLayer {
        builder(authority)
            .token_store(RedisStore::new(redis).unwrap().prefix(prefix))
            .min_backoff(Duration::from_millis(100))
            .fetch_timeout(Duration::from_secs(2))
            .build()
            .unwrap()
    }

    /// Item 1: two replicas on one Redis recover from any one bad answer as
    /// fast as one layer does, though requests keep coming meanwhile: a
    /// failure read back from Redis is the fleet's hold, not a new failure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_unusable_answer_does_not_lock_the_fleet_out() {
        if support::redis_server::missing() {
            return;
        }
        let server = RedisServer::start();
        for (n, (class, answer)) in failure_classes().into_iter().enumerate() {
            let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
            authority.push_faults([answer]);
            let prefix = format!("f{n}:");
            let (a, b) = (
                replica(&authority, &server.url(), &prefix),
                replica(&authority, &server.url(), &prefix),
            );
            assert!(a.token().await.is_err(), "{class}");
            // Nothing unusable was shared.
            let mut con = server.connection();
            let stored: Vec<String> = con.keys(format!("{prefix}{{*}}")).unwrap();
            assert!(stored.is_empty(), "{class}: {stored:?}");
            let started = Instant::now();
            let (mut ta, mut tb) = (None, None);
            while ta.is_none() || tb.is_none() {
                assert!(
                    started.elapsed() < Duration::from_secs(1),
                    "{class}: the fleet still fails after {:?}: {:?} / {:?}",
                    started.elapsed(),
                    a.token().await.err().map(|e| e.to_string()),
                    b.token().await.err().map(|e| e.to_string()),
                );
                ta = ta.or(a.token().await.ok());
                tb = tb.or(b.token().await.ok());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let (ta, tb) = (ta.unwrap(), tb.unwrap());
            assert_eq!(ta, tb, "{class}: one token for the fleet");
            assert!(authority.accepts(ta.expose_token()), "{class}");
            assert_eq!(authority.token_requests(), 2, "{class}");
        }
    }

    /// Item 13: layers on different token sources share one store, each
    /// under the name it was given.
    #[tokio::test]
    async fn token_sources_share_only_under_their_own_name() {
        if support::redis_server::missing() {
            return;
        }
        let server = RedisServer::start();
        let layer = |name: &str, token: &'static str| {
            OAuthLayer::builder()
                .token_source(Fixed(token))
                .token_source_name(name)
                .token_store(
                    RedisStore::new(server.url())
                        .unwrap()
                        .encryption_key([3; 32]),
                )
                .build()
                .unwrap()
        };
        let billing = layer("billing", "billing-token").token().await.unwrap();
        let ledger = layer("ledger", "ledger-token").token().await.unwrap();
        assert_eq!(billing.expose_token(), "billing-token");
        assert_eq!(ledger.expose_token(), "ledger-token");
        // The same name shares: a second billing layer takes the stored one.
        let again = layer("billing", "never-fetched").token().await.unwrap();
        assert_eq!(again.expose_token(), "billing-token");

        // A store with no name for the source is refused at build.
        let e = OAuthLayer::builder()
            .token_source(Fixed("t"))
            .token_store(RedisStore::new(server.url()).unwrap())
            .build()
            .unwrap_err();
        assert_eq!(e.kind(), tower_oauth::ConfigErrorKind::InvalidSetting);
        assert!(e.to_string().contains("token_source_name"), "{e}");
    }

    /// Item 3: a value sealed for one token identity, copied under another
    /// identity's key, is no token there: the layer fetches its own.
    #[tokio::test]
    async fn a_value_copied_to_another_identity_does_not_open() {
        if support::redis_server::missing() {
            return;
        }
        let server = RedisServer::start();
        let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
        let scoped = |scope: &str| {
            authority.expect(support::authority::Style::Unencoded, &[("scope", scope)]);
            builder(&authority)
                .scope(scope)
                .token_store(RedisStore::new(server.url()).unwrap().prefix("c:"))
                .build()
                .unwrap()
        };
        let read = scoped("read").token().await.unwrap();
        let keys_after_read: Vec<String> = server.connection().keys("c:{*}").unwrap();
        let write = scoped("write").token().await.unwrap();
        assert_ne!(read, write);
        let mut keys: Vec<String> = server.connection().keys("c:{*}").unwrap();
        assert_eq!(keys.len(), 2);
        for key in &keys {
            // `prefix{sha-256 hex}`
            let hash = key.strip_prefix("c:{").unwrap().strip_suffix('}').unwrap();
            assert_eq!(hash.len(), 64, "{key}");
            assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        }
        let read_key = keys_after_read[0].clone();
        keys.retain(|k| *k != read_key);
        let write_key = keys.remove(0);
        let mut con = server.connection();
        let sealed: String = con.get(&read_key).unwrap();
        let _: () = con.set_ex(&write_key, sealed, 3600).unwrap();
        let fresh = scoped("write").token().await.unwrap();
        assert_ne!(fresh, read, "the read token is never handed out for write");
        assert_eq!(authority.token_requests(), 3);
    }
}

/// Item 2: replicas with different client certificates (same client id,
/// same token URL, one store) never share a token: each is bound to its own
/// certificate.
#[cfg(all(feature = "mtls", feature = "redis"))]
#[tokio::test]
async fn replicas_with_different_certificates_do_not_share_tokens() {
    use support::mtls::{MtlsAuthority, Pki};
    use support::redis_server::RedisServer;
    use tower_oauth::{ClientAuth, RedisStore};
    if support::redis_server::missing() {
        return;
    }
    let server = RedisServer::start();
    let pki = Pki::new();
    let authority = MtlsAuthority::start(&pki).await;
    let (one, two) = (pki.issue("replica-1", &[]), pki.issue("replica-2", &[]));
    authority.register("svc", &one);
    authority.register("svc", &two);
    for (prefix, shared_key) in [("own:", None), ("shared:", Some([9u8; 32]))] {
        let replica = |identity: &support::mtls::Identity| {
            let mut store = RedisStore::new(server.url()).unwrap().prefix(prefix);
            if let Some(key) = shared_key {
                // Even replicas that could open each other's values.
                store = store.encryption_key(key);
            }
            OAuthLayer::builder()
                .token_url(authority.token_url())
                .client_id("svc")
                .client_auth(ClientAuth::TlsClientAuth)
                .client_identity(&identity.cert_pem, &identity.key_pem)
                .root_certificates(&pki.ca_pem)
                .token_store(store)
                .build()
                .unwrap()
        };
        let before = authority.token_requests();
        let first = replica(&one).token().await.unwrap();
        let second = replica(&two).token().await.unwrap();
        assert_ne!(first, second, "{prefix}");
        assert_eq!(authority.token_requests(), before + 2, "{prefix}");
        // Each replica of one certificate still shares with its kind.
        let again = replica(&one).token().await.unwrap();
        assert_eq!(again, first, "{prefix}");
        assert_eq!(authority.token_requests(), before + 2, "{prefix}");
    }
    let mut bindings = authority.bindings();
    bindings.sort();
    bindings.dedup();
    let mut expected = vec![one.thumbprint(), two.thumbprint()];
    expected.sort();
    assert_eq!(bindings, expected);
}
