//! [`TokenExchange`]: the token exchange grant of RFC 8693. [`SubjectToken`]:
//! where the token it trades comes from, such as a file, a function, or another
//! layer.

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

/// The token type URI of an Identity Assertion JWT Authorization Grant, or
/// ID-JAG. The IETF draft "Identity Assertion JWT Authorization Grant" defines
/// it, and MCP's enterprise-managed authorization uses it.
pub const ID_JAG_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// The function a subject token is asked from.
type SubjectFn = Arc<dyn Fn() -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync>;

/// What a token request asks a source that depends on it for: the issuer of the
/// authorization server it goes to, and the `resource` and `scope` it carries.
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

/// A source asked with the request's [`Asking`]. It gives a token made for the
/// request, such as an ID-JAG. When the server refused the one it gave, it
/// drops that one, so that the next is new, and says whether one comes.
#[derive(Clone)]
pub(crate) struct ForRequest {
    pub(crate) ask:
        Arc<dyn Fn(Asking) -> BoxFuture<'static, Result<String, TokenError>> + Send + Sync>,
    pub(crate) refused: Arc<dyn Fn(Asking) -> bool + Send + Sync>,
}

/// The token exchange grant of RFC 8693. Each token request trades a subject
/// token for a token of this layer's. The subject may be a workload's platform
/// token, or another service's access token. Give it with
/// [`OAuthLayerBuilder::token_exchange`](crate::OAuthLayerBuilder::token_exchange).
/// The exchanged token is cached, renewed and backed off like any other. The
/// request's `audience`, `resource` and `scope` are the builder's. In a token
/// slot, they are those of its [`TokenParams`](crate::TokenParams). The client
/// authenticates as usual, or not at all without a secret.
///
/// ```
/// use tower_oauth::{OAuthLayer, grant::{SubjectToken, TokenExchange}};
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
    /// Trades `subject`, of the type its source implies. A file's is a
    /// [JWT](JWT_TOKEN_TYPE). A function's or a layer's is an [access
    /// token](ACCESS_TOKEN_TYPE).
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

    /// The `subject_token_type`, by RFC 8693 section 3, such as
    /// `urn:ietf:params:oauth:token-type:id_token`.
    ///
    /// Default: by the subject's source, see [`new`](Self::new).
    pub fn subject_token_type(mut self, token_type: impl Into<String>) -> Self {
        self.subject_token_type = token_type.into();
        self
    }

    /// The `requested_token_type`, by RFC 8693 section 2.1.
    ///
    /// Default: none. The server chooses, usually an access token.
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
    /// A JWT a platform writes to `path` and renews, such as a Kubernetes
    /// projected service account token or a SPIFFE JWT-SVID. It is read at each
    /// token request, as
    /// [`ClientAuth::AssertionFile`](crate::client_auth::ClientAuth::AssertionFile) reads
    /// its file. Errors name the file, never its content.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        SubjectToken(SubjectFrom::File(path.into()))
    }

    /// A token your code holds: what `ask` answers, awaited at each token
    /// request within the layer's fetch timeout. `name` tells subjects apart
    /// where tokens are shared, as in a token store. Give the same name on
    /// every replica for the same subject, and another for another.
    ///
    /// ```
    /// use tower_oauth::grant::SubjectToken;
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

    /// The Kubernetes pod's service account token, which the kubelet keeps
    /// at `/var/run/secrets/kubernetes.io/serviceaccount/token` and renews:
    /// [`file`](Self::file) of that path. Its audience is the API server's;
    /// a token for another audience (a projected volume) lives where the
    /// pod's spec puts it, for [`file`](Self::file).
    pub fn kubernetes() -> Self {
        Self::file(crate::endpoint::client_auth::secret::KUBERNETES_TOKEN_FILE)
    }

    /// GitHub Actions' OIDC token for `audience`. It is asked at
    /// `ACTIONS_ID_TOKEN_REQUEST_URL` with `ACTIONS_ID_TOKEN_REQUEST_TOKEN`,
    /// which a job with `permissions: id-token: write` has. Kept until a minute
    /// before its `exp`. It is a JWT, for a token exchange, a JWT-bearer grant,
    /// or a client assertion such as
    /// [`ClientAuth::Assertion`](crate::client_auth::ClientAuth::Assertion) for Entra ID's
    /// federated credentials.
    pub fn github_actions(audience: impl Into<String>) -> Self {
        Self::platform(crate::endpoint::grant::platform::Platform::GithubActions {
            audience: audience.into(),
        })
    }

    /// GCP's identity token for `audience`, from the metadata server with
    /// `Metadata-Flavor: Google`, at `GCE_METADATA_HOST` when set. Kept until a
    /// minute before its `exp`.
    pub fn gcp_metadata(audience: impl Into<String>) -> Self {
        Self::platform(crate::endpoint::grant::platform::Platform::Gcp {
            audience: audience.into(),
        })
    }

    /// Azure's managed identity token for `resource`, of the user-assigned
    /// identity `client_id` if given. For a federated credential, `resource` is
    /// `api://AzureADTokenExchange`. Where the platform sets
    /// `IDENTITY_ENDPOINT` and `IDENTITY_HEADER`, as App Service, Functions and
    /// Container Apps do, the token comes from there. Otherwise it comes from
    /// the instance metadata service, IMDS. `AZURE_POD_IDENTITY_AUTHORITY_HOST`
    /// names another, as Azure's SDKs honour it. The token is kept until a
    /// minute before it runs out.
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

    /// A token that `ask` makes for each request's server, resource and scope,
    /// such as an ID-JAG, known as `name`. `refused` drops the one a server
    /// refused, and says whether a new one comes.
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

/// Two sources are the same when they are known by the same name: a file's
/// path, a function's name, or a platform and what it is asked for.
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
