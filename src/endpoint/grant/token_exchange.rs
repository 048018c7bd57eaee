//! [`TokenExchange`]: the token exchange grant (RFC 8693), and
//! [`SubjectToken`], where the token it trades comes from (a file, a
//! function, another layer).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::TokenError;
use crate::support::boxed::{BoxError, BoxFuture};

/// The `grant_type` of token exchange (RFC 8693 section 2.1).
pub const TOKEN_EXCHANGE_GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// The token type URI of an OAuth access token (RFC 8693 section 3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The token type URI of a JWT (RFC 8693 section 3).
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// The token type URI of an OpenID Connect ID token (RFC 8693 section 3).
pub const ID_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id_token";

/// The token type URI of an Identity Assertion JWT Authorization Grant
/// (ID-JAG: the IETF draft "Identity Assertion JWT Authorization Grant",
/// MCP's enterprise-managed authorization).
pub const ID_JAG_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// The function a subject token is asked from.
type SubjectFn = Arc<dyn Fn() -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync>;

/// What a token request asks a source that depends on it for: the
/// authorization server it goes to (its issuer), the `resource` and the
/// `scope` it carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Asking {
    pub(crate) audience: Option<String>,
    pub(crate) resource: Option<String>,
    pub(crate) scope: Option<String>,
}

impl Asking {
    /// What a request to the server of `issuer` with `params` asks for.
    pub(crate) fn of(issuer: Option<&str>, params: &[(String, String)]) -> Self {
        let param = |name: &str| {
            params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        Asking {
            audience: issuer.map(str::to_owned),
            resource: param("resource"),
            scope: param("scope"),
        }
    }
}

/// A source asked with the request's [`Asking`]: a token made for it (an
/// ID-JAG), and what to do when the server refused the one it gave (drop
/// it, so that the next is new; whether one comes).
#[derive(Clone)]
pub(crate) struct ForRequest {
    pub(crate) ask:
        Arc<dyn Fn(Asking) -> BoxFuture<'static, Result<String, TokenError>> + Send + Sync>,
    pub(crate) refused: Arc<dyn Fn(Asking) -> bool + Send + Sync>,
}

/// The token exchange grant (RFC 8693): each token request trades a subject
/// token (a workload's platform token, another service's access token) for
/// a token of this layer's. Give it with
/// [`OAuthLayerBuilder::token_exchange`](crate::OAuthLayerBuilder::token_exchange);
/// the exchanged token is cached, renewed and backed off like any other.
/// The request's `audience`, `resource` and `scope` are the builder's (and a
/// [`TokenParams`](crate::TokenParams)' per token slot); the client
/// authenticates as usual, or not at all without a secret.
///
/// ```
/// use tower_oauth::{OAuthLayer, SubjectToken, TokenExchange};
///
/// // Trade the pod's Kubernetes token for one the billing API takes.
/// let oauth = OAuthLayer::builder()
///     .token_url("https://sts.example.com/oauth2/token")
///     .client_id("orders-service")
///     .client_secret("s3cret")
///     .token_exchange(TokenExchange::new(SubjectToken::file(
///         "/var/run/secrets/tokens/sts-token",
///     )))
///     .audience("billing-api")
///     .build()?;
/// # Ok::<_, tower_oauth::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct TokenExchange {
    pub(crate) subject: SubjectToken,
    pub(crate) subject_token_type: String,
    pub(crate) requested_token_type: Option<String>,
}

impl TokenExchange {
    /// Trades `subject`, of the type its source implies (a file's: a
    /// [JWT](JWT_TOKEN_TYPE); a function's or a layer's: an [access
    /// token](ACCESS_TOKEN_TYPE)).
    pub fn new(subject: SubjectToken) -> Self {
        let subject_token_type = match &subject.0 {
            SubjectFrom::File(_) => JWT_TOKEN_TYPE,
            SubjectFrom::Fn { .. } | SubjectFrom::ForRequest { .. } => ACCESS_TOKEN_TYPE,
            SubjectFrom::Platform(platform) => match platform.platform {
                crate::endpoint::grant::platform::Platform::Azure { .. } => ACCESS_TOKEN_TYPE,
                _ => JWT_TOKEN_TYPE,
            },
        };
        TokenExchange {
            subject,
            subject_token_type: subject_token_type.to_owned(),
            requested_token_type: None,
        }
    }

    /// The `subject_token_type` (RFC 8693 section 3), such as
    /// `urn:ietf:params:oauth:token-type:id_token`.
    ///
    /// Default: by the subject's source, see [`new`](Self::new).
    pub fn subject_token_type(mut self, token_type: impl Into<String>) -> Self {
        self.subject_token_type = token_type.into();
        self
    }

    /// The `requested_token_type` (RFC 8693 section 2.1).
    ///
    /// Default: none (the server's choice, usually an access token).
    pub fn requested_token_type(mut self, token_type: impl Into<String>) -> Self {
        self.requested_token_type = Some(token_type.into());
        self
    }

    /// What sets the exchanged tokens apart in a token identity: the
    /// subject's source and the token types.
    pub(crate) fn identity(&self) -> String {
        format!(
            "token_exchange;subject={};subject_type={};requested={}",
            self.subject.identity(),
            self.subject_token_type,
            self.requested_token_type.as_deref().unwrap_or("")
        )
    }
}

/// Where a [`TokenExchange`]'s subject token comes from: asked afresh for
/// each token request.
#[derive(Clone)]
pub struct SubjectToken(pub(crate) SubjectFrom);

