//! [`OAuthLayerBuilder`]: every setting and its default (here), the checks
//! and the assembly of a layer (`build`), and the settings read from the
//! environment (`env`).

mod build;
mod credentials;
mod debug;
mod env;
mod grants;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderName;
use tower_service::Service;

use crate::boxed::BoxError;
use crate::endpoint::ClientAuth;
use crate::endpoint::{TowerTransport, Transport};
use crate::params::TokenParams;
use crate::slots::ParamsFor;
use crate::source::TokenSource;
use crate::store::TokenStore;

/// Configures an [`OAuthLayer`](crate::OAuthLayer).
///
/// Required: a URL ([`auth_url`](Self::auth_url) or
/// [`token_url`](Self::token_url)), [`client_id`](Self::client_id) and
/// [`client_secret`](Self::client_secret); or instead of all three, a
/// [`token_source`](Self::token_source). Everything else has a default.
/// Setters never fail; [`build`](Self::build) checks everything and names the
/// first problem.
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::{ConfigErrorKind, OAuthLayerBuilder};
///
/// let err = OAuthLayerBuilder::new()
///     .auth_url("https://auth.example.com/")
///     .client_id("my-client")
///     .client_secret("has&ampersand")
///     .build()
///     .unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::InvalidClientSecret);
/// assert!(!err.to_string().contains("has&ampersand"));
/// ```
#[must_use]
#[derive(Clone, Default)]
pub struct OAuthLayerBuilder {
    auth_url: Option<String>,
    token_url: Option<String>,
    issuer: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    /// A secret read from a file or a function, and read again when refused.
    secret_source: Option<crate::endpoint::SecretSource>,
    /// With `secret_source` the key file: its algorithm and key id.
    key_file: Option<(crate::keys::Algorithm, Option<String>)>,
    client_auth: Option<ClientAuth>,
    grant: crate::endpoint::Grant,
    params: Vec<(String, String)>,
    header_name: Option<HeaderName>,
    auth_scheme: Option<String>,
    keep_existing_header: bool,
    transport: Option<Arc<dyn Transport>>,
    source: Option<Arc<dyn TokenSource>>,
    source_name: Option<String>,
    store: Option<Arc<dyn TokenStore>>,
    refresh_margin: Option<Duration>,
    expiry_skew: Option<Duration>,
    fetch_timeout: Option<Duration>,
    forced_renewal_interval: Option<Duration>,
    min_backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    allow_insecure_http: bool,
    assertion_audience: Option<String>,
    assertion_lifetime: Option<Duration>,
    assertion_clock_skew: Option<Duration>,
    /// `Some(None)`: no `typ`.
    assertion_typ: Option<Option<String>>,
    #[cfg(feature = "reqwest")]
    tls: crate::endpoint::TransportSettings,
    dpop: Option<crate::dpop::DpopKey>,
    dpop_allow_bearer: bool,
    params_for: Option<ParamsFor>,
    max_token_slots: Option<usize>,
}

impl OAuthLayerBuilder {
    /// A builder with every setting at its default.
    pub fn new() -> Self {
        Self::default()
    }

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

    /// The client identifier. It is sent unencoded, as the specification
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

    /// How the client authenticates to the token endpoint: the
    /// specification's unencoded body, a form-urlencoded body, or HTTP Basic
    /// (percent-encoded, or as it is).
    ///
    /// Default: by how the endpoint was given (see [`ClientAuth`]):
    /// [`ClientAuth::UnencodedBody`] with [`auth_url`](Self::auth_url),
    /// [`ClientAuth::Basic`] with [`token_url`](Self::token_url).
    pub fn client_auth(mut self, client_auth: ClientAuth) -> Self {
        self.client_auth = Some(client_auth);
        self
    }

    /// Requests this `scope` (space-separated scopes; with
    /// [`ClientAuth::UnencodedBody`], the default for
    /// [`auth_url`](Self::auth_url), a value with spaces cannot be carried:
    /// use another [`ClientAuth`]).
    ///
    /// Default: none (the parameter is not sent).
    pub fn scope(self, scope: impl Into<String>) -> Self {
        self.param("scope", scope)
    }

    /// Requests a token for this `audience` (one value; setting it again
    /// replaces it). The parameter of servers that name the API a token is
    /// for by an audience, such as Auth0 and many API gateways; standard
    /// servers implementing RFC 8707 take [`resource`](Self::resource)
    /// instead, and ignore `audience`.
    ///
    /// Default: none (the parameter is not sent).
    pub fn audience(self, audience: impl Into<String>) -> Self {
        self.param("audience", audience)
    }

