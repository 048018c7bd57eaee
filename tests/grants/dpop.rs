//! DPoP (RFC 9449) against a strict loopback authorization server and
//! resource servers that verify every proof with jsonwebtoken: algorithms,
//! methods, query strings and fragments, several origins, nonces at both
//! servers and rotating, renewals mid-run, a 401 storm, bearer answers,
//! custom signers and the Tower contract on the signing path.
#![cfg(feature = "reqwest")]

use crate::support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use support::dpop_server::{DpopServer, Nonces, CLIENT_ID, CLIENT_SECRET};
use support::keys::{Kind, TestKey};
use tower::retry::{Retry, RetryLayer};
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::{
    client_auth::{Algorithm, JwsSigner},
    dpop::DpopKey,
    BoxError, BoxFuture, ConfigErrorKind, OAuthLayer, OAuthLayerBuilder, OAuthService,
    RetryUnauthorized, TokenError, TokenErrorKind,
};

fn builder(server: &DpopServer, key: DpopKey) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .dpop(key),
    )
}

/// A server with `origins` API origins and a layer on it with a new ES256
/// key.
async fn started(origins: usize, nonces: Nonces, lifetime_secs: u64) -> (DpopServer, OAuthLayer) {
    let server = DpopServer::start(origins, nonces, lifetime_secs).await;
    let oauth = builder(&server, DpopKey::generate(Algorithm::Es256).unwrap())
        .build()
        .unwrap();
    (server, oauth)
}

/// The usual stack: RetryUnauthorized outside the layer, hyper-util inside.
fn client(oauth: &OAuthLayer) -> Retry<RetryUnauthorized, OAuthService<support::HyperClient>> {
    ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(support::hyper_client())
}

fn request(method: Method, url: &str, id: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(url)
        .header("x-request-id", id)
        .body(Full::default())
        .unwrap()
}

async fn send(oauth: &OAuthLayer, method: Method, url: &str) -> Result<StatusCode, BoxError> {
    Ok(client(oauth)
        .oneshot(request(method, url, "-"))
        .await?
        .status())
}

fn token_error(e: &BoxError) -> &TokenError {
    e.downcast_ref::<TokenError>()
        .unwrap_or_else(|| panic!("not a TokenError: {e}"))
}

fn ath(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        token.as_bytes(),
    ))
}

#[tokio::test]
async fn es256_every_request_carries_a_proof_the_servers_verify() {
    let server = DpopServer::start(2, Nonces::Off, 3600).await;
    let key = DpopKey::generate(Algorithm::Es256).unwrap();
    let oauth = builder(&server, key.clone()).build().unwrap();
    let requests = [
        (Method::GET, 0, "/orders?page=2&sort=asc#top", "/orders"),
        (Method::POST, 1, "/orders", "/orders"),
        (Method::PUT, 0, "/orders/7", "/orders/7"),
        (Method::DELETE, 1, "/orders/7?force=true", "/orders/7"),
        (Method::PATCH, 0, "", "/"),
        (Method::HEAD, 1, "/health#x", "/health"),
        (Method::OPTIONS, 0, "/a%2fb/c?d", "/a%2fb/c"),
    ];
    for (method, origin, path, _) in &requests {
        let status = send(&oauth, method.clone(), &server.api_url(*origin, path))
            .await
            .unwrap();
        assert_eq!(status, 200, "{method} {path}: {:?}", server.refusals());
    }
    assert_eq!(server.refusals(), Vec::<String>::new());
    assert_eq!(server.token_requests(), 1);
    // The server's own RFC 7638 thumbprint of the proof's jwk is the key's.
    assert_eq!(server.bindings(), vec![key.thumbprint().to_owned()]);

    let seen = server.seen();
    assert_eq!(seen.len(), 1 + requests.len());
    assert_eq!(
        (seen[0].htm.as_str(), seen[0].htu.as_str()),
        ("POST", server.token_url().as_str())
    );
    assert_eq!(seen[0].ath, None, "a token request's proof has no ath");
    for ((method, origin, _, htu_path), proof) in requests.iter().zip(&seen[1..]) {
        assert_eq!(proof.htm, method.as_str());
        assert_eq!(proof.htu, format!("{}{htu_path}", server.origin(*origin)));
        assert_eq!(proof.ath.as_deref(), Some(ath("dpop-token-1").as_str()));
    }
}

