//! [`ClientAuth`]: how the client proves itself to the token endpoint.
//!
//! This file holds everything that depends on the method: what it requires,
//! what values it can carry, its names in configuration and server metadata,
//! and what it adds to the token request.

pub(crate) mod assertion;
pub(crate) mod secret;

use crate::error::{ConfigError, ConfigErrorKind};

/// How the client authenticates to the token endpoint.
///
/// Without a choice, the layer picks by how the endpoint was given:
///
/// | endpoint given with | default | why |
/// |---|---|---|
/// | [`auth_url`](crate::OAuthLayerBuilder::auth_url) | [`UnencodedBody`](ClientAuth::UnencodedBody) | the product-information API's token endpoint takes exactly its own request body |
/// | [`token_url`](crate::OAuthLayerBuilder::token_url) | [`Basic`](ClientAuth::Basic) | RFC 6749 section 2.3.1: every server must support HTTP Basic for clients with a secret |
/// | [`issuer`](crate::OAuthLayerBuilder::issuer) | what the server lists in `token_endpoint_auth_methods_supported`: [`Basic`](ClientAuth::Basic) if it lists `client_secret_basic` or nothing, else [`FormBody`](ClientAuth::FormBody) for `client_secret_post` | the server says what it takes (RFC 8414 section 2) |
///
/// It also parses from the names used in configuration, as `OAUTH_CLIENT_AUTH`
/// does for [`from_env`](crate::OAuthLayerBuilder::from_env). The names are
/// `basic` or `client_secret_basic`, `form` or `client_secret_post`,
/// `basic-unencoded` and `unencoded`:
///
/// ```
/// use tower_oauth::client_auth::ClientAuth;
///
/// assert_eq!("client_secret_post".parse::<ClientAuth>().unwrap(), ClientAuth::FormBody);
/// assert!("magic".parse::<ClientAuth>().is_err());
/// ```
///
/// ```
/// use tower_oauth::{OAuthLayer, client_auth::ClientAuth};
///
/// let oauth = OAuthLayer::builder()
///     .token_url("https://idp.example.com/oauth2/token")
///     .client_id("my-client")
///     .client_secret("a secret with + / & = and spaces")
///     .client_auth(ClientAuth::Basic)
///     .scope("read:products write:orders")
///     .build()
///     .unwrap();
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientAuth {
    /// The product-information API's request: id and secret in the body, values
    /// sent as they are, without encoding. Values with `&`, whitespace or
    /// control characters cannot be carried: they are a [`ConfigError`].
    #[default]
    UnencodedBody,
    /// Id and secret in the body, every name and value form-urlencoded. This is
    /// `client_secret_post`, in RFC 6749 section 2.3.1 and appendix B. It
    /// carries any value.
    FormBody,
    /// HTTP Basic authentication, `client_secret_basic` in RFC 6749 section
    /// 2.3.1. Id and secret are percent-encoded, joined with `:`, and
    /// base64-encoded in the `Authorization` header. RFC 3986's unreserved
    /// characters stay as they are, a space is `%20` and a `+` is `%2B`. The
    /// body holds `grant_type` and any extra parameters, form-urlencoded.
    ///
    /// Servers that form-decode the credentials, as RFC 6749 says, read any
    /// secret back exactly. So do servers that only percent-decode them.
    /// Servers that decode nothing read secrets of letters, digits and `-._~`
    /// exactly.
    Basic,
    /// HTTP Basic authentication with id and secret as they are, not encoded.
    /// It suits servers that do not decode the credentials at all. A client id
    /// that contains `:` cannot be carried: it is a [`ConfigError`].
    BasicUnencoded,
    /// `private_key_jwt`, by RFC 7523 section 2.2 and OpenID Connect Core
    /// section 9. It needs no secret. Each token request carries a fresh
    /// [`ClientAssertion`](crate::client_auth::ClientAssertion) signed with the key,
    /// form-urlencoded as `client_assertion_type` and `client_assertion`, with
    /// `client_id`. With [`issuer`](crate::OAuthLayerBuilder::issuer), the
    /// assertion's `aud` is the issuer, then the token endpoint's URL if the
    /// server refuses that. Otherwise it is the token endpoint's URL.
    /// [`assertion_audience`](crate::OAuthLayerBuilder::assertion_audience)
    /// overrides both.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::{Algorithm, ClientAuth, SigningKey}};
    ///
    /// # let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIL4vcREMaCdcc23IpMLEj8G1E4riNufMcCy2f9FRUTr8\n-----END PRIVATE KEY-----\n";
    /// // let pem = std::fs::read("/run/secrets/client-key.pem")?;
    /// let key = SigningKey::from_pem(pem, Algorithm::EdDsa)?.key_id("client-key-1");
    /// let oauth = OAuthLayer::builder()
    ///     .issuer("https://login.example.com")
    ///     .client_id("my-client")
    ///     .client_auth(ClientAuth::PrivateKeyJwt(key))
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    PrivateKeyJwt(crate::keys::SigningKey),
    /// `client_secret_jwt`, by RFC 7523 section 2.2 and OpenID Connect Core
    /// section 9. It is like [`PrivateKeyJwt`](ClientAuth::PrivateKeyJwt), with
    /// the assertion signed with HMAC SHA-256 (`HS256`) under the client
    /// secret. The secret itself is never sent.
    ClientSecretJwt,
    /// Mutual TLS, by RFC 8705 section 2: `tls_client_auth` and
    /// `self_signed_tls_client_auth`. The client proves itself with the
    /// certificate it presents in the TLS handshake. The body carries
    /// `client_id` and no secret. The built-in transport, with feature
    /// `reqwest`, presents the certificate given to
    /// [`client_identity`](crate::OAuthLayerBuilder::client_identity). A
    /// transport of your own brings its own TLS configuration.
    TlsClientAuth,
    /// A client assertion the client does not sign: a JWT that the platform
    /// writes to this file and renews. It may be a Kubernetes projected service
    /// account token, Azure workload identity's `AZURE_FEDERATED_TOKEN_FILE`, a
    /// SPIFFE JWT-SVID, or a CI system's OIDC token. It is sent as
    /// `client_assertion` with `client_id`, by RFC 7523 section 2.2. Servers
    /// call it `private_key_jwt` or a federated credential. It needs no secret
    /// and no feature.
    ///
    /// The file is read at each token request, so a renewed one is taken at the
    /// next. A refused assertion is tried once more if the file changed
    /// meanwhile. Nothing of it is kept. A file that reads empty, or not as a
    /// JWT, is read again a few times within about a quarter of a second, for a
    /// writer that truncates first. A file that is missing, empty, unreadable,
    /// not a JWT or past its `exp` gives a [`TokenError`](crate::TokenError) of
    /// kind [`Credential`](crate::TokenErrorKind::Credential). It names the
    /// file, never its content. With a token store, tokens are sealed only
    /// under an [`encryption_key`](crate::store::RedisStore::encryption_key) of yours.
    /// The file is no secret the replicas share.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::ClientAuth};
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.microsoftonline.com/my-tenant/oauth2/v2.0/token")
    ///     .client_id("00000000-0000-0000-0000-000000000000")
    ///     .client_auth(ClientAuth::AssertionFile("/var/run/secrets/azure/tokens/azure-identity-token".into()))
    ///     .scope("api://orders/.default")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    AssertionFile(std::path::PathBuf),
    /// `private_key_jwt` with a client assertion from any
    /// [`SubjectToken`](crate::grant::SubjectToken) source, asked at each token
    /// request. The source may be a platform's identity token (GitHub Actions',
    /// GCP's, or Azure managed identity's), a function, or another layer.
    /// Otherwise it is the same as [`AssertionFile`](Self::AssertionFile).
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::ClientAuth, grant::SubjectToken};
    ///
    /// // A GitHub Actions job to an Entra ID app with a federated credential.
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.microsoftonline.com/my-tenant/oauth2/v2.0/token")
    ///     .client_id("00000000-0000-0000-0000-000000000000")
    ///     .client_auth(ClientAuth::Assertion(SubjectToken::github_actions(
    ///         "api://AzureADTokenExchange",
    ///     )))
    ///     .scope("api://orders/.default")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    Assertion(crate::endpoint::grant::token_exchange::SubjectToken),
    /// No client authentication: `none`, in RFC 7591 section 2. The request
    /// carries `client_id` when one is given, and no credential. It suits a
    /// grant that proves the client itself, such as
    /// [`jwt_bearer`](crate::OAuthLayerBuilder::jwt_bearer), where it is the
    /// default without a secret. It never suits client credentials, whose
    /// client must authenticate.
    None,
}

