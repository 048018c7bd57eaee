//! The builder's settings of grants other than client credentials.

use std::sync::Arc;

use super::OAuthLayerBuilder;
use crate::endpoint::Grant;
use crate::endpoint::JwtBearer;
use crate::endpoint::TokenExchange;

impl OAuthLayerBuilder {
    /// Token requests use the JWT-bearer grant (RFC 7523 section 2.1)
    /// instead of client credentials: each carries `grant` as a fresh
    /// signed `assertion` (or one read from a file). The token endpoint is
    /// the one given with [`token_url`](Self::token_url) or
    /// [`issuer`](Self::issuer), else the grant's own
    /// ([`JwtBearer::token_url`], a Google key file's `token_uri`). The
    /// client id is optional (sent when given); without a client secret
    /// the client authentication is [`ClientAuth::None`](crate::ClientAuth::None),
    /// with one as usual. `scope` and the other parameters go in the body,
    /// but for a grant that puts the scope
    /// [in its assertion](JwtBearer::scope_in_assertion). Not with
    /// [`auth_url`](Self::auth_url): the specification's endpoint takes
    /// client credentials only.
    ///
    /// Default: client credentials.
    ///
    /// ```
    /// use tower_oauth::{Algorithm, JwtBearer, OAuthLayer, SigningKey};
    ///
    /// # let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIL4vcREMaCdcc23IpMLEj8G1E4riNufMcCy2f9FRUTr8\n-----END PRIVATE KEY-----\n";
    /// let key = SigningKey::from_pem(pem, Algorithm::EdDsa)?;
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.example.com/oauth2/token")
    ///     .jwt_bearer(JwtBearer::signed(key, "reporting-service").subject("reports@example.com"))
    ///     .scope("reports:read")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn jwt_bearer(mut self, grant: JwtBearer) -> Self {
        self.grant = Grant::JwtBearer(Arc::new(grant));
        self
    }

    /// Token requests use token exchange (RFC 8693) instead of client
    /// credentials: each trades the exchange's subject token, asked afresh,
    /// for a token of this layer's, with the builder's `audience`,
    /// `resource` and `scope` (and a token slot's
    /// [`TokenParams`](crate::TokenParams)). The client id is optional
    /// (sent when given); without a client secret the client authentication
    /// is [`ClientAuth::None`](crate::ClientAuth::None), with one as usual.
    /// Not with [`auth_url`](Self::auth_url).
    ///
    /// Default: client credentials.
    pub fn token_exchange(mut self, exchange: TokenExchange) -> Self {
        self.grant = Grant::TokenExchange(Arc::new(exchange));
        self
    }
}
