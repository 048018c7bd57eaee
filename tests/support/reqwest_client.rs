//! A reqwest client as the crate builds its own: rustls with ring, no
//! process-wide crypto provider (plain `http` on loopback, for the tests
//! and benchmarks).
#![allow(dead_code, unreachable_pub)]

/// The client; no roots are trusted, since nothing here speaks TLS.
pub fn reqwest_client() -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .build()
        .unwrap()
}
