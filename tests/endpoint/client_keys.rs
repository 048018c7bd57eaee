//! Client authentication with keys (`private_key_jwt`, `client_secret_jwt`)
//! against a loopback token endpoint that verifies every assertion with
//! jsonwebtoken, keys made by openssl.
#![cfg(feature = "reqwest")]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::Algorithm as Jose;
use support::assertion_endpoint::{AssertionEndpoint, Check};
use support::keys::{Kind, TestKey};
use tower_oauth::{
    client_auth::{Algorithm, ClientAuth, JwsSigner, SigningKey},
    BoxError, BoxFuture, ConfigErrorKind, OAuthLayer, TokenErrorKind,
};

const CLIENT: &str = "key-client";

fn layer(endpoint: &AssertionEndpoint, key: SigningKey) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(key)),
    )
    .build()
    .unwrap()
}

/// Three token requests over 1-second tokens, each with a fresh assertion
/// the endpoint accepts; the API accepts every request.
async fn three_tokens(endpoint: &AssertionEndpoint, oauth: &OAuthLayer) {
    for round in 0..3 {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(1_100)).await;
        }
        let response = support::send(oauth, &endpoint.api_url()).await.unwrap();
        assert_eq!(
            response.status(),
            200,
            "round {round}: {:?}",
            endpoint.refusals()
        );
    }
    assert_eq!(endpoint.refusals(), Vec::<String>::new());
    assert_eq!(endpoint.token_requests(), 3);
    assert_eq!(endpoint.issued(), 3);
    assert_eq!(endpoint.api_accepted(), 3);
    let claims = endpoint.claims();
    let jtis: std::collections::HashSet<_> = claims.iter().map(|c| c["jti"].clone()).collect();
    assert_eq!(jtis.len(), 3, "a fresh jti every time");
    for c in &claims {
        assert_eq!(c["iss"], CLIENT);
        assert_eq!(c["sub"], CLIENT);
        // Backdated by the default clock skew (5 s); `exp` a minute on.
        assert_eq!(c["exp"].as_u64().unwrap() - c["iat"].as_u64().unwrap(), 65);
        assert_eq!(c["nbf"], c["iat"]);
    }
}

async fn every_request_carries_a_verified_assertion(
    kind: Kind,
    alg: Algorithm,
    jose: Jose,
    pem: fn(&TestKey) -> String,
) {
    let key = TestKey::new(kind);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), jose), 1).await;
    let signing = SigningKey::from_pem(pem(&key), alg)
        .unwrap()
        .key_id("key-1");
    three_tokens(&endpoint, &layer(&endpoint, signing)).await;
    for header in endpoint.headers() {
        assert_eq!(header.kid.as_deref(), Some("key-1"));
        assert_eq!(header.typ.as_deref(), Some("client-authentication+jwt"));
    }
}

#[tokio::test]
async fn rs256_from_a_pkcs1_key() {
    every_request_carries_a_verified_assertion(
        Kind::Rsa(2048),
        Algorithm::Rs256,
        Jose::RS256,
        TestKey::traditional,
    )
    .await;
}

#[tokio::test]
async fn ps256_from_a_pkcs8_key() {
    every_request_carries_a_verified_assertion(
        Kind::Rsa(2048),
        Algorithm::Ps256,
        Jose::PS256,
        |k| k.pkcs8.clone(),
    )
    .await;
}

#[tokio::test]
async fn es256_from_a_pkcs8_key() {
    every_request_carries_a_verified_assertion(Kind::P256, Algorithm::Es256, Jose::ES256, |k| {
        k.pkcs8.clone()
    })
    .await;
}

#[tokio::test]
async fn es256_from_a_sec1_key() {
    every_request_carries_a_verified_assertion(
        Kind::P256,
        Algorithm::Es256,
        Jose::ES256,
        TestKey::traditional,
    )
    .await;
}

#[tokio::test]
async fn eddsa_from_a_pkcs8_key() {
    every_request_carries_a_verified_assertion(Kind::Ed25519, Algorithm::EdDsa, Jose::EdDSA, |k| {
        k.pkcs8.clone()
    })
    .await;
}

