//! [`SlotFactory`]: what a built layer keeps to make a token cache for a set of
//! parameters: its default token's, and a slot's for each [`TokenParams`].

use std::sync::{Arc, PoisonError};

use http::Uri;

use crate::cache::{
    Allowed, Challenges, Placement, StepUp, SupplyForScope, TokenCache, TokenSupply,
};
use crate::endpoint::Chain;
use crate::endpoint::{
    ClientAuth, Discovery, RequestSpec, RequestTarget, Requests, Resource, ResourceSource,
    SharedMetadata, TokenRequest, UrlFrom,
};
use crate::error::{TokenError, TokenErrorKind};
use crate::login::{KeySets, Login, Person};
use crate::policy::Policy;
use crate::slots::parked::Parked;
use crate::slots::routes::Routes;
use crate::slots::{ParamsFor, Slots};
use crate::source::TokenSource;
use crate::store::{PendingLogins, StoreUse, TokenStore};
use crate::token::identity::{IdentityBase, TokenIdentity};
use crate::token::params::{AccountDigest, TokenParams};

/// Who a slot's backchannel login asks (`TokenParams::login_hint`) and
/// what it shows them (`TokenParams::binding_message`), where its request
/// named them.
type Asked<'a> = (Option<&'a str>, Option<&'a str>);

/// Where the token request goes.
#[derive(Clone)]
pub(crate) enum Target {
    /// The token endpoint of this issuer's metadata (as configured, parsed).
    Issuer(String, Uri),
    /// This token endpoint, given with `token_url` or built from
    /// `auth_url`.
    Url(Uri, UrlFrom),
    /// The token endpoint of the server this protected resource names (as
    /// configured, parsed), which the trust rule allows (the layer's
    /// `Resource` holds the rule).
    Resource(String, Uri),
    /// None: only the protected resources' slots have tokens.
    NoEndpoint,
}

/// Where a layer's tokens come from, as the layer reports it.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    pub(crate) client_id: String,
    pub(crate) via: Via,
}

/// How a layer's token requests find their endpoint.
#[derive(Clone, Debug)]
pub(crate) enum Via {
    /// The token endpoint configured (not discovered), and its request.
    Url(Uri, Arc<TokenRequest>),
    /// The issuer's discovery.
    Issuer(Arc<Discovery>),
    /// The protected resource, and the default token's source.
    Resource(Arc<Resource>, Arc<ResourceSource>),
    /// None: only the protected resources' slots have tokens.
    Nowhere,
}

impl Endpoint {
    /// The token endpoint, when it was configured (not discovered).
    pub(crate) fn url(&self) -> Option<&Uri> {
        match &self.via {
            Via::Url(url, _) => Some(url),
            _ => None,
        }
    }

    /// Where the token requests come from; none without an endpoint.
    pub(crate) fn requests(&self) -> Option<Requests> {
        match &self.via {
            Via::Url(_, request) => Some(Requests::Direct(Arc::clone(request))),
            Via::Issuer(discovery) => Some(Requests::Discovered(Arc::clone(discovery))),
            Via::Resource(_, source) => Some(Requests::Resource(Arc::clone(source))),
            Via::Nowhere => None,
        }
    }
}

/// Everything checked by the builder that a token cache is made from.
pub(crate) struct SlotFactory {
    pub(crate) target: Target,
    /// What every token request of the layer is made of.
    pub(crate) spec: Arc<RequestSpec>,
    pub(crate) store: Option<Arc<dyn TokenStore>>,
    /// What makes the tokens interchangeable, besides the parameters.
    pub(crate) identity: IdentityBase,
    /// Derived from the client's credential, for sealing what the store
    /// keeps.
    pub(crate) sealing_key: Option<[u8; 32]>,
    /// With an issuer: the metadata found, shared by the layer's caches.
    pub(crate) metadata: SharedMetadata,
    /// With a protected resource: its metadata, shared by the layer's
    /// caches.
    pub(crate) resource: Option<Arc<Resource>>,
    pub(crate) policy: Policy,
    pub(crate) placement: Placement,
    /// The scopes a cache may add when the API asks (`step_up_scopes`).
    pub(crate) step_up_scopes: Vec<String>,
    /// The protected resources whose requests get their own slots
    /// (`protected_resources`), each with its own metadata.
    pub(crate) resources: Vec<Arc<Resource>>,
    /// How a person logs in, when the layer acts for one.
    pub(crate) login: Option<Arc<crate::login::Login>>,
    /// The servers' signing keys, for ID tokens and logout tokens: the
    /// layer's, shared by its accounts' factories.
    pub(crate) key_sets: Arc<KeySets>,
    /// A backchannel login's pending requests, where the store keeps none.
    pub(crate) parked: Arc<PendingLogins>,
    /// An account's factory: the caches it made, so that a login or a
    /// sign-out reaches each (a layer bound to the account holds one).
    pub(crate) made: std::sync::Mutex<Vec<std::sync::Weak<TokenCache>>>,
    /// An account's factory: whether the replica hears the store's news of
    /// sign-outs, which its caches' tokens are presented under.
    pub(crate) hearing: Option<Arc<crate::cache::Hearing>>,
}

