//! [`IdentityAssertion`]: the settings of enterprise-managed authorization
//! (ID-JAG): the identity provider an ID token is exchanged at, and where
//! the ID token comes from. The builder assembles them into a JWT-bearer
//! grant whose assertion the identity provider makes for each server.

use std::fmt;

use crate::endpoint::client_auth::ClientAuth;
use crate::endpoint::grant::token_exchange::SubjectToken;

/// Enterprise-managed authorization: MCP's authorization extension SEP-990,
/// the IETF draft "Identity Assertion JWT Authorization Grant" (ID-JAG).
/// Give it with
/// [`OAuthLayerBuilder::identity_assertion`](crate::OAuthLayerBuilder::identity_assertion)
/// on a layer for a [protected resource](crate::OAuthLayerBuilder::protected_resource)
/// (an MCP server).
///
/// An agent holds an employee's ID token from the company's identity
/// provider (IdP). For each token the layer needs, it
///
/// 1. exchanges the ID token at the IdP (RFC 8693) for an ID-JAG: a short
///    JWT with `requested_token_type` [`ID_JAG_TOKEN_TYPE`](crate::grant::token_type::ID_JAG),
///    `subject_token_type` [`ID_TOKEN_TYPE`](crate::grant::token_type::ID_TOKEN), `audience`
///    the issuer of the authorization server the resource names (chosen by
///    the trust rule), `resource` the resource, and the layer's `scope`,
///    with the IdP client's own authentication;
/// 2. presents the ID-JAG to that authorization server with the JWT-bearer
///    grant (RFC 7523) and the layer's client authentication.
///
/// The ID-JAG is kept until shortly before its `exp`, and renewals reuse it.
/// With a [token store](crate::OAuthLayerBuilder::token_store) it is shared
/// as tokens are. An ID-JAG the server refuses (`invalid_grant`) is dropped
/// and the request made once more with a new one. A refusal at either step
/// names the step, the server and what was asked, never a token.
///
/// ```
/// use tower_oauth::{OAuthLayer, grant::{IdentityAssertion, SubjectToken}};
///
/// let id_token = SubjectToken::from_fn("employee-id-token", || {
///     Box::pin(async { Ok(std::fs::read_to_string("/run/agent/id_token")?) })
/// });
/// let oauth = OAuthLayer::builder()
///     .protected_resource("https://mcp.example.com/mcp")
///     .trusted_issuers(["https://auth.mcp.example.com"])
///     .client_id("agent")
///     .client_secret("agent-secret")
///     .identity_assertion(
///         IdentityAssertion::issuer("https://acme.okta.com", id_token).client_id("agent-at-idp"),
///     )
///     .scope("tools:call")
///     .build()?;
/// # Ok::<_, tower_oauth::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct IdentityAssertion {
    pub(crate) idp: Idp,
    pub(crate) id_token: SubjectToken,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
    pub(crate) client_auth: Option<ClientAuth>,
}

/// Where the identity provider's token endpoint is.
#[derive(Clone, Debug)]
pub(crate) enum Idp {
    /// Its token endpoint.
    TokenUrl(String),
    /// Its issuer, whose metadata names the token endpoint.
    Issuer(String),
}

impl IdentityAssertion {
    /// The IdP by its token endpoint, and where the ID token comes from.
    pub fn token_url(url: impl Into<String>, id_token: SubjectToken) -> Self {
        Self::at(Idp::TokenUrl(url.into()), id_token)
    }

    /// The IdP by its issuer (its metadata names the token endpoint), and
    /// where the ID token comes from.
    pub fn issuer(issuer: impl Into<String>, id_token: SubjectToken) -> Self {
        Self::at(Idp::Issuer(issuer.into()), id_token)
    }

    fn at(idp: Idp, id_token: SubjectToken) -> Self {
        IdentityAssertion {
            idp,
            id_token,
            client_id: None,
            client_secret: None,
            client_auth: None,
        }
    }

    /// The agent's client id at the IdP.
    ///
    /// Default: none sent.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// The agent's client secret at the IdP.
    ///
    /// Default: none (no client authentication at the IdP, unless
    /// [`client_auth`](Self::client_auth) says otherwise).
    pub fn client_secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// How the agent authenticates at the IdP (a key for `private_key_jwt`,
    /// say).
    ///
    /// Default: `client_secret_basic` with a secret, else none; with
    /// [`issuer`](Self::issuer), chosen from the IdP's metadata.
    pub fn client_auth(mut self, auth: ClientAuth) -> Self {
        self.client_auth = Some(auth);
        self
    }

    /// The IdP, for messages and identities.
    pub(crate) fn idp(&self) -> &str {
        match &self.idp {
            Idp::TokenUrl(url) | Idp::Issuer(url) => url,
        }
    }
}

impl fmt::Debug for IdentityAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityAssertion")
            .field("idp", &self.idp)
            .field("id_token", &self.id_token)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("client_auth", &self.client_auth)
            .finish()
    }
}
