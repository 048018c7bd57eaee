//! Client assertions: the signed JWTs of `private_key_jwt` and
//! `client_secret_jwt`, by RFC 7523 section 2.2 and OpenID Connect Core section
//! 9. Each token request gets a fresh one.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::json;

use crate::endpoint::client_auth::{
    AssertionSettings, CLIENT_AUTHENTICATION_JWT_TYPE, DEFAULT_ASSERTION_CLOCK_SKEW,
    DEFAULT_ASSERTION_LIFETIME,
};
use crate::error::{TokenError, TokenErrorKind};
use crate::keys::SigningKey;

/// A JWT that authenticates a client at a token endpoint, by RFC 7523 section
/// 3:
///
/// - `iss` and `sub` are the client id, and `aud` the authorization server;
/// - `iat` and `nbf` are a few seconds ago, by
///   [`clock_skew`](Self::clock_skew), for servers whose clocks run a little
///   behind;
/// - `exp` is a short [`lifetime`](Self::lifetime) from now;
/// - `jti` is 128 random bits.
///
/// Each [`sign`](Self::sign) makes a new one. The layer makes these itself for
/// [`ClientAuth::PrivateKeyJwt`](crate::client_auth::ClientAuth::PrivateKeyJwt). This type
/// serves code that needs an assertion elsewhere, such as another grant or a
/// token exchange.
///
/// ```
/// use tower_oauth::client_auth::{Algorithm, ClientAssertion, SigningKey};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_oauth::BoxError> {
/// # let pem = doc_key();
/// let key = SigningKey::from_pem(pem, Algorithm::EdDsa)?;
/// let jwt = ClientAssertion::new("my-client", "https://login.example.com")
///     .sign(&key)
///     .await?;
/// assert_eq!(jwt.split('.').count(), 3);
/// # Ok(()) }
/// # fn doc_key() -> &'static str {
/// #     "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIL4vcREMaCdcc23IpMLEj8G1E4riNufMcCy2f9FRUTr8\n-----END PRIVATE KEY-----\n"
/// # }
/// ```
#[derive(Clone)]
pub struct ClientAssertion {
    /// `iss`.
    client_id: String,
    /// `sub`, when not the issuer (a grant's subject).
    subject: Option<String>,
    /// A `scope` claim (Google's JWT-bearer grant).
    scope: Option<String>,
    audience: String,
    lifetime: Duration,
    typ: Option<String>,
    clock_skew: Duration,
}

impl ClientAssertion {
    /// An assertion of `client_id` for `audience`: the issuer identifier, or
    /// the token endpoint's URL.
    pub fn new(client_id: impl Into<String>, audience: impl Into<String>) -> Self {
        ClientAssertion {
            client_id: client_id.into(),
            subject: None,
            scope: None,
            audience: audience.into(),
            lifetime: DEFAULT_ASSERTION_LIFETIME,
            typ: Some(CLIENT_AUTHENTICATION_JWT_TYPE.to_owned()),
            clock_skew: DEFAULT_ASSERTION_CLOCK_SKEW,
        }
    }

