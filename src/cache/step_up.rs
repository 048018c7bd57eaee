//! What a cache does when an API challenges its token: a step-up, the
//! token asked for again with more scope when the API says the one it has
//! is not enough (RFC 6750 section 3.1, `insufficient_scope`), within the
//! scopes the layer may add (`step_up_scopes`), never beyond, or for a
//! person's login without a list, any scope the person approves at the
//! server; bounded (the scope only grows, to at most `MAX_SCOPES` scopes
//! without a list, and the same scopes are asked for again at most once per
//! forced-renewal interval); and the protected resource's metadata read
//! again where a `401` says it is (RFC 9728 section 5.1); and a person's
//! login run again when an API asks for a stronger or more recent sign-in
//! (RFC 9470, `insufficient_user_authentication`), at most once per
//! forced-renewal interval.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use crate::cache::fetch::TokenSupply;
use crate::cache::TokenCache;
use crate::endpoint::{Reauthentication, Resource};
use crate::message::challenge::Challenge;

/// What a cache may do when an API challenges its token.
#[derive(Debug, Default)]
pub(crate) struct Challenges {
    /// More scope, within what the layer allows.
    pub(crate) step_up: Option<StepUp>,
    /// The protected resource the tokens are for, whose metadata a `401`
    /// may point at.
    pub(crate) resource: Option<Arc<Resource>>,
}

/// Makes the supply of tokens of a cache's parameters with another scope: the
/// seam through which the cache asks its maker (the layer's factory), which
/// it does not know.
pub(crate) trait SupplyForScope: Send + Sync + 'static {
    /// The source (and store use) of this cache's tokens with `scope`
    /// instead of its own; `None` when the token request cannot carry it
    /// (the product-information API's unencoded body and a scope with a space or a
    /// `&`), said in the log.
    fn for_scope(&self, scope: &str) -> Option<TokenSupply>;

    /// The `scopes_supported` of the authorization server the tokens come
    /// from, once its metadata was read; `None` when unknown (or not read
    /// yet). A step-up without a list asks only for scopes on it.
    fn server_scopes(&self) -> Option<Vec<String>> {
        None
    }
}

/// The most scopes a step-up without a list asks for, all together: each
/// new one is a new login, so a server that asks for another at every
/// answer gets a bounded number of them.
const MAX_SCOPES: usize = 32;

/// The scopes a cache may add when an API asks.
#[derive(Debug)]
pub(crate) enum Allowed {
    /// These, and no other (`step_up_scopes`).
    Listed(Vec<String>),
    /// Any scope token that names no other resource: a person's login,
    /// where the person approves each scope on the server's consent page,
    /// and no list was set. A scope that is a URL counts only at the
    /// origin of the resource the tokens are for (`origin`, lowercase
    /// `scheme://authority`; none known: no URL scope), so that an API
    /// cannot have the person's login ask for another API's token (Entra's
    /// `https://graph.microsoft.com/...`). The login asks only for scopes
    /// the server lists, where it lists any.
    Approved { origin: Option<String> },
}

impl Allowed {
    fn admits(&self, scope: &str) -> bool {
        match self {
            Allowed::Listed(listed) => listed.iter().any(|a| a == scope),
            Allowed::Approved { origin } => match origin_of(scope) {
                Some(named) => origin.as_deref() == Some(named.as_str()),
                None => true,
            },
        }
    }
}

/// The origin a scope names when it is an absolute URL (`scheme://...`),
/// lowercase; `None` for a plain scope token.
pub(crate) fn origin_of(scope: &str) -> Option<String> {
    let (scheme, rest) = scope.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    Some(format!("{scheme}://{authority}").to_ascii_lowercase())
}

/// A cache's step-up: what it may add, how, and the scope it asks with.
pub(crate) struct StepUp {
    allowed: Allowed,
    supplies: Box<dyn SupplyForScope>,
    /// The scopes of the current requests, in order.
    scopes: Mutex<Vec<String>>,
}

