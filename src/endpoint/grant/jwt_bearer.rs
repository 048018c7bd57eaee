//! [`JwtBearer`]: the JWT-bearer authorization grant of RFC 7523 section 2.1.
//! The crate signs its assertion, with Google's service account key file as a
//! preset, or a platform writes it to a file.

use std::fmt;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};

/// The `grant_type` of the JWT-bearer grant, from RFC 7523 section 2.1.
pub const JWT_BEARER_GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Google's token endpoint, the default `token_uri` of a service account key.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The JWT-bearer authorization grant of RFC 7523 section 2.1. The token
/// request carries `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`,
/// and a signed JWT as `assertion`. That JWT is the grant itself. Google
/// service accounts, Salesforce and many enterprise servers take it. Give it
/// with
/// [`OAuthLayerBuilder::jwt_bearer`](crate::OAuthLayerBuilder::jwt_bearer).
/// Caching, renewal and back-off are those of every token.
///
/// The assertion comes from one of two places:
///
/// - The layer signs it for each token request, with [`signed`](Self::signed).
///   `iss` is the issuer, and `sub` the subject, by default the issuer. `aud`
///   follows the rule of client assertions. With
///   [`issuer`](crate::OAuthLayerBuilder::issuer), it is the issuer, and after
///   an `invalid_grant` the token endpoint's URL once, the one taken kept.
///   Otherwise it is the token endpoint's URL. `iat` and `nbf` are backdated by
///   the
///   [`assertion_clock_skew`](crate::OAuthLayerBuilder::assertion_clock_skew),
///   and `exp` is a [`lifetime`](Self::lifetime) later. The `jti` is random,
///   and the header's `typ` is `JWT`.
/// - A platform writes and renews it in a file, read with
///   [`from_file`](Self::from_file) as for
///   [`ClientAuth::AssertionFile`](crate::client_auth::ClientAuth::AssertionFile).
///
/// The client needs no other authentication. Without a client secret, the
/// request carries no client credential, and `client_id` only when one is
/// given. With one, the client authenticates as usual.
///
/// ```no_run
/// use tower_oauth::{OAuthLayer, grant::JwtBearer};
///
/// let oauth = OAuthLayer::builder()
///     .jwt_bearer(JwtBearer::google_service_account_file("/run/secrets/service-account.json")?)
///     .scope("https://www.googleapis.com/auth/cloud-platform")
///     .build()?;
/// # Ok::<_, tower_oauth::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct JwtBearer {
    pub(crate) source: Source,
    pub(crate) scope_in_assertion: bool,
    token_uri: Option<String>,
}

/// Where the grant's assertion comes from.
#[derive(Clone)]
pub(crate) enum Source {
    /// Signed by the layer for each request.
    Signed(Signed),
    /// Written by a platform.
    File(PathBuf),
    /// Asked of a subject token source, such as a function or another layer.
    Subject(crate::endpoint::grant::token_exchange::SubjectToken),
}

/// The settings of an assertion the layer signs.
#[derive(Clone, Debug)]
pub(crate) struct Signed {
    pub(crate) key: crate::keys::SigningKey,
    pub(crate) issuer: String,
    pub(crate) subject: String,
    /// None: the token endpoint's URL.
    pub(crate) audience: Option<String>,
    pub(crate) lifetime: Duration,
}

impl JwtBearer {
    /// An assertion signed with `key` for each token request. It is issued by
    /// `issuer`, such as a service account's email or a client id, about
    /// itself.
    pub fn signed(key: crate::keys::SigningKey, issuer: impl Into<String>) -> Self {
        let issuer = issuer.into();
        JwtBearer {
            source: Source::Signed(Signed {
                key,
                subject: issuer.clone(),
                issuer,
                audience: None,
                lifetime: crate::policy::DEFAULT_ASSERTION_LIFETIME,
            }),
            scope_in_assertion: false,
            token_uri: None,
        }
    }

