//! [`TokenParams`]: the parameters that select a token, for a layer that serves
//! several APIs or several people. They are `resource`, `audience`, `scope`,
//! any others, and the account a token is for.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// The token request parameters that select a token: RFC 8707 `resource`
/// values, an `audience`, a `scope`, or any other parameter. A request may
/// carry `TokenParams` in its extensions, or
/// [`params_for`](crate::OAuthLayerBuilder::params_for) may give it some. It
/// then gets a token requested with exactly these parameters, kept in a token
/// slot of its own. Other requests get the layer's default token.
///
/// The parameters replace the layer's own of the same names, such as its
/// [`scope`](crate::OAuthLayerBuilder::scope), and add the others. Build them
/// with setters like the builder's. Cloning is cheap, a reference count, so
/// build each set once and clone it onto requests.
///
/// ```
/// use tower_oauth::TokenParams;
///
/// let orders = TokenParams::new()
///     .resource("https://orders.internal")
///     .scope("orders:read");
/// let mut request = http::Request::get("https://orders.internal/v1/orders").body(()).unwrap();
/// request.extensions_mut().insert(orders.clone());
/// assert_eq!(orders.params(), [("resource", "https://orders.internal"), ("scope", "orders:read")]);
/// ```
#[derive(Clone)]
pub struct TokenParams {
    inner: Arc<Inner>,
}

#[derive(Clone, Default)]
struct Inner {
    params: Vec<(String, String)>,
    /// The account whose token this is (see [`TokenParams::account`]).
    account: Option<Arc<str>>,
    /// What a backchannel login this token needs shows the person (see
    /// [`TokenParams::binding_message`]).
    binding_message: Option<Arc<str>>,
    /// Who an account's backchannel login asks (see
    /// [`TokenParams::login_hint`]).
    login_hint: Option<Arc<str>>,
    /// Of `params` and `account`, kept up to date: slots are found by it.
    hash: u64,
    /// Of `account` alone: an account's slots are kept together by it.
    account_hash: u64,
}

impl TokenParams {
    /// No parameters: the layer's default token.
    pub fn new() -> Self {
        let mut inner = Inner::default();
        inner.rehash();
        TokenParams {
            inner: Arc::new(inner),
        }
    }

    /// Adds a `resource`, the API's absolute URI, by RFC 8707. It is
    /// repeatable, for a token valid at several APIs.
    pub fn resource(self, resource: impl Into<String>) -> Self {
        self.add_param("resource", resource)
    }

    /// Sets the `authorization_details` (RFC 9396): what the token is for,
    /// one transaction at a time. `details` is a JSON array of objects, each
    /// with its `type`; it is sent in a canonical form, so that equal details
    /// in another order of members name the same token. Setting it again
    /// replaces it. A token is never shared between requests for other
    /// details, and one the server granted for other details than these is
    /// refused. Details that are no such array fail the request with
    /// [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest).
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_oauth::TokenParams;
    ///
    /// let pay = TokenParams::new().authorization_details(json!([{
    ///     "type": "payment_initiation",
    ///     "instructedAmount": {"currency": "EUR", "amount": "25.00"},
    ///     "creditorName": "Merchant A",
    /// }]));
    /// # let _ = pay;
    /// ```
    pub fn authorization_details(self, details: serde_json::Value) -> Self {
        let text = crate::token::details::param_text(&details);
        self.param(crate::token::details::AUTHORIZATION_DETAILS, text)
    }

    /// Sets the `audience`, one value. Setting it again replaces it.
    pub fn audience(self, audience: impl Into<String>) -> Self {
        self.param("audience", audience)
    }

    /// Sets the `scope`, as space-separated scopes. Setting it again replaces
    /// it.
    pub fn scope(self, scope: impl Into<String>) -> Self {
        self.param("scope", scope)
    }