impl StepUp {
    /// May add `allowed` to `scope` (the cache's own, space-separated)
    /// through `supplies`.
    pub(crate) fn new(
        allowed: Allowed,
        scope: Option<&str>,
        supplies: Box<dyn SupplyForScope>,
    ) -> Self {
        let scopes = scope
            .map(|s| s.split_ascii_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        StepUp {
            allowed,
            supplies,
            scopes: Mutex::new(scopes),
        }
    }
}

impl std::fmt::Debug for StepUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepUp")
            .field("allowed", &self.allowed)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
    /// Whether this cache may ask for more scope.
    #[inline]
    pub(crate) fn steps_up(&self) -> bool {
        self.challenges.step_up.is_some()
    }

    /// The API refused a token with `challenges`: one naming the
    /// protected resource's metadata has it read there at the next fetch
    /// (see `Resource::hinted`).
    pub(crate) fn refused_with(&self, challenges: &[Challenge]) {
        let Some(resource) = &self.challenges.resource else {
            return;
        };
        if let Some(url) = challenges.iter().find_map(|c| c.param("resource_metadata")) {
            resource.hinted(url);
        }
    }

    /// Whether a refusal's challenges are worth reading: the cache serves a
    /// protected resource.
    #[inline]
    pub(crate) fn reads_refusals(&self) -> bool {
        self.challenges.resource.is_some()
    }

    /// The API answered the token of `generation` with `insufficient_scope`,
    /// asking for `asked` (scope tokens separated by spaces). With scopes
    /// to add among the allowed ones: the requests ask with them from now
    /// on, and the token is dropped for one that has them. With one the
    /// layer may not add, or a scope that is no list of scope tokens: no
    /// token request. With none new: the token is renewed as a refused one
    /// is (once per forced-renewal interval). Whether another token comes,
    /// so that sending again can help.
    pub(crate) fn step_up(self: &Arc<Self>, generation: u64, asked: &str) -> bool {
        let Some(step_up) = &self.challenges.step_up else {
            return false;
        };
        // Scope tokens are separated by spaces alone (RFC 6749 section
        // 3.3): a tab, a control character or any byte outside NQCHAR makes
        // the whole scope unusable, rather than a part of it asked for.
        let asked: Vec<&str> = asked.split(' ').filter(|s| !s.is_empty()).collect();
        if !asked
            .iter()
            .all(|s| crate::token::params::is_scope_token(s))
        {
            tracing::warn!(
                "the API's insufficient_scope challenge names a scope that is not a list of \
                 scope tokens (RFC 6749 section 3.3); no token is requested for it"
            );
            return false;
        }
        let (scope, supply) = {
            let mut scopes = step_up
                .scopes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // The token's own, as granted, count as had (server text: only
            // what is a scope token).
            let current = self.current.load();
            let granted: Vec<&str> = current
                .as_ref()
                .and_then(|t| t.token.scope())
                .unwrap_or_default()
                .split_ascii_whitespace()
                .filter(|g| crate::token::params::is_scope_token(g))
                .collect();
            let had = |s: &str| scopes.iter().any(|h| h == s) || granted.contains(&s);
            let allowed = |s: &str| step_up.allowed.admits(s);
            let refused: Vec<&str> = asked
                .iter()
                .copied()
                .filter(|s| !had(s) && !allowed(s))
                .collect();
            if !refused.is_empty() {
                // A token without them cannot satisfy the API: no token
                // request is made, and the answer goes back as it is.
                tracing::warn!(
                    ?refused,
                    allowed = ?step_up.allowed,
                    "the API asked for scopes this layer may not add (step_up_scopes); no \
                     token is requested for them"
                );
                return false;
            }
            let new: Vec<&str> = asked
                .iter()
                .copied()
                .filter(|s| !had(s) && allowed(s))
                .collect();
            // A person's login asks only for scopes the server lists (where
            // it lists any): an API cannot steer it toward another scope of
            // the server's, and the token in hand keeps serving.
            if let (Allowed::Approved { .. }, Some(listed)) =
                (&step_up.allowed, step_up.supplies.server_scopes())
            {
                let unlisted: Vec<&&str> = new
                    .iter()
                    .filter(|s| !listed.is_empty() && !listed.iter().any(|l| l == **s))
                    .collect();
                if !unlisted.is_empty() {
                    tracing::warn!(
                        ?unlisted,
                        "the API asked for scopes the authorization server does not list in \
                         scopes_supported; no login is begun for them"
                    );
                    return false;
                }
            }
            if new.is_empty() {
                drop(scopes);
                tracing::debug!(
                    ?asked,
                    "the API asked for scopes the token was requested with; renewing it as a \
                     refused one"
                );
                return self.refused(generation).is_none();
            }
            let mut wider = scopes.clone();
            for s in granted.iter().chain(&new) {
                if !wider.iter().any(|h| h == s) {
                    wider.push((*s).to_owned());
                }
            }
            if matches!(step_up.allowed, Allowed::Approved { .. }) && wider.len() > MAX_SCOPES {
                tracing::warn!(
                    ?asked,
                    "the API asked for more scopes than a login asks for at once ({MAX_SCOPES}); \
                     no login is begun for them"
                );
                return false;
            }
            let scope = wider.join(" ");
            let Some(supply) = step_up.supplies.for_scope(&scope) else {
                return false;
            };
            if let (Allowed::Approved { .. }, Some(chain)) = (&step_up.allowed, &supply.chain) {
                chain.asked_by_api(&new);
            }
            *scopes = wider;
            (scope, supply)
        };
        tracing::info!(
            asked = %asked.join(" "),
            scope = %scope,
            "the API asked for more scope (insufficient_scope); requesting a token with it"
        );
        crate::telemetry::step_up();
        self.fetcher.supply.store(Arc::new(supply));
        self.drop_for_step_up(Instant::now());
        true
    }