impl std::str::FromStr for ClientAuth {
    type Err = ConfigError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "basic" | "client-secret-basic" => Ok(ClientAuth::Basic),
            "form" | "post" | "client-secret-post" => Ok(ClientAuth::FormBody),
            "basic-unencoded" => Ok(ClientAuth::BasicUnencoded),
            "unencoded" => Ok(ClientAuth::UnencodedBody),
            "none" => Ok(ClientAuth::None),
            "client-secret-jwt" => Ok(ClientAuth::ClientSecretJwt),
            "tls-client-auth" | "self-signed-tls-client-auth" | "mtls" => {
                Ok(ClientAuth::TlsClientAuth)
            }
            "assertion-file" | "client-assertion-file" => Err(ConfigError::new(
                ConfigErrorKind::InvalidSetting,
                "a client assertion file needs its path: give ClientAuth::AssertionFile(path) \
                 to client_auth, or set OAUTH_CLIENT_ASSERTION_FILE",
            )),
            "private-key-jwt" => Err(ConfigError::new(
                ConfigErrorKind::InvalidSetting,
                "private_key_jwt needs a key: give ClientAuth::PrivateKeyJwt(SigningKey) to \
                 client_auth",
            )),
            _ => Err(ConfigError::new(
                ConfigErrorKind::InvalidSetting,
                format!(
                    "unknown client authentication `{name}`: use basic (client_secret_basic), \
                     form (client_secret_post), basic-unencoded, unencoded, client_secret_jwt \
                     or tls_client_auth"
                ),
            )),
        }
    }
}