    /// The account the token is for: a person a web app, gateway or agent host
    /// acts for. Each account has its own tokens per set of parameters, its
    /// own chain of refresh tokens and its own login
    /// ([`OAuthLayer::begin_login`](crate::OAuthLayer::begin_login)). The id
    /// is opaque to the layer and may be personal data, such as an email: it
    /// appears in logs, metrics and store keys only as a digest. Setting it
    /// again replaces it.
    ///
    /// ```
    /// use tower_oauth::TokenParams;
    ///
    /// // Once per signed-in person, kept in their session:
    /// let alice = TokenParams::new().account("alice@example.com");
    /// let mut request = http::Request::get("https://api.example/v1/me").body(()).unwrap();
    /// request.extensions_mut().insert(alice.clone());
    /// assert_eq!(alice.get_account(), Some("alice@example.com"));
    /// assert!(alice.params().is_empty());
    /// ```
    pub fn account(mut self, id: impl Into<String>) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        inner.account = Some(Arc::from(id.into()));
        inner.rehash();
        self
    }

    /// A hash of the account alone, for keeping an account's slots together.
    pub(crate) fn account_hash(&self) -> u64 {
        self.inner.account_hash
    }

    /// The account set with [`account`](Self::account), if any.
    pub fn get_account(&self) -> Option<&str> {
        self.inner.account.as_deref()
    }

    /// What the person is shown, and compares on two screens, when the
    /// token of these parameters needs a backchannel login
    /// ([`Login::backchannel`](crate::login::Login::backchannel)): it
    /// replaces the layer's own
    /// [`Backchannel::binding_message`](crate::login::Backchannel::binding_message)
    /// for that login. It is never sent to the token endpoint. Checked as
    /// that setting is (plain text of at most 256 characters) before
    /// anything is sent: a request whose message is not, or whose layer has
    /// no backchannel login, fails with
    /// [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest).
    ///
    /// The message is part of what selects the token, but the layer's
    /// person has one login: a request with a new message asks the person
    /// only when a login is needed (none yet, or it ended). To have each
    /// transaction approved, give each its own
    /// [`authorization_details`](Self::authorization_details).
    ///
    /// Default: none, the layer's own.
    ///
    /// ```
    /// use tower_oauth::TokenParams;
    ///
    /// let pay = TokenParams::new()
    ///     .binding_message("Pay 25 EUR to ACME, order 4711")
    ///     .scope("payments");
    /// assert_eq!(pay.get_binding_message(), Some("Pay 25 EUR to ACME, order 4711"));
    /// assert_eq!(pay.params(), [("scope", "payments")]);
    /// ```
    pub fn binding_message(mut self, message: impl Into<String>) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        inner.binding_message = Some(Arc::from(message.into()));
        inner.rehash();
        self
    }

    /// The person of this request's [`account`](Self::account), as the
    /// server knows them (an e-mail address, a user name): who the layer's
    /// backchannel login
    /// ([`Backchannel::per_request`](crate::login::Backchannel::per_request))
    /// asks when the account has no login (none yet, or it ended). The
    /// account's tokens then come from that login, as from a web login's.
    /// Never sent to the token endpoint, never logged and never in `Debug`.
    /// A request with a hint and no account, a hint that is empty, over
    /// 8 KiB or with a control character, or a layer without a backchannel
    /// login fails with
    /// [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest) before
    /// anything is sent.
    ///
    /// Default: none; the account's requests are served by the login it
    /// has, and none is begun for it.
    ///
    /// ```
    /// use tower_oauth::TokenParams;
    ///
    /// let alice = TokenParams::new().account("user-17").login_hint("alice@example.com");
    /// assert!(format!("{alice:?}").contains("login_hint"));
    /// assert!(!format!("{alice:?}").contains("alice@"));
    /// ```
    pub fn login_hint(mut self, hint: impl Into<String>) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        inner.login_hint = Some(Arc::from(hint.into()));
        inner.rehash();
        self
    }

    /// The hint set with [`login_hint`](Self::login_hint), if any.
    pub(crate) fn get_login_hint(&self) -> Option<&str> {
        self.inner.login_hint.as_deref()
    }

    /// The message set with [`binding_message`](Self::binding_message), if
    /// any.
    pub fn get_binding_message(&self) -> Option<&str> {
        self.inner.binding_message.as_deref()
    }

    /// Sets `name=value`, replacing a value of that name. The names the layer
    /// sets itself are refused when the request is made: `grant_type`,
    /// `client_id`, `client_secret`, `client_assertion` and
    /// `client_assertion_type`. The request then fails with
    /// [`InvalidRequest`](crate::TokenErrorKind::InvalidRequest).
    pub fn param(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        self.edit(|params| match params.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => params.push((name, value)),
        })
    }

    /// Adds `name=value`, keeping a value of that name already set.
    pub fn add_param(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let pair = (name.into(), value.into());
        self.edit(|params| params.push(pair))
    }

    fn edit(mut self, f: impl FnOnce(&mut Vec<(String, String)>)) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        f(&mut inner.params);
        inner.rehash();
        self
    }

    /// The parameters, in the order they are sent.
    pub fn params(&self) -> Vec<(&str, &str)> {
        self.pairs()
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect()
    }

    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.inner.params
    }

    /// The same parameters without the account: what selects a token among
    /// an account's own.
    pub(crate) fn without_account(&self) -> TokenParams {
        let mut inner = Inner {
            params: self.inner.params.clone(),
            binding_message: self.inner.binding_message.clone(),
            login_hint: self.inner.login_hint.clone(),
            ..Inner::default()
        };
        inner.rehash();
        TokenParams {
            inner: Arc::new(inner),
        }
    }

    /// Whether neither a parameter nor an account is set: the layer's
    /// default token.
    pub fn is_empty(&self) -> bool {
        self.inner.params.is_empty()
            && self.inner.account.is_none()
            && self.inner.binding_message.is_none()
            && self.inner.login_hint.is_none()
    }
}