async fn three_requests(key: DpopKey) {
    let server = DpopServer::start(1, Nonces::Off, 3600).await;
    let thumbprint = key.thumbprint().to_owned();
    let oauth = builder(&server, key).build().unwrap();
    for n in 0..3 {
        let status = send(&oauth, Method::GET, &server.api_url(0, &format!("/r/{n}")))
            .await
            .unwrap();
        assert_eq!(status, 200, "{:?}", server.refusals());
    }
    assert_eq!(server.api_accepted(), 3);
    assert_eq!(server.bindings(), vec![thumbprint]);
}

#[tokio::test]
async fn every_algorithm_from_every_source() {
    three_requests(DpopKey::generate(Algorithm::EdDsa).unwrap()).await;
    let p256 = TestKey::new(Kind::P256);
    three_requests(DpopKey::from_pem(&p256.pkcs8, Algorithm::Es256).unwrap()).await;
    three_requests(DpopKey::from_jwk(p256.jwk(Kind::P256)).unwrap()).await;
    let rsa = TestKey::new(Kind::Rsa(2048));
    three_requests(DpopKey::from_pem(&rsa.pkcs8, Algorithm::Rs256).unwrap()).await;
    three_requests(DpopKey::from_pem(rsa.traditional(), Algorithm::Ps256).unwrap()).await;
}

#[tokio::test]
async fn nonces_demanded_at_both_servers_are_sent_and_follow_rotation() {
    let (server, oauth) = started(2, Nonces::Strict, 3600).await;
    let (api0, api1) = (server.api_url(0, "/a"), server.api_url(1, "/b"));

    // The token endpoint demands a nonce: asked once more, with it. Its
    // answer names origin 0's nonce, which the API there then takes.
    assert_eq!(send(&oauth, Method::GET, &api0).await.unwrap(), 200);
    assert_eq!(server.token_nonce_challenges(), 1);
    assert_eq!(server.token_requests(), 1);
    assert_eq!(server.api_nonce_challenges(), 0);
    // Origin 1 demands its own: one 401, resent once with it.
    assert_eq!(send(&oauth, Method::GET, &api1).await.unwrap(), 200);
    assert_eq!(server.api_nonce_challenges(), 1);
    // Both remembered.
    for _ in 0..3 {
        assert_eq!(send(&oauth, Method::POST, &api0).await.unwrap(), 200);
        assert_eq!(send(&oauth, Method::POST, &api1).await.unwrap(), 200);
    }
    assert_eq!(server.api_nonce_challenges(), 1);

    // Rotated at origin 1: one more challenge there, none at origin 0.
    server.rotate(1);
    assert_eq!(send(&oauth, Method::GET, &api1).await.unwrap(), 200);
    assert_eq!(send(&oauth, Method::GET, &api0).await.unwrap(), 200);
    assert_eq!(server.api_nonce_challenges(), 2);

    let stats = oauth.stats();
    assert_eq!(stats.dpop_nonce_challenges, 2);
    assert_eq!(stats.forced_renewals, 0, "a nonce challenge is no refusal");
    assert_eq!(server.token_requests(), 1);
    assert_eq!(server.refusals(), Vec::<String>::new());
    assert!(server.seen().iter().all(|s| s.nonce.is_some()));
}

