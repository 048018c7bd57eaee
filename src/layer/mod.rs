//! [`OAuthLayer`]: the layer users add to their client stack, and the
//! [`OAuthService`] constructors that take a layer.
//!
//! A layer holds the default token's cache, the token slots, and where
//! tokens come from.

mod accounts;
mod logout;
mod person;

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use crate::builder::OAuthLayerBuilder;
use crate::cache::{CacheRef, CachedToken, TokenCache};
use crate::endpoint::{ResourceMetadata, ServerMetadata};
use crate::error::{ConfigError, TokenError};
use crate::service::OAuthService;
use crate::slots::factory::{Endpoint, Via};
use crate::slots::Slots;
use crate::telemetry::stats::Stats;
use crate::token::params::TokenParams;
use crate::token::{AccessToken, UsableToken};

/// Adds a client-credentials access token to every request of the service it
/// wraps.
///
/// Build one with [`OAuthLayer::builder`]. Cloning is cheap: one `Arc`. The
/// layer, its clones and every [`OAuthService`] built from any of them share
/// one token, one token request at a time, and one back-off.
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::OAuthLayer;
///
/// # fn main() -> Result<(), tower_oauth::ConfigError> {
/// let oauth = OAuthLayer::builder()
///     .auth_url("https://auth.example.com")
///     .client_id("my-client")
///     .client_secret("my-secret")
///     .refresh_margin(Duration::from_secs(120))
///     .build()?;
/// assert_eq!(
///     oauth.token_url().unwrap(),
///     "https://auth.example.com/v1/oauth/accesstoken"
/// );
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct OAuthLayer {
    shared: Arc<Shared>,
}

/// What a layer and its clones share.
#[derive(Debug)]
struct Shared {
    /// The default token's cache.
    cache: Arc<TokenCache>,
    /// A token of its own for each set of parameters requests select.
    slots: Arc<Slots>,
    /// The reference to `cache` a new service instance starts on. See
    /// [`OAuthService::clone`](crate::OAuthService).
    cache_ref: Arc<CacheRef>,
    /// Where tokens come from. None for a layer on a token source.
    endpoint: Option<Endpoint>,
    /// For a layer bound to an account: the account, and its factory,
    /// which keeps its chain in memory while the layer lives.
    account: Option<Bound>,
}

/// The account a layer is bound to ([`OAuthLayer::for_account`]).
struct Bound {
    /// The account's id, for its sign-out ([`OAuthLayer::logout`]).
    id: String,
    _factory: Arc<crate::slots::factory::SlotFactory>,
}

impl fmt::Debug for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digest = crate::token::params::account_digest(&self.id);
        f.debug_struct("Bound")
            .field("account", &digest)
            .finish_non_exhaustive()
    }
}

impl OAuthLayer {
    /// A layer on `cache`, the default token, with its token slots.
    pub(crate) fn new(cache: Arc<TokenCache>, slots: Slots, endpoint: Option<Endpoint>) -> Self {
        let layer = OAuthLayer::on(cache, slots, endpoint, None);
        layer.restore_after_a_loss();
        layer
    }

    /// A layer bound to an account: on `cache`, the account's default
    /// token, with `slots` made from `factory`, the factory of the account
    /// `id`.
    fn bound(
        cache: Arc<TokenCache>,
        slots: Slots,
        endpoint: Option<Endpoint>,
        (id, factory): (String, Arc<crate::slots::factory::SlotFactory>),
    ) -> Self {
        let bound = Bound {
            id,
            _factory: factory,
        };
        OAuthLayer::on(cache, slots, endpoint, Some(bound))
    }

    fn on(
        cache: Arc<TokenCache>,
        slots: Slots,
        endpoint: Option<Endpoint>,
        account: Option<Bound>,
    ) -> Self {
        OAuthLayer {
            shared: Arc::new(Shared {
                cache_ref: Arc::new(CacheRef::new(Arc::clone(&cache))),
                cache,
                slots: Arc::new(slots),
                endpoint,
                account,
            }),
        }
    }

    /// Starts configuring a layer. The same as [`OAuthLayerBuilder::new`].
    pub fn builder() -> OAuthLayerBuilder {
        OAuthLayerBuilder::new()
    }

    /// A layer configured from the environment: one of `OAUTH_ISSUER`,
    /// `OAUTH_TOKEN_URL` and `OAUTH_AUTH_URL`, then `OAUTH_CLIENT_ID` and
    /// `OAUTH_CLIENT_SECRET`. `OAUTH_CLIENT_AUTH`, `OAUTH_SCOPE` and
    /// `OAUTH_RESOURCE` are optional. Every other setting is at its default.
    /// See [`OAuthLayerBuilder::from_env`].
    ///
    /// ```
    /// use tower_oauth::OAuthLayer;
    ///
    /// match OAuthLayer::from_env() {
    ///     Ok(oauth) => println!("tokens from {:?}", oauth.token_url()),
    ///     // For example: "environment variable OAUTH_CLIENT_ID is not set".
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the missing variable, or any problem
    /// [`OAuthLayerBuilder::build`] finds.
    pub fn from_env() -> Result<OAuthLayer, ConfigError> {
        OAuthLayerBuilder::from_env()?.build()
    }