impl ClientAuth {
    /// Whether the id and secret go in an `Authorization: Basic` header.
    pub(crate) fn is_basic(&self) -> bool {
        matches!(self, ClientAuth::Basic | ClientAuth::BasicUnencoded)
    }

    /// Whether the token request carries the client secret in some form. The
    /// secret is then required.
    pub(crate) fn needs_secret(&self) -> bool {
        !matches!(
            self,
            ClientAuth::TlsClientAuth
                | ClientAuth::AssertionFile(_)
                | ClientAuth::Assertion(_)
                | ClientAuth::None
                | ClientAuth::PrivateKeyJwt(_)
        )
    }

    /// The method's name in a [token identity](crate::token::identity). It is
    /// stable across versions, so a renamed variant must not change it. It is
    /// distinct for every method.
    pub(crate) fn identity_name(&self) -> &'static str {
        match self {
            ClientAuth::UnencodedBody => "unencoded_body",
            ClientAuth::FormBody => "client_secret_post",
            ClientAuth::Basic => "client_secret_basic",
            ClientAuth::BasicUnencoded => "client_secret_basic_unencoded",
            ClientAuth::PrivateKeyJwt(_) => "private_key_jwt",
            ClientAuth::ClientSecretJwt => "client_secret_jwt",
            ClientAuth::TlsClientAuth => "tls_client_auth",
            ClientAuth::AssertionFile(_) => "client_assertion_file",
            ClientAuth::Assertion(_) => "client_assertion_source",
            ClientAuth::None => "none",
        }
    }

    /// What of the credential, beyond the method, sets the client's tokens
    /// apart in a [token identity](crate::token::identity). For
    /// `private_key_jwt`, it is the signing key's algorithm, id and RFC 7638
    /// public key thumbprint. A custom signer that gives no public key is known
    /// by its algorithm and id. Never a secret.
    pub(crate) fn identity_credential(&self) -> Option<String> {
        match self {
            ClientAuth::PrivateKeyJwt(key) => Some(key.identity()),
            ClientAuth::Assertion(source) => Some(source.identity()),
            _ => None,
        }
    }

    /// The method's name in server metadata, as
    /// `token_endpoint_auth_methods_supported` lists it, for messages.
    pub(crate) fn method_name(&self) -> &'static str {
        match self {
            ClientAuth::UnencodedBody => "the product-information API's unencoded body",
            ClientAuth::FormBody => "client_secret_post",
            ClientAuth::Basic | ClientAuth::BasicUnencoded => "client_secret_basic",
            ClientAuth::PrivateKeyJwt(_) => "private_key_jwt",
            ClientAuth::ClientSecretJwt => "client_secret_jwt",
            ClientAuth::TlsClientAuth => "tls_client_auth",
            ClientAuth::AssertionFile(_) => "private_key_jwt (a client assertion file)",
            ClientAuth::Assertion(_) => "private_key_jwt (a client assertion from its source)",
            ClientAuth::None => "none",
        }
    }
}