#[tokio::test]
async fn a_new_nonce_in_a_success_answer_replaces_the_old() {
    let (server, oauth) = started(1, Nonces::Grace, 3600).await;
    let api = server.api_url(0, "/x");
    assert_eq!(send(&oauth, Method::GET, &api).await.unwrap(), 200);
    let before = server.seen().last().unwrap().nonce.clone().unwrap();
    // The old nonce is still taken once, and the answer names the new one,
    // which the next proof carries: no challenge at all.
    server.rotate(0);
    assert_eq!(send(&oauth, Method::GET, &api).await.unwrap(), 200);
    assert_eq!(
        server.seen().last().unwrap().nonce.as_deref(),
        Some(before.as_str())
    );
    assert_eq!(send(&oauth, Method::GET, &api).await.unwrap(), 200);
    let after = server.seen().last().unwrap().nonce.clone().unwrap();
    assert_ne!(after, before);
    assert_eq!(server.api_nonce_challenges(), 0);
}

#[tokio::test]
async fn renewed_tokens_mid_run_carry_their_own_ath() {
    let (server, oauth) = started(2, Nonces::Grace, 3).await;
    let client = client(&oauth);
    let mut tasks = Vec::new();
    for worker in 0..4 {
        let (client, url) = (client.clone(), server.api_url(worker % 2, "/load"));
        tasks.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(7);
            let mut statuses = Vec::new();
            while tokio::time::Instant::now() < deadline {
                let r = client
                    .clone()
                    .oneshot(request(Method::GET, &url, "-"))
                    .await;
                statuses.push(r.map(|r| r.status()).map_err(|e| e.to_string()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            statuses
        }));
    }
    let mut total = 0;
    for task in tasks {
        for status in task.await.unwrap() {
            assert_eq!(status, Ok(StatusCode::OK), "{:?}", server.refusals());
            total += 1;
        }
    }
    assert!(total > 400, "{total}");
    assert!(
        server.token_requests() >= 3,
        "{} tokens",
        server.token_requests()
    );
    assert_eq!(oauth.stats().forced_renewals, 0);
    // Each API proof's ath was checked against its own token; several
    // tokens' hashes appear.
    let aths: HashSet<_> = server.seen().into_iter().filter_map(|s| s.ath).collect();
    assert!(aths.len() >= 3, "{} distinct ath", aths.len());
    assert_eq!(server.refusals(), Vec::<String>::new());
}

#[tokio::test]
async fn a_nonce_storm_sends_no_request_more_than_twice_and_fetches_no_token() {
    let server = Arc::new(DpopServer::start(2, Nonces::Strict, 3600).await);
    let oauth = builder(&server, DpopKey::generate(Algorithm::Es256).unwrap())
        .build()
        .unwrap();
    let client = client(&oauth);
    for origin in 0..2 {
        let status = client
            .clone()
            .oneshot(request(
                Method::GET,
                &server.api_url(origin, "/warm"),
                &format!("warm-{origin}"),
            ))
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200);
    }
    let challenges_before = server.api_nonce_challenges();
    // Nonces rotate at both servers every 60 ms (a real server keeps one
    // for minutes) while 16 workers send without pause: each rotation
    // meets the requests in flight with `use_dpop_nonce`.
    let done = Arc::new(AtomicUsize::new(0));
    let rotating = {
        let (server, done) = (Arc::clone(&server), Arc::clone(&done));
        tokio::spawn(async move {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(60)).await;
                server.rotate(0);
                server.rotate(1);
            }
            done.store(1, Ordering::SeqCst);
        })
    };
    let mut tasks = Vec::new();
    for worker in 0..16 {
        let (client, server, done) = (client.clone(), Arc::clone(&server), Arc::clone(&done));
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut n = 0;
            while done.load(Ordering::SeqCst) == 0 {
                n += 1;
                let id = format!("{worker}-{n}");
                let url = server.api_url((worker + n) % 2, &format!("/storm/{n}?w={worker}"));
                let response = client
                    .clone()
                    .oneshot(request(Method::POST, &url, &id))
                    .await
                    .unwrap();
                let challenge = response
                    .headers()
                    .get("www-authenticate")
                    .map(|v| v.to_str().unwrap().to_owned());
                out.push((response.status(), challenge));
            }
            out
        }));
    }
    let (mut ok, mut total) = (0, 0);
    for task in tasks {
        for (status, challenge) in task.await.unwrap() {
            total += 1;
            if status == 200 {
                ok += 1;
            } else {
                // Only a nonce that rotated again before the resend.
                assert_eq!(status, 401);
                assert!(challenge.unwrap().contains("use_dpop_nonce"));
            }
        }
    }
    rotating.await.unwrap();
    eprintln!(
        "{ok} of {total} requests succeeded; {} nonce challenges",
        server.api_nonce_challenges() - challenges_before
    );
    let sends = server.sends();
    let most = sends.values().max().copied().unwrap();
    assert!(most <= 2, "a request was sent {most} times");
    assert!(server.api_nonce_challenges() > challenges_before + 10);
    // How many fail depends on how long a request takes against the 60 ms
    // rotation (a loaded machine fails more); what must hold on any timing:
    // every resend carried the nonce its challenge named (or a newer one),
    // so a request failed only when the server rotated again meanwhile.
    assert!(ok > 0, "none of {total} succeeded");
    assert_eq!(server.stale_resends(), Vec::<String>::new());
    assert_eq!(server.token_requests(), 1, "no token storm");
    let stats = oauth.stats();
    assert_eq!(stats.forced_renewals, 0);
    assert_eq!(
        stats.dpop_nonce_challenges as usize,
        server.api_nonce_challenges()
    );
    // The only refusals: none but nonce challenges.
    assert_eq!(server.refusals(), Vec::<String>::new());
}