    /// The assertion's `sub`: the user or account the token is for. Google's
    /// domain-wide delegation and Salesforce's user name use it. Ignored for an
    /// assertion [from a file](Self::from_file).
    ///
    /// Default: the issuer.
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        if let Source::Signed(signed) = &mut self.source {
            signed.subject = subject.into();
        }
        self
    }

    /// The assertion's `aud`. Salesforce wants `https://login.salesforce.com`.
    /// Ignored for an assertion [from a file](Self::from_file).
    ///
    /// Default: with an issuer, the issuer and then the token endpoint's URL,
    /// as above. Without one, the token endpoint's URL.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        if let Source::Signed(signed) = &mut self.source {
            signed.audience = Some(audience.into());
        }
        self
    }

    /// How long after its making the assertion is valid: `exp - iat`. Between 1
    /// second and 1 hour, the most Google takes. Ignored for an assertion [from
    /// a file](Self::from_file).
    ///
    /// Default: 60 s.
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        if let Source::Signed(signed) = &mut self.source {
            signed.lifetime = lifetime.clamp(Duration::from_secs(1), Duration::from_secs(3600));
        }
        self
    }

    /// An assertion a platform writes to `path` and renews, read at each token
    /// request. [`ClientAuth::AssertionFile`](crate::client_auth::ClientAuth::AssertionFile)
    /// says how it is read and what its errors say.
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        JwtBearer {
            source: Source::File(path.into()),
            scope_in_assertion: false,
            token_uri: None,
        }
    }

    /// An assertion asked of `source` at each token request. The source may be
    /// a file, a function, or another layer's current token, fresh as
    /// `SubjectToken::from(&layer)` makes it. These are the same sources a
    /// token exchange's subject comes from. Errors name the source, never the
    /// assertion.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, grant::{JwtBearer, SubjectToken}};
    ///
    /// // A CI platform's OIDC token, handed over by code of yours.
    /// let grant = JwtBearer::assertion_from(SubjectToken::from_fn("ci-oidc", || {
    ///     Box::pin(async { Ok(std::env::var("CI_JOB_JWT")?) })
    /// }));
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://login.example.com/oauth2/token")
    ///     .jwt_bearer(grant)
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn assertion_from(source: crate::endpoint::grant::token_exchange::SubjectToken) -> Self {
        JwtBearer {
            source: Source::Subject(source),
            scope_in_assertion: false,
            token_uri: None,
        }
    }

    /// Whether the layer's `scope` goes into the signed assertion as its
    /// `scope` claim, instead of into the request body. Google asks for it
    /// there.
    ///
    /// Default: false, so the `scope` is a body parameter, as RFC 7523 section
    /// 2.1 says. True for
    /// [`google_service_account`](Self::google_service_account).
    pub fn scope_in_assertion(mut self, yes: bool) -> Self {
        self.scope_in_assertion = yes;
        self
    }

    /// The grant of a Google service account, from its JSON key file. The
    /// `private_key` signs assertions with RS256, with its `private_key_id` as
    /// `kid`. The assertions are issued by `client_email` for the key's
    /// `token_uri`, and carry the scope. The `token_uri` is the layer's token
    /// endpoint, unless another is given.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming what is missing or wrong, never showing the
    /// key. The file may not be JSON, or not a service account key. It may have
    /// no `client_email`, or a `private_key` that does not read.
    pub fn google_service_account(json: impl AsRef<str>) -> Result<Self, ConfigError> {
        let bad = |why: String| {
            ConfigError::new(
                ConfigErrorKind::InvalidKey,
                format!("the Google service account key {why}"),
            )
        };
        let doc: serde_json::Value =
            serde_json::from_str(json.as_ref()).map_err(|_| bad("is not JSON".into()))?;
        let text = |name: &str| doc.get(name).and_then(serde_json::Value::as_str);
        if text("type") != Some("service_account") {
            return Err(bad(
                "is not of `type` `service_account` (a user's or an external account's \
                 credentials are not a service account key)"
                    .into(),
            ));
        }
        let email = text("client_email").ok_or_else(|| bad("has no `client_email`".into()))?;
        let pem = text("private_key").ok_or_else(|| bad("has no `private_key`".into()))?;
        let mut key = crate::keys::SigningKey::from_pem(pem, crate::keys::Algorithm::Rs256)
            .map_err(|e| {
                bad(format!(
                    "has a `private_key` that does not read: {}",
                    e.message()
                ))
            })?;
        if let Some(kid) = text("private_key_id") {
            key = key.key_id(kid);
        }
        let mut grant = JwtBearer::signed(key, email).scope_in_assertion(true);
        grant.token_uri = Some(text("token_uri").unwrap_or(GOOGLE_TOKEN_URI).to_owned());
        Ok(grant)
    }

    /// [`google_service_account`](Self::google_service_account) from the key
    /// file at `path`. `GOOGLE_APPLICATION_CREDENTIALS` names that file.
    ///
    /// # Errors
    ///
    /// As `google_service_account`. Also a file that cannot be read, named in
    /// the error.
    pub fn google_service_account_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::InvalidKey,
                format!("cannot read `{}`: {e}", path.display()),
            )
        })?;
        Self::google_service_account(json)
    }

    /// The token endpoint a key file names in `token_uri`, used when none is
    /// given to the builder.
    pub fn token_url(&self) -> Option<&str> {
        self.token_uri.as_deref()
    }

    /// What sets this grant's tokens apart in a token identity. It is the
    /// issuer, subject, audience and key, by the key's algorithm, id and
    /// thumbprint. Or it is the file. Never key material.
    pub(crate) fn identity(&self) -> String {
        match &self.source {
            Source::Signed(signed) => format!(
                "jwt_bearer;iss={};sub={};aud={};key={};scope_claim={}",
                signed.issuer,
                signed.subject,
                signed.audience.as_deref().unwrap_or(""),
                signed.key.identity(),
                self.scope_in_assertion
            ),
            Source::File(path) => format!(
                "jwt_bearer;file={};scope_claim={}",
                path.display(),
                self.scope_in_assertion
            ),
            Source::Subject(source) => format!(
                "jwt_bearer;source={};scope_claim={}",
                source.source(),
                self.scope_in_assertion
            ),
        }
    }
}

impl fmt::Debug for JwtBearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("JwtBearer");
        match &self.source {
            Source::Signed(signed) => {
                d.field("signed", signed);
            }
            Source::File(path) => {
                d.field("file", path);
            }
            Source::Subject(source) => {
                d.field("source", source);
            }
        }
        d.field("scope_in_assertion", &self.scope_in_assertion)
            .field("token_url", &self.token_uri)
            .finish()
    }
}