impl SlotFactory {
    /// A layer's default cache, its token slots and where its tokens come
    /// from.
    pub(crate) fn layer(
        self: Arc<Self>,
        params_for: Option<ParamsFor>,
        (max_slots, max_accounts): (usize, usize),
    ) -> (Arc<TokenCache>, Slots, Endpoint) {
        let (cache, endpoint) = self.make(&[], (None, None));
        let routes: Vec<(String, Uri)> = self
            .resources
            .iter()
            .map(|r| (r.url().to_owned(), r.parsed().clone()))
            .collect();
        let routes = Routes::new(&routes);
        let slots = Slots::new(
            Some(Arc::clone(&self)),
            params_for,
            (max_slots, max_accounts),
            routes,
        );
        (cache, slots, endpoint)
    }

    /// The cache of the token requested with the layer's parameters
    /// replaced or extended by `extra`, whose backchannel login (if any)
    /// asks as `asked` says.
    fn make(
        self: &Arc<Self>,
        extra: &[(String, String)],
        asked: Asked<'_>,
    ) -> (Arc<TokenCache>, Endpoint) {
        let params = merged(&self.spec.params, extra);
        let store = self.store_use(&params);
        let account = self.chain().and_then(|chain| chain.account());
        let slot = (!extra.is_empty() || account.is_some())
            .then(|| slot_name(extra, account, &self.identity.with_params(&params)));
        // A person's login asks for any scope an API names, which the
        // person approves at the server; `step_up_scopes` bounds it where
        // set, and is the only way for a machine's credential.
        let allowed = match (&self.step_up_scopes[..], self.login_for(asked)) {
            ([], None) => None,
            ([], Some(_)) => Some(Allowed::Approved {
                // The resource the tokens are for: named, else the layer's
                // one protected resource.
                origin: params
                    .iter()
                    .find(|(n, _)| n == "resource")
                    .map(|(_, url)| url.as_str())
                    .or(match &self.resources[..] {
                        [only] => Some(only.url()),
                        _ => None,
                    })
                    .and_then(crate::cache::origin_of),
            }),
            (listed, _) => Some(Allowed::Listed(listed.to_vec())),
        };
        let step_up = allowed.map(|allowed| {
            let scope = params
                .iter()
                .find(|(n, _)| n == "scope")
                .map(|(_, v)| v.as_str());
            let scoped = ScopedSupply {
                factory: Arc::clone(self),
                params: params.clone(),
                asked: (asked.0.map(str::to_owned), asked.1.map(str::to_owned)),
            };
            StepUp::new(allowed, scope, Box::new(scoped))
        });
        let (source, endpoint) = self.source(params, asked);
        let supply = TokenSupply {
            source,
            store,
            chain: self.spec.grant.chain().cloned(),
        };
        let cache = TokenCache::new(
            supply,
            self.policy.clone(),
            self.placement.clone(),
            endpoint.url().cloned(),
            slot,
            Challenges {
                step_up,
                resource: self.resource.clone(),
            },
            self.hearing.clone(),
        );
        if account.is_some() {
            let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
            if made.len() >= 16 {
                made.retain(|cache| cache.strong_count() > 0);
            }
            made.push(Arc::downgrade(&cache));
        }
        (cache, endpoint)
    }

    /// How the store (if any) keeps the token of `params`.
    fn store_use(&self, params: &[(String, String)]) -> Option<StoreUse> {
        self.store.as_ref().map(|store| StoreUse {
            store: Arc::clone(store),
            identity: self.identity.with_params(params),
            sealing_key: self.sealing_key,
            chain_identity: self.spec.grant.chain().map(|_| self.identity.chain()),
        })
    }