    /// The API answered the token of `generation` with
    /// `insufficient_user_authentication` (RFC 9470), asking for `asked`
    /// (its `acr_values` and `max_age`, server text, checked first).
    /// Where the tokens come from a person's login that can ask for it, the
    /// token is dropped and the next fetch logs the person in again with
    /// it; after such a login ended (approved or not), no other begins within
    /// `forced_renewal_interval` (or `max_age`, when longer), whatever is
    /// asked: an API that a new login does not satisfy gets its answer back.
    /// Whether another token comes.
    pub(crate) fn reauthenticate(
        self: &Arc<Self>,
        generation: u64,
        (acr_values, max_age): (Option<&str>, Option<&str>),
    ) -> bool {
        let Some(asked) = Reauthentication::from_challenge(acr_values, max_age) else {
            return false;
        };
        let supply = self.fetcher.supply.load();
        let Some(chain) = supply.chain.as_ref().filter(|c| c.reauthenticates()) else {
            return false;
        };
        let gap = asked
            .max_age
            .map(std::time::Duration::from_secs)
            .unwrap_or_default()
            .max(self.policy().forced_renewal_interval);
        let current = self.current.load();
        // Another answer of the same token asked already (its token is
        // gone): its login serves this request too, sent again once.
        if current.as_ref().is_none_or(|t| t.generation != generation) {
            return true;
        }
        if !chain.ask_reauthentication(asked.clone(), gap) {
            tracing::warn!(
                acr_values = asked.acr_values.as_deref().unwrap_or_default(),
                max_age = ?asked.max_age,
                "the API asks for another sign-in just after one; no new login is begun (at \
                 most one per forced_renewal_interval, or max_age when longer)"
            );
            return false;
        }
        tracing::info!(
            acr_values = asked.acr_values.as_deref().unwrap_or_default(),
            max_age = ?asked.max_age,
            "the API asks for a stronger or more recent sign-in \
             (insufficient_user_authentication); the person logs in again"
        );
        crate::telemetry::step_up();
        self.drop_for_step_up(Instant::now());
        true
    }
}