/// Keys read from JWKs (built from openssl's dump of the key) sign what
/// the public PEM verifies; the JWK's kid and alg are used.
#[tokio::test]
async fn keys_from_jwks_sign_for_every_key_type() {
    for (kind, jose, kid) in [
        (Kind::P256, Jose::ES256, "jwk-ec"),
        (Kind::Ed25519, Jose::EdDSA, "jwk-ed"),
        (Kind::Rsa(2048), Jose::PS256, "jwk-rsa"),
    ] {
        let key = TestKey::new(kind);
        let endpoint =
            AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), jose), 3600).await;
        let signing = SigningKey::from_jwk(key.jwk(kind)).unwrap();
        assert_eq!(signing.kid(), Some(kid));
        let oauth = layer(&endpoint, signing);
        let response = support::send(&oauth, &endpoint.api_url()).await.unwrap();
        assert_eq!(
            response.status(),
            200,
            "{kind:?}: {:?}",
            endpoint.refusals()
        );
        assert_eq!(endpoint.headers()[0].kid.as_deref(), Some(kid));
    }
}

/// client_secret_jwt: HS256 under the secret, which is never sent.
#[tokio::test]
async fn client_secret_jwt_signs_with_the_secret_and_never_sends_it() {
    let secret = "a-client-secret-of-at-least-32-bytes!";
    let endpoint = AssertionEndpoint::start(CLIENT, Check::Secret(secret.into()), 1).await;
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_secret(secret)
            .client_auth(ClientAuth::ClientSecretJwt),
    )
    .build()
    .unwrap();
    three_tokens(&endpoint, &oauth).await;
    assert!(endpoint.headers().iter().all(|h| h.alg == Jose::HS256));
}

/// With an issuer, discovery's issuer is the audience, and the assertion
/// settings apply.
#[tokio::test]
async fn with_discovery_the_audience_is_the_issuer() {
    let key = TestKey::new(Kind::P256);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600)
            .await;
    endpoint.publish_metadata(&["private_key_jwt"]);
    endpoint.set_audience(&endpoint.issuer());
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(endpoint.issuer())
            .client_id(CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap(),
            ))
            .assertion_lifetime(Duration::from_secs(30))
            .assertion_typ(None),
    )
    .build()
    .unwrap();
    let token = oauth.token().await.unwrap();
    assert!(token.expose_token().starts_with("at-"));
    let claims = endpoint.claims();
    assert_eq!(claims[0]["aud"], endpoint.issuer());
    // A 30 s lifetime, after `iat` backdated by the default 5 s skew.
    assert_eq!(
        claims[0]["exp"].as_u64().unwrap() - claims[0]["iat"].as_u64().unwrap(),
        35
    );
    assert_eq!(endpoint.headers()[0].typ, None);
}

/// The endpoint refuses an assertion signed by another key, or made for
/// another audience, with invalid_client; the layer reports it and backs
/// off.
#[tokio::test]
async fn refused_assertions_are_token_errors_with_the_servers_reason() {
    let key = TestKey::new(Kind::P256);
    let other = TestKey::new(Kind::P256);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600)
            .await;
    let oauth = layer(
        &endpoint,
        SigningKey::from_pem(&other.pkcs8, Algorithm::Es256).unwrap(),
    );
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(err.error_code(), Some("invalid_client"));
    assert!(
        endpoint.refusals()[0].contains("InvalidSignature"),
        "{:?}",
        endpoint.refusals()
    );
    // Backing off: no second token request.
    assert!(oauth.token().await.is_err());
    assert_eq!(endpoint.token_requests(), 1);

    let wrong_audience = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap(),
            ))
            .assertion_audience("https://somewhere-else.example"),
    )
    .build()
    .unwrap();
    let err = wrong_audience.token().await.unwrap_err();
    assert_eq!(err.error_code(), Some("invalid_client"));
    assert!(
        endpoint.refusals()[1].contains("InvalidAudience"),
        "{:?}",
        endpoint.refusals()
    );
}

/// A KMS stand-in: signs with a P-256 key after `delay`, or fails, or
/// hangs.
struct Kms {
    key: ring::signature::EcdsaKeyPair,
    delay: Duration,
    behaviour: Behaviour,
    calls: Arc<AtomicUsize>,
}

#[derive(Clone, Copy)]
enum Behaviour {
    Sign,
    Fail,
    Hang,
}

impl JwsSigner for Kms {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Es256
    }

    fn key_id(&self) -> Option<&str> {
        Some("kms-key")
    }

    fn sign<'a>(&'a self, message: &'a [u8]) -> BoxFuture<'a, Result<Vec<u8>, BoxError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            match self.behaviour {
                Behaviour::Sign => Ok(self
                    .key
                    .sign(&ring::rand::SystemRandom::new(), message)
                    .map_err(|_| "sign")?
                    .as_ref()
                    .to_vec()),
                Behaviour::Fail => Err("KMS: AccessDeniedException".into()),
                Behaviour::Hang => std::future::pending().await,
            }
        })
    }
}

