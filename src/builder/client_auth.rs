//! The builder's settings: how the client proves itself, and with which grant.

use crate::endpoint::ClientAuth;
use crate::endpoint::Grant;
use crate::endpoint::IdentityAssertion;
use crate::endpoint::JwtBearer;
use crate::endpoint::RefreshToken;
use crate::endpoint::SecretSource;
use crate::endpoint::TokenExchange;
use crate::support::boxed::BoxError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::OAuthLayerBuilder;

/// How the client proves itself: its id and secret (fixed, or read again
/// when rotated), the client authentication method and its assertions; and
/// the grant, when it is not client credentials.
impl OAuthLayerBuilder {
    /// The client identifier. It is sent unencoded, as the product-information API
    /// says, so it may not contain `&`, whitespace or control characters.
    ///
    /// Default: none.
    pub fn client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }

    /// The client secret. Sent unencoded, like the id, with the same
    /// restrictions. It never appears in `Debug`, `Display`, errors or logs.
    ///
    /// Default: none.
    pub fn client_secret(mut self, client_secret: impl Into<String>) -> Self {
        self.client_secret = Some(client_secret.into());
        self
    }

    /// The client secret is the content of this file (white space at its
    /// ends trimmed), read at [`build`](Self::build) and read again
    /// whenever the token endpoint refuses the client (401 or 403, or 400
    /// `invalid_client`): when the file then holds another secret, the
    /// token request is sent again at once with it, and the old secret is
    /// dropped. A secret rotated by a vault agent or a mounted Kubernetes
    /// secret is thus taken without a restart, after one refusal. In place
    /// of [`client_secret`](Self::client_secret), with the same
    /// restrictions for the chosen [`ClientAuth`].
    ///
    /// A file that cannot be read at build, or is empty, is a
    /// [`ConfigError`](crate::ConfigError) naming the file (never its
    /// content); one that cannot be read later keeps the secret in use, and
    /// a warning names the file. With a token store, tokens are sealed only
    /// under an [`encryption_key`](crate::RedisStore::encryption_key) of
    /// yours: a secret that changes cannot be the replicas' common key.
    ///
    /// Default: none.
    ///
    /// ```no_run
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/oauth2/token")
    ///     .client_id("orders-service")
    ///     .client_secret_file("/var/run/secrets/orders/client-secret")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn client_secret_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.secret_source = Some(SecretSource::File(path.into()));
        self
    }

    /// The client secret is what `read` returns, called at
    /// [`build`](Self::build) and again whenever the token endpoint refuses
    /// the client, as for [`client_secret_file`](Self::client_secret_file):
    /// for a secret kept by your own code (a vault client's cache). `read`
    /// runs on a blocking thread, never on the runtime's. Its error's text
    /// goes into messages, so keep the secret out of it.
    ///
    /// Default: none.
    ///
    /// ```
    /// use std::sync::{Arc, RwLock};
    /// use tower_oauth::OAuthLayer;
    ///
    /// let current = Arc::new(RwLock::new(String::from("s3cret")));
    /// let secret = Arc::clone(&current);
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/oauth2/token")
    ///     .client_id("orders-service")
    ///     .client_secret_fn(move || Ok(secret.read().unwrap().clone()))
    ///     .build()?;
    /// // Later, your vault watcher: *current.write().unwrap() = new_secret;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn client_secret_fn(
        mut self,
        read: impl Fn() -> Result<String, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.secret_source = Some(SecretSource::Fn(std::sync::Arc::new(read)));
        self
    }

    /// How the client authenticates to the token endpoint: the
    /// product-information API's unencoded body, a form-urlencoded body, or HTTP Basic
    /// (percent-encoded, or as it is).
    ///
    /// Default: by how the endpoint was given (see [`ClientAuth`]):
    /// [`ClientAuth::UnencodedBody`] with [`auth_url`](Self::auth_url),
    /// [`ClientAuth::Basic`] with [`token_url`](Self::token_url).
    pub fn client_auth(mut self, client_auth: ClientAuth) -> Self {
        self.client_auth = Some(client_auth);
        self
    }

    /// The client proves itself with `private_key_jwt`, its key the private
    /// key in this PEM file (PKCS #8, PKCS #1 or SEC 1, for `algorithm`;
    /// `key_id` its `kid`), read at [`build`](Self::build) and read again
    /// whenever the token endpoint refuses the client, as for
    /// [`client_secret_file`](Self::client_secret_file): a key rotated on
    /// disk (a new PEM, registered at the server) is taken after one
    /// refusal, without a restart. A file that then no longer holds a usable
    /// key keeps the key in use, and a warning names the file. In place of
    /// [`client_auth`](Self::client_auth)`(ClientAuth::PrivateKeyJwt(..))`.
    ///
    /// Default: none.
    ///
    /// ```no_run
    /// use tower_oauth::{Algorithm, OAuthLayer};
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .issuer("https://login.example.com")
    ///     .client_id("orders-service")
    ///     .private_key_file("/var/run/secrets/orders/client-key.pem", Algorithm::Es256, Some("key-2026"))
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn private_key_file(
        mut self,
        path: impl Into<PathBuf>,
        algorithm: crate::keys::Algorithm,
        key_id: Option<&str>,
    ) -> Self {
        self.secret_source = Some(SecretSource::File(path.into()));
        self.key_file = Some((algorithm, key_id.map(str::to_owned)));
        self
    }

    /// The `aud` of the client assertions of
    /// [`ClientAuth::PrivateKeyJwt`] and [`ClientAuth::ClientSecretJwt`]:
    /// set, it is the only one sent.
    ///
    /// Default: with [`issuer`](Self::issuer), the issuer identifier (what
    /// the 2026 update of RFC 7523 asks for), and after a refusal of it, once,
    /// the token endpoint's URL (what RFC 7523, OpenID Connect Core section 9
    /// and many servers expect); the one the server took goes first for the
    /// rest of the layer's life. Without an issuer, the token endpoint's URL.
    /// Both are safe: each names the very server the assertion is sent to,
    /// which is what the update is after (see `SECURITY.md`).
    pub fn assertion_audience(mut self, audience: impl Into<String>) -> Self {
        self.assertion_audience = Some(audience.into());
        self
    }

    /// How long a client assertion is valid after it is made (`exp - iat`).
    /// Between 1 second and 1 hour. Each token request makes a new one.
    ///
    /// Default: [`DEFAULT_ASSERTION_LIFETIME`](crate::DEFAULT_ASSERTION_LIFETIME)
    /// (60 s).
    pub fn assertion_lifetime(mut self, lifetime: Duration) -> Self {
        self.assertion_lifetime = Some(lifetime);
        self
    }

    /// How far the client assertions' `iat` and `nbf` lie before the moment
    /// each is made, so that a token endpoint whose clock runs that much
    /// behind takes them; `exp` stays
    /// [`assertion_lifetime`](Self::assertion_lifetime) after that moment. At
    /// most 5 minutes.
    ///
    /// Default: [`DEFAULT_ASSERTION_CLOCK_SKEW`](crate::DEFAULT_ASSERTION_CLOCK_SKEW)
    /// (5 s).
    pub fn assertion_clock_skew(mut self, skew: Duration) -> Self {
        self.assertion_clock_skew = Some(skew);
        self
    }

    /// The `typ` header of client assertions, or `None` to send none (for a
    /// server that refuses a `typ` it does not know).
    ///
    /// Default: `Some(`[`CLIENT_AUTHENTICATION_JWT_TYPE`](crate::CLIENT_AUTHENTICATION_JWT_TYPE)`)`,
    /// `client-authentication+jwt`: the explicit type the 2026 update of RFC
    /// 7523 recommends, which servers that predate it ignore.
    pub fn assertion_typ(mut self, typ: Option<&str>) -> Self {
        self.assertion_typ = Some(typ.map(str::to_owned));
        self
    }

    /// Token requests use the JWT-bearer grant (RFC 7523 section 2.1)
    /// instead of client credentials: each carries `grant` as a fresh
    /// signed `assertion` (or one read from a file). The token endpoint is
    /// the one given with [`token_url`](Self::token_url) or
    /// [`issuer`](Self::issuer), else the grant's own
    /// ([`JwtBearer::token_url`], a Google key file's `token_uri`). The
    /// client id is optional (sent when given). Without a client secret
    /// the client authentication is [`ClientAuth::None`],
    /// with one as usual. `scope` and the other parameters go in the body,
    /// but for a grant that puts the scope
    /// [in its assertion](JwtBearer::scope_in_assertion). Not with
    /// [`auth_url`](Self::auth_url): the product-information API's token endpoint takes
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
    /// (sent when given). Without a client secret the client authentication
    /// is [`ClientAuth::None`], with one as usual.
    /// Not with [`auth_url`](Self::auth_url).
    ///
    /// Default: client credentials.
    pub fn token_exchange(mut self, exchange: TokenExchange) -> Self {
        self.grant = Grant::TokenExchange(Arc::new(exchange));
        self
    }

    /// Enterprise-managed authorization (MCP's SEP-990, ID-JAG): each token
    /// request exchanges an ID token at the identity provider for an
    /// ID-JAG made for the authorization server the
    /// [protected resource](Self::protected_resource) names, then presents
    /// it with the JWT-bearer grant and this layer's client authentication.
    /// See [`IdentityAssertion`]. Needs
    /// [`protected_resource`](Self::protected_resource),
    /// [`protected_resources`](Self::protected_resources) or
    /// [`issuer`](Self::issuer) (the ID-JAG's audience is the server's
    /// issuer); not with another grant.
    ///
    /// Default: none (client credentials).
    pub fn identity_assertion(mut self, settings: IdentityAssertion) -> Self {
        self.id_jag = Some(settings);
        self
    }

    /// Token requests use the refresh token grant (RFC 6749 section 6):
    /// each sends `grant_type=refresh_token` and the chain's current
    /// refresh token, with the layer's client authentication (a public
    /// client: [`client_id`](Self::client_id) and no secret, which makes
    /// it [`ClientAuth::None`]), `scope` (a narrower one than the login's),
    /// `resource`, `audience` and parameters. A new refresh token in an
    /// answer replaces the current one everywhere the chain is kept: the
    /// layer, its token slots (which refresh one at a time), and the
    /// [token store](Self::token_store) ([`FileStore`](crate::FileStore)
    /// for the processes of one machine, `RedisStore` for a fleet). A
    /// refused refresh token ends the chain:
    /// [`TokenErrorKind::LoginRequired`](crate::TokenErrorKind::LoginRequired)
    /// until [`OAuthLayer::replace_refresh_token`](crate::OAuthLayer::replace_refresh_token).
    /// See the [refresh tokens guide](crate::docs::refresh_tokens). Not
    /// with [`auth_url`](Self::auth_url).
    ///
    /// Default: client credentials.
    ///
    /// ```
    /// use tower_oauth::{FileStore, OAuthLayer, RefreshToken};
    ///
    /// # let dir = std::env::temp_dir().join(format!("doc-refresh-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let oauth = OAuthLayer::builder()
    ///     .issuer("https://login.example.com")
    ///     .client_id("my-cli")
    ///     .refresh_token(RefreshToken::new("refresh-token-from-the-login"))
    ///     .scope("read")
    ///     .token_store(FileStore::new(dir.join("tokens"))?)
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn refresh_token(mut self, token: RefreshToken) -> Self {
        self.grant = Grant::Refresh(token.chain);
        self
    }
}