    /// How far `iat` and `nbf` lie before the moment the assertion is made,
    /// rounded up to whole seconds. A server whose clock runs that much behind
    /// still takes the assertion as valid now. `exp` stays
    /// [`lifetime`](Self::lifetime) after the moment it is made. Anything
    /// longer than 24 hours is taken as 24 hours.
    ///
    /// Default: 5 s.
    pub fn clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew.min(crate::policy::MAX_SETTING);
        self
    }

    /// How long after its making the assertion is valid: `exp - iat`, rounded
    /// up to whole seconds. Anything longer than
    /// 24 hours is taken as 24 hours.
    ///
    /// Default: 60 s.
    pub fn lifetime(mut self, lifetime: Duration) -> Self {
        self.lifetime = lifetime.min(crate::policy::MAX_SETTING);
        self
    }

    /// The JWS header's `typ`, or none to leave it out.
    ///
    /// Default: [`CLIENT_AUTHENTICATION_JWT_TYPE`].
    pub fn typ(mut self, typ: Option<&str>) -> Self {
        self.typ = typ.map(str::to_owned);
        self
    }

    /// An authorization grant's assertion, by RFC 7523 section 2.1, of `issuer`
    /// about `subject` for `audience`. Its header's `typ` is `JWT`.
    pub(crate) fn grant(issuer: &str, subject: &str, audience: &str) -> Self {
        let mut assertion = ClientAssertion::new(issuer, audience).typ(Some("JWT"));
        if subject != issuer {
            assertion.subject = Some(subject.to_owned());
        }
        assertion
    }

    /// A `scope` claim, for servers that read the scopes from the assertion.
    pub(crate) fn scope_claim(mut self, scope: Option<&str>) -> Self {
        self.scope = scope.map(str::to_owned);
        self
    }

    /// The `aud` the assertion is made for.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Makes and signs a new assertion with `key`.
    ///
    /// # Errors
    ///
    /// A [`TokenError`] of kind [`Signing`](TokenErrorKind::Signing) when the
    /// key fails, as a custom signer may, or when no random `jti` can be drawn.
    pub async fn sign(&self, key: &SigningKey) -> Result<String, TokenError> {
        let mut jwt = self.signing_input(key.algorithm().name(), key.kid())?;
        let signature = key.sign(jwt.as_bytes()).await.map_err(|e| {
            TokenError::new(TokenErrorKind::Signing)
                .with_message(format!("the client assertion could not be signed: {e}"))
        })?;
        jwt.push('.');
        base64url_into(&signature, &mut jwt);
        Ok(jwt)
    }

    /// Makes and signs a new assertion with HMAC SHA-256 under `secret`, for
    /// `client_secret_jwt`.
    pub(crate) fn sign_hs256(&self, secret: &ring::hmac::Key) -> Result<String, TokenError> {
        let mut jwt = self.signing_input("HS256", None)?;
        let tag = ring::hmac::sign(secret, jwt.as_bytes());
        jwt.push('.');
        base64url_into(tag.as_ref(), &mut jwt);
        Ok(jwt)
    }

    /// `base64url(header) . base64url(claims)`, with fresh times and `jti`.
    fn signing_input(&self, alg: &str, kid: Option<&str>) -> Result<String, TokenError> {
        let mut jti = [0u8; 16];
        SystemRandom::new().fill(&mut jti).map_err(|_| {
            TokenError::new(TokenErrorKind::Signing)
                .with_message("no random bytes for the client assertion's jti")
        })?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let seconds = |d: Duration| d.as_secs() + u64::from(d.subsec_nanos() > 0);
        let lifetime = seconds(self.lifetime);
        let issued = now.saturating_sub(seconds(self.clock_skew));
        let mut header = json!({ "alg": alg });
        if let Some(typ) = &self.typ {
            header["typ"] = json!(typ);
        }
        if let Some(kid) = kid {
            header["kid"] = json!(kid);
        }
        let mut claims = json!({
            "iss": self.client_id,
            "sub": self.subject.as_deref().unwrap_or(&self.client_id),
            "aud": self.audience,
            "iat": issued,
            "nbf": issued,
            "exp": now.saturating_add(lifetime.max(1)),
            "jti": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(jti),
        });
        if let Some(scope) = &self.scope {
            claims["scope"] = json!(scope);
        }
        let mut input = String::with_capacity(512);
        base64url_into(header.to_string().as_bytes(), &mut input);
        input.push('.');
        base64url_into(claims.to_string().as_bytes(), &mut input);
        Ok(input)
    }
}

impl fmt::Debug for ClientAssertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientAssertion")
            .field("client_id", &self.client_id)
            .field("subject", &self.subject)
            .field("scope", &self.scope)
            .field("audience", &self.audience)
            .field("lifetime", &self.lifetime)
            .field("typ", &self.typ)
            .field("clock_skew", &self.clock_skew)
            .finish()
    }
}

fn base64url_into(bytes: &[u8], out: &mut String) {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(bytes, out);
}

/// What signs a client's assertions.
pub(crate) enum AssertionKey {
    /// `private_key_jwt`.
    Key(SigningKey),
    /// `client_secret_jwt`: HMAC SHA-256 under the client secret.
    Secret(ring::hmac::Key),
}

/// The client assertions sent to one token endpoint: a fresh one for each
/// request, made for the audience the server takes.
///
/// The audience rule:
///
/// - With [`assertion_audience`](crate::OAuthLayerBuilder::assertion_audience),
///   that value alone.
/// - Without it and with an issuer, the issuer identifier first, as the 2026
///   update of RFC 7523 asks. When the server refuses that assertion, once more
///   with the token endpoint's URL, as RFC 7523, OpenID Connect Core section 9
///   and many deployed servers expect. Whichever the server took last goes
///   first from then on, for the whole layer.
/// - Without an issuer, the token endpoint's URL.
///
/// Why both are safe: the update guards against an assertion made for one party
/// being taken by another. The attack is a client that sends a server an
/// assertion whose audience is some other server's endpoint. Here the issuer is
/// the configured one, since discovery refuses metadata that names another. The
/// URL is the very URL the assertion is sent to. So every assertion names its
/// own recipient, and none is ever good at a server it was not sent to.
pub(crate) struct Assertions {
    key: AssertionKey,
    /// For the audience set, the issuer, or the token endpoint's URL.
    first: ClientAssertion,
    /// With an issuer and no audience set: for the token endpoint's URL.
    second: Option<ClientAssertion>,
    /// Whether the server took `second` last (shared by the layer).
    second_taken: Arc<AtomicBool>,
}

