//! Protected-resource metadata, by RFC 9728. It says which authorization server
//! an API names, the `resource` and scopes its tokens are requested with, and
//! the binding it requires. It is read inside the token fetch, so with its
//! single flight, timeout, size cap and back-off. It is checked before anything
//! in it is used. The trust rule chooses the server.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::Uri;
use serde_json::Value;
use tokio::time::Instant;

use crate::endpoint::client_auth::ClientAuth;
use crate::endpoint::discovery::{get_json, texts, Discovery, SharedMetadata};
use crate::endpoint::spec::RequestSpec;
use crate::endpoint::url::same_identifier;
use crate::endpoint::TokenRequest;
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::support::boxed::BoxFuture;
use crate::token::params::is_scope_token;
use crate::token::AccessToken;

mod find;

use self::find::covers;

/// How long protected-resource metadata is used before it is read again.
const MAX_AGE: Duration = Duration::from_secs(60 * 60);

/// How soon after a challenge had the metadata read again another may.
const MIN_REREAD: Duration = Duration::from_secs(10);

/// What the metadata of a [protected
/// resource](crate::OAuthLayerBuilder::protected_resource) says, by RFC 9728
/// section 2, and the authorization server the layer took from it.
/// [`OAuthLayer::resource_metadata`](crate::OAuthLayer::resource_metadata)
/// gives it. Every text is the server's, clipped and escaped.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceMetadata {
    /// The resource identifier, `resource`. It is identical to the one
    /// configured, which the layer checks. Read at the origin's root or where
    /// the API's challenge said, it may name a resource that holds the one
    /// configured (same origin, a path above it); tokens then ask for it.
    pub resource: String,
    /// Where the metadata was read.
    pub metadata_url: String,
    /// The authorization servers the resource names in `authorization_servers`,
    /// in its order.
    pub authorization_servers: Vec<String>,
    /// The one the layer requests tokens from, by the trust rule of
    /// [`trusted_issuers`](crate::OAuthLayerBuilder::trusted_issuers).
    pub issuer: String,
    /// The scopes the resource lists in `scopes_supported`. Requested when the
    /// layer has no `scope` of its own (a person's login asks first for the
    /// scope the API's challenge names).
    pub scopes_supported: Vec<String>,
    /// Whether the resource takes only DPoP-bound tokens:
    /// `dpop_bound_access_tokens_required`.
    pub dpop_bound_access_tokens_required: bool,
    /// Whether the resource takes only tokens bound to a client certificate, by
    /// RFC 8705: `tls_client_certificate_bound_access_tokens`.
    pub tls_client_certificate_bound_access_tokens: bool,
}

/// Which of a resource's authorization servers this client may use.
#[derive(Clone, Debug)]
pub(crate) enum Trust {
    /// The [issuer](crate::OAuthLayerBuilder::issuer) set: only it.
    Issuer(String),
    /// The first of the resource's that is among these.
    Listed(Vec<String>),
    /// The resource's first: only for credentials that cannot be replayed
    /// elsewhere (the builder checks).
    Any,
}

/// A layer's protected resource: its metadata, read once for all the
/// layer's caches, and the discovery of the server chosen.
pub(crate) struct Resource {
    /// As configured: what the metadata's `resource` must be identical to.
    url: String,
    parsed: Uri,
    metadata_url: Uri,
    trust: Trust,
    spec: Arc<RequestSpec>,
    read: Mutex<Option<Read>>,
    /// Where an API's challenge said the metadata is (`resource_metadata`),
    /// to be read there next, and when a challenge last said so.
    hint: Mutex<(Option<Uri>, Option<Instant>)>,
}

#[derive(Clone)]
struct Read {
    metadata: ResourceMetadata,
    issuer: Uri,
    at: Instant,
    /// Read again at the next fetch: a token request failed, or the API
    /// pointed at its metadata.
    stale: bool,
    /// The server metadata of `metadata.issuer`, shared by the caches.
    server: SharedMetadata,
    /// The scope the resource's challenge to a request without a token
    /// named, asked for before `scopes_supported` (a login's only).
    challenge_scope: Option<String>,
}