fn kms(key: &TestKey, delay: Duration, behaviour: Behaviour) -> (SigningKey, Arc<AtomicUsize>) {
    let der = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.pkcs8.as_bytes()).unwrap();
    let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        der.secret_der(),
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let signer = Kms {
        key: pair,
        delay,
        behaviour,
        calls: Arc::clone(&calls),
    };
    (SigningKey::custom(signer), calls)
}

use rustls_pki_types::pem::PemObject;

#[tokio::test]
async fn a_slow_remote_signer_serves() {
    let key = TestKey::new(Kind::P256);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600)
            .await;
    let (signing, calls) = kms(&key, Duration::from_millis(300), Behaviour::Sign);
    let oauth = layer(&endpoint, signing);
    // Many requests at once: one signature, one token request.
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (oauth, url) = (oauth.clone(), endpoint.api_url());
        requests.spawn(async move { support::send(&oauth, &url).await.unwrap().status() });
    }
    for status in requests.join_all().await {
        assert_eq!(status, 200);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(endpoint.token_requests(), 1);
    assert_eq!(endpoint.headers()[0].kid.as_deref(), Some("kms-key"));
}

#[tokio::test]
async fn a_failing_signer_is_a_signing_error_and_is_backed_off() {
    let key = TestKey::new(Kind::P256);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600)
            .await;
    let (signing, calls) = kms(&key, Duration::ZERO, Behaviour::Fail);
    let oauth = layer(&endpoint, signing);
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Signing);
    assert!(err.to_string().contains("AccessDeniedException"), "{err}");
    assert!(err.is_retryable());
    let again = oauth.token().await.unwrap_err();
    assert!(again.backing_off().is_some(), "{again}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        endpoint.token_requests(),
        0,
        "nothing sent without an assertion"
    );
}

#[tokio::test]
async fn a_hanging_signer_times_out_within_the_fetch_timeout() {
    let key = TestKey::new(Kind::P256);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600)
            .await;
    let (signing, calls) = kms(&key, Duration::ZERO, Behaviour::Hang);
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(signing))
            .fetch_timeout(Duration::from_millis(300)),
    )
    .build()
    .unwrap();
    let started = std::time::Instant::now();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(oauth.token().await.unwrap_err().backing_off().is_some());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Bad keys are ConfigErrors naming the problem, never showing the key.
#[test]
fn bad_keys_are_named_without_their_material() {
    let rsa = TestKey::new(Kind::Rsa(2048));
    let small = TestKey::new(Kind::Rsa(1024));
    let ec = TestKey::new(Kind::P256);
    let material = |pem: &str| pem.lines().nth(1).unwrap().to_owned();
    let cases: Vec<(String, Algorithm, &str)> = vec![
        ("not a key".into(), Algorithm::Es256, "no private key found"),
        (ec.public.clone(), Algorithm::Es256, "public key"),
        (ec.encrypted(), Algorithm::Es256, "encrypted"),
        (ec.pkcs8.clone(), Algorithm::Rs256, "is not an RSA key"),
        (
            rsa.pkcs8.clone(),
            Algorithm::Es256,
            "is not an EC P-256 key",
        ),
        (
            rsa.traditional(),
            Algorithm::EdDsa,
            "PKCS #1 RSA key, but EdDSA needs an Ed25519 key",
        ),
        (small.pkcs8.clone(), Algorithm::Rs256, "too small"),
    ];
    for (pem, alg, expected) in cases {
        let err = SigningKey::from_pem(&pem, alg).unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::InvalidKey);
        assert!(err.to_string().contains(expected), "{alg:?}: {err}");
        if pem.contains("-----") {
            assert!(!err.to_string().contains(&material(&pem)), "{err}");
        }
    }
    let public_jwk = r#"{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}"#;
    let err = SigningKey::from_jwk(public_jwk).unwrap_err();
    assert!(err.to_string().contains("public key"), "{err}");
    let err = SigningKey::from_jwk(r#"{"kty":"EC","crv":"P-384","d":"AAAA"}"#).unwrap_err();
    assert!(err.to_string().contains("P-384"), "{err}");
    assert_eq!(
        "HS512".parse::<Algorithm>().unwrap_err().kind(),
        ConfigErrorKind::InvalidKey
    );
}

