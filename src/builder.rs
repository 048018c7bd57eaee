//! [`OAuthLayerBuilder`]: every setting, its default, and validation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Uri};
use tower_service::Service;

use crate::authorize::Placement;
use crate::boxed::BoxError;
use crate::cache::{Policy, TokenCache};
use crate::endpoint::client_auth::{check_param, check_unencoded};
use crate::endpoint::client_auth::{AssertionSettings, ClientAuth};
use crate::endpoint::transport::{TowerTransport, Transport};
use crate::endpoint::url::checked_url;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::identity::{IdentityBase, Origin, Parts};
use crate::layer::OAuthLayer;
use crate::params::TokenParams;
use crate::policy::DEFAULT_TOKEN_SLOTS;
use crate::recipe::{Recipe, Target};
use crate::slots::{ParamsFor, Slots};
use crate::source::TokenSource;
use crate::store::{StoreUse, TokenStore};

/// The token endpoint's path below `auth_url` (specification, section 4).
const TOKEN_PATH: &str = "/v1/oauth/accesstoken";

/// Configures an [`OAuthLayer`].
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
    client_auth: Option<ClientAuth>,
    params: Vec<(String, String)>,
    header_name: Option<HeaderName>,
    auth_scheme: Option<String>,
    keep_existing_header: bool,
    transport: Option<Arc<dyn Transport>>,
    source: Option<Arc<dyn TokenSource>>,
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
    /// `Some(None)`: no `typ`.
    assertion_typ: Option<Option<String>>,
    #[cfg(feature = "reqwest")]
    tls: crate::endpoint::tls::TlsSettings,
    #[cfg(feature = "jwt")]
    dpop: Option<crate::DpopKey>,
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
    /// built-in names `grant_type`, `client_id` and `client_secret` cannot be
    /// set (a [`ConfigError`] from [`build`](Self::build)).
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

    /// Shares tokens, and token requests, with other replicas through
    /// `store`, such as [`RedisStore`](crate::RedisStore) (feature `redis`).
    /// Layers with the same token URL, client id, client authentication and
    /// parameters share one token; layers built on a
    /// [`token_source`](Self::token_source) all share one key (give each
    /// source's store its own prefix).
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
    /// Default: 5 minutes.
    pub fn refresh_margin(mut self, refresh_margin: Duration) -> Self {
        self.refresh_margin = Some(refresh_margin);
        self
    }

    /// How long before expiry a token is no longer presented, to allow for
    /// clock drift and the request's time in flight. Honoured up to a tenth of
    /// the token's lifetime.
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
    /// Default: 10 seconds.
    pub fn forced_renewal_interval(mut self, interval: Duration) -> Self {
        self.forced_renewal_interval = Some(interval);
        self
    }

    /// The first delay after a failed token request before another is made;
    /// each further failure in a row doubles it (with jitter), up to
    /// [`max_backoff`](Self::max_backoff). A `Retry-After` from the endpoint
    /// takes precedence (up to one hour). Must be more than zero.
    ///
    /// Default: 1 second.
    pub fn min_backoff(mut self, delay: Duration) -> Self {
        self.min_backoff = Some(delay);
        self
    }

    /// The longest delay between failed token requests, without
    /// `Retry-After`. Must be at least [`min_backoff`](Self::min_backoff).
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
    /// [`ClientAuth::PrivateKeyJwt`] and [`ClientAuth::ClientSecretJwt`].
    ///
    /// Default: the issuer identifier with [`issuer`](Self::issuer) (what
    /// the 2026 update of RFC 7523 asks for), else the token endpoint's URL
    /// (what RFC 7523 and OpenID Connect Core section 9 name).
    #[cfg(feature = "jwt")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
    pub fn assertion_audience(mut self, audience: impl Into<String>) -> Self {
        self.assertion_audience = Some(audience.into());
        self
    }

    /// How long a client assertion is valid after it is made (`exp - iat`);
    /// between 1 second and 1 hour. Each token request makes a new one.
    ///
    /// Default: [`DEFAULT_ASSERTION_LIFETIME`](crate::DEFAULT_ASSERTION_LIFETIME)
    /// (60 s).
    #[cfg(feature = "jwt")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
    pub fn assertion_lifetime(mut self, lifetime: Duration) -> Self {
        self.assertion_lifetime = Some(lifetime);
        self
    }

    /// The `typ` header of client assertions, or `None` to send none (for a
    /// server that refuses a `typ` it does not know).
    ///
    /// Default: `Some(`[`CLIENT_AUTHENTICATION_JWT_TYPE`](crate::CLIENT_AUTHENTICATION_JWT_TYPE)`)`,
    /// `client-authentication+jwt`: the explicit type the 2026 update of RFC
    /// 7523 recommends, which servers that predate it ignore.
    #[cfg(feature = "jwt")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
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
    /// ([`DpopKey::from_pem`](crate::DpopKey::from_pem)).
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
    #[cfg(feature = "jwt")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
    pub fn dpop(mut self, key: crate::DpopKey) -> Self {
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
    #[cfg(feature = "jwt")]
    #[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
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
    #[cfg(feature = "mtls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mtls")))]
    pub fn client_identity(
        mut self,
        cert_chain_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Self {
        self.tls.identity = Some((cert_chain_pem.as_ref().to_vec(), key_pem.as_ref().to_vec()));
        self
    }

    /// Certificate authorities (PEM, one or more) the built-in transport
    /// trusts for the token endpoint besides the web's (webpki roots): for
    /// an identity provider behind a private CA. Can be given more than once.
    ///
    /// Default: none (the web's roots only).
    #[cfg(feature = "reqwest")]
    #[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
    pub fn root_certificates(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.tls.roots.push(pem.as_ref().to_vec());
        self
    }

    /// A builder with the endpoint and credentials from the environment:
    /// one of `OAUTH_ISSUER`, `OAUTH_TOKEN_URL` and `OAUTH_AUTH_URL`;
    /// `OAUTH_CLIENT_ID` and `OAUTH_CLIENT_SECRET`; and optionally
    /// `OAUTH_CLIENT_AUTH` (`basic`, `form`, `basic-unencoded`, `unencoded`;
    /// see [`ClientAuth`]), `OAUTH_SCOPE`, and `OAUTH_RESOURCE` (one or more
    /// resource URIs, separated by white space). Set anything else on it
    /// before [`build`](Self::build).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or empty.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let urls = [
            ("OAUTH_ISSUER", var("OAUTH_ISSUER")),
            ("OAUTH_TOKEN_URL", var("OAUTH_TOKEN_URL")),
            ("OAUTH_AUTH_URL", var("OAUTH_AUTH_URL")),
        ];
        let set: Vec<&str> = urls
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(name, _)| *name)
            .collect();
        if set.len() > 1 {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                format!("{} are all set; set one", set.join(" and ")),
            ));
        }
        let mut builder = match urls {
            [(_, Some(issuer)), ..] => Self::new().issuer(issuer),
            [_, (_, Some(url)), _] => Self::new().token_url(url),
            [_, _, (_, Some(url))] => Self::new().auth_url(url),
            _ => {
                return Err(ConfigError::new(
                    ConfigErrorKind::MissingUrl,
                    "none of OAUTH_ISSUER, OAUTH_TOKEN_URL and OAUTH_AUTH_URL is set",
                ))
            }
        };
        let missing = |kind, name: &str| {
            ConfigError::new(kind, format!("environment variable {name} is not set"))
        };
        let id = var("OAUTH_CLIENT_ID")
            .ok_or_else(|| missing(ConfigErrorKind::MissingClientId, "OAUTH_CLIENT_ID"))?;
        let secret = var("OAUTH_CLIENT_SECRET")
            .ok_or_else(|| missing(ConfigErrorKind::MissingClientSecret, "OAUTH_CLIENT_SECRET"))?;
        builder = builder.client_id(id).client_secret(secret);
        if let Some(auth) = var("OAUTH_CLIENT_AUTH") {
            let auth: ClientAuth = auth.parse().map_err(|e: ConfigError| {
                ConfigError::new(e.kind(), format!("OAUTH_CLIENT_AUTH: {}", e.message()))
            })?;
            builder = builder.client_auth(auth);
        }
        if let Some(scope) = var("OAUTH_SCOPE") {
            builder = builder.scope(scope);
        }
        // Several resources, separated by white space.
        for resource in var("OAUTH_RESOURCE")
            .iter()
            .flat_map(|r| r.split_whitespace())
        {
            builder = builder.resource(resource);
        }
        Ok(builder)
    }

    /// Checks the settings and builds the layer.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first problem: a missing client id,
    /// secret or URL; both URLs given; a URL that cannot be parsed, lacks a
    /// host, carries user information, or (for `auth_url`) a query; plain
    /// `http` to a host that is not loopback without
    /// [`allow_insecure_http`](Self::allow_insecure_http); an id, secret or
    /// parameter the chosen [`ClientAuth`] cannot carry; a reserved parameter
    /// name; a token source together with endpoint settings; a zero fetch
    /// timeout or back-off; an auth scheme that is not a single word.
    pub fn build(mut self) -> Result<OAuthLayer, ConfigError> {
        let (policy, placement) = self.settings()?;
        let max_slots = self.max_token_slots.unwrap_or(DEFAULT_TOKEN_SLOTS);
        if max_slots == 0 {
            return Err(invalid_setting("max_token_slots must be at least 1"));
        }
        if let Some(source) = self.source.take() {
            if self.auth_url.is_some()
                || self.token_url.is_some()
                || self.issuer.is_some()
                || self.client_id.is_some()
                || self.client_secret.is_some()
                || self.client_auth.is_some()
                || !self.params.is_empty()
                || self.transport.is_some()
                || self.presents_certificate()
            {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "a token source was given together with endpoint settings (URL, client \
                     id or secret, client authentication, parameters or transport); give \
                     one or the other",
                ));
            }
            if self.params_for.is_some() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "params_for was given together with a token source, which has one token; \
                     TokenParams select among the layer's own token requests",
                ));
            }
            if self.dpop_key().is_some() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "dpop was given together with a token source: DPoP-bound tokens come from \
                     the layer's own token request, which proves the key",
                ));
            }
            let store = self.store.take().map(|store| StoreUse {
                store,
                identity: IdentityBase::new(Parts {
                    origin: Origin::Source,
                    client_id: "",
                    client_auth: None,
                    credential: None,
                    dpop_thumbprint: None,
                })
                .with_params(&[]),
                sealing_key: None,
            });
            let slots = Slots::new(None, None, 0);
            return Ok(OAuthLayer {
                cache: TokenCache::new(source, policy, placement, None, store, Some(slots)),
            });
        }

        let target = match self.checked_issuer()? {
            Some((issuer, parsed)) => Target::Issuer(issuer, parsed),
            None => Target::Url(self.url()?),
        };
        let client_id = required(
            self.client_id.take(),
            ConfigErrorKind::MissingClientId,
            "client id",
        )?;
        // With an issuer and no choice, discovery chooses.
        let auth = match (self.client_auth.clone(), &target) {
            (Some(chosen), _) => Some(chosen),
            (None, Target::Issuer(..)) => None,
            (None, Target::Url(_)) if self.auth_url.is_some() => Some(ClientAuth::UnencodedBody),
            (None, Target::Url(_)) => Some(ClientAuth::Basic),
        };
        let client_secret = self.checked_secret(auth.as_ref())?;
        let unencoded = auth == Some(ClientAuth::UnencodedBody);
        if auth == Some(ClientAuth::BasicUnencoded) && client_id.contains(':') {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidClientId,
                "the client id contains `:`, which ClientAuth::BasicUnencoded cannot carry \
                 (Basic separates id and secret with it); use ClientAuth::Basic",
            ));
        }
        if unencoded {
            check_unencoded(&client_id, ConfigErrorKind::InvalidClientId, "client id")?;
            check_unencoded(
                &client_secret,
                ConfigErrorKind::InvalidClientSecret,
                "client secret",
            )?;
        }
        let assertion = self.assertion_settings()?;
        for (name, value) in &self.params {
            check_param(name, value, unencoded)?;
        }

        let transport = match self.transport.take() {
            #[cfg(feature = "reqwest")]
            Some(_) if !self.tls.is_default() => {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "client_identity or root_certificates was given together with a transport \
                     of your own; configure TLS in that transport instead",
                ))
            }
            Some(transport) => transport,
            None => self.default_transport(policy.fetch_timeout)?,
        };
        // What makes its tokens interchangeable, never the secret; the
        // parameters are added by the recipe.
        let mut url_text = None;
        let credential = auth.as_ref().and_then(ClientAuth::identity_credential);
        let dpop_thumbprint = self.dpop_key();
        let identity = IdentityBase::new(Parts {
            origin: match &target {
                Target::Issuer(issuer, _) => Origin::Issuer(issuer),
                Target::Url(url) => Origin::TokenUrl(url_text.get_or_insert(url.to_string())),
            },
            client_id: &client_id,
            client_auth: auth.as_ref().map(ClientAuth::identity_name),
            credential: credential.as_deref(),
            dpop_thumbprint: dpop_thumbprint.as_deref(),
        });
        let sealing_key = self.sealing_key(&client_secret, auth.as_ref());
        let recipe = Recipe {
            target,
            from_auth_url: self.auth_url.is_some(),
            client_id,
            client_secret,
            auth,
            params: std::mem::take(&mut self.params),
            assertion,
            presents_certificate: self.presents_certificate(),
            transport,
            allow_insecure_http: self.allow_insecure_http,
            store: self.store.take(),
            identity,
            sealing_key,
            metadata: Default::default(),
            policy,
            placement,
        };
        Ok(OAuthLayer {
            cache: Arc::new(recipe).layer_cache(self.params_for.take(), max_slots),
        })
    }

    /// The client secret, required when `auth` sends it (or, left to
    /// discovery, unless a client certificate can stand in for it), and
    /// refused when `auth` sends none: a secret given there would be a
    /// mistake left unnoticed.
    fn checked_secret(&mut self, auth: Option<&ClientAuth>) -> Result<String, ConfigError> {
        let needs_secret = match auth {
            Some(auth) => auth.needs_secret(),
            None => !self.presents_certificate() || self.client_secret.is_some(),
        };
        if needs_secret {
            return required(
                self.client_secret.take(),
                ConfigErrorKind::MissingClientSecret,
                "client secret",
            );
        }
        if let (Some(auth), Some(_)) = (auth, &self.client_secret) {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                format!(
                    "a client secret was given with {}, which sends no secret; leave the \
                     secret out",
                    auth.method_name()
                ),
            ));
        }
        if auth == Some(&ClientAuth::TlsClientAuth)
            && self.transport.is_none()
            && !self.presents_certificate()
        {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "ClientAuth::TlsClientAuth needs a client certificate: give it with \
                 client_identity (feature `mtls`), or give a transport that presents one",
            ));
        }
        Ok(String::new())
    }

    /// The client assertions' settings, checked.
    fn assertion_settings(&self) -> Result<AssertionSettings, ConfigError> {
        let lifetime = self
            .assertion_lifetime
            .unwrap_or(crate::endpoint::client_auth::DEFAULT_ASSERTION_LIFETIME);
        if lifetime < Duration::from_secs(1) || lifetime > Duration::from_secs(3600) {
            return Err(invalid_setting(
                "assertion_lifetime must be between 1 second and 1 hour",
            ));
        }
        let typ = self.assertion_typ.clone().unwrap_or_else(|| {
            Some(crate::endpoint::client_auth::CLIENT_AUTHENTICATION_JWT_TYPE.to_owned())
        });
        if typ
            .as_deref()
            .is_some_and(|t| t.is_empty() || t.chars().any(char::is_control))
        {
            return Err(invalid_setting(
                "assertion_typ must be a media type such as client-authentication+jwt, or None",
            ));
        }
        Ok(AssertionSettings {
            audience: self.assertion_audience.clone(),
            lifetime,
            typ,
        })
    }

    /// The key for sealing what a store keeps, derived from the client's own
    /// credential: its secret, else its private key, else its TLS client
    /// key; none without one (or without feature `redis`).
    #[cfg_attr(not(all(feature = "redis", feature = "jwt")), allow(unused_variables))]
    fn sealing_key(&self, secret: &str, auth: Option<&ClientAuth>) -> Option<[u8; 32]> {
        #[cfg(feature = "redis")]
        {
            let derive = crate::store::seal::derive;
            if !secret.is_empty() {
                return Some(derive(secret.as_bytes()));
            }
            #[cfg(feature = "jwt")]
            if let Some(ClientAuth::PrivateKeyJwt(key)) = auth {
                if let Some(seed) = key.seed() {
                    return Some(derive(seed));
                }
            }
            #[cfg(feature = "reqwest")]
            if let Some(key_pem) = self.tls.identity_key() {
                return Some(derive(key_pem));
            }
            None
        }
        #[cfg(not(feature = "redis"))]
        None
    }

    /// The DPoP key's thumbprint, if DPoP is on.
    fn dpop_key(&self) -> Option<String> {
        #[cfg(feature = "jwt")]
        return self.dpop.as_ref().map(|k| k.thumbprint().to_owned());
        #[cfg(not(feature = "jwt"))]
        None
    }

    /// Whether the built-in transport presents a client certificate.
    fn presents_certificate(&self) -> bool {
        #[cfg(feature = "reqwest")]
        return self.tls.presents_certificate();
        #[cfg(not(feature = "reqwest"))]
        false
    }

    /// The built-in transport, with the TLS settings.
    #[cfg(feature = "reqwest")]
    fn default_transport(
        &self,
        fetch_timeout: Duration,
    ) -> Result<Arc<dyn Transport>, ConfigError> {
        Ok(Arc::new(crate::endpoint::transport::ReqwestTransport::new(
            fetch_timeout,
            &self.tls,
        )?))
    }

    #[cfg(not(feature = "reqwest"))]
    fn default_transport(
        &self,
        _fetch_timeout: Duration,
    ) -> Result<Arc<dyn Transport>, ConfigError> {
        Err(ConfigError::new(
            ConfigErrorKind::MissingTransport,
            "no transport for the token request: enable the `reqwest` feature or give one with \
             OAuthLayerBuilder::transport",
        ))
    }

    /// The issuer, checked: it excludes the URL setters, and is an absolute
    /// URL without a query (RFC 8414 section 2).
    fn checked_issuer(&self) -> Result<Option<(String, Uri)>, ConfigError> {
        let Some(raw) = &self.issuer else {
            return Ok(None);
        };
        if self.auth_url.is_some() || self.token_url.is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "issuer is set together with auth_url or token_url; give one (the issuer's \
                 metadata names its token endpoint)",
            ));
        }
        let raw = raw.trim();
        let uri = checked_url("issuer", raw, self.allow_insecure_http)?;
        if uri.query().is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidUrl,
                format!("issuer `{raw}` has a query; an issuer identifier has none (RFC 8414 section 2)"),
            ));
        }
        Ok(Some((raw.to_owned(), uri)))
    }

    fn settings(&self) -> Result<(Policy, Placement), ConfigError> {
        let placement_is_custom = self.header_name.is_some() || self.auth_scheme.is_some();
        let auth_scheme = self
            .auth_scheme
            .clone()
            .unwrap_or_else(|| "Bearer".to_owned());
        if !auth_scheme.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid_setting(
                "auth_scheme must be a single word of visible ASCII (or empty)",
            ));
        }
        let defaults = Policy::default();
        let policy = Policy {
            refresh_margin: self.refresh_margin.unwrap_or(defaults.refresh_margin),
            expiry_skew: self.expiry_skew.unwrap_or(defaults.expiry_skew),
            fetch_timeout: self.fetch_timeout.unwrap_or(defaults.fetch_timeout),
            forced_renewal_interval: self
                .forced_renewal_interval
                .unwrap_or(defaults.forced_renewal_interval),
            min_backoff: self.min_backoff.unwrap_or(defaults.min_backoff),
            max_backoff: self.max_backoff.unwrap_or(defaults.max_backoff),
        };
        if policy.fetch_timeout.is_zero() {
            return Err(invalid_setting("fetch_timeout must be more than zero"));
        }
        if policy.min_backoff.is_zero() {
            return Err(invalid_setting("min_backoff must be more than zero"));
        }
        if policy.max_backoff < policy.min_backoff {
            return Err(invalid_setting("max_backoff must be at least min_backoff"));
        }
        let placement = Placement {
            header_name: self
                .header_name
                .clone()
                .unwrap_or(http::header::AUTHORIZATION),
            auth_scheme,
            keep_existing: self.keep_existing_header,
            #[cfg(feature = "jwt")]
            dpop: self.dpop.clone().map(|key| {
                Arc::new(crate::dpop::Dpop {
                    key,
                    nonces: crate::dpop::NonceBook::default(),
                    allow_bearer: self.dpop_allow_bearer,
                    sign_timeout: policy.fetch_timeout,
                })
            }),
        };
        if placement_is_custom && self.dpop_key().is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "dpop was given together with header_name or auth_scheme: a DPoP-bound token \
                 goes in `Authorization: DPoP <token>`",
            ));
        }
        Ok((policy, placement))
    }

    /// The token endpoint's URL, checked.
    fn url(&self) -> Result<Uri, ConfigError> {
        let (raw, is_base) = match (&self.auth_url, &self.token_url) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "both auth_url and token_url are set; give one",
                ))
            }
            (Some(a), None) => (a.trim(), true),
            (None, Some(t)) => (t.trim(), false),
            (None, None) => {
                return Err(ConfigError::new(
                    ConfigErrorKind::MissingUrl,
                    "no token endpoint: set issuer, token_url or auth_url",
                ))
            }
        };
        let name = if is_base { "auth_url" } else { "token_url" };
        let bad = |why: &str| {
            ConfigError::new(ConfigErrorKind::InvalidUrl, format!("{name} `{raw}` {why}"))
        };
        let uri = checked_url(name, raw, self.allow_insecure_http)?;
        if !is_base {
            return Ok(uri);
        }
        if uri.query().is_some() {
            return Err(bad("has a query; the token path cannot be appended to it (use token_url for a full endpoint URL)"));
        }
        // The same scheme and host, with the token path after the base path.
        let mut parts = uri.into_parts();
        let base = parts.path_and_query.as_ref().map_or("", |p| p.path());
        let path = format!("{}{TOKEN_PATH}", base.trim_end_matches('/'));
        parts.path_and_query = Some(
            path.parse()
                .map_err(|e| bad(&format!("is not a valid URL ({e})")))?,
        );
        Uri::from_parts(parts).map_err(|e| bad(&format!("is not a valid URL ({e})")))
    }
}

