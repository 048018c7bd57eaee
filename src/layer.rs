//! [`OAuthLayer`]: the layer users add to their client stack.

use std::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use crate::builder::OAuthLayerBuilder;
use crate::cache::TokenCache;
use crate::service::OAuthService;

/// Adds a client-credentials access token to every request of the service it
/// wraps.
///
/// Build one with [`OAuthLayer::builder`]. Cloning is cheap (one `Arc`): the
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
///     oauth.token_url().to_string(),
///     "https://auth.example.com/v1/oauth/accesstoken"
/// );
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct OAuthLayer {
    pub(crate) cache: Arc<TokenCache>,
}

impl OAuthLayer {
    /// Starts configuring a layer; the same as [`OAuthLayerBuilder::new`].
    pub fn builder() -> OAuthLayerBuilder {
        OAuthLayerBuilder::new()
    }

    /// The token endpoint the layer requests tokens from.
    pub fn token_url(&self) -> &http::Uri {
        &self.cache.endpoint().url
    }

    /// The client id the layer authenticates as.
    pub fn client_id(&self) -> &str {
        &self.cache.endpoint().client_id
    }
}

impl<S> Layer<S> for OAuthLayer {
    type Service = OAuthService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OAuthService::new(inner, self.clone())
    }
}

impl fmt::Debug for OAuthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthLayer")
            .field("token_url", self.token_url())
            .field("client_id", &self.client_id())
            .field("client_secret", &"[redacted]")
            .field("cache", &self.cache)
            .finish()
    }
}
