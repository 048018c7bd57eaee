//! Mutual TLS (RFC 8705) against a loopback TLS token endpoint and API that
//! require client certificates from a throwaway CA: tokens bound to the
//! certificate, accepted only from the client presenting it.
#![cfg(feature = "reqwest")]

use crate::support;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use support::mtls::{MtlsAuthority, Pki};
use tower::ServiceExt;
use tower_oauth::{client_auth::ClientAuth, ConfigErrorKind, OAuthLayer};

const CLIENT: &str = "mtls-client";

/// An API client (hyper-util over hyper-rustls) presenting `identity`.
fn api_client(
    pki: &Pki,
    identity: &support::mtls::Identity,
) -> Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(pki.client_config(identity))
        .https_only()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(https)
}

#[tokio::test]
async fn certificate_bound_tokens_are_fetched_with_the_identity_and_accepted_from_it() {
    let pki = Pki::new();
    let authority = MtlsAuthority::start(&pki).await;
    let identity = pki.issue(CLIENT, &[]);
    authority.register(CLIENT, &identity);

    let oauth = OAuthLayer::builder()
        .token_url(authority.token_url())
        .client_id(CLIENT)
        .client_auth(ClientAuth::TlsClientAuth)
        .client_identity(&identity.cert_pem, &identity.key_pem)
        .root_certificates(&pki.ca_pem)
        .build()
        .unwrap();
    let client = tower::ServiceBuilder::new()
        .layer(oauth.clone())
        .service(api_client(&pki, &identity));
    for _ in 0..5 {
        let response = client
            .clone()
            .oneshot(support::get(&authority.api_url()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{:?}", authority.refusals());
    }
    assert_eq!(authority.token_requests(), 1);
    assert_eq!(authority.api_accepted(), 5);
    assert_eq!(authority.bindings(), vec![identity.thumbprint()]);

    // The same token from a client with another certificate of the same CA
    // is refused: the binding is checked.
    let other = pki.issue("someone-else", &[]);
    let stranger = tower::ServiceBuilder::new()
        .layer(oauth)
        .service(api_client(&pki, &other));
    let response = stranger
        .oneshot(support::get(&authority.api_url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(authority.api_refused(), 1);
}

/// With an issuer, a client certificate and no secret, discovery chooses
/// tls_client_auth and the metadata's mutual TLS alias.
#[tokio::test]
async fn discovery_uses_the_mtls_alias_and_tls_client_auth() {
    let pki = Pki::new();
    let authority = MtlsAuthority::start(&pki).await;
    authority.publish_metadata();
    let identity = pki.issue(CLIENT, &[]);
    authority.register(CLIENT, &identity);
    let oauth = OAuthLayer::builder()
        .issuer(authority.issuer())
        .client_id(CLIENT)
        .client_identity(&identity.cert_pem, &identity.key_pem)
        .root_certificates(&pki.ca_pem)
        .build()
        .unwrap();
    let token = oauth.token().await.unwrap();
    assert!(
        token.expose_token().starts_with("bound-"),
        "{:?}",
        authority.refusals()
    );
    let metadata = oauth.server_metadata().unwrap();
    assert_eq!(metadata.client_auth, ClientAuth::TlsClientAuth);
    assert_eq!(
        metadata.mtls_token_endpoint.as_deref(),
        Some(authority.token_url().as_str())
    );
}

/// Without the certificate, the endpoint refuses; the error says so.
#[tokio::test]
async fn without_the_certificate_the_endpoint_refuses() {
    let pki = Pki::new();
    let authority = MtlsAuthority::start(&pki).await;
    let oauth = OAuthLayer::builder()
        .token_url(authority.token_url())
        .client_id(CLIENT)
        .client_auth(ClientAuth::TlsClientAuth)
        // A transport of one's own that forgot the client certificate.
        .transport(
            Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(
                        rustls::ClientConfig::builder_with_provider(Arc::new(
                            rustls::crypto::ring::default_provider(),
                        ))
                        .with_safe_default_protocol_versions()
                        .unwrap()
                        .with_root_certificates({
                            let mut roots = rustls::RootCertStore::empty();
                            use rustls::pki_types::pem::PemObject;
                            for c in rustls::pki_types::CertificateDer::pem_slice_iter(
                                pki.ca_pem.as_bytes(),
                            ) {
                                roots.add(c.unwrap()).unwrap();
                            }
                            roots
                        })
                        .with_no_client_auth(),
                    )
                    .https_only()
                    .enable_http1()
                    .build(),
            ),
        )
        .build();
    let err = oauth.unwrap().token().await.unwrap_err();
    assert_eq!(err.error_code(), Some("invalid_client"));
    assert_eq!(
        authority.refusals(),
        vec!["no client certificate".to_owned()]
    );
}

/// Bad identities are ConfigErrors at build, naming the problem without the
/// key.
#[test]
fn bad_identities_are_refused_at_build() {
    let pki = Pki::new();
    let identity = pki.issue(CLIENT, &[]);
    let other = pki.issue("other", &[]);
    let build = |cert: &str, key: &str| {
        OAuthLayer::builder()
            .token_url("https://idp.example.com/token")
            .client_id(CLIENT)
            .client_auth(ClientAuth::TlsClientAuth)
            .client_identity(cert, key)
            .build()
            .unwrap_err()
    };
    let key_line = identity.key_pem.lines().nth(1).unwrap().to_owned();
    for (cert, key, expected) in [
        (
            identity.key_pem.as_str(),
            identity.key_pem.as_str(),
            "no certificate",
        ),
        (
            identity.cert_pem.as_str(),
            identity.cert_pem.as_str(),
            "a certificate without its key",
        ),
        ("", identity.key_pem.as_str(), "no certificate"),
        (
            identity.cert_pem.as_str(),
            other.key_pem.as_str(),
            "does the key belong to the certificate",
        ),
    ] {
        let err = build(cert, key);
        assert_eq!(err.kind(), ConfigErrorKind::InvalidKey, "{err}");
        assert!(err.to_string().contains(expected), "{expected}: {err}");
        assert!(!err.to_string().contains(&key_line), "{err}");
    }
    // TlsClientAuth without any certificate.
    let err = OAuthLayer::builder()
        .token_url("https://idp.example.com/token")
        .client_id(CLIENT)
        .client_auth(ClientAuth::TlsClientAuth)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("client_identity"), "{err}");
    // TLS settings with a transport of one's own, which would ignore them.
    let err = OAuthLayer::builder()
        .token_url("https://idp.example.com/token")
        .client_id(CLIENT)
        .client_secret("s")
        .root_certificates(&pki.ca_pem)
        .transport(support::hyper_client())
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
}
