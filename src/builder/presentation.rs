//! The builder's settings: how a token is presented on a request.

use http::HeaderName;

use super::OAuthLayerBuilder;

/// How a token goes on a request: the header, its scheme, and whether a
/// caller's own header is kept. Also DPoP, which binds tokens to a key.
impl OAuthLayerBuilder {
    /// The request header that carries the token, for APIs that want, say,
    /// `X-Access-Token`.
    ///
    /// ```
    /// use http::HeaderName;
    /// use tower_oauth::OAuthLayer;
    ///
    /// // Requests get `X-Access-Token: <token>`.
    /// let oauth = OAuthLayer::builder()
    ///     .auth_url("https://auth.example.com")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .header_name(HeaderName::from_static("x-access-token"))
    ///     .auth_scheme("")
    ///     .build()
    ///     .unwrap();
    /// ```
    ///
    /// Default: `Authorization`.
    pub fn header_name(mut self, name: HeaderName) -> Self {
        self.header_name = Some(name);
        self
    }

    /// The scheme written before the token in the header. Empty for the bare
    /// token, as in `X-Access-Token: <token>`. The token endpoint's
    /// `token_type`, such as `bearer` or `BearerToken`, does not change it.
    ///
    /// Default: `Bearer`.
    pub fn auth_scheme(mut self, scheme: impl Into<String>) -> Self {
        self.auth_scheme = Some(scheme.into());
        self
    }

    /// Whether a request that already has the token header keeps it, rather
    /// than having it replaced. Such a request is sent without waiting for a
    /// token.
    ///
    /// Default: false, so the header is replaced.
    pub fn keep_existing_header(mut self, keep: bool) -> Self {
        self.keep_existing_header = keep;
        self
    }

    /// Binds tokens to `key` with DPoP, by RFC 9449. Each token request carries
    /// a proof of the key. The token endpoint must answer with a `DPoP` token,
    /// bound to the key's thumbprint. Every request through the layer carries
    /// `Authorization: DPoP <token>` and a fresh `DPoP` proof for its method
    /// and URI. So requests need absolute URIs. One without scheme and host
    /// fails with [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest).
    /// With tonic, build the client with `with_origin`.
    ///
    /// The token endpoint or an API may demand nonces with `use_dpop_nonce`.
    /// The layer keeps them per origin and sends them. A `401` that asks for
    /// one leaves the token alone, and
    /// [`RetryUnauthorized`](crate::RetryUnauthorized) resends the request with
    /// a new proof.
    ///
    /// Tokens are shared through a [`token_store`](Self::token_store) only
    /// among replicas with the same key, since its thumbprint is part of the
    /// store's key. So replicas that should share tokens read one key from a
    /// file, with [`DpopKey::from_pem`](crate::dpop::DpopKey::from_pem).
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::Algorithm, dpop::DpopKey};
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.example.com/oauth2/token")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .dpop(DpopKey::generate(Algorithm::Es256)?)
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    ///
    /// Default: none, bearer tokens.
    pub fn dpop(mut self, key: crate::dpop::DpopKey) -> Self {
        self.dpop = Some(key);
        self
    }

    /// Whether a bearer token is taken from a token endpoint that ignores
    /// the DPoP proof. It is then sent as `Authorization: Bearer`, without
    /// proofs, and a warning is logged at each token request. Without it
    /// such an answer is an
    /// [`InvalidResponse`](crate::TokenErrorKind::InvalidResponse) error
    /// that says so.
    ///
    /// Default: `false`. The layer is strict: with DPoP, it sends only bound
    /// tokens.
    pub fn dpop_allow_bearer(mut self, allow: bool) -> Self {
        self.dpop_allow_bearer = allow;
        self
    }
}