#[tokio::test]
async fn discovery_shows_the_servers_dpop_algorithms_and_warns_of_a_mismatch() {
    let server = DpopServer::start(1, Nonces::Strict, 3600).await;
    server.publish_metadata(&["ES256", "PS256"]);
    let discovered = |key: DpopKey| {
        support::with_transport(
            OAuthLayer::builder()
                .issuer(server.issuer())
                .allow_insecure_http(true)
                .client_id(CLIENT_ID)
                .client_secret(CLIENT_SECRET)
                .dpop(key),
        )
        .build()
        .unwrap()
    };
    let oauth = discovered(DpopKey::generate(Algorithm::Es256).unwrap());
    assert_eq!(
        send(&oauth, Method::GET, &server.api_url(0, "/x"))
            .await
            .unwrap(),
        200
    );
    let metadata = oauth.server_metadata().unwrap();
    assert_eq!(metadata.dpop_algorithms, ["ES256", "PS256"]);

    // This server takes any algorithm; a stricter one would refuse EdDSA,
    // which the log says before it does.
    let (_guard, logs) = support::capture_logs();
    let oauth = discovered(DpopKey::generate(Algorithm::EdDsa).unwrap());
    assert_eq!(
        send(&oauth, Method::GET, &server.api_url(0, "/x"))
            .await
            .unwrap(),
        200
    );
    assert!(
        logs.text()
            .contains("does not list the DPoP key's algorithm"),
        "{}",
        logs.text()
    );
}

#[tokio::test]
async fn a_bearer_answer_is_refused_by_default_and_sent_as_bearer_when_allowed() {
    let server = DpopServer::start(1, Nonces::Off, 3600).await;
    server.ignore_dpop();
    let strict = builder(&server, DpopKey::generate(Algorithm::Es256).unwrap())
        .build()
        .unwrap();
    let e = send(&strict, Method::GET, &server.api_url(0, "/x"))
        .await
        .unwrap_err();
    let e = token_error(&e);
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
    assert!(
        e.to_string()
            .contains("`Bearer` token, not a DPoP-bound one"),
        "{e}"
    );
    assert!(e.to_string().contains("dpop_allow_bearer(true)"), "{e}");

    let lenient = builder(&server, DpopKey::generate(Algorithm::Es256).unwrap())
        .dpop_allow_bearer(true)
        .build()
        .unwrap();
    // The server refuses a request with a DPoP header or another scheme.
    assert_eq!(
        send(&lenient, Method::GET, &server.api_url(0, "/x"))
            .await
            .unwrap(),
        200
    );
    assert_eq!(server.refusals(), Vec::<String>::new());
}