/// Debug output of keys, the client auth and the builder holds no key
/// material; a secret beside private_key_jwt is refused.
#[test]
fn keys_never_show_in_debug_and_settings_are_checked() {
    let ec = TestKey::new(Kind::P256);
    let key = SigningKey::from_pem(&ec.pkcs8, Algorithm::Es256)
        .unwrap()
        .key_id("k");
    let builder = OAuthLayer::builder()
        .token_url("https://idp.example.com/token")
        .client_id(CLIENT)
        .client_auth(ClientAuth::PrivateKeyJwt(key.clone()));
    for shown in [
        format!("{key:?}"),
        format!("{:?}", ClientAuth::PrivateKeyJwt(key.clone())),
        format!("{builder:?}"),
    ] {
        assert!(shown.contains("[redacted]"), "{shown}");
        for line in ec.pkcs8.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!shown.contains(&line[..20]), "{shown}");
        }
    }
    assert_eq!(key, key.clone().key_id("k"));
    assert_ne!(key, key.clone().key_id("other"));
    let err = builder.clone().client_secret("s").build().unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    let err = builder
        .clone()
        .assertion_lifetime(Duration::from_secs(7200))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidSetting);
    assert!(builder.build().is_ok());
    let err = OAuthLayer::builder()
        .token_url("https://idp.example.com/token")
        .client_id(CLIENT)
        .client_auth(ClientAuth::ClientSecretJwt)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingClientSecret);
}

/// The assertions' `iat` and `nbf` are backdated by the clock skew setting,
/// for a server whose clock runs behind; `exp` stays the lifetime after
/// the moment of signing. Checked by the endpoint with jsonwebtoken.
#[tokio::test]
async fn assertions_are_backdated_by_the_clock_skew() {
    let key = TestKey::new(Kind::P256);
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600)
            .await;
    let signing = SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap();
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(signing.clone()))
            .assertion_clock_skew(Duration::from_secs(30)),
    )
    .build()
    .unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    oauth.token().await.unwrap();
    let claims = endpoint.claims();
    let iat = claims[0]["iat"].as_u64().unwrap();
    assert!(
        iat + 30 >= before && iat + 30 <= before + 2,
        "iat {iat}, now {before}"
    );
    assert_eq!(claims[0]["nbf"], claims[0]["iat"]);
    assert_eq!(claims[0]["exp"].as_u64().unwrap() - iat, 90);

    let e = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(signing))
            .assertion_clock_skew(Duration::from_secs(301)),
    )
    .build()
    .unwrap_err();
    assert_eq!(e.kind(), tower_oauth::ConfigErrorKind::InvalidSetting);
}

/// A key file rotated on disk and at the server is taken after one refusal;
/// a file that then holds no key keeps the key in use.
#[tokio::test]
async fn a_private_key_file_rotated_is_taken_after_one_refusal() {
    let (first, second) = (TestKey::new(Kind::P256), TestKey::new(Kind::P256));
    let endpoint =
        AssertionEndpoint::start(CLIENT, Check::Public(first.public.clone(), Jose::ES256), 1).await;
    let dir = std::env::temp_dir().join(format!("tower-oauth-keyfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client-key.pem");
    std::fs::write(&file, &first.pkcs8).unwrap();
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .private_key_file(&file, Algorithm::Es256, Some("rotating")),
    )
    .build()
    .unwrap();
    assert!(!format!("{oauth:?}").contains("PRIVATE KEY"));
    oauth.token().await.unwrap();

    // The rotation: the server takes the new key only; the file holds it.
    endpoint.set_key(Check::Public(second.public.clone(), Jose::ES256));
    let next = dir.join("client-key.next");
    std::fs::write(&next, &second.pkcs8).unwrap();
    std::fs::rename(&next, &file).unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    oauth.token().await.unwrap();
    assert_eq!(
        endpoint.token_requests(),
        3,
        "one refusal, then the new key"
    );
    assert_eq!(endpoint.refusals().len(), 1);
    assert!(endpoint
        .headers()
        .iter()
        .all(|h| h.kid.as_deref() == Some("rotating")));

    // A file that holds no key: the key in use stays, and the refusal is
    // the server's.
    std::fs::write(&file, "not a key").unwrap();
    endpoint.set_key(Check::Public(first.public.clone(), Jose::ES256));
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.error_code(), Some("invalid_client"));
    assert_eq!(endpoint.token_requests(), 4);

    let err = OAuthLayer::builder()
        .token_url(endpoint.token_url())
        .client_id(CLIENT)
        .private_key_file(&file, Algorithm::Es256, None)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidKey);
    assert!(
        err.message()
            .starts_with(&format!("the file `{}`: ", file.display())),
        "{err}"
    );
}
