//! The builder's settings: where tokens come from: the token endpoint.

use super::OAuthLayerBuilder;

/// The token endpoint: by the specification's base URL, by its own URL, or
/// discovered from an issuer; and whether plain `http` may reach it.
impl OAuthLayerBuilder {
    /// The base URL of the authorization service; the token endpoint is
    /// `{auth_url}/v1/oauth/accesstoken` (a trailing slash does not double).
    /// Give this or [`token_url`](Self::token_url), not both.
    ///
    /// Default: none.
    pub fn auth_url(mut self, auth_url: impl AsRef<str>) -> Self {
        self.auth_url = Some(auth_url.as_ref().to_owned());
        self
    }

    /// The full URL of the token endpoint, used exactly as given (no query
    /// parameters are added). Give this or [`auth_url`](Self::auth_url), not
    /// both.
    ///
    /// Default: none.
    pub fn token_url(mut self, token_url: impl AsRef<str>) -> Self {
        self.token_url = Some(token_url.as_ref().to_owned());
        self
    }

    /// The issuer (authorization server identifier) to discover the token
    /// endpoint from, for standard OAuth 2.0 and OpenID Connect servers: its
    /// metadata is read from `/.well-known/oauth-authorization-server` (RFC
    /// 8414, with the issuer's path after it) or else
    /// `/.well-known/openid-configuration` (OpenID Connect Discovery) when
    /// the first token is needed, in the same fetch, with the same timeout,
    /// size cap and back-off. The metadata's `issuer` must be identical to
    /// this value; its `token_endpoint` is used, and its
    /// `token_endpoint_auth_methods_supported` chooses the client
    /// authentication (HTTP Basic when it lists it or lists nothing, else a
    /// form body) unless [`client_auth`](Self::client_auth) says otherwise.
    /// The metadata is kept, and read again after a failure or when the
    /// token endpoint answers as if it moved (404, 405, a redirect). Give this,
    /// [`token_url`](Self::token_url) or [`auth_url`](Self::auth_url).
    ///
    /// ```
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .issuer("https://login.example.com/realms/main")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(oauth.issuer(), Some("https://login.example.com/realms/main"));
    /// ```
    ///
    /// Default: none.
    pub fn issuer(mut self, issuer: impl AsRef<str>) -> Self {
        self.issuer = Some(issuer.as_ref().to_owned());
        self
    }

    /// Allows a plain `http` token URL to a host that is not loopback. The
    /// client secret then crosses the network unencrypted: only for networks
    /// you trust. `http` to `localhost`, `127.0.0.0/8` or `::1` is always
    /// allowed.
    ///
    /// Default: false.
    pub fn allow_insecure_http(mut self, allow: bool) -> Self {
        self.allow_insecure_http = allow;
        self
    }
}