#[tokio::test]
async fn a_request_without_an_absolute_uri_fails_alone() {
    let (server, oauth) = started(1, Nonces::Off, 3600).await;
    let e = send(&oauth, Method::GET, "/relative").await.unwrap_err();
    let e = token_error(&e);
    assert_eq!(e.kind(), TokenErrorKind::InvalidRequest);
    assert!(!e.is_retryable());
    assert_eq!(
        send(&oauth, Method::GET, &server.api_url(0, "/x"))
            .await
            .unwrap(),
        200
    );
    assert_eq!(oauth.stats().token_requests, 1);
}

/// An HSM stand-in: a P-256 key made by the test, signing after the
/// token request as told.
struct Hsm {
    key: ring::signature::EcdsaKeyPair,
    calls: Arc<AtomicUsize>,
    after_first: After,
    gate: Arc<tokio::sync::Semaphore>,
}

#[derive(Clone, Copy, PartialEq)]
enum After {
    Sign,
    Fail,
    Hang,
    /// Wait for a permit of the gate.
    Gate,
    /// Take 2.5 seconds.
    Slow,
}

impl JwsSigner for Hsm {
    fn algorithm(&self) -> Algorithm {
        Algorithm::Es256
    }

    fn sign<'a>(&'a self, message: &'a [u8]) -> BoxFuture<'a, Result<Vec<u8>, BoxError>> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match (call, self.after_first) {
                (0, _) | (_, After::Sign) => {}
                (_, After::Fail) => return Err("HSM: session closed".into()),
                (_, After::Hang) => std::future::pending::<()>().await,
                (_, After::Gate) => self.gate.acquire().await.unwrap().forget(),
                (_, After::Slow) => tokio::time::sleep(Duration::from_millis(2500)).await,
            }
            let signature = self
                .key
                .sign(&ring::rand::SystemRandom::new(), message)
                .map_err(|_| "sign")?;
            Ok(signature.as_ref().to_vec())
        })
    }

    fn public_jwk(&self) -> Option<String> {
        use ring::signature::KeyPair;
        let point = self.key.public_key().as_ref();
        Some(format!(
            r#"{{"kty":"EC","crv":"P-256","x":"{}","y":"{}","kid":"hsm-1"}}"#,
            URL_SAFE_NO_PAD.encode(&point[1..33]),
            URL_SAFE_NO_PAD.encode(&point[33..])
        ))
    }
}

fn hsm(after_first: After) -> (DpopKey, Arc<AtomicUsize>, Arc<tokio::sync::Semaphore>) {
    let rng = ring::rand::SystemRandom::new();
    let alg = &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let key = ring::signature::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let signer = Hsm {
        key,
        calls: Arc::clone(&calls),
        after_first,
        gate: Arc::clone(&gate),
    };
    (DpopKey::custom(signer).unwrap(), calls, gate)
}

#[tokio::test]
async fn a_custom_signer_proves_every_request() {
    let server = DpopServer::start(1, Nonces::Strict, 3600).await;
    let (key, calls, _) = hsm(After::Sign);
    let thumbprint = key.thumbprint().to_owned();
    let oauth = builder(&server, key).build().unwrap();
    for n in 0..3 {
        let url = server.api_url(0, &format!("/hsm/{n}"));
        assert_eq!(
            send(&oauth, Method::PUT, &url).await.unwrap(),
            200,
            "{:?}",
            server.refusals()
        );
    }
    // Two token request proofs (the first drew the nonce demand), three API
    // proofs.
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    assert_eq!(server.bindings(), vec![thumbprint]);
}

