//! Mutual TLS (RFC 8705): the layer authenticates to the token endpoint
//! with a client certificate (`tls_client_auth`), the endpoint binds the
//! token to that certificate, and the API client presents the same
//! certificate so the API accepts the token.
//!
//! ```text
//! cargo run --example mtls
//! ```
//!
//! Makes a throwaway certificate authority, a client certificate and a TLS
//! token endpoint and API on 127.0.0.1; needs no configuration. With real
//! credentials, read the PEM files instead (`std::fs::read`).

#[path = "../tests/support/mtls.rs"]
mod mtls;
#[path = "../tests/support/serve.rs"]
mod serve;
#[path = "../tests/support/tally.rs"]
mod tally;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{client_auth::ClientAuth, OAuthLayer};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let pki = mtls::Pki::new();
    let authority = mtls::MtlsAuthority::start(&pki).await;
    // The client's certificate, registered with the authorization server.
    let identity = pki.issue("orders-service", &[]);
    authority.register("orders-service", &identity);

    // 1. The layer presents the certificate to the token endpoint.
    let oauth = OAuthLayer::builder()
        .token_url(authority.token_url())
        .client_id("orders-service")
        .client_auth(ClientAuth::TlsClientAuth)
        .client_identity(&identity.cert_pem, &identity.key_pem)
        // Only because this authority's CA is private; drop for a public one.
        .root_certificates(&pki.ca_pem)
        .build()?;

    // 2. The API client presents the same certificate: a certificate-bound
    //    token is accepted only over a connection with it. Here hyper-util
    //    over hyper-rustls with a rustls ClientConfig built from the same
    //    two PEM files (`with_client_auth_cert`); with reqwest, give
    //    `reqwest::Identity::from_pem(key + cert)` to `ClientBuilder::identity`.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(pki.client_config(&identity))
        .https_only()
        .enable_http1()
        .build();
    let api = Client::builder(TokioExecutor::new()).build::<_, Full<Bytes>>(https);
    let client = ServiceBuilder::new().layer(oauth.clone()).service(api);

    for n in 1..=3 {
        let request = http::Request::get(authority.api_url()).body(Full::default())?;
        let response = client.clone().oneshot(request).await?;
        println!("request {n}: {}", response.status());
        if response.status() != 200 {
            return Err(format!("the API refused request {n}: {:?}", authority.refusals()).into());
        }
    }
    let bindings = authority.bindings();
    println!(
        "token requests: {}; the token is bound to the certificate (cnf.x5t#S256 {}): {}",
        authority.token_requests(),
        bindings[0],
        bindings[0] == identity.thumbprint()
    );
    if authority.token_requests() != 1 || bindings[0] != identity.thumbprint() {
        return Err("expected one token, bound to the client's certificate".into());
    }
    Ok(())
}
