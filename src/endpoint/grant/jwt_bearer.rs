//! [`JwtBearer`]: the JWT-bearer authorization grant (RFC 7523 section
//! 2.1), with an assertion the crate signs (and Google's service account
//! key file as a preset) or one a platform writes to a file.

use std::fmt;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{ConfigError, ConfigErrorKind};

/// The `grant_type` of the JWT-bearer grant (RFC 7523 section 2.1).
pub const JWT_BEARER_GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Google's token endpoint, the default `token_uri` of a service account key.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The JWT-bearer authorization grant (RFC 7523 section 2.1): the token
/// request carries `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`
/// and a signed JWT as `assertion`, which is the grant itself (Google
/// service accounts, Salesforce, many enterprise servers). Give it with
/// [`OAuthLayerBuilder::jwt_bearer`](crate::OAuthLayerBuilder::jwt_bearer);
/// caching, renewal and back-off are those of every token.
///
/// The assertion is either signed by the layer for each token request
/// ([`signed`](Self::signed)): `iss` the issuer, `sub` the
/// subject (by default the issuer), `aud` by the rule of client assertions
/// (with [`issuer`](crate::OAuthLayerBuilder::issuer): the issuer, and
/// after an `invalid_grant` the token endpoint's URL once, the one taken
/// kept; else the token endpoint's URL), `iat`
/// and `nbf` backdated by the
/// [`assertion_clock_skew`](crate::OAuthLayerBuilder::assertion_clock_skew),
/// `exp` a [`lifetime`](Self::lifetime) later, a random `jti`, and the
/// header's `typ` `JWT`; or read from a file a platform writes and renews
/// ([`from_file`](Self::from_file)), as for
/// [`ClientAuth::AssertionFile`](crate::ClientAuth::AssertionFile).
///
/// The client needs no other authentication: without a client secret the
/// request carries no client credential (and `client_id` only when one is
/// given); with one, the client authenticates as usual.
///
/// ```no_run
/// use tower_oauth::{JwtBearer, OAuthLayer};
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
    /// Asked of a subject token source (a function, another layer).
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
    /// An assertion signed with `key` for each token request, issued by
    /// `issuer` (a service account's email, a client id) about itself.
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

    /// The assertion's `sub`: the user or account the token is for (Google's
    /// domain-wide delegation, Salesforce's user name). Ignored for an
    /// assertion [from a file](Self::from_file).
    ///
    /// Default: the issuer.
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        if let Source::Signed(signed) = &mut self.source {
            signed.subject = subject.into();
        }
        self
    }

    /// The assertion's `aud` (Salesforce wants `https://login.salesforce.com`).
    /// Ignored for an assertion [from a file](Self::from_file).
    ///
    /// Default: with an issuer, the issuer and then the token endpoint's URL
    /// (see above); else the token endpoint's URL.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        if let Source::Signed(signed) = &mut self.source {
            signed.audience = Some(audience.into());
        }
        self
    }

    /// How long after its making the assertion is valid (`exp - iat`),
    /// between 1 second and 1 hour (the most Google takes). Ignored for an
    /// assertion [from a file](Self::from_file).
    ///
    /// Default: [`DEFAULT_ASSERTION_LIFETIME`](crate::DEFAULT_ASSERTION_LIFETIME) (60 s).
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        if let Source::Signed(signed) = &mut self.source {
            signed.lifetime = lifetime.clamp(Duration::from_secs(1), Duration::from_secs(3600));
        }
        self
    }

    /// An assertion a platform writes to `path` and renews, read at each
    /// token request (see
    /// [`ClientAuth::AssertionFile`](crate::ClientAuth::AssertionFile) for
    /// how it is read and what its errors say).
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        JwtBearer {
            source: Source::File(path.into()),
            scope_in_assertion: false,
            token_uri: None,
        }
    }

    /// An assertion asked of `source` at each token request: a file, a
    /// function, or another layer's current token (fresh, as
    /// `SubjectToken::from(&layer)` makes it), the same sources a token
    /// exchange's subject comes from. Errors name the source, never the
    /// assertion.
    ///
    /// ```
    /// use tower_oauth::{JwtBearer, OAuthLayer, SubjectToken};
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
    /// `scope` claim (and not into the request body), as Google asks.
    ///
    /// Default: false (the `scope` is a body parameter, RFC 7523 section
    /// 2.1); true for [`google_service_account`](Self::google_service_account).
    pub fn scope_in_assertion(mut self, yes: bool) -> Self {
        self.scope_in_assertion = yes;
        self
    }

    /// The grant of a Google service account, from its JSON key file: the
    /// `private_key` (RS256, its `private_key_id` as `kid`) signs assertions
    /// issued by `client_email` for the key's `token_uri`, which is the
    /// layer's token endpoint unless another is given, with the scope in the
    /// assertion.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming what is missing or wrong (not JSON, not a
    /// service account key, no `client_email`, a `private_key` that does
    /// not read), never showing the key.
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
    /// file at `path` (`GOOGLE_APPLICATION_CREDENTIALS` names it).
    ///
    /// # Errors
    ///
    /// As `google_service_account`, and a file that cannot be read (named).
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

    /// The token endpoint a key file names (`token_uri`), used when none is
    /// given to the builder.
    pub fn token_url(&self) -> Option<&str> {
        self.token_uri.as_deref()
    }

    /// What sets this grant's tokens apart in a token identity: the
    /// issuer, subject, audience and key (algorithm, id, thumbprint), or the
    /// file; never key material.
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
