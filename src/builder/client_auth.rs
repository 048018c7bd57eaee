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

/// How the client proves itself: its id and secret, fixed or read again when
/// rotated, the client authentication method and its assertions. Also the
/// grant, when it is not client credentials.
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

    /// The client secret is the content of this file, with white space at its
    /// ends trimmed. It is read at [`build`](Self::build). It is read again
    /// whenever the token endpoint refuses the client: a 401 or 403, or a 400
    /// with `invalid_client`. When the file then holds another secret, the
    /// token request is sent again at once with it, and the old secret is
    /// dropped. So a secret that a vault agent or a mounted Kubernetes secret
    /// rotates is taken without a restart, after one refusal. This takes the
    /// place of [`client_secret`](Self::client_secret), with the same
    /// restrictions for the chosen [`ClientAuth`].
    ///
    /// A file that cannot be read at build, or is empty, is a
    /// [`ConfigError`](crate::ConfigError) that names the file, never its
    /// content. A file that cannot be read later keeps the secret in use, and a
    /// warning names the file. With a token store, tokens are sealed only under
    /// an [`encryption_key`](crate::store::RedisStore::encryption_key) of yours. A
    /// secret that changes cannot be the replicas' common key.
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

    /// The client secret is what `read` returns. It is called at
    /// [`build`](Self::build), and again whenever the token endpoint refuses
    /// the client, as for [`client_secret_file`](Self::client_secret_file). Use
    /// it for a secret your own code keeps, such as a vault client's cache.
    /// `read` runs on a blocking thread, never on the runtime's. Its error's
    /// text goes into messages, so keep the secret out of it.
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

    /// How the client authenticates to the token endpoint. The choices include
    /// the product-information API's unencoded body, a form-urlencoded body,
    /// and HTTP Basic, percent-encoded or as it is.
    ///
    /// Default: by how the endpoint was given, as [`ClientAuth`] says.
    /// [`ClientAuth::UnencodedBody`] with [`auth_url`](Self::auth_url), and
    /// [`ClientAuth::Basic`] with [`token_url`](Self::token_url).
    pub fn client_auth(mut self, client_auth: ClientAuth) -> Self {
        self.client_auth = Some(client_auth);
        self
    }

    /// The client proves itself with `private_key_jwt`, with the private key in
    /// this PEM file. The file holds PKCS #8, PKCS #1 or SEC 1, for
    /// `algorithm`. `key_id` is the key's `kid`. The file is read at
    /// [`build`](Self::build). It is read again whenever the token endpoint
    /// refuses the client, as for
    /// [`client_secret_file`](Self::client_secret_file). So a key rotated on
    /// disk, as a new PEM registered at the server, is taken after one refusal,
    /// without a restart. A file that then no longer holds a usable key keeps
    /// the key in use, and a warning names the file. This takes the place of
    /// [`client_auth`](Self::client_auth)`(ClientAuth::PrivateKeyJwt(..))`.
    ///
    /// Default: none.
    ///
    /// ```no_run
    /// use tower_oauth::{OAuthLayer, client_auth::Algorithm};
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

    /// The `aud` of the client assertions of [`ClientAuth::PrivateKeyJwt`] and
    /// [`ClientAuth::ClientSecretJwt`]. When set, it is the only one sent.
    ///
    /// Default: with [`issuer`](Self::issuer), the issuer identifier, which the
    /// 2026 update of RFC 7523 asks for. After a refusal of it, the layer tries
    /// the token endpoint's URL once, which RFC 7523, OpenID Connect Core
    /// section 9 and many servers expect. The one the server took goes first
    /// for the rest of the layer's life. Without an issuer, the default is the
    /// token endpoint's URL. Both are safe: each names the very server the
    /// assertion is sent to, which is what the update is after. `SECURITY.md`
    /// says more.
    pub fn assertion_audience(mut self, audience: impl Into<String>) -> Self {
        self.assertion_audience = Some(audience.into());
        self
    }

    /// How long a client assertion is valid after it is made: `exp - iat`.
    /// Between 1 second and 1 hour. Each token request makes a new one.
    ///
    /// Default: 60 s.
    pub fn assertion_lifetime(mut self, lifetime: Duration) -> Self {
        self.assertion_lifetime = Some(lifetime);
        self
    }

    /// How far the client assertions' `iat` and `nbf` lie before the moment
    /// each is made. A token endpoint whose clock runs that much behind then
    /// takes them. `exp` stays [`assertion_lifetime`](Self::assertion_lifetime)
    /// after that moment. At most 5 minutes.
    ///
    /// Default: 5 s.
    pub fn assertion_clock_skew(mut self, skew: Duration) -> Self {
        self.assertion_clock_skew = Some(skew);
        self
    }

    /// The `typ` header of client assertions, or `None` to send none. Send none
    /// to a server that refuses a `typ` it does not know.
    ///
    /// Default:
    /// `Some(`[`CLIENT_ASSERTION_TYP`](crate::client_auth::CLIENT_ASSERTION_TYP)`)`,
    /// that is `client-authentication+jwt`. The 2026 update of RFC 7523
    /// recommends this explicit type. Servers that predate it ignore it.
    pub fn assertion_typ(mut self, typ: Option<&str>) -> Self {
        self.assertion_typ = Some(typ.map(str::to_owned));
        self
    }

    /// Token requests use the JWT-bearer grant of RFC 7523 section 2.1, instead
    /// of client credentials. Each carries `grant` as a fresh signed
    /// `assertion`, or as one read from a file. The token endpoint is the one
    /// given with [`token_url`](Self::token_url) or [`issuer`](Self::issuer).
    /// Without either, it is the grant's own: [`JwtBearer::token_url`], or a
    /// Google key file's `token_uri`.
    ///
    /// The client id is optional, and sent when given. Without a client secret,
    /// the client authentication is [`ClientAuth::None`]. With one, it is as
    /// usual. `scope` and the other parameters go in the body, except for a
    /// grant that puts the scope [in its
    /// assertion](JwtBearer::scope_in_assertion). Not with
    /// [`auth_url`](Self::auth_url): the product-information API's token
    /// endpoint takes client credentials only.
    ///
    /// Default: client credentials.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::{Algorithm, SigningKey}, grant::JwtBearer};
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

    /// Token requests use token exchange, by RFC 8693, instead of client
    /// credentials. Each trades the exchange's subject token, asked afresh, for
    /// a token of this layer's. It sends the builder's `audience`, `resource`
    /// and `scope`, or a token slot's [`TokenParams`](crate::TokenParams). The
    /// client id is optional, and sent when given. Without a client secret, the
    /// client authentication is [`ClientAuth::None`]. With one, it is as usual.
    /// Not with [`auth_url`](Self::auth_url).
    ///
    /// Default: client credentials.
    pub fn token_exchange(mut self, exchange: TokenExchange) -> Self {
        self.grant = Grant::TokenExchange(Arc::new(exchange));
        self
    }

    /// Enterprise-managed authorization: MCP's SEP-990, with an ID-JAG. Each
    /// token request exchanges an ID token at the identity provider for an
    /// ID-JAG. The ID-JAG is made for the authorization server the [protected
    /// resource](Self::protected_resource) names. The request then presents it
    /// with the JWT-bearer grant and this layer's client authentication. See
    /// [`IdentityAssertion`].
    ///
    /// It needs [`protected_resource`](Self::protected_resource),
    /// [`protected_resources`](Self::protected_resources) or
    /// [`issuer`](Self::issuer), since the ID-JAG's audience is the server's
    /// issuer. Not with another grant.
    ///
    /// Default: none, so client credentials.
    pub fn identity_assertion(mut self, settings: IdentityAssertion) -> Self {
        self.id_jag = Some(settings);
        self
    }

    /// Token requests use the refresh token grant of RFC 6749 section 6. Each
    /// sends `grant_type=refresh_token` and the chain's current refresh token.
    /// It sends the layer's client authentication, `scope`, `resource`,
    /// `audience` and parameters. A public client gives
    /// [`client_id`](Self::client_id) and no secret, which makes it
    /// [`ClientAuth::None`]. A `scope` here asks for a narrower one than the
    /// login's.
    ///
    /// A new refresh token in an answer replaces the current one everywhere the
    /// chain is kept: in the layer, in its token slots, which refresh one at a
    /// time, and in the [token store](Self::token_store).
    /// [`FileStore`](crate::store::FileStore) keeps it for the processes of one
    /// machine, and `RedisStore` for a fleet. A refused refresh token ends the
    /// chain. Requests then fail with
    /// [`TokenErrorKind::LoginRequired`](crate::TokenErrorKind::LoginRequired)
    /// until
    /// [`OAuthLayer::replace_refresh_token`](crate::OAuthLayer::replace_refresh_token).
    /// See the [refresh tokens guide](crate::docs::refresh_tokens). Not with
    /// [`auth_url`](Self::auth_url).
    ///
    /// Default: client credentials.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, grant::RefreshToken, store::FileStore};
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

    /// Acts for a person, who logs in as `login` says: in the system browser, a
    /// user agent of yours, or on another device. The login's refresh token
    /// begins the layer's chain of refresh tokens, kept as
    /// [`refresh_token`](Self::refresh_token)'s is, in memory or in the token
    /// store. With `refresh_token` too, the chain begins with that one, and a
    /// login runs when it ends. See the [login guide](crate::login).
    ///
    /// The layer finds the authorization server from
    /// [`issuer`](Self::issuer) or [`protected_resource`](Self::protected_resource),
    /// not from a token URL. Its client is the [`client_id`](Self::client_id)
    /// given, with its secret if it has one. Without one, it is the
    /// [`client_metadata_url`](Self::client_metadata_url) where the server takes
    /// it, else a public client the layer registers (RFC 7591).
    ///
    /// Default: no login.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, login::Login};
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .protected_resource("https://mcp.example.com/mcp")
    ///     .client_id("my-cli")
    ///     .login(Login::browser())
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn login(mut self, login: crate::login::Login) -> Self {
        self.login = Some(login);
        self
    }

    /// The URL of this program's client metadata document, for a
    /// [`login`](Self::login) without a [`client_id`](Self::client_id). Where
    /// the server's metadata says `client_id_metadata_document_supported` (MCP's
    /// SEP-991), the URL is the client id, and the server reads the document
    /// there. Otherwise the layer registers a public client at the server's
    /// `registration_endpoint` (RFC 7591). The URL must be `https` with a path,
    /// or `http` on loopback for a test.
    ///
    /// Without a client id, a login takes a client id in this order: one it
    /// got at that server before, kept with the chain in the token store; this
    /// URL; a registration. A registered client is kept the same way, so a
    /// second process or a replica does not register again.
    ///
    /// Default: none, so a login without a client id registers.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, login::Login};
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .protected_resource("https://mcp.example.com/mcp")
    ///     .client_metadata_url("https://agent.example.com/oauth/client.json")
    ///     .login(Login::browser())
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }
}
