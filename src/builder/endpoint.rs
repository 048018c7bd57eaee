//! The builder's settings: where tokens come from: the token endpoint.

use super::OAuthLayerBuilder;

/// The token endpoint: by the product-information API's base URL, by its own URL, or
/// discovered from an issuer; and whether plain `http` may reach it.
impl OAuthLayerBuilder {
    /// The base URL of the authorization service. The token endpoint is
    /// `{auth_url}/v1/oauth/accesstoken`, and a trailing slash does not double.
    /// Give this or [`token_url`](Self::token_url), not both.
    ///
    /// Default: none.
    pub fn auth_url(mut self, auth_url: impl AsRef<str>) -> Self {
        self.auth_url = Some(auth_url.as_ref().to_owned());
        self
    }

    /// The full URL of the token endpoint, used exactly as given. No query
    /// parameters are added. Give this or [`auth_url`](Self::auth_url), not
    /// both.
    ///
    /// Default: none.
    pub fn token_url(mut self, token_url: impl AsRef<str>) -> Self {
        self.token_url = Some(token_url.as_ref().to_owned());
        self
    }

    /// The issuer to discover the token endpoint from, for standard OAuth 2.0
    /// and OpenID Connect servers. The issuer is the authorization server's
    /// identifier. Its metadata is read from
    /// `/.well-known/oauth-authorization-server`, by RFC 8414, with the
    /// issuer's path after it. Failing that, it is read from
    /// `/.well-known/openid-configuration`, by OpenID Connect Discovery. It is
    /// read when the first token is needed, in the same fetch, with the same
    /// timeout, size cap and back-off.
    ///
    /// The metadata's `issuer` must be identical to this value. An empty path
    /// and `/` count as the same. Its `token_endpoint` is used. Its
    /// `token_endpoint_auth_methods_supported` chooses the client
    /// authentication, unless [`client_auth`](Self::client_auth) says
    /// otherwise: HTTP Basic when it lists it or lists nothing, else a form
    /// body. The metadata is kept. It is read again after a failure, or when
    /// the token endpoint answers as if it moved: a 404, a 405 or a redirect.
    /// Give this, [`token_url`](Self::token_url) or
    /// [`auth_url`](Self::auth_url).
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

