//! [`OAuthLayerBuilder::build`]: every setting checked, then the layer
//! assembled: its policy and placement, its token source (or the factory its
//! token caches are made from), its store identity.

use std::sync::Arc;
use std::time::Duration;

use crate::cache::{Placement, TokenCache};
use crate::endpoint::ClientAuth;
use crate::endpoint::{check_params, check_unencoded, warn_if_read_otherwise};
use crate::endpoint::{ClientSecret, RotatingSecret};
use crate::endpoint::{Grant, RequestSpec, UrlFrom};
use crate::error::{ConfigError, ConfigErrorKind};
use crate::layer::OAuthLayer;
use crate::policy::{Policy, DEFAULT_TOKEN_SLOTS};
use crate::slots::factory::{SlotFactory, Target};
use crate::slots::Slots;
use crate::source::TokenSource;
use crate::store::StoreUse;
use crate::token::identity::{IdentityBase, Origin, Parts};
use crate::transport::Transport;

use super::OAuthLayerBuilder;

mod checks;
mod fapi;
mod id_jag;
#[cfg(test)]
mod tests;

use self::checks::{invalid_setting, required};

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
        let (mut policy, placement) = self.settings()?;
        crate::telemetry::describe();
        let max_slots = self.max_slots()?;
        if let Some(source) = self.source.take() {
            return self.build_on_source(source, policy, placement);
        }
        let login = self.login_grant()?;
        let login_timeout = login.as_ref().map(|login| login.timeout);
        let other_grant = self.checked_grant()?;
        let resources = self.checked_resources()?;
        let only_resources =
            !resources.is_empty() && self.auth_url.is_none() && self.token_url.is_none();
        let target = match (self.checked_resource()?, self.checked_issuer()?) {
            (Some((url, parsed)), _) => Target::Resource(url, parsed),
            (None, Some((issuer, parsed))) => Target::Issuer(issuer, parsed),
            (None, None) if only_resources => Target::NoEndpoint,
            (None, None) => {
                let from = match self.auth_url {
                    Some(_) => UrlFrom::AuthUrl,
                    None => UrlFrom::TokenUrl,
                };
                Target::Url(self.url()?, from)
            }
        };
        // Which servers a protected resource may send the credential to.
        let trust = self.trust()?;
        if login_timeout.is_some() && matches!(target, Target::Url(..)) {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "a login needs the authorization server's metadata, for its authorization \
                 endpoint: give issuer or protected_resource, not a token URL",
            ));
        }
        let client_id = match (self.client_id.take(), other_grant) {
            // A login without one takes the metadata document's URL, or
            // registers (RFC 7591).
            (None, Some(_)) => String::new(),
            (id, _) => required(id, ConfigErrorKind::MissingClientId, "client id")?,
        };
        let rotating_key = self.rotating_key()?;
        let auth = self.chosen_auth(other_grant, &target)?;
        self.check_fapi2(auth.as_ref())?;
        if matches!(target, Target::Resource(..)) || !resources.is_empty() {
            self.check_trust(&trust, auth.as_ref())?;
        }
        let client_secret = self.checked_secret(auth.as_ref())?;
        // A key file's PEM is the credential that rotates.
        let (rotating, client_secret) = match (self.secret_source.take(), rotating_key) {
            (None, Some((source, pem))) => (Some(source), pem),
            (source, _) => (source, client_secret),
        };
        self.check_values(&client_id, &client_secret, auth.as_ref())?;
        let assertion = self.assertion_settings()?;
        let transport = self.chosen_transport(policy.fetch_timeout)?;
        // A fetch that may be a login waits for a person too: every bound on
        // it, and every wait for it, grows by the login's timeout. Each of
        // its requests keeps the transport's own bound.
        if let Some(timeout) = login_timeout {
            policy.fetch_timeout = policy
                .fetch_timeout
                .saturating_add(timeout)
                .min(crate::policy::MAX_SETTING);
        }
        if let Some(settings) = self.id_jag.take() {
            if matches!(target, Target::Url(..)) && resources.is_empty() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "identity_assertion needs the authorization server's issuer, the ID-JAG's \
                     audience: give protected_resource (the MCP server's URL) or issuer, not a \
                     token URL",
                ));
            }
            self.grant = self.id_jag_grant(&settings, &transport, policy.fetch_timeout)?;
        }
        let identity = self.identity(&target, &client_id, auth.as_ref());
        // A credential that changes cannot be the replicas' common sealing key.
        let sealing_key = match rotating {
            Some(_) => None,
            None => self.sealing_key(&client_secret, auth.as_ref()),
        };
        // A refresh token's chain is sealed under the refresh token the
        // layer was configured with too: every process configured alike
        // has it, a public client has nothing else, and a store alone
        // opens nothing.
        let sealing_key = match self.grant.chain() {
            // A login's chain has no refresh token to begin with: the
            // credential's key alone, if any.
            Some(chain) if chain.initial().is_empty() => sealing_key,
            Some(chain) => {
                let mut material = sealing_key.map(|k| k.to_vec()).unwrap_or_default();
                material.extend_from_slice(chain.initial().as_bytes());
                Some(crate::store::derive_sealing_key(&material))
            }
            None => sealing_key,
        };
        let secret = match rotating {
            Some(source) => ClientSecret::Rotating(RotatingSecret::new(source, client_secret)),
            None => ClientSecret::Fixed(client_secret),
        };
        let id_token_skew = self
            .id_token_clock_skew
            .unwrap_or(crate::policy::DEFAULT_ID_TOKEN_CLOCK_SKEW);
        if id_token_skew > Duration::from_secs(300) {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidSetting,
                "id_token_clock_skew must be at most 5 minutes",
            ));
        }
        let spec = RequestSpec {
            client_id,
            secret,
            auth,
            params: std::mem::take(&mut self.params),
            assertion,
            grant: std::mem::take(&mut self.grant),
            presents_certificate: self.presents_certificate(),
            dpop: placement.dpop.clone(),
            transport,
            allow_insecure_http: self.allow_insecure_http,
            id_token_skew,
            par: match self.fapi2 {
                true => crate::login::PushedAuthorization::Always,
                false => self.par.unwrap_or_default(),
            },
            fapi2: self.fapi2,
            used_request_uris: Default::default(),
        };
        let spec = Arc::new(spec);
        let resource = match &target {
            Target::Resource(url, parsed) => Some(crate::endpoint::Resource::new(
                url,
                parsed,
                trust.clone(),
                Arc::clone(&spec),
            )),
            _ => None,
        };
        let resources = resources
            .iter()
            .map(|(url, parsed)| {
                crate::endpoint::Resource::new(url, parsed, trust.clone(), Arc::clone(&spec))
            })
            .collect();
        let factory = SlotFactory {
            target,
            spec,
            store: self.store.take(),
            identity,
            sealing_key,
            metadata: Default::default(),
            resource,
            policy,
            placement,
            step_up_scopes: self.checked_step_up_scopes()?,
            resources,
            login,
            key_sets: Default::default(),
            parked: Default::default(),
            made: Default::default(),
            hearing: None,
        };
        let max_accounts = self
            .max_accounts
            .unwrap_or(crate::policy::DEFAULT_MAX_ACCOUNTS);
        if max_accounts == 0 {
            return Err(invalid_setting("max_accounts must be at least 1"));
        }
        let (cache, slots, endpoint) =
            Arc::new(factory).layer(self.params_for.take(), (max_slots, max_accounts));
        Ok(OAuthLayer::new(cache, slots, Some(endpoint)))
    }

    /// The login, checked and folded into the grant: a chain that it begins,
    /// or the refresh token's chain that it begins again.
    fn login_grant(&mut self) -> Result<Option<Arc<crate::login::Login>>, ConfigError> {
        let metadata_url = self.client_metadata_url.take();
        let Some(mut login) = self.login.take() else {
            return match metadata_url {
                Some(_) => Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "client_metadata_url was given without a login; it is the client id of a \
                     person's login (OAuthLayerBuilder::login)",
                )),
                None => Ok(None),
            };
        };
        if let Some(url) = metadata_url {
            let parsed = crate::endpoint::checked_url("client_metadata_url", &url, false)?;
            if parsed.path().trim_matches('/').is_empty() {
                return Err(invalid_setting(
                    "client_metadata_url must have a path (the document's own URL, SEP-991)",
                ));
            }
            login.client_metadata_url = Some(url);
        }
        login.check()?;
        self.grant = match &self.grant {
            Grant::ClientCredentials if self.id_jag.is_none() => {
                let reauthenticates = login.reauthenticates();
                Grant::Refresh(Arc::new(crate::endpoint::Chain::for_login(
                    login.automatic,
                    reauthenticates,
                )))
            }
            Grant::Refresh(chain) => Grant::Refresh(Arc::new(
                chain.with_login(login.automatic, login.reauthenticates()),
            )),
            _ => {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    "login was given together with another grant (jwt_bearer, token_exchange, \
                     identity_assertion); a login begins a chain of refresh tokens, and serves \
                     with refresh_token alone",
                ))
            }
        };
        Ok(Some(Arc::new(login)))
    }

    /// How many token slots are kept: at least 1.
    fn max_slots(&self) -> Result<usize, ConfigError> {
        let max_slots = self.max_token_slots.unwrap_or(DEFAULT_TOKEN_SLOTS);
        if max_slots == 0 {
            return Err(invalid_setting("max_token_slots must be at least 1"));
        }
        Ok(max_slots)
    }

    /// A layer on a token source of the user's own: no endpoint setting
    /// may come with it, and a store shares its tokens by its name.
    fn build_on_source(
        mut self,
        source: Arc<dyn TokenSource>,
        policy: Policy,
        placement: Placement,
    ) -> Result<OAuthLayer, ConfigError> {
        if self.auth_url.is_some()
            || self.token_url.is_some()
            || self.issuer.is_some()
            || self.resource_url.is_some()
            || !self.resource_urls.is_empty()
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
        if !self.step_up_scopes.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "step_up_scopes was given together with a token source, whose requests the \
                 layer cannot widen",
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
            chain_identity: None,
        });
        let cache = TokenCache::of_source(source, policy, placement, store);
        Ok(OAuthLayer::new(cache, Slots::none(), None))
    }

    /// The grant, checked against the endpoint settings: its name when it
    /// is not client credentials (it proves the client itself, or lets it
    /// authenticate as usual: the id is optional, and without a secret
    /// there is no client authentication). A Google service account's
    /// grant brings its token URL.
    fn checked_grant(&mut self) -> Result<Option<&'static str>, ConfigError> {
        if self.source_name.is_some() {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "token_source_name was given without a token source; it names a source's \
                 tokens in a token store",
            ));
        }
        if self.id_jag.is_some() && !matches!(self.grant, Grant::ClientCredentials) {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "identity_assertion was given together with another grant (jwt_bearer, \
                 token_exchange, refresh_token); it is a JWT-bearer grant of its own",
            ));
        }
        let other_grant = match &self.grant {
            Grant::ClientCredentials if self.id_jag.is_some() => Some("identity_assertion"),
            Grant::ClientCredentials => None,
            Grant::JwtBearer(_) => Some("jwt_bearer"),
            Grant::TokenExchange(_) => Some("token_exchange"),
            Grant::Refresh(chain) => {
                chain.check()?;
                Some("refresh_token")
            }
        };
        if let Some(name) = other_grant {
            if self.auth_url.is_some() {
                return Err(ConfigError::new(
                    ConfigErrorKind::Conflicting,
                    format!(
                        "{name} was given with auth_url: the product-information API's token endpoint takes \
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
        Ok(other_grant)
    }

    /// The client authentication: the one chosen, else by how the endpoint
    /// was given (`None`: with an issuer, discovery chooses).
    fn chosen_auth(
        &self,
        other_grant: Option<&str>,
        target: &Target,
    ) -> Result<Option<ClientAuth>, ConfigError> {
        let has_secret = self.client_secret.is_some() || self.secret_source.is_some();
        if other_grant.is_none() && self.client_auth == Some(ClientAuth::None) {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "ClientAuth::None sends no client credential, which the client credentials \
                 grant needs; it serves other grants (jwt_bearer, token_exchange)",
            ));
        }
        Ok(match (self.client_auth.clone(), target) {
            (Some(chosen), _) => Some(chosen),
            (None, _) if other_grant.is_some() && !has_secret => Some(ClientAuth::None),
            (None, Target::Issuer(..) | Target::Resource(..) | Target::NoEndpoint) => None,
            (None, Target::Url(_, UrlFrom::AuthUrl)) => Some(ClientAuth::UnencodedBody),
            (None, Target::Url(..)) => Some(ClientAuth::Basic),
        })
    }

    /// The id, the secret and the parameters, checked against what `auth`
    /// can carry.
    fn check_values(
        &self,
        client_id: &str,
        client_secret: &str,
        auth: Option<&ClientAuth>,
    ) -> Result<(), ConfigError> {
        let unencoded = auth == Some(&ClientAuth::UnencodedBody);
        if auth == Some(&ClientAuth::BasicUnencoded) && client_id.contains(':') {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidClientId,
                "the client id contains `:`, which ClientAuth::BasicUnencoded cannot carry \
                 (Basic separates id and secret with it); use ClientAuth::Basic",
            ));
        }
        if unencoded {
            check_unencoded(client_id, ConfigErrorKind::InvalidClientId, "client id")?;
            check_unencoded(
                client_secret,
                ConfigErrorKind::InvalidClientSecret,
                "client secret",
            )?;
            warn_if_read_otherwise(client_id, "client id");
            warn_if_read_otherwise(client_secret, "client secret");
        }
        check_params(&self.params, unencoded)
    }

    /// The transport given, or the built-in one with the TLS and proxy
    /// settings (which a transport of one's own cannot take).
    fn chosen_transport(
        &mut self,
        fetch_timeout: Duration,
    ) -> Result<Arc<dyn Transport>, ConfigError> {
        match self.transport.take() {
            #[cfg(feature = "reqwest")]
            Some(_) if !self.tls.is_default() => Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "client_identity, root_certificates or proxy_from_env was given together \
                 with a transport of your own; configure TLS and proxies in that transport \
                 instead",
            )),
            Some(transport) => Ok(transport),
            None => self.default_transport(fetch_timeout),
        }
    }

    /// What makes the layer's tokens interchangeable, never the secret. The
    /// parameters are added by the factory.
    fn identity(
        &self,
        target: &Target,
        client_id: &str,
        auth: Option<&ClientAuth>,
    ) -> IdentityBase {
        let token_url = match target {
            Target::Url(url, _) => url.to_string(),
            Target::Issuer(..) | Target::Resource(..) | Target::NoEndpoint => String::new(),
        };
        let credential = auth.and_then(ClientAuth::identity_credential);
        let grant_identity = self.grant.identity();
        let dpop_thumbprint = self.dpop_key();
        let certificate = self.certificate_thumbprint();
        IdentityBase::new(Parts {
            origin: match target {
                Target::Issuer(issuer, _) => Origin::Issuer(issuer),
                Target::Url(..) => Origin::TokenUrl(&token_url),
                Target::Resource(url, _) => Origin::Resource(url),
                Target::NoEndpoint => Origin::Resource(""),
            },
            client_id,
            client_auth: auth.map(ClientAuth::identity_name),
            credential: credential.as_deref(),
            certificate: certificate.as_deref(),
            dpop_thumbprint: dpop_thumbprint.as_deref(),
            grant: grant_identity.as_deref(),
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
        Ok(Arc::new(crate::transport::ReqwestTransport::new(
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
}