    /// The factory of `account`'s tokens: the same settings, with the
    /// account's own chain of refresh tokens as the grant, and the account's
    /// digest in every identity, so that no store key or sealed value of
    /// one account serves another.
    pub(crate) fn for_account(
        &self,
        account: AccountDigest,
        hearing: Arc<crate::cache::Hearing>,
    ) -> Arc<SlotFactory> {
        let identity = self.identity.for_account(&account);
        // A backchannel login asks the person a request names.
        let login = self.login.clone().filter(|login| login.asks_backchannel());
        let asks = login.as_ref().is_some_and(|login| login.automatic);
        let chain = Arc::new(Chain::for_account(account, asks));
        Arc::new(SlotFactory {
            target: self.target.clone(),
            spec: Arc::new(self.spec.with_chain(chain)),
            store: self.store.clone(),
            identity,
            sealing_key: self.sealing_key,
            metadata: Arc::clone(&self.metadata),
            resource: self.resource.clone(),
            policy: self.policy.clone(),
            placement: self.placement.clone(),
            step_up_scopes: self.step_up_scopes.clone(),
            resources: self.resources.clone(),
            login,
            key_sets: Arc::clone(&self.key_sets),
            // The layer's: an account's keys hold its digest.
            parked: Arc::clone(&self.parked),
            made: Default::default(),
            hearing: Some(hearing),
        })
    }

    /// The live caches an account's factory made.
    pub(crate) fn caches(&self) -> Vec<Arc<TokenCache>> {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        made.retain(|cache| cache.strong_count() > 0);
        made.iter().filter_map(std::sync::Weak::upgrade).collect()
    }

    /// The chain of this factory's grant, if it refreshes one.
    pub(crate) fn chain(&self) -> Option<&Arc<Chain>> {
        self.spec.grant.chain()
    }

    /// The token request of the cache with the layer's own parameters,
    /// once its server's metadata is read: what a web login is begun with.
    pub(crate) async fn login_request(self: &Arc<Self>) -> Result<Arc<TokenRequest>, TokenError> {
        let (_, endpoint) = self.source(self.spec.params.clone(), (None, None));
        match &endpoint.via {
            Via::Issuer(discovery) => return discovery.token_request().await,
            Via::Resource(_, source) => return source.token_request().await,
            Via::Url(..) | Via::Nowhere => {}
        }
        Err(TokenError::new(TokenErrorKind::Configuration).with_message(
            "a web login needs the authorization server's metadata: configure the layer with \
             issuer or protected_resource",
        ))
    }