impl Inner {
    /// Hashes with keys drawn once per process: ids and parameters an
    /// attacker chooses cannot be made to collide and slow the slots' map.
    fn rehash(&mut self) {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        let keys = KEYS.get_or_init(RandomState::new);
        self.account_hash = keys.hash_one(&self.account);
        let mut hasher = keys.build_hasher();
        self.params.hash(&mut hasher);
        hasher.write_u64(self.account_hash);
        self.binding_message.hash(&mut hasher);
        self.login_hint.hash(&mut hasher);
        self.hash = hasher.finish();
    }
}

impl Default for TokenParams {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for TokenParams {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.hash == other.inner.hash
                && self.inner.account == other.inner.account
                && self.inner.params == other.inner.params
                && self.inner.binding_message == other.inner.binding_message
                && self.inner.login_hint == other.inner.login_hint)
    }
}

impl Eq for TokenParams {}

impl Hash for TokenParams {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.inner.hash);
    }
}

/// The parameters' names only, and the account as a digest. A value may be a
/// secret, for a server that takes a parameter as a credential, an account id
/// may be personal data, and `Debug` output ends up in logs.
impl fmt::Debug for TokenParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.inner.params.iter().map(|(n, _)| n.as_str()).collect();
        let mut debug = f.debug_struct("TokenParams");
        debug.field("names", &names);
        if let Some(account) = &self.inner.account {
            debug.field("account", &account_digest(account).short());
        }
        if self.inner.binding_message.is_some() {
            debug.field("binding_message", &"(set)");
        }
        if self.inner.login_hint.is_some() {
            debug.field("login_hint", &"(set)");
        }
        debug.finish_non_exhaustive()
    }
}

/// An account id's digest: SHA-256 of the id, in hex. It is what logs,
/// metrics and store keys name an account by.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct AccountDigest(pub(crate) String);

impl AccountDigest {
    /// The first 12 hex digits, for logs.
    pub(crate) fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl fmt::Debug for AccountDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}

/// The digest of account `id`.
pub(crate) fn account_digest(id: &str) -> AccountDigest {
    AccountDigest(crate::support::encoding::sha256_hex(
        [b"tower-oauth account\0", id.as_bytes()]
            .concat()
            .as_slice(),
    ))
}

/// A hasher for maps keyed by [`TokenParams`], which carry their hash: it
/// passes that on instead of hashing again.
#[derive(Default)]
pub(crate) struct CarriedHash(u64);

impl Hasher for CarriedHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used by `TokenParams`; anything else mixes in.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Whether `scope` is one scope token, by RFC 6749 section 3.3: at least one of
/// `%x21 / %x23-5B / %x5D-7E`.
pub(crate) fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_params_are_equal_and_hash_alike() {
        let a = TokenParams::new().resource("https://a").scope("x");
        let b = TokenParams::new()
            .resource("https://a")
            .scope("y")
            .scope("x");
        assert_eq!(a, b);
        let hash = |p: &TokenParams| {
            let mut h = CarriedHash::default();
            p.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(a, TokenParams::new().scope("x").resource("https://a"));
        assert_ne!(a, a.clone().resource("https://b"));
        assert!(TokenParams::new().is_empty());
        // Names only: a value may be a secret.
        assert_eq!(
            format!("{:?}", a.clone().param("api_key", "hunter2")),
            r#"TokenParams { names: ["resource", "scope", "api_key"], .. }"#
        );
    }

    #[test]
    fn accounts_set_tokens_apart_and_show_as_a_digest() {
        let alice = TokenParams::new().account("alice@example.com");
        let bob = TokenParams::new().account("bob@example.com");
        assert_ne!(alice, bob);
        assert_ne!(alice, TokenParams::new());
        assert!(!alice.is_empty() && alice.params().is_empty());
        assert_eq!(alice, TokenParams::new().account("alice@example.com"));
        assert_eq!(alice.without_account(), TokenParams::new());
        let shown = format!("{alice:?}");
        assert!(!shown.contains("alice"), "{shown}");
        assert!(shown.contains(account_digest("alice@example.com").short()));
        // The digest is SHA-256 of a tagged id, as `sha256sum` gives it.
        assert_eq!(
            account_digest("alice@example.com").0,
            crate::support::encoding::sha256_hex(b"tower-oauth account\0alice@example.com")
        );
    }

    #[test]
    fn scope_tokens_follow_rfc_6749() {
        assert!(is_scope_token("mcp:tools"));
        assert!(is_scope_token("https://graph.example/.default"));
        for bad in ["", "a b", "a\"b", "a\\b", "é", "a\nb"] {
            assert!(!is_scope_token(bad), "{bad:?}");
        }
    }
}
