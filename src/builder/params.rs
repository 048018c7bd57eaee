//! The builder's settings: what a token is requested for.

use crate::token::params::TokenParams;
use std::sync::Arc;

use super::OAuthLayerBuilder;

/// What a token is requested for: the parameters of the layer's token
/// request, and the token slots that requests choose parameters for.
impl OAuthLayerBuilder {
    /// Requests this `scope`, as space-separated scopes.
    /// [`ClientAuth::UnencodedBody`](crate::client_auth::ClientAuth::UnencodedBody), the
    /// default for [`auth_url`](Self::auth_url), cannot carry a value with
    /// spaces. Use another [`ClientAuth`](crate::client_auth::ClientAuth) for one.
    ///
    /// Default: none, so the parameter is not sent.
    pub fn scope(self, scope: impl Into<String>) -> Self {
        self.param("scope", scope)
    }

    /// Requests a token for this `audience`. It takes one value: setting it
    /// again replaces it. Servers that name the API a token is for by an
    /// audience use this parameter, such as Auth0 and many API gateways.
    /// Standard servers that implement RFC 8707 take
    /// [`resource`](Self::resource) instead, and ignore `audience`.
    ///
    /// Default: none, so the parameter is not sent.
    pub fn audience(self, audience: impl Into<String>) -> Self {
        self.param("audience", audience)
    }

    /// Requests a token for the API at `resource`, by RFC 8707's resource
    /// indicators: an absolute URI without a fragment. It is repeatable. Each
    /// call adds one `resource` parameter, for a token valid at several APIs,
    /// where the server allows it.
    ///
    /// ```
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/oauth2/token")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .resource("https://orders.example.com/")
    ///     .resource("https://billing.example.com/")
    ///     .build()
    ///     .unwrap();
    /// ```
    ///
    /// Default: none, so the parameter is not sent.
    pub fn resource(self, resource: impl Into<String>) -> Self {
        self.add_param("resource", resource)
    }