impl Resource {
    /// The resource at `url` (already checked: absolute, no query or
    /// fragment).
    pub(crate) fn new(url: &str, parsed: &Uri, trust: Trust, spec: Arc<RequestSpec>) -> Arc<Self> {
        Arc::new(Resource {
            url: url.to_owned(),
            parsed: parsed.clone(),
            metadata_url: metadata_url(parsed),
            trust,
            spec,
            read: Mutex::new(None),
            hint: Mutex::new((None, None)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Read>> {
        self.read.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `scopes_supported` of the authorization server its metadata
    /// names, once read; `None` before.
    pub(crate) fn server_scopes(&self) -> Option<Vec<String>> {
        let server = Arc::clone(&self.lock().as_ref()?.server);
        let metadata = server.lock().unwrap_or_else(PoisonError::into_inner);
        Some(metadata.as_ref()?.scopes_supported.clone())
    }

    /// The resource identifier, as configured.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The resource identifier, parsed.
    pub(crate) fn parsed(&self) -> &Uri {
        &self.parsed
    }

    /// The issuer configured, which the resource must name.
    pub(crate) fn issuer(&self) -> Option<&str> {
        match &self.trust {
            Trust::Issuer(issuer) => Some(issuer),
            Trust::Listed(_) | Trust::Any => None,
        }
    }

    /// What the last reading found.
    pub(crate) fn metadata(&self) -> Option<ResourceMetadata> {
        self.lock().as_ref().map(|read| read.metadata.clone())
    }

    /// Read the metadata again at the next token fetch.
    pub(crate) fn mark_stale(&self) {
        if let Some(read) = self.lock().as_mut() {
            read.stale = true;
        }
    }

    /// An API refused a token with a challenge naming its metadata at
    /// `url` (RFC 9728 section 5.1): read there at the next fetch, if it is
    /// on the resource's own origin and no challenge did so within
    /// `MIN_REREAD` (a challenge cannot make the layer read elsewhere, nor
    /// often).
    pub(crate) fn hinted(&self, url: &str) {
        let Ok(hint) = url.parse::<Uri>() else {
            return;
        };
        if hint.scheme() != self.metadata_url.scheme()
            || hint.authority() != self.metadata_url.authority()
        {
            tracing::debug!(
                resource = %self.url,
                hint = %crate::error::clip(url),
                "a challenge named protected-resource metadata on another origin; not read"
            );
            return;
        }
        {
            let mut last = self.hint.lock().unwrap_or_else(PoisonError::into_inner);
            if last.1.is_some_and(|at| at.elapsed() < MIN_REREAD) {
                return;
            }
            *last = (Some(hint), Some(Instant::now()));
        }
        self.mark_stale();
    }

    /// The metadata: as read before while it is fresh, else read now; if
    /// reading it again fails in a way that can pass (the network, a
    /// `5xx`), what was read before, with a warning.
    async fn current(&self) -> Result<Read, TokenError> {
        let known = self.lock().clone();
        if let Some(read) = &known {
            if !read.stale && read.at.elapsed() < MAX_AGE {
                return Ok(read.clone());
            }
        }
        let outcome = self.read_now(known.as_ref()).await;
        let document = crate::telemetry::Document::ProtectedResource;
        crate::telemetry::metadata_read(document, outcome.is_ok());
        let read = match outcome {
            Ok(read) => read,
            Err(e) if e.is_retryable() && known.is_some() => {
                tracing::warn!(
                    resource = %self.url,
                    error = %e,
                    "could not read the protected-resource metadata again; using what was \
                     read before"
                );
                return Ok(known.expect("checked"));
            }
            Err(e) => return Err(e),
        };
        *self.lock() = Some(read.clone());
        Ok(read)
    }

    /// Reads and checks the metadata, and chooses the server.
    async fn read_now(&self, known: Option<&Read>) -> Result<Read, TokenError> {
        let hint = self
            .hint
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .take();
        let what = "protected-resource metadata";
        // A person's login asks for the scope the resource's challenge names
        // first (the MCP scope selection): the resource is asked once
        // without a token.
        let probed = match self.spec.login_chain().is_some() {
            true => Some(self.challenged().await),
            false => None,
        };
        let challenge_scope = probed.clone().flatten().and_then(|c| c.scope);
        let (url, doc) = match hint {
            Some(hint) => {
                let doc = get_json(&*self.spec.transport, &hint, what).await?;
                (hint, doc)
            }
            None => self.find(probed.as_ref()).await?,
        };
        let url = &url;
        let invalid = |m: String| {
            TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message(format!("{what} at `{url}`: {m}"))
        };
        let resource = doc.get("resource").and_then(Value::as_str).unwrap_or("");
        // Read at the resource's own well-known URL, the metadata is the
        // resource's (RFC 9728 section 3.3). Read elsewhere (the origin's
        // root, a challenge's hint), it may be that of a resource that holds
        // this one: the same origin, and a path this one's lies under.
        let own = *url == self.metadata_url;
        if !same_identifier(resource, &self.url) && (own || !covers(resource, &self.url)) {
            return Err(invalid(format!(
                "the metadata names the resource `{}`, not `{}` as configured; they must be \
                 identical (RFC 9728 section 3.3), and nothing else in it is used",
                clip(resource),
                self.url
            )));
        }
        let flag = |key: &str| doc.get(key).and_then(Value::as_bool).unwrap_or(false);
        let authorization_servers = texts(&doc, "authorization_servers");
        let scopes_supported = texts(&doc, "scopes_supported");
        if let Some(bad) = scopes_supported.iter().find(|s| !is_scope_token(s)) {
            return Err(invalid(format!(
                "`scopes_supported` lists `{bad}`, which is not a scope (RFC 6749 section 3.3)"
            )));
        }
        let issuer = self.choose(&authorization_servers).map_err(|e| {
            let detail = e.detail().unwrap_or_default();
            e.with_message(format!("{what} at `{url}`: {detail}"))
        })?;
        let parsed = crate::endpoint::checked_url(
            "the authorization server",
            &issuer,
            self.spec.allow_insecure_http,
        )
        .map_err(|e| invalid(e.to_string()))?;
        let metadata = ResourceMetadata {
            resource: resource.to_owned(),
            metadata_url: url.to_string(),
            authorization_servers,
            issuer,
            scopes_supported,
            dpop_bound_access_tokens_required: flag("dpop_bound_access_tokens_required"),
            tls_client_certificate_bound_access_tokens: flag(
                "tls_client_certificate_bound_access_tokens",
            ),
        };
        self.check_binding(&metadata)?;
        let server = match known {
            Some(known) if known.metadata.issuer == metadata.issuer => Arc::clone(&known.server),
            _ => SharedMetadata::default(),
        };
        tracing::info!(
            resource = %self.url,
            issuer = %metadata.issuer,
            scopes = ?metadata.scopes_supported,
            "read the protected-resource metadata"
        );
        Ok(Read {
            metadata,
            issuer: parsed,
            at: Instant::now(),
            stale: false,
            server,
            challenge_scope,
        })
    }

    /// The server this client takes among those the resource names.
    fn choose(&self, listed: &[String]) -> Result<String, TokenError> {
        let refuse = |m: String| TokenError::new(TokenErrorKind::Configuration).with_message(m);
        let named = || {
            if listed.is_empty() {
                "none".to_owned()
            } else {
                listed.join(", ")
            }
        };
        match &self.trust {
            Trust::Issuer(issuer) if listed.iter().any(|s| same_identifier(s, issuer)) => {
                Ok(issuer.clone())
            }
            Trust::Issuer(issuer) => Err(refuse(format!(
                "the resource names the authorization servers ({}), not the issuer `{issuer}` \
                 configured; no token is requested from a server the resource does not name",
                named()
            ))),
            Trust::Listed(trusted) => listed
                .iter()
                .find(|s| trusted.iter().any(|t| same_identifier(s, t)))
                .cloned()
                .ok_or_else(|| {
                    refuse(format!(
                        "the resource names the authorization servers ({}), none of them among \
                         trusted_issuers ({}); the client's credential is sent to none of them",
                        named(),
                        trusted.join(", ")
                    ))
                }),
            Trust::Any => listed.first().cloned().ok_or_else(|| {
                TokenError::new(TokenErrorKind::InvalidResponse)
                    .with_message("the metadata names no `authorization_servers`".to_owned())
            }),
        }
    }

    /// The binding the resource requires, which this layer must be able to
    /// give its tokens.
    fn check_binding(&self, metadata: &ResourceMetadata) -> Result<(), TokenError> {
        let refuse = |m: &str| {
            Err(TokenError::new(TokenErrorKind::Configuration)
                .with_message(format!("the protected resource `{}` {m}", self.url)))
        };
        if metadata.dpop_bound_access_tokens_required && self.spec.dpop.is_none() {
            return refuse(
                "takes only DPoP-bound tokens (dpop_bound_access_tokens_required), and this \
                 layer has no DPoP key: add one with OAuthLayerBuilder::dpop",
            );
        }
        if metadata.tls_client_certificate_bound_access_tokens && !self.spec.presents_certificate {
            return refuse(
                "takes only tokens bound to a client certificate \
                 (tls_client_certificate_bound_access_tokens), and this layer presents none: \
                 add one with OAuthLayerBuilder::client_identity",
            );
        }
        Ok(())
    }
}

/// Where a resource publishes its metadata: the well-known part between the
/// host and the resource's path (RFC 9728 section 3.1).
fn metadata_url(resource: &Uri) -> Uri {
    let scheme = resource.scheme_str().unwrap_or("https");
    let authority = resource.authority().map_or("", |a| a.as_str());
    let path = resource.path().trim_end_matches('/');
    format!("{scheme}://{authority}/.well-known/oauth-protected-resource{path}")
        .parse()
        .expect("built from a valid URL")
}

/// The token source of one of the layer's caches for a protected resource:
/// the metadata (shared), then the discovery of the server it names, with
/// the `resource` and the scopes.
pub(crate) struct ResourceSource {
    resource: Arc<Resource>,
    /// What its token requests are made of: the layer's, or an account's.
    spec: Arc<RequestSpec>,
    /// The cache's own parameters.
    params: Vec<(String, String)>,
    /// The discovery of the server last chosen.
    current: Mutex<Option<Arc<Discovery>>>,
}

impl ResourceSource {
    /// The tokens of `resource`, asked with `spec` (the layer's, or an
    /// account's) and `params`.
    pub(crate) fn new(
        resource: Arc<Resource>,
        spec: Arc<RequestSpec>,
        params: Vec<(String, String)>,
    ) -> Arc<Self> {
        Arc::new(ResourceSource {
            resource,
            spec,
            params,
            current: Mutex::new(None),
        })
    }

    /// The token request's parameters: the cache's, the `resource` (RFC
    /// 8707) unless they name one, the scopes the resource lists unless
    /// they name some.
    fn params(&self, read: &Read) -> Vec<(String, String)> {
        let metadata = &read.metadata;
        let mut params = self.params.clone();
        let has = |name: &str| self.params.iter().any(|(n, _)| n == name);
        if !has("resource") {
            // The metadata's own, where it names a resource that holds the
            // one configured.
            let resource = if same_identifier(&metadata.resource, &self.resource.url) {
                &self.resource.url
            } else {
                &metadata.resource
            };
            params.push(("resource".to_owned(), resource.clone()));
        }
        let scope = match &read.challenge_scope {
            Some(scope) => scope.clone(),
            None => metadata.scopes_supported.join(" "),
        };
        if !has("scope") && !scope.is_empty() {
            let unencoded = self.resource.spec.auth == Some(ClientAuth::UnencodedBody);
            match crate::endpoint::check_param("scope", &scope, unencoded) {
                Ok(()) => params.push(("scope".to_owned(), scope)),
                Err(e) => tracing::warn!(
                    error = %e,
                    "the resource's scopes_supported cannot be carried by this layer's token \
                     request; asking without them"
                ),
            }
        }
        params
    }

    /// The discovery for what `read` found: the one before when the server
    /// and the parameters are the same.
    fn discovery(&self, read: &Read) -> Arc<Discovery> {
        let params = self.params(read);
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(discovery) = current.as_ref() {
            if discovery.issuer() == read.metadata.issuer && discovery.params() == params {
                return Arc::clone(discovery);
            }
        }
        let discovery = Discovery::new(
            &read.metadata.issuer,
            &read.issuer,
            Arc::clone(&self.spec),
            params,
            Arc::clone(&read.server),
        );
        *current = Some(Arc::clone(&discovery));
        discovery
    }

    /// The current discovery, if a token was requested.
    pub(crate) fn server(&self) -> Option<Arc<Discovery>> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().map(Arc::clone)
    }

    /// The token request the server's metadata makes, for a web login.
    pub(crate) async fn token_request(&self) -> Result<Arc<TokenRequest>, TokenError> {
        let read = self.resource.current().await?;
        self.discovery(&read).token_request().await
    }

    /// The metadata (read again when need be), then the server's discovery
    /// and one token request.
    pub(crate) fn fetch(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            let read = self.resource.current().await?;
            let outcome = self.discovery(&read).fetch().await;
            if outcome.as_ref().is_err_and(|e| !e.is_retryable()) {
                // Refused, or not answered as a token endpoint: the resource
                // may have moved to another server.
                self.resource.mark_stale();
            }
            outcome
        })
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("url", &self.url)
            .field("trust", &self.trust)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ResourceSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceSource")
            .field("resource", &self.resource.url)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::url::same_identifier;

    #[test]
    fn the_well_known_url_puts_the_path_after_the_well_known_part() {
        let url = |r: &str| metadata_url(&r.parse().unwrap()).to_string();
        assert_eq!(
            url("https://api.example.com/mcp"),
            "https://api.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            url("https://api.example.com"),
            "https://api.example.com/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            url("http://127.0.0.1:8080/a/b/"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource/a/b"
        );
    }

    #[test]
    fn an_empty_path_and_a_slash_are_the_same_identifier_and_nothing_else_is() {
        assert!(same_identifier(
            "https://as.example.com",
            "https://as.example.com"
        ));
        assert!(same_identifier(
            "https://as.example.com",
            "https://as.example.com/"
        ));
        assert!(same_identifier(
            "https://as.example.com:8443/",
            "https://as.example.com:8443"
        ));
        for (a, b) in [
            (
                "https://as.example.com/tenant",
                "https://as.example.com/tenant/",
            ),
            ("https://as.example.com", "https://as.example.com.evil/"),
            ("https://as.example.com", "https://AS.example.com"),
            ("https://as.example.com?", "https://as.example.com?/"),
            ("https://", "https:///"),
            ("as.example.com", "as.example.com/"),
        ] {
            assert!(!same_identifier(a, b), "{a} {b}");
        }
    }
}
