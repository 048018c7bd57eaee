//! The checks of single settings that `build` runs: the endpoint's URL or
//! issuer, the secret (or the key file standing in for it), the assertion
//! settings, and the timing and placement settings.

use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use crate::builder::OAuthLayerBuilder;
use crate::cache::Placement;
use crate::endpoint::checked_url;
use crate::endpoint::{AssertionSettings, ClientAuth, Trust};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::policy::{Policy, MAX_SETTING};

/// The token endpoint's path below `auth_url` (the product-information API's authentication interface, section 4).
const TOKEN_PATH: &str = "/v1/oauth/accesstoken";

impl OAuthLayerBuilder {
    /// With a private key file: the file (taken from the secret source) and
    /// its PEM, read now; the client authentication becomes
    /// `private_key_jwt` with its key.
    pub(super) fn rotating_key(
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
    pub(super) fn checked_secret(
        &mut self,
        auth: Option<&ClientAuth>,
    ) -> Result<String, ConfigError> {
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
    pub(super) fn assertion_settings(&self) -> Result<AssertionSettings, ConfigError> {
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

    /// The protected resource, checked (an absolute URL without a query),
    /// with the servers this client may take among those it names; `None`
    /// without one (and then no trusted issuers either).
    pub(super) fn checked_resource(&self) -> Result<Option<(String, Uri)>, ConfigError> {
        let Some(raw) = &self.resource_url else {
            if !self.trusted_issuers.is_empty() && self.resource_urls.is_empty() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "trusted_issuers was given without protected_resource or \
                     protected_resources; they choose among the authorization servers a \
                     protected resource names",
                ));
            }
            return Ok(None);
        };
        if self.auth_url.is_some() || self.token_url.is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "protected_resource is set together with auth_url or token_url; give one (the \
                 resource's metadata names its authorization server)",
            ));
        }
        if self.params.iter().any(|(name, _)| name == "resource") {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "a `resource` parameter was given with protected_resource, which sends its own \
                 (RFC 8707)",
            ));
        }
        let raw = raw.trim();
        let uri = checked_url("protected_resource", raw, self.allow_insecure_http)?;
        if uri.query().is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidUrl,
                format!("protected_resource `{raw}` has a query; give the resource identifier without one"),
            ));
        }
        Ok(Some((raw.to_owned(), uri)))
    }

    /// Which of the servers a protected resource names this client may
    /// use: the issuer set, else the trusted ones, else any (for the
    /// credentials [`check_trust`](Self::check_trust) allows).
    pub(super) fn trust(&self) -> Result<Trust, ConfigError> {
        Ok(
            match (self.checked_issuer()?, self.trusted_issuers.as_slice()) {
                (Some(_), [_, ..]) => {
                    return Err(ConfigError::new(
                        ConfigErrorKind::Conflicting,
                        "issuer and trusted_issuers were both given; give the one server (issuer) \
                     or the servers this client may use (trusted_issuers)",
                    ))
                }
                (Some((issuer, _)), []) => Trust::Issuer(issuer),
                (None, []) => Trust::Any,
                (None, trusted) => {
                    for issuer in trusted {
                        checked_url("a trusted issuer", issuer, self.allow_insecure_http)?;
                    }
                    Trust::Listed(trusted.to_vec())
                }
            },
        )
    }

    /// The protected resources whose requests get their own tokens, each
    /// checked as `protected_resource` is, none given twice.
    pub(super) fn checked_resources(&self) -> Result<Vec<(String, Uri)>, ConfigError> {
        let mut checked: Vec<(String, Uri)> = Vec::new();
        for raw in &self.resource_urls {
            let raw = raw.trim();
            let uri = checked_url("protected_resources", raw, self.allow_insecure_http)?;
            if uri.query().is_some() {
                return Err(ConfigError::new(
                    ConfigErrorKind::InvalidUrl,
                    format!("protected_resources lists `{raw}`, which has a query; give the resource identifier without one"),
                ));
            }
            let same = |other: &str| crate::endpoint::same_identifier(other, raw);
            if checked.iter().any(|(url, _)| same(url))
                || self.resource_url.as_deref().is_some_and(same)
            {
                return Err(invalid_setting(&format!(
                    "protected_resources lists `{raw}` twice (or protected_resource names it)"
                )));
            }
            checked.push((raw.to_owned(), uri));
        }
        Ok(checked)
    }

    /// Without a server named (`Trust::Any`), the credential must be one the
    /// server the resource names cannot replay elsewhere.
    pub(super) fn check_trust(
        &self,
        trust: &crate::endpoint::Trust,
        auth: Option<&ClientAuth>,
    ) -> Result<(), ConfigError> {
        if !matches!(trust, crate::endpoint::Trust::Any) {
            return Ok(());
        }
        let has_secret = self.client_secret.is_some() || self.secret_source.is_some();
        let why = if self.id_jag.is_some() {
            "an ID-JAG for any server it names would be asked of the identity provider in the \
             employee's name"
        } else if self.grant.chain().is_some_and(|c| c.initial().is_empty()) && !has_secret {
            // A login's chain: the server gets back only what it issued (a
            // code, a refresh token), and a refresh token goes only to the
            // server that issued it.
            return Ok(());
        } else if !matches!(self.grant, crate::endpoint::Grant::ClientCredentials) {
            "its grant's assertion or subject token could be replayed by that server"
        } else if self.assertion_audience.is_some() {
            "assertion_audience fixes the client assertion's `aud`, so that server could \
             replay it"
        } else {
            match auth {
                Some(ClientAuth::PrivateKeyJwt(_) | ClientAuth::TlsClientAuth) => return Ok(()),
                None if !has_secret => return Ok(()),
                Some(ClientAuth::AssertionFile(_) | ClientAuth::Assertion(_)) => {
                    "the assertion file's `aud` is fixed by the platform, so that server could \
                     replay it"
                }
                _ => "the client secret (or an HMAC of it) would be sent to it",
            }
        };
        Err(ConfigError::new(
            ConfigErrorKind::Conflicting,
            format!(
                "protected_resource without issuer or trusted_issuers takes the authorization \
                 server the resource names, and {why}; name the servers this client may use \
                 with trusted_issuers (or issuer), or authenticate with private_key_jwt or \
                 mutual TLS"
            ),
        ))
    }

    /// The scopes a step-up may add, each a scope token (RFC 6749 section
    /// 3.3).
    pub(super) fn checked_step_up_scopes(&self) -> Result<Vec<String>, ConfigError> {
        let unencoded = self.client_auth == Some(ClientAuth::UnencodedBody)
            || (self.client_auth.is_none() && self.auth_url.is_some());
        if unencoded && !self.step_up_scopes.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "step_up_scopes was given with the product-information API's unencoded body, which \
                 cannot carry more than one scope (no spaces): use ClientAuth::FormBody or \
                 ClientAuth::Basic",
            ));
        }
        for scope in &self.step_up_scopes {
            if !crate::token::params::is_scope_token(scope) {
                return Err(invalid_setting(&format!(
                    "step_up_scopes lists `{}`, which is not one scope (RFC 6749 section 3.3: \
                     visible ASCII, no space, `\"` or `\\`)",
                    crate::error::clip(scope)
                )));
            }
        }
        Ok(self.step_up_scopes.clone())
    }

    /// The issuer, checked: it excludes the URL setters, and is an absolute
    /// URL without a query (RFC 8414 section 2).
    pub(super) fn checked_issuer(&self) -> Result<Option<(String, Uri)>, ConfigError> {
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

    pub(super) fn settings(&self) -> Result<(Policy, Placement), ConfigError> {
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
            refresh_answer_timeout: setting(
                self.refresh_answer_timeout,
                defaults.refresh_answer_timeout,
            ),
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
    pub(super) fn url(&self) -> Result<Uri, ConfigError> {
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

pub(super) fn invalid_setting(message: &str) -> ConfigError {
    ConfigError::new(ConfigErrorKind::InvalidSetting, message)
}

pub(super) fn required(
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