fn invalid_setting(message: &str) -> ConfigError {
    ConfigError::new(ConfigErrorKind::InvalidSetting, message)
}

fn required(
    value: Option<String>,
    kind: ConfigErrorKind,
    what: &str,
) -> Result<String, ConfigError> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        Some(_) => Err(ConfigError::new(kind, format!("the {what} is empty"))),
        None => Err(ConfigError::new(kind, format!("no {what} was given"))),
    }
}

impl fmt::Debug for OAuthLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthLayerBuilder")
            .field("auth_url", &self.auth_url)
            .field("token_url", &self.token_url)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("client_auth", &self.client_auth)
            .field(
                "params",
                &self.params.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("header_name", &self.header_name)
            .field("auth_scheme", &self.auth_scheme)
            .field("keep_existing_header", &self.keep_existing_header)
            .field("transport", &self.transport.as_ref().map(|_| "custom"))
            .field("token_source", &self.source.as_ref().map(|_| "custom"))
            .field("token_store", &self.store.as_ref().map(|_| "custom"))
            .field("refresh_margin", &self.refresh_margin)
            .field("expiry_skew", &self.expiry_skew)
            .field("fetch_timeout", &self.fetch_timeout)
            .field("forced_renewal_interval", &self.forced_renewal_interval)
            .field("min_backoff", &self.min_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("assertion_audience", &self.assertion_audience)
            .field("assertion_lifetime", &self.assertion_lifetime)
            .field("assertion_typ", &self.assertion_typ)
            .field("client_identity", &self.presents_certificate())
            .field("dpop", &self.dpop_key())
            .field("dpop_allow_bearer", &self.dpop_allow_bearer)
            .field("params_for", &self.params_for.as_ref().map(|_| "custom"))
            .field("max_token_slots", &self.max_token_slots)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> OAuthLayerBuilder {
        // A transport that is never called: these tests only build.
        let unused = tower::service_fn(|_: http::Request<Bytes>| async {
            Err::<http::Response<String>, BoxError>("not called".into())
        });
        OAuthLayerBuilder::new()
            .client_id("id-123")
            .client_secret("s3cr3t!x")
            .transport(unused)
    }

    fn url_of(b: OAuthLayerBuilder) -> String {
        b.build().unwrap().token_url().unwrap().to_string()
    }

    fn kind_of(b: OAuthLayerBuilder) -> ConfigErrorKind {
        let e = b.build().unwrap_err();
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
        assert!(!format!("{e:?}").contains("s3cr3t"), "{e:?}");
        e.kind()
    }

    #[test]
    fn auth_url_gets_the_token_path_once() {
        for base in [
            "https://auth.example.com",
            "https://auth.example.com/",
            "https://auth.example.com//",
        ] {
            assert_eq!(
                url_of(valid().auth_url(base)),
                "https://auth.example.com/v1/oauth/accesstoken"
            );
        }
        assert_eq!(
            url_of(valid().auth_url("https://example.com/gw/")),
            "https://example.com/gw/v1/oauth/accesstoken"
        );
    }

    #[test]
    fn token_url_is_used_as_given() {
        assert_eq!(
            url_of(valid().token_url("https://example.com/oauth2/token?tenant=a")),
            "https://example.com/oauth2/token?tenant=a"
        );
    }

    #[test]
    fn http_only_for_loopback_unless_allowed() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://localhost:1",
            "http://[::1]:9",
            "http://127.9.9.9",
        ] {
            assert!(valid().auth_url(ok).build().is_ok(), "{ok}");
        }
        assert_eq!(
            kind_of(valid().auth_url("http://auth.example.com")),
            ConfigErrorKind::InsecureUrl
        );
        assert!(valid()
            .auth_url("http://auth.example.com")
            .allow_insecure_http(true)
            .build()
            .is_ok());
    }

    #[test]
    fn bad_urls_are_named() {
        assert_eq!(kind_of(valid()), ConfigErrorKind::MissingUrl);
        assert_eq!(
            kind_of(valid().auth_url("https://a").token_url("https://b")),
            ConfigErrorKind::Conflicting
        );
        for bad in [
            "not a url",
            "/v1/oauth",
            "ftp://example.com",
            "https://example.com/?x=1",
            "https://example.com/#frag",
        ] {
            assert_eq!(
                kind_of(valid().auth_url(bad)),
                ConfigErrorKind::InvalidUrl,
                "{bad}"
            );
        }
        let e = valid()
            .auth_url("https://user:pa55word@example.com")
            .build()
            .unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::InvalidUrl);
        assert!(!e.to_string().contains("pa55word"));
    }

    #[test]
    fn credentials_are_required_and_checked() {
        let url = "https://auth.example.com";
        assert_eq!(
            kind_of(
                OAuthLayerBuilder::new()
                    .auth_url(url)
                    .client_secret("s3cr3t")
            ),
            ConfigErrorKind::MissingClientId
        );
        assert_eq!(
            kind_of(OAuthLayerBuilder::new().auth_url(url).client_id("a")),
            ConfigErrorKind::MissingClientSecret
        );
        assert_eq!(
            kind_of(valid().auth_url(url).client_id("")),
            ConfigErrorKind::MissingClientId
        );
        for secret in [
            "s3cr3t&x",
            "s3cr3t x",
            "s3cr3t\n",
            "s3cr3t\u{7f}",
            "s3cr3t\u{a0}",
        ] {
            assert_eq!(
                kind_of(valid().auth_url(url).client_secret(secret)),
                ConfigErrorKind::InvalidClientSecret,
                "{secret:?}"
            );
        }
        assert_eq!(
            kind_of(valid().auth_url(url).client_id("a&b")),
            ConfigErrorKind::InvalidClientId
        );
        // Characters a form decoder would read differently are still sent as
        // given: that is what the specification asks.
        assert!(valid()
            .auth_url(url)
            .client_secret("a+b/c=d%")
            .build()
            .is_ok());
    }

    #[test]
    fn settings_are_checked() {
        let url = "https://auth.example.com";
        assert_eq!(
            kind_of(valid().auth_url(url).fetch_timeout(Duration::ZERO)),
            ConfigErrorKind::InvalidSetting
        );
        assert_eq!(
            kind_of(
                valid()
                    .auth_url(url)
                    .min_backoff(Duration::from_secs(5))
                    .max_backoff(Duration::from_secs(1))
            ),
            ConfigErrorKind::InvalidSetting
        );
    }

    #[test]
    fn environment_variables_are_read_and_named() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let err = OAuthLayerBuilder::from_lookup(env(&[])).unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::MissingUrl);
        let err = OAuthLayerBuilder::from_lookup(env(&[
            ("OAUTH_AUTH_URL", "https://a.example"),
            ("OAUTH_CLIENT_ID", "id"),
            ("OAUTH_CLIENT_SECRET", ""),
        ]))
        .unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::MissingClientSecret);
        assert!(err.to_string().contains("OAUTH_CLIENT_SECRET"));
        let b = OAuthLayerBuilder::from_lookup(env(&[
            ("OAUTH_TOKEN_URL", "https://a.example/token"),
            ("OAUTH_CLIENT_ID", "id"),
            ("OAUTH_CLIENT_SECRET", "s3cr3t"),
            ("OAUTH_SCOPE", "read"),
        ]))
        .unwrap();
        assert_eq!(b.token_url.as_deref(), Some("https://a.example/token"));
        assert_eq!(b.params, vec![("scope".to_owned(), "read".to_owned())]);

        // Any server: an issuer, a client authentication, several resources.
        let b = OAuthLayerBuilder::from_lookup(env(&[
            ("OAUTH_ISSUER", "https://idp.example/realms/x"),
            ("OAUTH_CLIENT_ID", "id"),
            ("OAUTH_CLIENT_SECRET", "s3cr3t"),
            ("OAUTH_CLIENT_AUTH", "client_secret_post"),
            ("OAUTH_SCOPE", "read write"),
            (
                "OAUTH_RESOURCE",
                "https://orders.example/ https://billing.example/",
            ),
        ]))
        .unwrap();
        assert_eq!(b.issuer.as_deref(), Some("https://idp.example/realms/x"));
        assert_eq!(b.client_auth, Some(ClientAuth::FormBody));
        let resources: Vec<&str> = b
            .params
            .iter()
            .filter(|(n, _)| n == "resource")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            resources,
            ["https://orders.example/", "https://billing.example/"]
        );
        if cfg!(feature = "reqwest") {
            assert!(b.build().unwrap().issuer().is_some());
        }

        let err = OAuthLayerBuilder::from_lookup(env(&[
            ("OAUTH_ISSUER", "https://idp.example"),
            ("OAUTH_TOKEN_URL", "https://idp.example/token"),
        ]))
        .unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
        assert!(
            err.to_string().contains("OAUTH_ISSUER and OAUTH_TOKEN_URL"),
            "{err}"
        );
        let err = OAuthLayerBuilder::from_lookup(env(&[
            ("OAUTH_ISSUER", "https://idp.example"),
            ("OAUTH_CLIENT_ID", "id"),
            ("OAUTH_CLIENT_SECRET", "s3cr3t"),
            ("OAUTH_CLIENT_AUTH", "magic"),
        ]))
        .unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::InvalidSetting);
        assert!(
            err.to_string()
                .contains("OAUTH_CLIENT_AUTH: unknown client authentication `magic`"),
            "{err}"
        );
    }

    #[test]
    fn without_a_transport_the_default_is_reqwest_or_an_error() {
        let b = OAuthLayerBuilder::new()
            .auth_url("https://a.example")
            .client_id("id")
            .client_secret("s");
        if cfg!(feature = "reqwest") {
            assert!(b.build().is_ok());
        } else {
            assert_eq!(
                b.build().unwrap_err().kind(),
                ConfigErrorKind::MissingTransport
            );
        }
    }

    #[test]
    fn debug_redacts_the_secret() {
        let b = valid().auth_url("https://auth.example.com");
        assert!(!format!("{b:?}").contains("s3cr3t"));
        let layer = b.build().unwrap();
        let shown = format!("{layer:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("id-123"));
    }
}