/// The `client_assertion_type` of a JWT client assertion, by RFC 7523 section
/// 2.2.
pub const JWT_BEARER_ASSERTION_TYPE: &str =
    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The explicit `typ` of a client authentication JWT:
/// `client-authentication+jwt`. It is the default of
/// [`ClientAssertion::typ`](crate::client_auth::ClientAssertion::typ). The 2026 update of
/// RFC 7523, draft-ietf-oauth-rfc7523bis, registers it. It recommends it, so
/// that the JWT cannot be taken for another kind.
pub const CLIENT_AUTHENTICATION_JWT_TYPE: &str = "client-authentication+jwt";

use crate::policy::{DEFAULT_ASSERTION_CLOCK_SKEW, DEFAULT_ASSERTION_LIFETIME};

/// The settings of client assertions, for `private_key_jwt` and
/// `client_secret_jwt`, beyond the key.
#[derive(Clone, Debug)]
pub(crate) struct AssertionSettings {
    /// The `aud`. None: the issuer with discovery, else the token endpoint.
    pub(crate) audience: Option<String>,
    pub(crate) lifetime: std::time::Duration,
    pub(crate) typ: Option<String>,
    /// How far `iat` and `nbf` are backdated.
    pub(crate) clock_skew: std::time::Duration,
    /// Without an audience set, with an issuer: whether the token endpoint's
    /// URL, rather than the issuer, is the `aud` the server took last. Every
    /// token request of a layer shares it, its clones and slots included, so
    /// that a server's choice is learnt once.
    pub(crate) endpoint_audience: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The same for a JWT-bearer grant's assertions.
    pub(crate) grant_endpoint_audience: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// With a private key read from a file: its algorithm and key id. The
    /// file's PEM is then the rotating credential, read again on refusal.
    pub(crate) key_file: Option<(crate::keys::Algorithm, Option<String>)>,
}

/// The key of a rotating key file's `pem`, for `settings`. None if it does not
/// read. The key the layer was built with then stays.
pub(crate) fn key_from_file(
    settings: &AssertionSettings,
    pem: &str,
) -> Option<Result<crate::keys::SigningKey, ConfigError>> {
    let (algorithm, kid) = settings.key_file.as_ref()?;
    Some(
        crate::keys::SigningKey::from_pem(pem, *algorithm).map(|key| match kid {
            Some(kid) => key.key_id(kid.clone()),
            None => key,
        }),
    )
}