    /// The API this layer's tokens are for, by its resource identifier. The
    /// layer reads what the API says of itself in its RFC 9728
    /// protected-resource metadata, at
    /// `{origin}/.well-known/oauth-protected-resource{path}`. It reads it when
    /// the first token is needed, in the token fetch, with its timeout, size
    /// cap and back-off. No redirect is followed. It takes from the metadata:
    ///
    /// - The authorization server, among its `authorization_servers`, by the
    ///   trust rule of [`trusted_issuers`](Self::trusted_issuers). That
    ///   server's token endpoint and client authentication are then discovered
    ///   as with [`issuer`](Self::issuer).
    /// - `resource`, sent as the RFC 8707 `resource` parameter of every token
    ///   request.
    /// - `scopes_supported`, requested as the `scope` when the layer has none
    ///   of its own.
    /// - `dpop_bound_access_tokens_required` and
    ///   `tls_client_certificate_bound_access_tokens`. The layer must then have
    ///   a [DPoP key](Self::dpop) or a [client
    ///   certificate](Self::client_identity). Otherwise its token requests fail
    ///   with
    ///   [`TokenErrorKind::Configuration`](crate::TokenErrorKind::Configuration),
    ///   naming the setting, instead of fetching a token the API would refuse.
    ///
    /// The metadata's `resource` must be identical to `url`. An empty path and
    /// `/` count as the same, as for issuers. Otherwise nothing in it is used,
    /// and the fetch fails with a message naming both.
    ///
    /// The metadata is kept for an hour. It is read again sooner after a token
    /// request the server refused. It is also read again when the API refuses a
    /// token with a challenge naming its metadata, in `resource_metadata` by
    /// RFC 9728 section 5.1. It is read there if that is on the resource's own
    /// origin, at most once per 10 seconds. The reading happens in the fetch,
    /// so it never holds up a request that has a usable token. See
    /// [`OAuthLayer::resource_metadata`](crate::OAuthLayer::resource_metadata).
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::{Algorithm, ClientAuth, SigningKey}};
    ///
    /// # let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIL4vcREMaCdcc23IpMLEj8G1E4riNufMcCy2f9FRUTr8\n-----END PRIVATE KEY-----\n";
    /// let key = SigningKey::from_pem(pem, Algorithm::EdDsa)?.key_id("client-key-1");
    /// // The API names its authorization server; a signed assertion (bound
    /// // to that server by its `aud`) may go to the one it names.
    /// let oauth = OAuthLayer::builder()
    ///     .protected_resource("https://mcp.example.com/mcp")
    ///     .client_id("reporting-agent")
    ///     .client_auth(ClientAuth::PrivateKeyJwt(key))
    ///     .build()?;
    /// assert_eq!(oauth.protected_resource(), Some("https://mcp.example.com/mcp"));
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Give this instead of [`token_url`](Self::token_url) and
    /// [`auth_url`](Self::auth_url). With [`issuer`](Self::issuer), the
    /// resource must name that issuer.
    ///
    /// Default: none.
    pub fn protected_resource(mut self, url: impl AsRef<str>) -> Self {
        self.resource_url = Some(url.as_ref().to_owned());
        self
    }

    /// Protected resources that get tokens of their own. A request whose URL
    /// lies under one of them gets that resource's token: the same scheme, host
    /// and port, and its path or below. The token comes from its own [token
    /// slot](Self::max_token_slots), with its own metadata, `resource` and
    /// scopes. It has its own authorization server, by the trust rule of
    /// [`trusted_issuers`](Self::trusted_issuers). All is read as for
    /// [`protected_resource`](Self::protected_resource).
    ///
    /// Other requests get the layer's default token. With no
    /// [`issuer`](Self::issuer), [`token_url`](Self::token_url),
    /// [`auth_url`](Self::auth_url) or `protected_resource`, the layer has
    /// none. Such a request then fails alone with
    /// [`TokenErrorKind::Configuration`](crate::TokenErrorKind::Configuration),
    /// without being sent. This suits a gateway, or an agent that talks to
    /// several MCP servers.
    ///
    /// ```
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .protected_resources([
    ///         "https://tickets.example.com/mcp",
    ///         "https://wiki.example.com/mcp",
    ///     ])
    ///     .trusted_issuers(["https://login.example.com"])
    ///     .client_id("agent-host")
    ///     .client_secret("secret")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    ///
    /// Default: none.
    pub fn protected_resources<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.resource_urls = urls
            .into_iter()
            .map(|url| url.as_ref().to_owned())
            .collect();
        self
    }

    /// The authorization servers this client may request tokens from for a
    /// [protected resource](Self::protected_resource). They are issuer
    /// identifiers, compared exactly. The first server the resource lists that
    /// is also here is taken. If there is none, the token request fails with
    /// [`TokenErrorKind::Configuration`](crate::TokenErrorKind::Configuration),
    /// and nothing is sent.
    ///
    /// A hostile or compromised API could name a server of its own. Hence the
    /// trust rule:
    ///
    /// - With [`issuer`](Self::issuer), that server only, and the resource must
    ///   name it.
    /// - Else with `trusted_issuers`, the first of them the resource names.
    /// - Else the first server the resource names, and only for credentials
    ///   that server cannot replay elsewhere. These are `private_key_jwt`
    ///   without [`assertion_audience`](Self::assertion_audience), whose
    ///   assertion's `aud` is that server, and mutual TLS. Other credentials go
    ///   only to a server named here or with `issuer`: a client secret, sent
    ///   with Basic, in a form body, in the product-information API's body or
    ///   as `client_secret_jwt`; an assertion file; a JWT-bearer grant; a token
    ///   exchange. [`build`](Self::build) refuses them otherwise. See
    ///   `SECURITY.md`.
    ///
    /// Default: none.
    pub fn trusted_issuers<I, S>(mut self, issuers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.trusted_issuers = issuers
            .into_iter()
            .map(|issuer| issuer.as_ref().to_owned())
            .collect();
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