#[derive(Clone)]
pub(crate) enum SubjectFrom {
    /// A JWT a platform writes to a file and renews.
    File(PathBuf),
    /// A function's answer, known in identities by its name.
    Fn { name: String, ask: SubjectFn },
    /// Made for each request's server, resource and scope, known in
    /// identities by its name.
    ForRequest { name: String, source: ForRequest },
    /// Asked of the platform the workload runs on.
    Platform(Arc<crate::endpoint::grant::platform::PlatformToken>),
}

impl SubjectToken {
    /// A JWT a platform writes to `path` and renews (a Kubernetes projected
    /// service account token, a SPIFFE JWT-SVID), read at each token
    /// request as [`ClientAuth::AssertionFile`](crate::ClientAuth::AssertionFile)
    /// reads its file: errors name the file, never its content.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        SubjectToken(SubjectFrom::File(path.into()))
    }

    /// What `ask` answers, awaited at each token request (within the
    /// layer's fetch timeout): a token your code holds. `name` tells
    /// subjects apart where tokens are shared (a token store): give the
    /// same name on every replica for the same subject, another for another.
    ///
    /// ```
    /// use tower_oauth::SubjectToken;
    ///
    /// let subject = SubjectToken::from_fn("ci-oidc", || {
    ///     Box::pin(async { Ok(std::env::var("CI_JOB_JWT")?) })
    /// });
    /// ```
    pub fn from_fn<F>(name: impl Into<String>, ask: F) -> Self
    where
        F: Fn() -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync + 'static,
    {
        SubjectToken(SubjectFrom::Fn {
            name: name.into(),
            ask: Arc::new(ask),
        })
    }

    /// GitHub Actions' OIDC token for `audience`, asked at
    /// `ACTIONS_ID_TOKEN_REQUEST_URL` with `ACTIONS_ID_TOKEN_REQUEST_TOKEN`
    /// (a job with `permissions: id-token: write`). Kept until a minute
    /// before its `exp`. A JWT: for a token exchange, a JWT-bearer grant,
    /// or a client assertion ([`ClientAuth::Assertion`](crate::ClientAuth::Assertion),
    /// Entra ID's federated credentials, say).
    pub fn github_actions(audience: impl Into<String>) -> Self {
        Self::platform(crate::endpoint::grant::platform::Platform::GithubActions {
            audience: audience.into(),
        })
    }

    /// GCP's identity token for `audience`, from the metadata server
    /// (`Metadata-Flavor: Google`, at `GCE_METADATA_HOST` when set). Kept
    /// until a minute before its `exp`.
    pub fn gcp_metadata(audience: impl Into<String>) -> Self {
        Self::platform(crate::endpoint::grant::platform::Platform::Gcp {
            audience: audience.into(),
        })
    }

    /// Azure's managed identity token for `resource` (such as
    /// `api://AzureADTokenExchange` for a federated credential), of the
    /// user-assigned identity `client_id` if given: from
    /// `IDENTITY_ENDPOINT` with `IDENTITY_HEADER` where the platform sets
    /// them (App Service, Functions, Container Apps), else from the
    /// instance metadata service (IMDS; `AZURE_POD_IDENTITY_AUTHORITY_HOST`
    /// names another, as Azure's SDKs honour it); kept until a minute
    /// before it runs out.
    pub fn azure_managed_identity(resource: impl Into<String>, client_id: Option<&str>) -> Self {
        Self::platform(crate::endpoint::grant::platform::Platform::Azure {
            resource: resource.into(),
            client_id: client_id.map(str::to_owned),
        })
    }

    fn platform(platform: crate::endpoint::grant::platform::Platform) -> Self {
        SubjectToken(SubjectFrom::Platform(Arc::new(
            crate::endpoint::grant::platform::PlatformToken::new(platform),
        )))
    }

    /// A token made for each request's server, resource and scope by `ask`
    /// (an ID-JAG), known as `name`; `refused` drops the one a server
    /// refused and says whether a new one comes.
    pub(crate) fn for_request(name: String, source: ForRequest) -> Self {
        SubjectToken(SubjectFrom::ForRequest { name, source })
    }

    /// Where the subject comes from, for messages: `file:<path>` or
    /// `fn:<name>`.
    pub(crate) fn source(&self) -> String {
        self.identity()
    }

    /// How the subject is known in a token identity.
    pub(crate) fn identity(&self) -> String {
        match &self.0 {
            SubjectFrom::File(path) => format!("file:{}", path.display()),
            SubjectFrom::Fn { name, .. } => format!("fn:{name}"),
            SubjectFrom::ForRequest { name, .. } => name.clone(),
            SubjectFrom::Platform(platform) => platform.name(),
        }
    }
}

/// Two sources are the same when they are known by the same name (a
/// file's path, a function's name, a platform and what it is asked for).
impl PartialEq for SubjectToken {
    fn eq(&self, other: &Self) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for SubjectToken {}

impl fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            SubjectFrom::File(path) => f.debug_tuple("SubjectToken::File").field(path).finish(),
            SubjectFrom::Fn { name, .. } => f.debug_tuple("SubjectToken::Fn").field(name).finish(),
            SubjectFrom::ForRequest { name, .. } => f
                .debug_tuple("SubjectToken::ForRequest")
                .field(name)
                .finish(),
            SubjectFrom::Platform(platform) => f
                .debug_tuple("SubjectToken::Platform")
                .field(&platform.platform)
                .finish(),
        }
    }
}
