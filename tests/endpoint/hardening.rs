//! What a hostile token endpoint, a shared Redis and a log reader can do, as
//! black-box scenarios against servers on 127.0.0.1 and a real
//! `redis-server`: each test is one scenario of SECURITY.md.

use crate::support;

use std::time::{Duration, Instant};

use support::*;
use tower_oauth::{OAuthLayer, TokenErrorKind};

const HOUR: Duration = Duration::from_secs(3600);

/// Every log line of this test binary, from every thread: the tests that
/// read logs check that something is absent (a superset does no harm) or
/// present (their own lines are there, whatever else is). A subscriber for
/// the whole process, not per thread: a per-thread one misses events of
/// callsites another test thread registered first.
fn logs() -> &'static Captured {
    static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let (subscriber, captured) = capturing();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        captured
    })
}

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
    use tower_oauth::store::RedisStore;

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
            .token_store(
                RedisStore::new(redis)
                    .unwrap()
                    .prefix(prefix)
                    // Item 7: a huge Redis timeout is bounded too.
                    .timeout(Duration::MAX),
            )
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

    /// Someone who can write to Redis stretches a value's time-to-live or
    /// puts an old value back: the end sealed inside the value still holds.
    /// An expired token is not handed out, and a failure's hold is not
    /// stretched.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stretched_or_replayed_value_does_not_outlive_its_own_end() {
        if support::redis_server::missing() {
            return;
        }
        let server = RedisServer::start();
        let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
        let first = replica(&authority, &server.url(), "r:")
            .token()
            .await
            .unwrap();
        let mut con = server.connection();
        let key: String = con.keys::<_, Vec<String>>("r:{*}").unwrap().remove(0);
        let sealed: String = con.get(&key).unwrap();
        // Gone from Redis when it runs out; put back for an hour.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let _: () = con.set_ex(&key, &sealed, 3600).unwrap();
        let second = replica(&authority, &server.url(), "r:")
            .token()
            .await
            .unwrap();
        assert_ne!(second, first, "the replayed token ran out long ago");
        assert_eq!(authority.token_requests(), 2);

        // A failure held 100 ms, its time-to-live stretched to an hour.
        let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
        authority.push_faults([fault(503, r#"{"error":"temporarily_unavailable"}"#)]);
        let a = replica(&authority, &server.url(), "h:");
        assert!(a.token().await.is_err());
        let failure: String = con
            .keys::<_, Vec<String>>("h:{*}:failure")
            .unwrap()
            .remove(0);
        let _: () = con.expire(&failure, 3600).unwrap();
        let b = replica(&authority, &server.url(), "h:");
        let started = Instant::now();
        while b.token().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "held back too long"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
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
#[cfg(all(feature = "reqwest", feature = "redis"))]
#[tokio::test]
async fn replicas_with_different_certificates_do_not_share_tokens() {
    use support::mtls::{MtlsAuthority, Pki};
    use support::redis_server::RedisServer;
    use tower_oauth::{client_auth::ClientAuth, store::RedisStore};
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

/// Every form in which `secret` (of `client_id`) may come back: as sent
/// raw, percent- and form-encoded (either hex case), inside the Basic
/// credential, and JSON-escaped; computed here with the encoding crates
/// themselves.
fn echoed_forms(client_id: &str, secret: &str) -> Vec<String> {
    use base64::Engine;
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let form: String = form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let percent = utf8_percent_encode(secret, NON_ALPHANUMERIC)
        .to_string()
        .replace("%2D", "-")
        .replace("%2E", ".")
        .replace("%5F", "_")
        .replace("%7E", "~");
    let id_percent = utf8_percent_encode(client_id, NON_ALPHANUMERIC)
        .to_string()
        .replace("%2D", "-");
    let mut forms = vec![
        secret.to_owned(),
        form.clone(),
        form.to_lowercase(),
        percent.clone(),
        b64(&format!("{client_id}:{secret}")),
        b64(&format!("{id_percent}:{percent}")),
    ];
    let json = serde_json::to_string(secret).unwrap();
    forms.push(json.trim_matches('"').replace('/', "\\/"));
    forms
}

/// Item 4: a token endpoint that echoes the secret back in any encoding the
/// crate sent gets none of them into the error or the log.
#[tokio::test]
async fn a_secret_echoed_back_in_any_encoding_is_scrubbed() {
    let logs = logs();
    for secret in [CLIENT_SECRET, "pa ss+wörd/\"x"] {
        let authority = Authority::start(CLIENT_ID, secret, HOUR).await;
        let forms = echoed_forms(CLIENT_ID, secret);
        let description = format!("you sent {}", forms.join(" and "));
        authority.push_faults([fault(
            401,
            &serde_json::json!({"error": "invalid_client", "error_description": description})
                .to_string(),
        )]);
        let oauth = with_transport(
            OAuthLayer::builder()
                .token_url(authority.token_url())
                .client_id(CLIENT_ID)
                .client_secret(secret)
                .client_auth(tower_oauth::client_auth::ClientAuth::FormBody),
        )
        .build()
        .unwrap();
        let e = oauth.token().await.unwrap_err();
        let shown = [e.to_string(), format!("{e:?}"), logs.text()];
        for text in &shown {
            assert!(text.contains("[redacted]"), "{text}");
            for form in &forms {
                assert!(!text.contains(form.as_str()), "{form} in {text}");
            }
        }
    }
}

/// Item 7: `Duration::MAX` in every setting: no panic, and tokens still
/// flow (renewed ahead, renewed after a refusal, backed off after a
/// failure).
#[tokio::test]
async fn huge_durations_neither_panic_nor_overflow() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
    let oauth = builder(&authority)
        .refresh_margin(Duration::MAX)
        .expiry_skew(Duration::MAX)
        .fetch_timeout(Duration::MAX)
        .forced_renewal_interval(Duration::MAX)
        .min_backoff(Duration::MAX)
        .max_backoff(Duration::MAX)
        .build()
        .unwrap();
    let url = authority.api_url("/data");
    assert_eq!(send(&oauth, &url).await.unwrap().status(), 200);
    // Past the renewal point (half of two seconds): renewed ahead.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(send(&oauth, &url).await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(authority.token_requests(), 2);
    // Refused: dropped and fetched anew.
    authority.revoke_all();
    let _ = send(&oauth, &url).await.unwrap();
    assert_eq!(send(&oauth, &url).await.unwrap().status(), 200);
    // A failure backs off for the longest setting, a day, and says so.
    authority.push_faults([fault(400, r#"{"error":"invalid_client"}"#)]);
    let failing = builder(&authority)
        .min_backoff(Duration::MAX)
        .max_backoff(Duration::MAX)
        .build()
        .unwrap();
    assert!(failing.token().await.is_err());
    let e = failing.token().await.unwrap_err();
    let left = e.backing_off().unwrap_or_default();
    assert!(
        left > Duration::from_secs(23 * 3600) && left <= Duration::from_secs(24 * 3600),
        "{e}"
    );

    // A token source's own huge lifetime and advice are bounded too.
    struct Forever;
    impl tower_oauth::TokenSource for Forever {
        fn fetch_token(
            &self,
        ) -> tower_oauth::BoxFuture<'_, Result<tower_oauth::AccessToken, tower_oauth::TokenError>>
        {
            Box::pin(async {
                Ok(tower_oauth::AccessToken::new("forever")
                    .with_expires_in(Duration::MAX)
                    .with_refresh_in(Duration::MAX))
            })
        }
    }
    let oauth = OAuthLayer::builder().token_source(Forever).build().unwrap();
    let token = oauth.token().await.unwrap();
    assert_eq!(token.lifetime(), Duration::from_secs(24 * 3600));
    assert!(oauth.stats().token_usable_for.is_some());
}

/// Item 8: a secret or value with `+` or `%`, sent unencoded as the
/// specification says, draws one warning at build naming the character
/// and the client authentication to use, never the value; the same for a
/// request's own parameters.
#[tokio::test]
async fn values_a_form_decoder_would_misread_are_warned_about() {
    let logs = logs();
    let secret = "ab+cd%2Fef";
    let authority = Authority::start(CLIENT_ID, secret, HOUR).await;
    authority.expect(
        support::authority::Style::Unencoded,
        &[("scope", "read+write%21")],
    );
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id(CLIENT_ID)
            .client_secret(secret)
            .scope("read+write%21"),
    )
    .build()
    .unwrap();
    let text = logs.text();
    assert!(text.contains("the client secret contains `+`"), "{text}");
    assert!(
        text.contains("value of parameter `scope` contains `+`"),
        "{text}"
    );
    assert!(text.contains("ClientAuth::FormBody"), "{text}");
    assert!(
        !text.contains(secret) && !text.contains("read+write"),
        "{text}"
    );
    // What is sent is still exactly what the specification says.
    let token = oauth.token().await.unwrap();
    assert!(authority.accepts(token.expose_token()));
    assert!(
        authority.violations().is_empty(),
        "{:?}",
        authority.violations()
    );

    let _ = oauth
        .token_for(&tower_oauth::TokenParams::new().scope("50%off"))
        .await;
    let text = logs.text();
    assert!(
        text.contains("value of parameter `scope` contains `%`"),
        "{text}"
    );
    assert!(!text.contains("50%off"), "{text}");
}

/// Item 9: `client_assertion` and `client_assertion_type` are the layer's
/// own: refused as parameters, at build and per request.
#[tokio::test]
async fn client_assertion_parameters_are_reserved() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    for name in ["client_assertion", "client_assertion_type"] {
        let e = builder(&authority).param(name, "x").build().unwrap_err();
        assert_eq!(
            e.kind(),
            tower_oauth::ConfigErrorKind::InvalidParameter,
            "{e}"
        );
        assert!(e.to_string().contains(name), "{e}");
        let oauth = builder(&authority).build().unwrap();
        let e = oauth
            .token_for(&tower_oauth::TokenParams::new().param(name, "x"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidRequest, "{e}");
    }
    assert_eq!(authority.token_requests(), 0);
}

/// Item 10: no value of `TokenParams` in its `Debug`; server text in an
/// error or a log is clipped, and cannot forge a log line.
#[tokio::test]
async fn server_text_is_clipped_and_cannot_forge_log_lines() {
    let params = tower_oauth::TokenParams::new()
        .scope("orders")
        .param("api_key", "hunter2");
    let debug = format!("{params:?}");
    assert!(
        debug.contains("api_key") && !debug.contains("hunter2"),
        "{debug}"
    );

    let logs = logs();
    // A hostile issuer in the metadata: 20,000 characters with line breaks.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let hostile = format!("x\r\nFORGED issuer line {}", "a".repeat(20_000));
    authority.publish(
        "/.well-known/oauth-authorization-server",
        serde_json::json!({"issuer": hostile, "token_endpoint": authority.token_url()}).to_string(),
    );
    let oauth = with_transport(
        OAuthLayer::builder()
            .issuer(authority.base_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    let e = oauth.token().await.unwrap_err();
    for text in [e.to_string(), format!("{e:?}")] {
        assert!(text.len() < 2_600, "{} bytes", text.len());
        assert!(!text.contains('\n') && !text.contains('\r'), "{text}");
    }
    // An error description with line breaks.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.push_faults([fault(
        400,
        r#"{"error":"invalid_request","error_description":"bad\r\nFORGED description line"}"#,
    )]);
    let e = builder(&authority)
        .build()
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert!(!e.to_string().contains('\n'), "{e}");
    assert!(e.to_string().contains("bad\\r\\nFORGED"), "{e}");
    let text = logs.text();
    assert!(
        !text.lines().any(|l| l.starts_with("FORGED")),
        "a forged line in the log:\n{text}"
    );
}

/// Item 11: an issuer whose metadata names a plain-http token endpoint off
/// loopback is refused, and nothing is sent there.
#[tokio::test]
async fn a_plain_http_token_endpoint_off_loopback_is_refused() {
    use std::sync::{Arc, Mutex};
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.publish(
        "/.well-known/oauth-authorization-server",
        serde_json::json!({
            "issuer": authority.base_url(),
            "token_endpoint": "http://tokens.example.test/token",
        })
        .to_string(),
    );
    // A transport that goes only to 127.0.0.1, and notes every request.
    let sent = Arc::new(Mutex::new(Vec::new()));
    let noted = Arc::clone(&sent);
    let inner = hyper_client();
    let transport = tower::service_fn(
        move |req: http::Request<http_body_util::Full<bytes::Bytes>>| {
            noted.lock().unwrap().push(req.uri().to_string());
            let inner = inner.clone();
            async move {
                if req.uri().host() != Some("127.0.0.1") {
                    return Err::<_, tower::BoxError>("not loopback: refused by the test".into());
                }
                inner.request(req).await.map_err(tower::BoxError::from)
            }
        },
    );
    let oauth = OAuthLayer::builder()
        .issuer(authority.base_url())
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        .transport(transport)
        .build()
        .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{e}");
    assert!(e.to_string().contains("http"), "{e}");
    assert!(
        sent.lock()
            .unwrap()
            .iter()
            .all(|u| u.starts_with("http://127.0.0.1")),
        "{:?}",
        sent.lock().unwrap()
    );
    assert_eq!(authority.token_requests(), 0);
}

/// A renewal ahead runs in a span of its own that names its token slot by
/// its parameters' names (never their values), apart from the request that
/// happened to start it.
#[tokio::test]
async fn a_renewal_ahead_has_its_own_span_naming_the_slot() {
    let logs = logs();
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
    authority.expect(
        support::authority::Style::Unencoded,
        &[("resource", "https://secret-api.example")],
    );
    let oauth = builder(&authority).build().unwrap();
    let params = tower_oauth::TokenParams::new().resource("https://secret-api.example");
    oauth.token_for(&params).await.unwrap();
    // Past the renewal point (half of two seconds): renewed ahead.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    oauth.token_for(&params).await.unwrap();
    let started = Instant::now();
    while authority.token_requests() < 2 {
        assert!(started.elapsed() < Duration::from_secs(2));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let text = logs.text();
    let renewal: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("oauth_token_renewal{slot=\"resource #"))
        .collect();
    assert!(!renewal.is_empty(), "{text}");
    assert!(
        renewal.iter().all(|l| !l.contains("secret-api")),
        "{renewal:?}"
    );
}