#[tokio::test]
async fn a_failing_or_hanging_signer_fails_the_request_not_the_token() {
    let server = DpopServer::start(1, Nonces::Off, 3600).await;
    let (key, _, _) = hsm(After::Fail);
    let oauth = builder(&server, key).build().unwrap();
    let e = send(&oauth, Method::GET, &server.api_url(0, "/x"))
        .await
        .unwrap_err();
    let e = token_error(&e);
    assert_eq!(e.kind(), TokenErrorKind::Signing);
    assert!(e.to_string().contains("HSM: session closed"), "{e}");
    assert!(oauth.stats().token_usable_for.is_some(), "the token stays");

    let (key, _, _) = hsm(After::Hang);
    let oauth = builder(&server, key)
        .fetch_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let e = send(&oauth, Method::GET, &server.api_url(0, "/x"))
        .await
        .unwrap_err();
    assert_eq!(token_error(&e).kind(), TokenErrorKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// A signer slower than the token's life: once the proof is made the token
/// is checked again, and the request fails rather than carry it expired.
#[tokio::test]
async fn a_token_that_runs_out_while_its_proof_is_signed_is_not_sent() {
    // Two-second tokens, usable for 1.8 s; the signer takes 2.5 s.
    let server = DpopServer::start(1, Nonces::Off, 2).await;
    let (key, _, _) = hsm(After::Slow);
    let oauth = builder(&server, key).build().unwrap();
    let e = send(&oauth, Method::GET, &server.api_url(0, "/slow"))
        .await
        .unwrap_err();
    let e = token_error(&e);
    assert_eq!(e.kind(), TokenErrorKind::Timeout, "{e}");
    assert!(
        e.to_string().contains("ran out while the DPoP signer"),
        "{e}"
    );
    // Only the token request carried a proof: no API request was sent.
    assert!(server.seen().iter().all(|s| s.ath.is_none()));
    assert!(server.refusals().is_empty(), "{:?}", server.refusals());
}

#[tokio::test]
async fn the_signing_path_keeps_the_tower_contract() {
    use tower_test::mock;
    let server = DpopServer::start(1, Nonces::Off, 3600).await;
    let (key, calls, gate) = hsm(After::Gate);
    let oauth = builder(&server, key).build().unwrap();
    oauth.token().await.unwrap();
    let (mut svc, mut handle) =
        mock::spawn_layer::<Request<Full<Bytes>>, Response<Full<Bytes>>, _>(oauth.clone());

    // Readiness is the inner service's.
    handle.allow(0);
    assert!(svc.poll_ready().is_pending());
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let url = server.api_url(0, "/gated");
    let fut = tokio::spawn(svc.call(request(Method::GET, &url, "g1")));
    // Nothing reaches the inner service before the proof is signed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), handle.next_request())
            .await
            .is_err()
    );
    gate.add_permits(1);
    let (req, respond) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .unwrap()
        .unwrap();
    assert!(req.headers()["authorization"]
        .to_str()
        .unwrap()
        .starts_with("DPoP "));
    assert!(req.headers().contains_key("dpop"));
    respond.send_response(Response::new(Full::default()));
    assert_eq!(fut.await.unwrap().unwrap().status(), 200);

    // Dropped while signing: nothing is sent.
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let fut = svc.call(request(Method::GET, &url, "g2"));
    drop(fut);
    gate.add_permits(1);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), handle.next_request())
            .await
            .is_err()
    );
}

#[test]
fn keys_and_settings_are_checked() {
    let e = DpopKey::generate(Algorithm::Rs256).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidKey);
    assert!(e.to_string().contains("from_pem"), "{e}");

    struct NoJwk;
    impl JwsSigner for NoJwk {
        fn algorithm(&self) -> Algorithm {
            Algorithm::Es256
        }
        fn sign<'a>(&'a self, _: &'a [u8]) -> BoxFuture<'a, Result<Vec<u8>, BoxError>> {
            Box::pin(async { Err("unused".into()) })
        }
    }
    let e = DpopKey::custom(NoJwk).unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidKey);
    assert!(e.to_string().contains("public_jwk"), "{e}");

    let key = DpopKey::generate(Algorithm::Es256).unwrap();
    let base = || {
        OAuthLayer::builder()
            .token_url("https://login.example.com/token")
            .client_id("c")
            .client_secret("s")
            .dpop(key.clone())
    };
    let e = base().auth_scheme("Token").build().unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Conflicting);
    struct Fixed;
    impl tower_oauth::TokenSource for Fixed {
        fn fetch_token(&self) -> BoxFuture<'_, Result<tower_oauth::AccessToken, TokenError>> {
            Box::pin(async { Ok(tower_oauth::AccessToken::new("t")) })
        }
    }
    let e = OAuthLayer::builder()
        .token_source(Fixed)
        .dpop(key.clone())
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Conflicting);
    assert!(e.to_string().contains("token source"), "{e}");
}

