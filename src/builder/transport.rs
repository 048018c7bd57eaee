//! The builder's settings: what carries the token request.

use crate::support::boxed::BoxError;
use crate::transport::TowerTransport;
use bytes::Bytes;
use std::sync::Arc;
use tower_service::Service;

use super::OAuthLayerBuilder;

/// What carries the token request: the built-in reqwest transport with its
/// TLS and proxy settings, or any Tower service of your own.
impl OAuthLayerBuilder {
    /// Carries the token request over `service` instead of the built-in reqwest
    /// client. It may be a hyper-util client with your TLS settings, or a stack
    /// with your own retries and proxies. With `default-features = false`, so
    /// without reqwest, this is how tokens are fetched.
    ///
    /// The service gets a `POST` whose body converts from [`Bytes`]. So
    /// `http_body_util::Full<Bytes>` and `reqwest::Body` work. The service must
    /// not follow redirects, and hyper-util's client does not. Its response
    /// body is read up to 64 KiB. [`fetch_timeout`](Self::fetch_timeout) bounds
    /// the whole exchange.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body_util::Full;
    /// use hyper_util::{client::legacy::Client, rt::TokioExecutor};
    /// use tower_oauth::OAuthLayer;
    ///
    /// let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    /// let oauth = OAuthLayer::builder()
    ///     .auth_url("http://127.0.0.1:8080")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .transport(http.clone())
    ///     .build()
    ///     .unwrap();
    /// ```
    ///
    /// Default: reqwest, with feature `reqwest`, following no redirects.
    pub fn transport<S, ReqB, ResB>(mut self, service: S) -> Self
    where
        S: Service<http::Request<ReqB>, Response = http::Response<ResB>> + Clone + Send + 'static,
        S::Future: Send,
        S::Error: Into<BoxError>,
        ReqB: From<Bytes> + Send + 'static,
        ResB: http_body::Body + Send + 'static,
        ResB::Data: Send,
        ResB::Error: Into<BoxError>,
    {
        self.transport = Some(Arc::new(TowerTransport::new(service)));
        self
    }

    /// The client certificate and private key that the built-in transport
    /// presents to the token endpoint, for mutual TLS by RFC 8705. The
    /// certificate is a chain in PEM, the client's own first. The key is in
    /// PEM.
    ///
    /// It authenticates the client with
    /// [`ClientAuth::TlsClientAuth`](crate::client_auth::ClientAuth::TlsClientAuth).
    /// Discovery chooses that when no secret is given and the server lists
    /// `tls_client_auth` or `self_signed_tls_client_auth`. It also lets the
    /// server bind tokens to the certificate, in `cnf.x5t#S256`, with any
    /// client authentication. With [`issuer`](Self::issuer), the metadata's
    /// `mtls_endpoint_aliases.token_endpoint` is used when it has one.
    ///
    /// Certificate-bound tokens are accepted only from a client that presents
    /// the same certificate. So give the API client the same identity, as the
    /// [credentials guide](crate::docs::credentials)'s "Mutual TLS" and the
    /// `mtls` example show. A transport of your own, given with
    /// [`transport`](Self::transport), brings its own TLS configuration
    /// instead.
    ///
    /// Default: none, so no client certificate.
    #[cfg(feature = "reqwest")]
    pub fn client_identity(
        mut self,
        cert_chain_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Self {
        self.tls.identity = Some((cert_chain_pem.as_ref().to_vec(), key_pem.as_ref().to_vec()));
        self
    }

    /// Certificate authorities, in PEM, one or more, that the built-in
    /// transport trusts for the token endpoint. It trusts them besides the
    /// web's webpki roots. Use it for an identity provider behind a private CA.
    /// It can be given more than once.
    ///
    /// Default: none, so the web's roots only.
    #[cfg(feature = "reqwest")]
    pub fn root_certificates(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.tls.roots.push(pem.as_ref().to_vec());
        self
    }

    /// Whether the built-in transport sends token requests through the proxies
    /// the environment names. These are `HTTPS_PROXY`, `HTTP_PROXY` and
    /// `ALL_PROXY`, or their lowercase forms. Requests to the hosts `NO_PROXY`
    /// lists go direct. `NO_PROXY` lists names with their subdomains, IP
    /// addresses and ranges, or `*` for all. A loopback token endpoint is never
    /// reached through a proxy: `localhost`, `127.0.0.0/8` and `::1`. So the
    /// secret stays on the machine.
    ///
    /// Default: `true`, so the environment's proxies, by the `NO_PROXY` rules.
    #[cfg(feature = "reqwest")]
    pub fn proxy_from_env(mut self, on: bool) -> Self {
        self.tls.env_proxy = on;
        self
    }
}
