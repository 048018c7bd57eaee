//! [`OAuthLayerBuilder::build`]: every setting checked, then the layer
//! assembled: its policy and placement, its token source (or the recipe its
//! token caches are made from), its store identity.

use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use crate::cache::{Placement, TokenCache};
use crate::endpoint::checked_url;
use crate::endpoint::Transport;
use crate::endpoint::{check_param, check_unencoded, warn_if_read_otherwise};
use crate::endpoint::{AssertionSettings, ClientAuth};
use crate::endpoint::{ClientSecret, RotatingSecret};
use crate::endpoint::{Grant, RequestSpec};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::identity::{IdentityBase, Origin, Parts};
use crate::layer::OAuthLayer;
use crate::policy::{Policy, DEFAULT_TOKEN_SLOTS, MAX_SETTING};
use crate::slots::recipe::{Recipe, Target};
use crate::slots::Slots;
use crate::store::StoreUse;

use super::OAuthLayerBuilder;

/// The token endpoint's path below `auth_url` (specification, section 4).
const TOKEN_PATH: &str = "/v1/oauth/accesstoken";

impl OAuthLayerBuilder {
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
        crate::telemetry::describe();
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
                || self.secret_source.is_some()
                || !matches!(self.grant, Grant::ClientCredentials)
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
            let name = match (self.source_name.take(), &self.store) {
                (Some(name), _) if name.trim().is_empty() => {
                    return Err(invalid_setting("token_source_name is empty"))
                }
                (Some(name), _) => name,
                (None, Some(_)) => {
                    return Err(invalid_setting(
                        "a token store shares a token source's tokens by the name given with \
                         token_source_name, and none was given: name the source (the same \
                         name on every replica, another for every other source)",
                    ))
                }
                (None, None) => String::new(),
            };
            let store = self.store.take().map(|store| StoreUse {
                store,
                identity: IdentityBase::new(Parts {
                    origin: Origin::Source(&name),
                    client_id: "",
                    client_auth: None,
                    credential: None,
                    certificate: None,
                    dpop_thumbprint: None,
                    grant: None,
                })
                .with_params(&[]),
                sealing_key: None,
            });
            let cache = TokenCache::new(source, policy, placement, None, None, store);
            return Ok(OAuthLayer::new(cache, Slots::new(None, None, 0), None));
        }

        if self.source_name.is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "token_source_name was given without a token source; it names a source's \
                 tokens in a token store",
            ));
        }
        // Another grant than client credentials proves the client itself, or
        // lets it authenticate as usual: the id is optional, and without a
        // secret there is no client authentication.
        let other_grant = match &self.grant {
            Grant::ClientCredentials => None,
            Grant::JwtBearer(_) => Some("jwt_bearer"),
            Grant::TokenExchange(_) => Some("token_exchange"),
        };
        if let Some(name) = other_grant {
            if self.auth_url.is_some() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    format!(
                        "{name} was given with auth_url: the specification's endpoint takes \
                         client credentials only; give the token endpoint with token_url or \
                         issuer"
                    ),
                ));
            }
        }
        if let Grant::JwtBearer(grant) = &self.grant {
            if self.token_url.is_none() && self.issuer.is_none() {
                self.token_url = grant.token_url().map(str::to_owned);
            }
        }
        let target = match self.checked_issuer()? {
            Some((issuer, parsed)) => Target::Issuer(issuer, parsed),
            None => Target::Url(self.url()?),
        };
        let client_id = match (self.client_id.take(), other_grant) {
            (None, Some(_)) => String::new(),
            (id, _) => required(id, ConfigErrorKind::MissingClientId, "client id")?,
        };
        let rotating_key = self.rotating_key()?;
        let has_secret = self.client_secret.is_some() || self.secret_source.is_some();
        if other_grant.is_none() && self.client_auth == Some(ClientAuth::None) {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "ClientAuth::None sends no client credential, which the client credentials \
                 grant needs; it serves other grants (jwt_bearer, token_exchange)",
            ));
        }
        // With an issuer and no choice, discovery chooses.
        let auth = match (self.client_auth.clone(), &target) {
            (Some(chosen), _) => Some(chosen),
            (None, _) if other_grant.is_some() && !has_secret => Some(ClientAuth::None),
            (None, Target::Issuer(..)) => None,
            (None, Target::Url(_)) if self.auth_url.is_some() => Some(ClientAuth::UnencodedBody),
            (None, Target::Url(_)) => Some(ClientAuth::Basic),
        };
        let client_secret = self.checked_secret(auth.as_ref())?;
        // A key file's PEM is the credential that rotates.
        let (rotating, client_secret) = match (self.secret_source.take(), rotating_key) {
            (None, Some((source, pem))) => (Some(source), pem),
            (source, _) => (source, client_secret),
        };
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
            warn_if_read_otherwise(&client_id, "client id");
            warn_if_read_otherwise(&client_secret, "client secret");
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
                    "client_identity, root_certificates or proxy_from_env was given together \
                     with a transport of your own; configure TLS and proxies in that transport \
                     instead",
                ))
            }
            Some(transport) => transport,
            None => self.default_transport(policy.fetch_timeout)?,
        };
        // What makes its tokens interchangeable, never the secret; the
        // parameters are added by the recipe.
        let token_url = match &target {
            Target::Url(url) => url.to_string(),
            Target::Issuer(..) => String::new(),
        };
        let credential = auth.as_ref().and_then(ClientAuth::identity_credential);
        let grant_identity = self.grant.identity();
        let dpop_thumbprint = self.dpop_key();
        let certificate = self.certificate_thumbprint();
        let identity = IdentityBase::new(Parts {
            origin: match &target {
                Target::Issuer(issuer, _) => Origin::Issuer(issuer),
                Target::Url(_) => Origin::TokenUrl(&token_url),
            },
            client_id: &client_id,
            client_auth: auth.as_ref().map(ClientAuth::identity_name),
            credential: credential.as_deref(),
            certificate: certificate.as_deref(),
            dpop_thumbprint: dpop_thumbprint.as_deref(),
            grant: grant_identity.as_deref(),
        });
        // A credential that changes cannot be the replicas' common sealing key.
        let sealing_key = match rotating {
            Some(_) => None,
            None => self.sealing_key(&client_secret, auth.as_ref()),
        };
        let client_secret = match rotating {
            Some(source) => ClientSecret::Rotating(RotatingSecret::new(source, client_secret)),
            None => ClientSecret::Fixed(client_secret),
        };
        let spec = RequestSpec {
            client_id,
            secret: client_secret,
            auth,
            params: std::mem::take(&mut self.params),
            assertion,
            grant: std::mem::take(&mut self.grant),
            presents_certificate: self.presents_certificate(),
            dpop: placement.dpop.clone(),
            transport,
            allow_insecure_http: self.allow_insecure_http,
        };
        let recipe = Recipe {
            target,
            from_auth_url: self.auth_url.is_some(),
            spec: Arc::new(spec),
            store: self.store.take(),
            identity,
            sealing_key,
            metadata: Default::default(),
            policy,
            placement,
        };
        let (cache, slots, endpoint) = Arc::new(recipe).layer(self.params_for.take(), max_slots);
        Ok(OAuthLayer::new(cache, slots, Some(endpoint)))
    }

    /// With a private key file: the file (taken from the secret source) and
    /// its PEM, read now; the client authentication becomes
    /// `private_key_jwt` with its key.
    fn rotating_key(
        &mut self,
    ) -> Result<Option<(crate::endpoint::SecretSource, String)>, ConfigError> {
        let Some((algorithm, kid)) = self.key_file.clone() else {
            return Ok(None);
        };
        let source = self.secret_source.take().expect("set with the key file");
        if self.client_secret.is_some() || self.client_auth.is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "private_key_file was given with client_secret or client_auth; the key file \
                 is the client's credential (private_key_jwt): give one",
            ));
        }
        let pem = source
            .read_now()
            .map_err(|why| ConfigError::new(ConfigErrorKind::InvalidKey, why))?;
        let mut key = crate::keys::SigningKey::from_pem(&pem, algorithm).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::InvalidKey,
                format!("{}: {}", source.describe(), e.message()),
            )
        })?;
        if let Some(kid) = kid {
            key = key.key_id(kid);
        }
        self.client_auth = Some(ClientAuth::PrivateKeyJwt(key));
        Ok(Some((source, pem)))
    }

    /// The client secret, required when `auth` sends it (or, left to
    /// discovery, unless a client certificate can stand in for it), and
    /// refused when `auth` sends none: a secret given there would be a
    /// mistake left unnoticed.
    fn checked_secret(&mut self, auth: Option<&ClientAuth>) -> Result<String, ConfigError> {
        let needs_secret = match auth {
            Some(auth) => auth.needs_secret(),
            None => {
                !self.presents_certificate()
                    || self.client_secret.is_some()
                    || self.secret_source.is_some()
            }
        };
        if let Some(source) = &self.secret_source {
            if self.client_secret.is_some() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "client_secret was given together with client_secret_file or \
                     client_secret_fn; give one",
                ));
            }
            if needs_secret {
                let secret = source
                    .read_now()
                    .map_err(|why| ConfigError::new(ConfigErrorKind::MissingClientSecret, why))?;
                return Ok(secret);
            }
        }
        if needs_secret {
            return required(
                self.client_secret.take(),
                ConfigErrorKind::MissingClientSecret,
                "client secret",
            );
        }
        if let (Some(auth), true) = (
            auth,
            self.client_secret.is_some() || self.secret_source.is_some(),
        ) {
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
                 client_identity (feature `reqwest`), or give a transport that presents one",
            ));
        }
        Ok(String::new())
    }

    /// The client assertions' settings, checked.
    fn assertion_settings(&self) -> Result<AssertionSettings, ConfigError> {
        let lifetime = self
            .assertion_lifetime
            .unwrap_or(crate::policy::DEFAULT_ASSERTION_LIFETIME);
        if lifetime < Duration::from_secs(1) || lifetime > Duration::from_secs(3600) {
            return Err(invalid_setting(
                "assertion_lifetime must be between 1 second and 1 hour",
            ));
        }
        let typ = self
            .assertion_typ
            .clone()
            .unwrap_or_else(|| Some(crate::endpoint::CLIENT_AUTHENTICATION_JWT_TYPE.to_owned()));
        if typ
            .as_deref()
            .is_some_and(|t| t.is_empty() || t.chars().any(char::is_control))
        {
            return Err(invalid_setting(
                "assertion_typ must be a media type such as client-authentication+jwt, or None",
            ));
        }
        let clock_skew = self
            .assertion_clock_skew
            .unwrap_or(crate::policy::DEFAULT_ASSERTION_CLOCK_SKEW);
        if clock_skew > Duration::from_secs(300) {
            return Err(invalid_setting(
                "assertion_clock_skew must be at most 5 minutes",
            ));
        }
        Ok(AssertionSettings {
            audience: self.assertion_audience.clone(),
            lifetime,
            typ,
            clock_skew,
            endpoint_audience: Default::default(),
            grant_endpoint_audience: Default::default(),
            key_file: self.key_file.clone(),
        })
    }

    /// The key for sealing what a store keeps, derived from the client's own
    /// credential: its secret, else its private key, else its TLS client
    /// key; none without one.
    fn sealing_key(&self, secret: &str, auth: Option<&ClientAuth>) -> Option<[u8; 32]> {
        let derive = crate::store::derive_sealing_key;
        if !secret.is_empty() {
            return Some(derive(secret.as_bytes()));
        }
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

    /// The DPoP key's thumbprint, if DPoP is on.
    pub(super) fn dpop_key(&self) -> Option<String> {
        self.dpop.as_ref().map(|k| k.thumbprint().to_owned())
    }

    /// The SHA-256 thumbprint of the client certificate the built-in
    /// transport presents, if it presents one.
    fn certificate_thumbprint(&self) -> Option<String> {
        #[cfg(feature = "reqwest")]
        return self.tls.certificate_thumbprint();
        #[cfg(not(feature = "reqwest"))]
        None
    }

    /// Whether the built-in transport presents a client certificate.
    pub(super) fn presents_certificate(&self) -> bool {
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
        Ok(Arc::new(crate::endpoint::ReqwestTransport::new(
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
        // Every duration is taken up to MAX_SETTING, so that no arithmetic
        // on instants can overflow, whatever was given (`Duration::MAX`).
        let setting =
            |given: Option<Duration>, default: Duration| given.unwrap_or(default).min(MAX_SETTING);
        let policy = Policy {
            refresh_margin: setting(self.refresh_margin, defaults.refresh_margin),
            expiry_skew: setting(self.expiry_skew, defaults.expiry_skew),
            fetch_timeout: setting(self.fetch_timeout, defaults.fetch_timeout),
            forced_renewal_interval: setting(
                self.forced_renewal_interval,
                defaults.forced_renewal_interval,
            ),
            min_backoff: setting(self.min_backoff, defaults.min_backoff),
            max_backoff: setting(self.max_backoff, defaults.max_backoff),
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