    /// Adds `name=value` to the token request body, after the built-in
    /// parameters. Setting a name again replaces its value. Use
    /// [`add_param`](Self::add_param) to send a name more than once. The names
    /// the layer sets itself cannot be set: [`build`](Self::build) then returns
    /// a [`ConfigError`](crate::ConfigError). They are `grant_type`,
    /// `client_id`, `client_secret`, `client_assertion`,
    /// `client_assertion_type` and `assertion`, and token exchange's
    /// `subject_token`, `subject_token_type`, `actor_token`, `actor_token_type`
    /// and `requested_token_type`.
    ///
    /// Default: none.
    pub fn param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match self.params.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.params.push((name, value)),
        }
        self
    }

    /// Sets the `authorization_details` (RFC 9396) of the layer's token: a
    /// JSON array of objects, each with its `type`, sent in a canonical
    /// form in each token request of the grant (client credentials, a
    /// refresh, token exchange, JWT-bearer), and in a login's authorization
    /// request (pushed, where the login pushes it) or device request; a
    /// code's exchange does not repeat them (RFC 9396 section 6). A token
    /// the server granted for other details, or without naming them, is
    /// refused. A token slot's
    /// [`TokenParams::authorization_details`](crate::TokenParams::authorization_details)
    /// replaces it. Details that are no such array make
    /// [`build`](Self::build) return a [`ConfigError`](crate::ConfigError).
    ///
    /// Default: none.
    pub fn authorization_details(self, details: serde_json::Value) -> Self {
        let text = crate::token::details::param_text(&details);
        self.param(crate::token::details::AUTHORIZATION_DETAILS, text)
    }

    /// Adds `name=value` to the token request body, keeping any parameter
    /// of that name already set: `.add_param("resource", a).add_param("resource", b)`
    /// sends both, in that order. The same names as for
    /// [`param`](Self::param) are reserved.
    ///
    /// Default: none.
    pub fn add_param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((name.into(), value.into()));
        self
    }

    /// Chooses a request's token from the request itself. `choose` sees each
    /// request's head: method, URI, headers and extensions. It gives the
    /// [`TokenParams`] of its token, or `None` for the layer's default token.
    /// It typically chooses by origin, so that one client stack serves several
    /// APIs, each with its own token. A request that carries `TokenParams` in
    /// its extensions keeps those, and `choose` is not asked.
    ///
    /// The closure runs for every request. So build each `TokenParams` once and
    /// clone it: a clone is a reference count.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, TokenParams};
    ///
    /// let orders = TokenParams::new().resource("https://orders.internal");
    /// let stock = TokenParams::new().resource("https://stock.internal").scope("stock:read");
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.example.com/oauth2/token")
    ///     .client_id("gateway")
    ///     .client_secret("secret")
    ///     .params_for(move |request| match request.uri.host() {
    ///         Some("orders.internal") => Some(orders.clone()),
    ///         Some("stock.internal") => Some(stock.clone()),
    ///         _ => None,
    ///     })
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    ///
    /// Default: none, so only a request's own `TokenParams` select a token.
    pub fn params_for<F>(mut self, choose: F) -> Self
    where
        F: Fn(&http::request::Parts) -> Option<TokenParams> + Send + Sync + 'static,
    {
        self.params_for = Some(Arc::new(choose));
        self
    }

    /// The scopes this layer may add to a token when an API asks for them. An
    /// API asks with a `403` and `WWW-Authenticate: Bearer
    /// error="insufficient_scope", scope="..."`, as RFC 6750 section 3.1 and
    /// MCP's step-up define. The token of that request's parameters, the
    /// default one or a slot's, is then requested again. It asks for the scopes
    /// it has, and for those asked for that are listed here, and from then on
    /// with them. The `403` is marked so that
    /// [`RetryUnauthorized`](crate::RetryUnauthorized) sends it again. The
    /// reqwest middleware and the MCP client send it again themselves.
    ///
    /// A scope not listed here is never requested, and a warning names it. The
    /// same scopes asked for again get a new token at most once per
    /// [`forced_renewal_interval`](Self::forced_renewal_interval). Within it,
    /// the `403` is returned as it is. Challenges are read only on a `403`, so
    /// requests that succeed pay nothing for this.
    ///
    /// ```
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.example.com/oauth2/token")
    ///     .client_id("agent")
    ///     .client_secret("secret")
    ///     .scope("files:read")
    ///     .step_up_scopes(["files:write", "files:share"])
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    ///
    /// With a person's [`login`](Self::login), the person approves every
    /// scope on the server's consent page: without this list, a challenge's
    /// scopes start a new login that asks for them with the scopes the
    /// chain has (at most 32 scopes in all), and a log line names them.
    /// This list, where set, bounds that too.
    ///
    /// Default: none, so a `403` is returned as it is; with a login, any
    /// scope the API asks for, approved by the person.
    pub fn step_up_scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.step_up_scopes = scopes
            .into_iter()
            .map(|scope| scope.as_ref().to_owned())
            .collect();
        self
    }

    /// How many tokens the layer keeps besides its default one. It keeps one
    /// slot per distinct [`TokenParams`], each with its own single flight,
    /// renewal, back-off and 401 handling. Past that number, the least recently
    /// used slot is evicted, and a warning is logged once. The slot's memory
    /// and tasks are freed once no request uses it. So a caller that puts
    /// per-request values into the parameters cannot grow memory without bound.
    ///
    /// Default: 64. At least 1.
    pub fn max_token_slots(mut self, max: usize) -> Self {
        self.max_token_slots = Some(max);
        self
    }

    /// How many accounts' tokens the layer keeps in memory, for requests that
    /// name an [account](crate::TokenParams::account): one per account and
    /// set of parameters, each with its own single flight and renewal. Past
    /// that number, the least recently used leave memory (an account's
    /// slots are kept in shards, and each shard evicts its own). With a
    /// [token store](Self::token_store), an account that left comes back from
    /// it at its next request: its tokens and its chain of refresh tokens,
    /// with no token request while its token is fresh. Without one, it comes
    /// back without its login, and its person must sign in again.
    ///
    /// Default: 10,000. At least 1.
    pub fn max_accounts(mut self, max: usize) -> Self {
        self.max_accounts = Some(max);
        self
    }
}