/// The product-information API's interface sends values unencoded: `&` would split the body, and
/// whitespace or control characters are not carried intact.
pub(crate) fn check_unencoded(
    value: &str,
    kind: ConfigErrorKind,
    what: &str,
) -> Result<(), ConfigError> {
    let problem = if value.contains('&') {
        "`&`"
    } else if value.chars().any(char::is_whitespace) {
        "whitespace"
    } else if value.chars().any(char::is_control) {
        "a control character"
    } else {
        return Ok(());
    };
    Err(ConfigError::new(
        kind,
        format!(
            "the {what} contains {problem}, which the token request body cannot carry: \
             its values are sent without encoding (use ClientAuth::FormBody or \
             ClientAuth::Basic for such values)"
        ),
    ))
}

/// Warns when `value`, sent unencoded as the product-information API's
/// interface says, holds a character that a server which form-decodes the body
/// would read as something else: `+` as a space, `%` as the start of an escape.
/// What is sent is still what that interface asks for. The warning names the
/// character, never the value, and the client authentication to use if the
/// server refuses it.
pub(crate) fn warn_if_read_otherwise(value: &str, what: &str) {
    let character = if value.contains('+') {
        "`+`"
    } else if value.contains('%') {
        "`%`"
    } else {
        return;
    };
    tracing::warn!(
        "the {what} contains {character}, which the product-information API's unencoded body sends as \
         it is; a server that form-decodes the body reads `+` as a space and `%XX` as an \
         escape, so it would read another value: if the server refuses it, use \
         ClientAuth::FormBody (or ClientAuth::Basic), which encode it"
    );
}

/// The parameters the layer sets itself, which no user parameter may name.
pub(crate) const RESERVED_PARAMS: [&str; 12] = [
    "grant_type",
    "refresh_token",
    "client_id",
    "client_secret",
    "client_assertion",
    "client_assertion_type",
    "assertion",
    "subject_token",
    "subject_token_type",
    "actor_token",
    "actor_token_type",
    "requested_token_type",
];

/// Extra parameters: a name that is not empty or reserved. Sent unencoded, the
/// name and value must be ones the body can carry.
/// Checks each of `params` as [`check_param`] does, and that
/// `authorization_details`, one JSON array, comes at most once.
pub(crate) fn check_params(
    params: &[(String, String)],
    unencoded: bool,
) -> Result<(), ConfigError> {
    for (name, value) in params {
        check_param(name, value, unencoded)?;
    }
    let details = crate::token::details::AUTHORIZATION_DETAILS;
    if params.iter().filter(|(name, _)| name == details).count() > 1 {
        return Err(ConfigError::new(
            ConfigErrorKind::InvalidParameter,
            "`authorization_details` is given more than once: it is one JSON array, which holds \
             every object (set it with authorization_details, which replaces it)",
        ));
    }
    Ok(())
}

pub(crate) fn check_param(name: &str, value: &str, unencoded: bool) -> Result<(), ConfigError> {
    let bad = |why: String| Err(ConfigError::new(ConfigErrorKind::InvalidParameter, why));
    if name.is_empty() {
        return bad("a token request parameter has an empty name".into());
    }
    if RESERVED_PARAMS.contains(&name) {
        return bad(format!(
            "`{name}` is set by the layer itself (from the client authentication) and cannot \
             be given as a parameter, so that no parameter stands beside or replaces the \
             layer's own"
        ));
    }
    if name == crate::token::details::AUTHORIZATION_DETAILS {
        crate::token::details::canonical_text(value).map_err(|why| {
            ConfigError::new(
                ConfigErrorKind::InvalidParameter,
                format!(
                    "`authorization_details` {why}; RFC 9396 takes a JSON array of objects, each \
                 with a `type`"
                ),
            )
        })?;
    }
    if unencoded {
        if name.contains('=') {
            return bad(format!("the parameter name `{name}` contains `=`"));
        }
        let what = format!("value of parameter `{}`", crate::error::clip(name));
        check_unencoded(name, ConfigErrorKind::InvalidParameter, "parameter name")?;
        check_unencoded(value, ConfigErrorKind::InvalidParameter, &what)?;
        warn_if_read_otherwise(name, "parameter name");
        warn_if_read_otherwise(value, &what);
    }
    Ok(())
}