    /// The store keys of the tokens requested with `extra` (each set of a
    /// token slot's parameters), for erasing them.
    pub(crate) fn store_keys(&self, extras: &[TokenParams]) -> Vec<String> {
        let mut keys: Vec<String> = extras
            .iter()
            .map(|extra| {
                let params = merged(&self.spec.params, extra.pairs());
                self.identity.with_params(&params).key().to_owned()
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// What a pending web login with `state` is kept under.
    pub(crate) fn pending_login_key(&self, state: &str) -> TokenIdentity {
        self.identity.pending_login(state)
    }

    /// The cache of a token slot for `params`, which are checked as the
    /// builder checks its own.
    pub(crate) fn slot(
        self: &Arc<Self>,
        params: &TokenParams,
    ) -> Result<Arc<TokenCache>, TokenError> {
        let unencoded = self.spec.auth == Some(ClientAuth::UnencodedBody);
        let invalid = |e: String| {
            TokenError::new(TokenErrorKind::InvalidRequest)
                .with_message(format!("the request's TokenParams: {e}"))
        };
        crate::endpoint::check_params(params.pairs(), unencoded)
            .map_err(|e| invalid(e.to_string()))?;
        let asked = (params.get_login_hint(), params.get_binding_message());
        if asked != (None, None)
            && !self
                .login
                .as_ref()
                .is_some_and(|login| login.asks_backchannel())
        {
            return Err(invalid(
                "a login_hint or binding_message is for a backchannel login, which this layer \
                 has none of: configure Login::backchannel"
                    .into(),
            ));
        }
        if let Some(hint) = asked.0 {
            if self.chain().and_then(|chain| chain.account()).is_none() {
                return Err(invalid(
                    "a login_hint names the person of an account: set TokenParams::account too"
                        .into(),
                ));
            }
            crate::login::check_hint(hint).map_err(|e| invalid(format!("the login_hint {e}")))?;
        }
        if let Some(message) = asked.1 {
            crate::login::check_binding_message(message).map_err(invalid)?;
        }
        Ok(self.make(params.pairs(), asked).0)
    }

    /// The login of a slot whose request named `asked`: the layer's, asking
    /// as `asked` says where it names someone or something to show. An
    /// account's slot has one only where its request names the person: the
    /// account's other logins are its web logins, which the app's routes
    /// run.
    fn login_for(&self, asked: Asked<'_>) -> Option<Arc<Login>> {
        let account = self.chain().and_then(|chain| chain.account());
        match (account, asked) {
            (Some(_), (None, _)) => None,
            (_, (None, None)) => self.login.clone(),
            (_, (hint, message)) => self
                .login
                .as_ref()
                .map(|login| Arc::new(login.asking(hint, message))),
        }
    }

    /// The token source for `params`, and where its requests go. A person's
    /// chain (a login's, an account's) has the login's own requests come
    /// first ([`Person`]). A backchannel login asks the person `asked`
    /// names (an account's has a login only where a request names them),
    /// and shows them its message, where given.
    fn source(
        &self,
        params: Vec<(String, String)>,
        asked: Asked<'_>,
    ) -> (Arc<dyn TokenSource>, Endpoint) {
        let (source, endpoint) = self.endpoint_source(params);
        if let (Some(chain), Some(requests)) = (self.spec.grant.chain(), endpoint.requests()) {
            if chain.logs_in() || chain.account().is_some() {
                let parked = Parked {
                    store: self.store.clone(),
                    identity: self.identity.clone(),
                    sealing_key: self.sealing_key,
                    memory: Arc::clone(&self.parked),
                };
                let person = Person::new(
                    requests,
                    Arc::clone(chain),
                    self.login_for(asked),
                    (Arc::clone(&self.key_sets), Arc::new(parked)),
                );
                return (Arc::new(person), endpoint);
            }
        }
        (source, endpoint)
    }

    /// The endpoint's own token source for `params`, and where it goes.
    fn endpoint_source(&self, params: Vec<(String, String)>) -> (Arc<dyn TokenSource>, Endpoint) {
        let client_id = self.spec.client_id.clone();
        // A slot of one of the protected resources: that resource's own
        // metadata and server.
        let resource = params
            .iter()
            .find(|(name, _)| name == "resource")
            .and_then(|(_, url)| {
                self.resources
                    .iter()
                    .find(|r| crate::endpoint::same_identifier(r.url(), url))
            });
        if let Some(resource) = resource {
            let source = ResourceSource::new(Arc::clone(resource), Arc::clone(&self.spec), params);
            let endpoint = Endpoint {
                client_id,
                via: Via::Resource(Arc::clone(resource), Arc::clone(&source)),
            };
            return (source, endpoint);
        }
        match &self.target {
            Target::Issuer(raw, parsed) => {
                let discovery = Discovery::new(
                    raw,
                    parsed,
                    Arc::clone(&self.spec),
                    params,
                    Arc::clone(&self.metadata),
                );
                let endpoint = Endpoint {
                    client_id,
                    via: Via::Issuer(Arc::clone(&discovery)),
                };
                (discovery, endpoint)
            }
            Target::Resource(..) => {
                let resource = Arc::clone(self.resource.as_ref().expect("made with the target"));
                let source =
                    ResourceSource::new(Arc::clone(&resource), Arc::clone(&self.spec), params);
                let endpoint = Endpoint {
                    client_id,
                    via: Via::Resource(resource, Arc::clone(&source)),
                };
                (source, endpoint)
            }
            Target::NoEndpoint => {
                let endpoint = Endpoint {
                    client_id,
                    via: Via::Nowhere,
                };
                let names: Vec<&str> = self.resources.iter().map(|r| r.url()).collect();
                (Arc::new(NoDefaultToken(names.join(", "))), endpoint)
            }
            Target::Url(url, from) => {
                let target = RequestTarget {
                    url: url.clone(),
                    issuer: None,
                    // Always chosen by the builder for a URL.
                    auth: self.spec.auth.clone().unwrap_or(ClientAuth::Basic),
                    params,
                    server: None,
                };
                let source = TokenRequest::new(Arc::clone(&self.spec), target);
                let source = Arc::new(source.configured_from(*from));
                let endpoint = Endpoint {
                    client_id,
                    via: Via::Url(url.clone(), Arc::clone(&source)),
                };
                (source, endpoint)
            }
        }
    }
}

/// The default token of a layer that has only protected resources' tokens:
/// none, for requests under none of them (the resources named).
struct NoDefaultToken(String);

impl TokenSource for NoDefaultToken {
    fn fetch_token(
        &self,
    ) -> crate::support::boxed::BoxFuture<'_, Result<crate::token::AccessToken, TokenError>> {
        let message = format!(
            "this request lies under none of the protected resources ({}), and the layer has \
             no token of its own (give it one with issuer, token_url or protected_resource); \
             nothing was sent",
            self.0
        );
        Box::pin(async move {
            Err(TokenError::new(TokenErrorKind::Configuration).with_message(message))
        })
    }
}

/// The way to the tokens of a cache's parameters with a wider scope.
struct ScopedSupply {
    factory: Arc<SlotFactory>,
    params: Vec<(String, String)>,
    /// Who the cache's backchannel login asks, and what it shows them,
    /// where the request named them.
    asked: (Option<String>, Option<String>),
}

impl SupplyForScope for ScopedSupply {
    fn for_scope(&self, scope: &str) -> Option<TokenSupply> {
        let unencoded = self.factory.spec.auth == Some(ClientAuth::UnencodedBody);
        if let Err(e) = crate::endpoint::check_param("scope", scope, unencoded) {
            tracing::warn!(
                error = %e,
                "the API asked for more scope, which this layer's token request cannot carry"
            );
            return None;
        }
        let params = merged(&self.params, &[("scope".to_owned(), scope.to_owned())]);
        let store = self.factory.store_use(&params);
        let asked = (self.asked.0.as_deref(), self.asked.1.as_deref());
        let (source, _) = self.factory.source(params, asked);
        let chain = self.factory.spec.grant.chain().cloned();
        Some(TokenSupply {
            source,
            store,
            chain,
        })
    }

    fn server_scopes(&self) -> Option<Vec<String>> {
        let resource = self
            .params
            .iter()
            .find(|(name, _)| name == "resource")
            .and_then(|(_, url)| {
                let resources = &self.factory.resources;
                resources
                    .iter()
                    .find(|r| crate::endpoint::same_identifier(r.url(), url))
            })
            .or(match &self.factory.resources[..] {
                [only] => Some(only),
                _ => None,
            });
        match resource {
            Some(resource) => resource.server_scopes(),
            None => {
                let metadata = self.factory.metadata.lock();
                let metadata = metadata.unwrap_or_else(PoisonError::into_inner);
                Some(metadata.as_ref()?.scopes_supported.clone())
            }
        }
    }
}

/// `base` without the names `extra` sets, then `extra`.
fn merged(base: &[(String, String)], extra: &[(String, String)]) -> Vec<(String, String)> {
    base.iter()
        .filter(|(name, _)| !extra.iter().any(|(n, _)| n == name))
        .chain(extra)
        .cloned()
        .collect()
}

/// A token slot's name in logs: its account's digest, its parameters' names
/// (never their values, which may be secret) and the first hex digits of its
/// identity, which tell apart slots with the same names.
fn slot_name(
    extra: &[(String, String)],
    account: Option<&AccountDigest>,
    identity: &crate::token::identity::TokenIdentity,
) -> String {
    let names: Vec<&str> = extra.iter().map(|(name, _)| name.as_str()).collect();
    let account = account
        .map(|a| format!("account {a:?} "))
        .unwrap_or_default();
    format!("{account}{} #{}", names.join(","), &identity.key()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_parameters_replace_those_of_their_names() {
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        let base = pairs(&[
            ("scope", "a"),
            ("resource", "r1"),
            ("resource", "r2"),
            ("x", "1"),
        ]);
        let extra = pairs(&[("resource", "r3"), ("scope", "b")]);
        assert_eq!(
            merged(&base, &extra),
            pairs(&[("x", "1"), ("resource", "r3"), ("scope", "b")])
        );
        assert_eq!(merged(&base, &[]), base);
    }
}