    /// Requests a token for the API at `resource` (RFC 8707 resource
    /// indicators: an absolute URI without a fragment). Repeatable: each call
    /// adds one `resource` parameter, for a token valid at several APIs
    /// (where the server allows it).
    ///
    /// ```
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/oauth2/token")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .resource("https://orders.example.com/")
    ///     .resource("https://billing.example.com/")
    ///     .build()
    ///     .unwrap();
    /// ```
    ///
    /// Default: none (the parameter is not sent).
    pub fn resource(self, resource: impl Into<String>) -> Self {
        self.add_param("resource", resource)
    }

    /// Adds `name=value` to the token request body, after the built-in
    /// parameters; setting a name again replaces its value (use
    /// [`add_param`](Self::add_param) to send a name more than once). The
    /// names the layer sets itself (`grant_type`, `client_id`,
    /// `client_secret`, `client_assertion`, `client_assertion_type`,
    /// `assertion`, and token exchange's `subject_token`,
    /// `subject_token_type`, `actor_token`, `actor_token_type`,
    /// `requested_token_type`) cannot be set (a [`ConfigError`](crate::ConfigError) from
    /// [`build`](Self::build)).
    ///
    /// Default: none.
    pub fn param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match self.params.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.params.push((name, value)),
        }
        self
    }

    /// Adds `name=value` to the token request body, keeping any parameter
    /// of that name already set: `.add_param("resource", a).add_param("resource", b)`
    /// sends both, in that order. The same names as for
    /// [`param`](Self::param) are reserved.
    ///
    /// Default: none.
    pub fn add_param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((name.into(), value.into()));
        self
    }

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

    /// The scheme written before the token in the header; empty for the
    /// bare token (`X-Access-Token: <token>`). The token endpoint's
    /// `token_type` (`bearer`, `BearerToken`, ...) does not change it.
    ///
    /// Default: `Bearer`.
    pub fn auth_scheme(mut self, scheme: impl Into<String>) -> Self {
        self.auth_scheme = Some(scheme.into());
        self
    }

    /// Whether a request that already has the token header keeps it (and is
    /// sent without waiting for a token) rather than having it replaced.
    ///
    /// Default: false (replaced).
    pub fn keep_existing_header(mut self, keep: bool) -> Self {
        self.keep_existing_header = keep;
        self
    }

    /// Carries the token request over `service` instead of the built-in
    /// reqwest client: a hyper-util client with your TLS settings, or a stack
    /// with your own retries and proxies. With `default-features = false`
    /// (no reqwest) this is how tokens are fetched.
    ///
    /// The service gets a `POST` whose body converts from [`Bytes`] (so
    /// `http_body_util::Full<Bytes>`, `reqwest::Body`, ... work) and must not
    /// follow redirects (hyper-util's client does not). Its response body is
    /// read up to 64 KiB; [`fetch_timeout`](Self::fetch_timeout) bounds the
    /// whole exchange.
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
    /// Default: reqwest (feature `reqwest`), following no redirects.
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

    /// Takes tokens from `source` instead of the client-credentials request:
    /// another grant, a vault, a sidecar. All caching, single flight,
    /// renewal, back-off and 401 handling stay. Do not set a URL, client id,
    /// secret, client authentication, parameters or transport with it.
    ///
    /// Default: none (the client-credentials request).
    pub fn token_source(mut self, source: impl TokenSource) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The name under which a [`token_store`](Self::token_store) shares the
    /// tokens of the [`token_source`](Self::token_source): layers whose
    /// sources have the same name share one token, so give each source
    /// (each grant, audience or account it fetches for) a name of its own,
    /// the same on every replica. Required with a token store, which cannot
    /// tell sources apart by themselves.
    ///
    /// Default: none.
    pub fn token_source_name(mut self, name: impl Into<String>) -> Self {
        self.source_name = Some(name.into());
        self
    }

    /// Shares tokens, and token requests, with other replicas through
    /// `store`, such as [`RedisStore`](crate::RedisStore) (feature `redis`).
    /// Layers with the same token URL (or issuer), client id, client
    /// authentication (and its signing key), client certificate, DPoP key
    /// and parameters share one token; layers built on a
    /// [`token_source`](Self::token_source) share by the
    /// [`token_source_name`](Self::token_source_name) they must be given.
    ///
    /// Default: none (each layer keeps its token in memory).
    pub fn token_store(mut self, store: impl TokenStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// How long before expiry a request starts renewing the token in the
    /// background (it goes on at once with the current token). A small random
    /// part (up to a tenth of the margin) is added, so that many clients do
    /// not renew in step. Honoured up to half the token's lifetime.
    ///
    /// Longer than [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken
    /// as 24 hours.
    ///
    /// Default: 5 minutes.
    pub fn refresh_margin(mut self, refresh_margin: Duration) -> Self {
        self.refresh_margin = Some(refresh_margin);
        self
    }

    /// How long before expiry a token is no longer presented, to allow for
    /// clock drift and the request's time in flight. Honoured up to a tenth of
    /// the token's lifetime.
    ///
    /// Longer than [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken
    /// as 24 hours.
    ///
    /// Default: 10 seconds.
    pub fn expiry_skew(mut self, expiry_skew: Duration) -> Self {
        self.expiry_skew = Some(expiry_skew);
        self
    }

    /// The longest a token request may take, from connecting to reading the
    /// last byte of the answer. Separate from any time-out on the requests it
    /// serves. Must be more than zero.
    ///
    /// Longer than [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken
    /// as 24 hours.
    ///
    /// Default: 10 seconds.
    pub fn fetch_timeout(mut self, fetch_timeout: Duration) -> Self {
        self.fetch_timeout = Some(fetch_timeout);
        self
    }

    /// After the API answers `401 Unauthorized`, the token that was sent is
    /// dropped and a new one fetched, at most once per this interval. A 401
    /// within the interval after such a renewal leaves the token in place: an
    /// API that refuses every token (an application not subscribed to it, for
    /// instance) then costs one token request per interval, not one per
    /// request.
    ///
    /// Longer than [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken
    /// as 24 hours.
    ///
    /// Default: 10 seconds.
    pub fn forced_renewal_interval(mut self, interval: Duration) -> Self {
        self.forced_renewal_interval = Some(interval);
        self
    }

    /// The first delay after a failed token request before another is made;
    /// each further failure in a row doubles it (with jitter), up to
    /// [`max_backoff`](Self::max_backoff). While no token serves and the
    /// failure can heal (5xx, 429, time-outs, transport errors), retries come
    /// steadily instead, a little before each `min_backoff` (0.8 to 0.95 of
    /// it), so that requests recover within `min_backoff` of the endpoint's
    /// return. A `Retry-After` from the endpoint takes precedence (up to one
    /// hour). Must be more than zero.
    ///
    /// Longer than [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken
    /// as 24 hours.
    ///
    /// Default: 1 second.
    pub fn min_backoff(mut self, delay: Duration) -> Self {
        self.min_backoff = Some(delay);
        self
    }

    /// The longest delay between failed token requests, without
    /// `Retry-After`. Must be at least [`min_backoff`](Self::min_backoff).
    ///
    /// Longer than [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken
    /// as 24 hours.
    ///
    /// Default: 60 seconds.
    pub fn max_backoff(mut self, delay: Duration) -> Self {
        self.max_backoff = Some(delay);
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

    /// How long a client assertion is valid after it is made (`exp - iat`);
    /// between 1 second and 1 hour. Each token request makes a new one.
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

    /// Chooses a request's token from the request itself: `choose` sees
    /// each request's head (method, URI, headers, extensions) and gives the
    /// [`TokenParams`] of its token, or `None` for the layer's default
    /// token. Typically by origin, so that one client stack serves several
    /// APIs, each with its own token. A request that carries `TokenParams`
    /// in its extensions keeps those; `choose` is not asked.
    ///
    /// Build each `TokenParams` once and clone it (a reference count): the
    /// closure runs for every request.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, TokenParams};
    ///
    /// let orders = TokenParams::new().resource("https://orders.internal");
    /// let stock = TokenParams::new().resource("https://stock.internal").scope("stock:read");
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.example.com/oauth2/token")
    ///     .client_id("gateway")
    ///     .client_secret("secret")
    ///     .params_for(move |request| match request.uri.host() {
    ///         Some("orders.internal") => Some(orders.clone()),
    ///         Some("stock.internal") => Some(stock.clone()),
    ///         _ => None,
    ///     })
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    ///
    /// Default: none (only a request's own `TokenParams` select a token).
    pub fn params_for<F>(mut self, choose: F) -> Self
    where
        F: Fn(&http::request::Parts) -> Option<TokenParams> + Send + Sync + 'static,
    {
        self.params_for = Some(Arc::new(choose));
        self
    }

    /// How many tokens the layer keeps besides its default one: one slot
    /// per distinct [`TokenParams`], each with its own single flight,
    /// renewal, back-off and 401 handling. Past it the least recently used
    /// slot is evicted (its memory and tasks freed once no request uses
    /// it), and a warning is logged once: a caller that puts per-request
    /// values into the parameters cannot grow memory without bound.
    ///
    /// Default: [`DEFAULT_TOKEN_SLOTS`](crate::DEFAULT_TOKEN_SLOTS) (64); at
    /// least 1.
    pub fn max_token_slots(mut self, max: usize) -> Self {
        self.max_token_slots = Some(max);
        self
    }

    /// Binds tokens to `key` with DPoP (RFC 9449): each token request
    /// carries a proof of the key, the token endpoint must answer with a
    /// `DPoP` token (bound to the key's thumbprint), and every request
    /// through the layer carries `Authorization: DPoP <token>` and a fresh
    /// `DPoP` proof for its method and URI (so requests need absolute URIs:
    /// one without scheme and host fails with
    /// [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest); with tonic,
    /// build the client with `with_origin`). Nonces
    /// the token endpoint or an API demand (`use_dpop_nonce`) are kept per
    /// origin and sent; a `401` that asks for one leaves the token alone, and
    /// [`RetryUnauthorized`](crate::RetryUnauthorized) resends the request
    /// with a new proof.
    ///
    /// Tokens are shared through a [`token_store`](Self::token_store) only among
    /// replicas with the same key (its thumbprint is part of the store's
    /// key): replicas that should share tokens read one key from a file
    /// ([`DpopKey::from_pem`](crate::dpop::DpopKey::from_pem)).
    ///
    /// ```
    /// use tower_oauth::{Algorithm, DpopKey, OAuthLayer};
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
    /// the DPoP proof; it is then sent as `Authorization: Bearer`, without
    /// proofs, and a warning is logged at each token request. Without it
    /// such an answer is an
    /// [`InvalidResponse`](crate::TokenErrorKind::InvalidResponse) error
    /// that says so.
    ///
    /// Default: `false` (strict: a DPoP layer sends only bound tokens).
    pub fn dpop_allow_bearer(mut self, allow: bool) -> Self {
        self.dpop_allow_bearer = allow;
        self
    }

    /// The client certificate (chain, PEM, the client's own first) and its
    /// private key (PEM) that the built-in transport presents to the token
    /// endpoint: mutual TLS (RFC 8705). It authenticates the client with
    /// [`ClientAuth::TlsClientAuth`] (chosen by discovery when no secret is
    /// given and the server lists `tls_client_auth` or
    /// `self_signed_tls_client_auth`), and lets the server bind tokens to
    /// the certificate (`cnf.x5t#S256`) with any client authentication;
    /// with [`issuer`](Self::issuer) the metadata's
    /// `mtls_endpoint_aliases.token_endpoint` is used when it has one.
    ///
    /// Certificate-bound tokens are accepted only from a client presenting
    /// the same certificate: give the API client the same identity (see the
    /// README's "Mutual TLS" and the `mtls` example). A transport of your
    /// own ([`transport`](Self::transport)) brings its own TLS configuration
    /// instead.
    ///
    /// Default: none (no client certificate).
    #[cfg(feature = "reqwest")]
    pub fn client_identity(
        mut self,
        cert_chain_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Self {
        self.tls.identity = Some((cert_chain_pem.as_ref().to_vec(), key_pem.as_ref().to_vec()));
        self
    }

    /// Whether the built-in transport sends token requests through the
    /// proxies the environment names: `HTTPS_PROXY`, `HTTP_PROXY` and
    /// `ALL_PROXY` (or their lowercase forms), except to the hosts
    /// `NO_PROXY` lists (names with their subdomains, IP addresses and
    /// ranges, `*` for all). A loopback token endpoint (`localhost`,
    /// `127.0.0.0/8`, `::1`) is never reached through a proxy: the secret
    /// stays on the machine.
    ///
    /// Default: `true` (the environment's proxies, by the `NO_PROXY` rules).
    #[cfg(feature = "reqwest")]
    pub fn proxy_from_env(mut self, on: bool) -> Self {
        self.tls.env_proxy = on;
        self
    }

    /// Certificate authorities (PEM, one or more) the built-in transport
    /// trusts for the token endpoint besides the web's (webpki roots): for
    /// an identity provider behind a private CA. Can be given more than once.
    ///
    /// Default: none (the web's roots only).
    #[cfg(feature = "reqwest")]
    pub fn root_certificates(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.tls.roots.push(pem.as_ref().to_vec());
        self
    }
}

#[cfg(test)]
mod tests;
