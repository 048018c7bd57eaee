//! [`OAuthLayerBuilder`]: its settings (here, and the setters in sections,
//! a file and one `impl` block each, in the order a reader meets them:
//! `endpoint`, `client_auth`, `params`, `presentation`, `timing`,
//! `transport`, `sharing`), the settings read from the environment (`env`),
//! and the checks and the assembly of a layer (`build`).

mod build;
mod client_auth;
mod endpoint;
mod env;
mod params;
mod presentation;
mod profile;
mod sharing;
mod timing;
mod transport;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use crate::endpoint::ClientAuth;
use crate::slots::ParamsFor;
use crate::source::TokenSource;
use crate::store::TokenStore;
use crate::transport::Transport;

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
    resource_url: Option<String>,
    resource_urls: Vec<String>,
    trusted_issuers: Vec<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    /// A secret read from a file or a function, and read again when refused.
    secret_source: Option<crate::endpoint::SecretSource>,
    /// With `secret_source` the key file: its algorithm and key id.
    key_file: Option<(crate::keys::Algorithm, Option<String>)>,
    client_auth: Option<ClientAuth>,
    grant: crate::endpoint::Grant,
    /// Enterprise-managed authorization, assembled into `grant` at build.
    id_jag: Option<crate::endpoint::IdentityAssertion>,
    /// A person's login, assembled into `grant` at build.
    login: Option<crate::login::Login>,
    /// The login's client id where the server takes a metadata document.
    client_metadata_url: Option<String>,
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
    refresh_answer_timeout: Option<Duration>,
    forced_renewal_interval: Option<Duration>,
    min_backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    allow_insecure_http: bool,
    assertion_audience: Option<String>,
    assertion_lifetime: Option<Duration>,
    assertion_clock_skew: Option<Duration>,
    id_token_clock_skew: Option<Duration>,
    par: Option<crate::login::PushedAuthorization>,
    fapi2: bool,
    /// `Some(None)`: no `typ`.
    assertion_typ: Option<Option<String>>,
    #[cfg(feature = "reqwest")]
    tls: crate::transport::TransportSettings,
    dpop: Option<crate::dpop::DpopKey>,
    dpop_allow_bearer: bool,
    params_for: Option<ParamsFor>,
    max_token_slots: Option<usize>,
    max_accounts: Option<usize>,
    step_up_scopes: Vec<String>,
}

impl OAuthLayerBuilder {
    /// A builder with every setting at its default.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Every setting by name. The secret, keys and parameter values left out.
impl fmt::Debug for OAuthLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthLayerBuilder")
            .field("auth_url", &self.auth_url)
            .field("token_url", &self.token_url)
            .field("issuer", &self.issuer)
            .field("protected_resource", &self.resource_url)
            .field("protected_resources", &self.resource_urls)
            .field("trusted_issuers", &self.trusted_issuers)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("client_secret_from", &self.secret_source)
            .field("client_auth", &self.client_auth)
            .field("grant", &self.grant)
            .field("login", &self.login)
            .field("client_metadata_url", &self.client_metadata_url)
            .field(
                "params",
                &self.params.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("header_name", &self.header_name)
            .field("auth_scheme", &self.auth_scheme)
            .field("keep_existing_header", &self.keep_existing_header)
            .field("transport", &self.transport.as_ref().map(|_| "custom"))
            .field("token_source", &self.source.as_ref().map(|_| "custom"))
            .field("token_source_name", &self.source_name)
            .field("token_store", &self.store.as_ref().map(|_| "custom"))
            .field("refresh_margin", &self.refresh_margin)
            .field("expiry_skew", &self.expiry_skew)
            .field("fetch_timeout", &self.fetch_timeout)
            .field("refresh_answer_timeout", &self.refresh_answer_timeout)
            .field("forced_renewal_interval", &self.forced_renewal_interval)
            .field("min_backoff", &self.min_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("assertion_audience", &self.assertion_audience)
            .field("assertion_lifetime", &self.assertion_lifetime)
            .field("assertion_clock_skew", &self.assertion_clock_skew)
            .field("assertion_typ", &self.assertion_typ)
            .field("id_token_clock_skew", &self.id_token_clock_skew)
            .field("pushed_authorization", &self.par)
            .field("fapi2", &self.fapi2)
            .field("client_identity", &self.presents_certificate())
            .field("dpop", &self.dpop_key())
            .field("dpop_allow_bearer", &self.dpop_allow_bearer)
            .field("params_for", &self.params_for.as_ref().map(|_| "custom"))
            .field("max_token_slots", &self.max_token_slots)
            .field("max_accounts", &self.max_accounts)
            .field("step_up_scopes", &self.step_up_scopes)
            .finish()
    }
}