    /// The token endpoint the layer requests tokens from. `None` for a layer
    /// built on a [`TokenSource`](crate::TokenSource), or on an
    /// [`issuer`](OAuthLayerBuilder::issuer): see
    /// [`server_metadata`](Self::server_metadata) for that.
    pub fn token_url(&self) -> Option<&http::Uri> {
        self.shared.endpoint.as_ref().and_then(Endpoint::url)
    }

    /// The issuer the layer discovers its token endpoint from, when built with
    /// [`issuer`](OAuthLayerBuilder::issuer). With a [protected
    /// resource](OAuthLayerBuilder::protected_resource) and no issuer, the
    /// server taken is in [`resource_metadata`](Self::resource_metadata).
    pub fn issuer(&self) -> Option<&str> {
        match &self.shared.endpoint.as_ref()?.via {
            Via::Issuer(discovery) => Some(discovery.issuer()),
            Via::Resource(resource, _) => resource.issuer(),
            Via::Url(..) | Via::Nowhere => None,
        }
    }

    /// What discovery found at the [`issuer`](OAuthLayerBuilder::issuer), or at
    /// the server a [protected resource](OAuthLayerBuilder::protected_resource)
    /// names. That is the token endpoint and the client authentication in use.
    /// Discovery happens at the first token request. `None` before it, after a
    /// failed discovery, and for layers without an issuer or a protected
    /// resource.
    pub fn server_metadata(&self) -> Option<ServerMetadata> {
        match &self.shared.endpoint.as_ref()?.via {
            Via::Issuer(discovery) => discovery.metadata(),
            Via::Resource(_, source) => source.server()?.metadata(),
            Via::Url(..) | Via::Nowhere => None,
        }
    }

    /// The [protected resource](OAuthLayerBuilder::protected_resource) the
    /// layer's tokens are for, as configured.
    pub fn protected_resource(&self) -> Option<&str> {
        match &self.shared.endpoint.as_ref()?.via {
            Via::Resource(resource, _) => Some(resource.url()),
            _ => None,
        }
    }

    /// What the [protected resource](OAuthLayerBuilder::protected_resource)'s
    /// metadata says, and the authorization server the layer took from it. The
    /// metadata is read at the first token request. `None` before it, while no
    /// reading has succeeded, and for layers without a protected resource.
    pub fn resource_metadata(&self) -> Option<ResourceMetadata> {
        match &self.shared.endpoint.as_ref()?.via {
            Via::Resource(resource, _) => resource.metadata(),
            _ => None,
        }
    }

    /// The client id the layer authenticates as. `None` for a layer built on a
    /// [`TokenSource`](crate::TokenSource).
    pub fn client_id(&self) -> Option<&str> {
        self.shared.endpoint.as_ref().map(|e| e.client_id.as_str())
    }