impl Assertions {
    /// The assertions of `client_id` sent to `url`, under `settings`;
    /// `issuer` when the endpoint was discovered from one.
    pub(crate) fn new(
        client_id: &str,
        settings: &AssertionSettings,
        issuer: Option<&str>,
        url: &str,
        key: AssertionKey,
    ) -> Self {
        let claims = |audience: &str| {
            ClientAssertion::new(client_id, audience)
                .lifetime(settings.lifetime)
                .typ(settings.typ.as_deref())
                .clock_skew(settings.clock_skew)
        };
        let audiences = Audiences {
            set: settings.audience.as_deref(),
            issuer,
            url,
        };
        Self::for_audiences(claims, audiences, key, &settings.endpoint_audience)
    }

    /// The assertions `claims` makes for `audiences`, by the audience rule;
    /// `second_taken` remembers the server's choice for the layer.
    pub(crate) fn for_audiences(
        claims: impl Fn(&str) -> ClientAssertion,
        audiences: Audiences<'_>,
        key: AssertionKey,
        second_taken: &Arc<AtomicBool>,
    ) -> Self {
        let (first, second) = match (audiences.set, audiences.issuer) {
            (Some(audience), _) => (claims(audience), None),
            (None, Some(issuer)) if issuer != audiences.url => {
                (claims(issuer), Some(claims(audiences.url)))
            }
            (None, _) => (claims(audiences.url), None),
        };
        Assertions {
            key,
            first,
            second,
            second_taken: Arc::clone(second_taken),
        }
    }

    /// Which assertion a request carries: the one the server took last, or
    /// with `other` the one it did not (when there are two).
    pub(crate) fn choice(&self, other: bool) -> AudienceChoice {
        AudienceChoice {
            token_url: self.second.is_some()
                && (self.second_taken.load(Ordering::Relaxed) != other),
        }
    }

    /// The assertion that is not `choice` (`choice` itself when there is one).
    pub(crate) fn other(&self, choice: AudienceChoice) -> AudienceChoice {
        AudienceChoice {
            token_url: self.second.is_some() && !choice.token_url,
        }
    }

    /// Whether a refused assertion can be tried for another audience.
    fn has_other(&self) -> bool {
        self.second.is_some()
    }

    /// After `error` refused `choice` (a `what`, chosen with `setting`):
    /// whether the other audience can be tried, said in the log when it can.
    pub(crate) fn tries_other(
        &self,
        choice: AudienceChoice,
        error: &TokenError,
        what: &str,
        setting: &str,
    ) -> bool {
        if !self.has_other() {
            return false;
        }
        tracing::warn!(
            refused = %self.audience(choice),
            next = %self.audience(self.other(choice)),
            error = %error,
            "the token endpoint refused the {what} made for one audience; trying once with \
             the other (set {setting} to choose)"
        );
        true
    }

    fn claims(&self, choice: AudienceChoice) -> &ClientAssertion {
        match (&self.second, choice.token_url) {
            (Some(second), true) => second,
            _ => &self.first,
        }
    }

    /// The `aud` of `choice`.
    pub(crate) fn audience(&self, choice: AudienceChoice) -> &str {
        self.claims(choice).audience()
    }

    /// A new assertion of `choice`, signed.
    pub(crate) async fn sign(&self, choice: AudienceChoice) -> Result<String, TokenError> {
        let claims = self.claims(choice);
        match &self.key {
            AssertionKey::Key(key) => claims.sign(key).await,
            AssertionKey::Secret(secret) => claims.sign_hs256(secret),
        }
    }

    /// The server took `choice`: it goes first from now on.
    pub(crate) fn taken(&self, choice: AudienceChoice) {
        if self.second.is_some()
            && self.second_taken.swap(choice.token_url, Ordering::Relaxed) != choice.token_url
        {
            tracing::info!(
                audience = %self.audience(choice),
                "the token endpoint took the client assertion for this audience after refusing \
                 the other; the layer's assertions carry it first from now on (set \
                 assertion_audience to choose)"
            );
        }
    }
}

/// The audiences an assertion may be made for: one set by the user, the
/// issuer the endpoint was discovered from, the endpoint's URL.
pub(crate) struct Audiences<'a> {
    pub(crate) set: Option<&'a str>,
    pub(crate) issuer: Option<&'a str>,
    pub(crate) url: &'a str,
}

/// Which of a client's [`Assertions`] a request carries: the first (the
/// configured audience, the issuer, or the token endpoint's URL), or the
/// token endpoint's URL when the first names the issuer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AudienceChoice {
    /// The assertion for the token endpoint's URL, the second of two.
    token_url: bool,
}