#[test]
fn debug_shows_no_key_material() {
    let pem = TestKey::new(Kind::P256);
    let key = DpopKey::from_pem(&pem.pkcs8, Algorithm::Es256).unwrap();
    let jwk: serde_json::Value = serde_json::from_str(&pem.jwk(Kind::P256)).unwrap();
    let d = jwk["d"].as_str().unwrap();
    let body: String = pem
        .pkcs8
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let shown = format!("{key:?} {:?}", OAuthLayer::builder().dpop(key.clone()));
    assert!(
        !shown.contains(d) && !shown.contains(&body[..40]),
        "{shown}"
    );
    assert!(shown.contains(key.thumbprint()));
    assert!(!key.public_jwk().contains("\"d\""));
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_shares_tokens_only_among_replicas_with_the_same_key() {
    if support::redis_server::missing() {
        return;
    }
    let redis = support::redis_server::RedisServer::start();
    let server = DpopServer::start(1, Nonces::Strict, 3600).await;
    let pem = TestKey::new(Kind::P256).pkcs8.clone();
    let replica = |key: DpopKey| {
        builder(&server, key)
            .token_store(
                tower_oauth::store::RedisStore::new(redis.url())
                    .unwrap()
                    .prefix("dpop:"),
            )
            .build()
            .unwrap()
    };
    // Four replicas read one key: one token for them all, and each proves
    // it with the key it is bound to.
    let fleet: Vec<_> = (0..4)
        .map(|_| replica(DpopKey::from_pem(&pem, Algorithm::Es256).unwrap()))
        .collect();
    let api = server.api_url(0, "/shared");
    for oauth in &fleet {
        assert_eq!(
            send(oauth, Method::GET, &api).await.unwrap(),
            200,
            "{:?}",
            server.refusals()
        );
    }
    assert_eq!(server.token_requests(), 1);
    // A replica with a key of its own never takes that token.
    let other = replica(DpopKey::generate(Algorithm::Es256).unwrap());
    assert_eq!(
        send(&other, Method::GET, &api).await.unwrap(),
        200,
        "{:?}",
        server.refusals()
    );
    assert_eq!(server.token_requests(), 2);
    let bindings: HashSet<_> = server.bindings().into_iter().collect();
    assert_eq!(bindings.len(), 2);
    assert_eq!(server.refusals(), Vec::<String>::new());
}

/// A gRPC health server on 127.0.0.1 whose every call is checked as the
/// DPoP APIs check theirs (a refusal is `UNAUTHENTICATED` carrying the
/// challenge and the nonce); its origin.
async fn dpop_grpc_server(server: &Arc<DpopServer>) -> String {
    use tonic::transport::server::TcpIncoming;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    server.add_origin(&origin);
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let (checker, at) = (Arc::clone(server), origin.clone());
    let check = move |req: Request<tonic::body::Body>| -> Result<_, BoxError> {
        checker
            .check_api(&at, &req)
            .map(|()| req)
            .map_err(|refusal| {
                let mut metadata = tonic::metadata::MetadataMap::new();
                metadata.insert("www-authenticate", refusal.challenge().parse().unwrap());
                metadata.insert("dpop-nonce", checker.nonce(&at).parse().unwrap());
                Box::new(tonic::Status::with_metadata(
                    tonic::Code::Unauthenticated,
                    refusal.why,
                    metadata,
                )) as BoxError
            })
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(tower::filter::FilterLayer::new(check))
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    origin
}

#[tokio::test]
async fn a_tonic_client_with_its_origin_sends_proofs_and_follows_nonces() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let server = Arc::new(DpopServer::start(1, Nonces::Strict, 3600).await);
    let origin = dpop_grpc_server(&server).await;
    let channel = tonic::transport::Channel::from_shared(origin.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let oauth = builder(&server, DpopKey::generate(Algorithm::Es256).unwrap())
        .build()
        .unwrap();
    let stack = ServiceBuilder::new().layer(oauth.clone()).service(channel);
    let check = || HealthCheckRequest {
        service: String::new(),
    };

    // Without its origin a tonic call reaches the layer as a bare path: it
    // fails alone, and says why.
    let err = HealthClient::new(stack.clone())
        .check(check())
        .await
        .unwrap_err();
    assert!(err.message().contains("absolute URIs"), "{err:?}");

    // With it: the API's nonce challenge comes back as UNAUTHENTICATED; the
    // token stays, the nonce is kept, and the next call goes through.
    let mut client = HealthClient::with_origin(stack, origin.parse().unwrap());
    let err = client.check(check()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");
    assert_eq!(server.api_nonce_challenges(), 1);
    for _ in 0..3 {
        let ok = client.check(check()).await.unwrap().into_inner();
        assert_eq!(
            ok.status(),
            tonic_health::pb::health_check_response::ServingStatus::Serving
        );
    }
    let stats = oauth.stats();
    assert_eq!((stats.dpop_nonce_challenges, stats.forced_renewals), (1, 0));
    assert_eq!(server.token_requests(), 1);
    assert_eq!(server.refusals(), Vec::<String>::new());
    let htu = format!("{origin}/grpc.health.v1.Health/Check");
    let calls: Vec<_> = server.seen().into_iter().filter(|s| s.htu == htu).collect();
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|s| s.htm == "POST" && s.nonce.is_some()));
}

/// An API that takes only DPoP-bound tokens says so in its RFC 9728
/// metadata; a layer with a DPoP key gets such a token from the server it
/// names, checked by the strict server (proofs verified by jsonwebtoken).
#[tokio::test]
async fn a_resource_that_requires_dpop_gets_bound_tokens_from_the_server_it_names() {
    let server = DpopServer::start(1, Nonces::Off, 3600).await;
    server.publish_metadata(&["ES256"]);
    server.publish_resource_metadata();
    let resource = format!("{}/api", server.issuer());
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(&resource)
            .trusted_issuers([server.issuer()])
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .dpop(DpopKey::generate(Algorithm::Es256).unwrap()),
    )
    .build()
    .unwrap();
    let response = support::send(&oauth, &server.api_url(0, "/api/orders"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        oauth
            .resource_metadata()
            .unwrap()
            .dpop_bound_access_tokens_required
    );
    assert_eq!(server.bindings().len(), 1, "one DPoP-bound token");
}

/// A DPoP-bound refresh token is refreshed with the same key: every
/// refresh carries a proof of it (checked by the strict server with
/// jsonwebtoken), and each access token is bound to it.
#[tokio::test]
async fn refreshes_prove_the_same_key_for_every_token() {
    let server = DpopServer::start(1, Nonces::Strict, 2).await;
    let key = DpopKey::generate(Algorithm::Es256).unwrap();
    let thumbprint = key.thumbprint().to_owned();
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .refresh_token(tower_oauth::grant::RefreshToken::new(
                "dpop-bound-refresh-token",
            ))
            .dpop(key),
    )
    .build()
    .unwrap();
    let client = client(&oauth);
    let url = server.api_url(0, "/refreshed");
    let deadline = tokio::time::Instant::now() + Duration::from_millis(4500);
    while tokio::time::Instant::now() < deadline {
        let status = client
            .clone()
            .oneshot(request(Method::GET, &url, "-"))
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::OK, "{:?}", server.refusals());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bindings = server.bindings();
    assert!(bindings.len() >= 3, "{} tokens", bindings.len());
    assert!(bindings.iter().all(|jkt| *jkt == thumbprint));
    assert_eq!(server.refusals(), Vec::<String>::new());
}