    /// What the layer has done so far, and the state of its token, for health
    /// checks and dashboards. The counters are totals over the default token
    /// and every [token slot](Self::slot_stats), evicted ones included.
    /// `token_usable_for` and `backing_off` are the default token's. It is
    /// cheap: a few atomic loads per token, a clock read, and brief locks that
    /// the hot path never takes.
    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.cache.stats();
        stats.add(&self.shared.slots.totals());
        stats
    }

    /// Each live token slot's parameters and stats. See [`TokenParams`]. Empty
    /// for a layer that serves one token.
    pub fn slot_stats(&self) -> Vec<(TokenParams, Stats)> {
        self.shared.slots.stats()
    }

    /// A token for `params`, from its slot, made if need be. It serves code
    /// outside a client stack: it is what a request carrying `params` gets.
    /// Empty parameters give the default token, as [`token`](Self::token) does.
    ///
    /// # Errors
    ///
    /// As [`token`](Self::token). Also
    /// [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest) for parameters
    /// the layer cannot send, such as a reserved name or a value the
    /// product-information API's unencoded body cannot carry. The same for a
    /// layer built on a [`TokenSource`](crate::TokenSource).
    pub async fn token_for(&self, params: &TokenParams) -> Result<AccessToken, TokenError> {
        let cache = self.cache_for(params)?;
        cache.token().await.map(|t| t.token.clone())
    }

    /// The current token, for code outside a Tower stack, such as a websocket
    /// handshake or a hand-built request. It is the cached one while it is
    /// usable. Otherwise it is the result of the shared fetch, started if none
    /// is under way. A request through the layer would get exactly the same.
    ///
    /// ```
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// let token = oauth.token().await?;
    /// let header = format!("Bearer {}", token.expose_token());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The [`TokenError`] of a failed fetch, or the last one while backing
    /// off.
    pub async fn token(&self) -> Result<AccessToken, TokenError> {
        self.shared.cache.token().await.map(|t| t.token.clone())
    }

    /// The current token if it is usable at this moment, without waiting and
    /// without blocking. It serves code that cannot await, such as a tonic
    /// [`Interceptor`](https://docs.rs/tonic/latest/tonic/service/trait.Interceptor.html)
    /// or a callback. Its expiry is checked against the clock, as for a request
    /// through the layer, and a renewal ahead starts when it is due. Without a
    /// usable token, it returns an error at once, and starts the shared fetch
    /// in the background on the current Tokio runtime. So a later call finds
    /// the token.
    ///
    /// ```
    /// use tonic::{service::Interceptor, Request, Status};
    /// use tower_oauth::OAuthLayer;
    ///
    /// /// Puts the layer's token on every gRPC call, synchronously.
    /// #[derive(Clone)]
    /// struct BearerToken(OAuthLayer);
    ///
    /// impl Interceptor for BearerToken {
    ///     fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
    ///         let token = self.0.token_now().map_err(|e| Status::unavailable(e.to_string()))?;
    ///         let value = token.header_value().as_bytes().try_into().map_err(|_| {
    ///             Status::internal("the token cannot go into gRPC metadata")
    ///         })?;
    ///         request.metadata_mut().insert("authorization", value);
    ///         Ok(request)
    ///     }
    /// }
    /// ```
    ///
    /// Prefer the layer itself where the client stack allows it. A request
    /// through it waits for a token instead of failing.
    ///
    /// # Errors
    ///
    /// [`NotReady`](crate::TokenErrorKind::NotReady) while a token is being
    /// fetched. The last failure while backing off after one.
    /// [`Runtime`](crate::TokenErrorKind::Runtime) when a fetch is needed and
    /// no Tokio runtime is running here.
    pub fn token_now(&self) -> Result<UsableToken, TokenError> {
        self.shared.cache.usable_now().map(usable)
    }

    /// As [`token_now`](Self::token_now), for the token of `params`. See
    /// [`token_for`](Self::token_for).
    ///
    /// # Errors
    ///
    /// As [`token_now`](Self::token_now) and [`token_for`](Self::token_for).
    pub fn token_now_for(&self, params: &TokenParams) -> Result<UsableToken, TokenError> {
        self.cache_for(params)?.usable_now().map(usable)
    }

    /// Drops the current token because the API refused it, and starts fetching
    /// a new one. The next [`token`](Self::token) or request waits for it. It
    /// is rate-limited like the layer's own reaction to a 401. Within
    /// [`forced_renewal_interval`](OAuthLayerBuilder::forced_renewal_interval)
    /// of the last forced renewal, this does nothing. Otherwise the fetch
    /// starts at once, even while a failed renewal's back-off lasts. Returns
    /// whether the token was dropped.
    ///
    /// ```
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// let token = oauth.token().await?;
    /// # let refused = true;
    /// // ... the websocket server refused `token` ...
    /// if refused {
    ///     oauth.force_renewal();
    ///     let fresh = oauth.token().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn force_renewal(&self) -> bool {
        self.shared.cache.force_renewal(None)
    }

    /// Drops every token, the default one and every slot's, and forgets the
    /// back-off: the next request fetches at once.
    pub(crate) fn restart_all(&self) {
        self.shared.cache.restart();
        for cache in self.shared.slots.caches() {
            cache.restart();
        }
    }

    /// Starts a new chain with the refresh token of a new login, without
    /// rebuilding the layer. Call it after
    /// [`LoginRequired`](crate::TokenErrorKind::LoginRequired), or to switch
    /// accounts. The layer's tokens are dropped, the default one and every
    /// token slot's, and its back-off is forgotten. So the next request
    /// refreshes with `token` at once. Through a token store, the new chain
    /// replaces the stored one at the next refresh, and the other processes or
    /// replicas follow it from there. A token the store shares from before is
    /// not taken.
    ///
    /// ```
    /// # async fn example(oauth: tower_oauth::OAuthLayer, new_login: String) -> Result<(), Box<dyn std::error::Error>> {
    /// use tower_oauth::TokenErrorKind;
    ///
    /// if let Err(e) = oauth.token().await {
    ///     if e.kind() == TokenErrorKind::LoginRequired {
    ///         // ... log in again, then:
    ///         oauth.replace_refresh_token(new_login)?;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] of kind
    /// [`InvalidSetting`](crate::ConfigErrorKind::InvalidSetting) when the
    /// layer was not built with
    /// [`refresh_token`](OAuthLayerBuilder::refresh_token). The same when
    /// `token` is empty, longer than 8 KiB, or holds a character outside RFC
    /// 6749's `VSCHAR`.
    pub fn replace_refresh_token(&self, token: impl Into<String>) -> Result<(), ConfigError> {
        let Some(chain) = self.shared.slots.chain() else {
            return Err(ConfigError::new(
                crate::error::ConfigErrorKind::InvalidSetting,
                "replace_refresh_token: this layer was not built with a refresh token",
            ));
        };
        let token = token.into();
        crate::endpoint::check_refresh_token(&token, "given to replace_refresh_token")?;
        chain.replace(&token);
        self.restart_all();
        tracing::info!("a new login's refresh token replaces the chain");
        Ok(())
    }
}

/// What a cached token hands out through the accessors that never wait.
fn usable(token: Arc<CachedToken>) -> UsableToken {
    UsableToken {
        token: token.token.clone(),
        header: token.header.clone(),
        usable_for: token.timings.usable_for(tokio::time::Instant::now()),
    }
}

impl OAuthLayer {
    /// The default token's cache, for the layer's other entry points.
    pub(crate) fn default_cache(&self) -> &Arc<TokenCache> {
        &self.shared.cache
    }

    /// The cache of the token slot of `params`, made if need be. The default
    /// token's for empty parameters.
    pub(crate) fn cache_for(&self, params: &TokenParams) -> Result<Arc<TokenCache>, TokenError> {
        if params.is_empty() {
            return Ok(Arc::clone(self.default_cache()));
        }
        Ok(Arc::clone(&self.shared.slots.cache_ref_for(params)?.cache))
    }

    /// The cache of the protected resource a request to `destination` goes to,
    /// made if need be. `destination` is asked for only when the layer has
    /// protected resources. Otherwise `None`: the default token's cache, or as
    /// the request's own parameters say. This serves the layer's entry points
    /// that have no `http` request head.
    #[cfg_attr(
        not(any(feature = "reqwest-middleware", feature = "mcp")),
        allow(dead_code)
    )]
    pub(crate) fn cache_at<'p>(
        &self,
        destination: impl FnOnce() -> Option<crate::slots::routes::Destination<'p>>,
    ) -> Option<Result<Arc<TokenCache>, TokenError>> {
        let routed = self.shared.slots.routed(destination)?;
        Some(routed.map(|cache_ref| Arc::clone(&cache_ref.cache)))
    }
}

impl<S> Layer<S> for OAuthLayer {
    type Service = OAuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OAuthService::new(inner, self.clone())
    }
}

impl<S> OAuthService<S> {
    /// Wraps `inner`, taking tokens from `layer`.
    pub fn new(inner: S, layer: OAuthLayer) -> Self {
        let shared = &layer.shared;
        OAuthService::on(
            inner,
            Arc::clone(&shared.cache_ref),
            Arc::clone(&shared.slots),
        )
    }
}

impl fmt::Debug for OAuthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthLayer")
            .field("token_url", &self.token_url())
            .field("client_id", &self.client_id())
            .field("client_secret", &"[redacted]")
            .field("cache", &self.shared.cache)
            .finish()
    }
}

impl From<&OAuthLayer> for crate::endpoint::SubjectToken {
    /// The other layer's token as a token exchange's subject, an access token.
    /// That layer fetches, caches and renews it. Where tokens are shared, it is
    /// known by that layer's endpoint and client id. A token past its renewal
    /// point is renewed first, waited for within that layer's fetch timeout. If
    /// the renewal fails while the current token still serves, the current one
    /// goes. So a server that gives the exchanged token the subject's expiry
    /// gives it as much life as it can.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, grant::{SubjectToken, TokenExchange}};
    ///
    /// let upstream = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/token")
    ///     .client_id("gateway")
    ///     .client_secret("s3cret")
    ///     .build()?;
    /// let downstream = OAuthLayer::builder()
    ///     .token_url("https://sts.example.com/token")
    ///     .token_exchange(TokenExchange::new(SubjectToken::from(&upstream)))
    ///     .audience("ledger-api")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    fn from(layer: &OAuthLayer) -> Self {
        let origin = match (layer.issuer(), layer.token_url()) {
            (Some(issuer), _) => issuer.to_owned(),
            (None, Some(url)) => url.to_string(),
            (None, None) => "token-source".to_owned(),
        };
        let name = format!("layer:{origin}:{}", layer.client_id().unwrap_or(""));
        let layer = layer.clone();
        // A subject past its renewal point is renewed first, so that an
        // exchanged token given the subject's expiry lives as long as it can.
        Self::from_fn(name, move || {
            let layer = layer.clone();
            Box::pin(async move {
                let token = layer.shared.cache.fresh_token().await?;
                Ok(token.token.expose_token().to_owned())
            })
        })
    }
}
