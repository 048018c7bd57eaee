//! Client assertions: the signed JWTs of `private_key_jwt` and
//! `client_secret_jwt` (RFC 7523 section 2.2, OpenID Connect Core section
//! 9), one fresh for every token request.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::json;

use crate::endpoint::client_auth::{
    CLIENT_AUTHENTICATION_JWT_TYPE, DEFAULT_ASSERTION_CLOCK_SKEW, DEFAULT_ASSERTION_LIFETIME,
};
use crate::error::{TokenError, TokenErrorKind};
use crate::keys::SigningKey;

/// The `client_assertion_type` of a JWT client assertion (RFC 7523 section
/// 2.2).
pub const JWT_BEARER_ASSERTION_TYPE: &str =
    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A JWT that authenticates a client at a token endpoint (RFC 7523 section
/// 3): `iss` and `sub` the client id, `aud` the authorization server, `iat`
/// and `nbf` a few seconds ago ([`clock_skew`](Self::clock_skew), for
/// servers whose clocks run a little behind), `exp` a short
/// [`lifetime`](Self::lifetime) from now, a `jti` of 128 random bits. Each
/// [`sign`](Self::sign) makes a new one.
///
/// The layer makes these itself for
/// [`ClientAuth::PrivateKeyJwt`](crate::ClientAuth::PrivateKeyJwt); this
/// type serves code that needs an assertion elsewhere (another grant, a
/// token exchange).
///
/// ```
/// use tower_oauth::{Algorithm, ClientAssertion, SigningKey};
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
    client_id: String,
    audience: String,
    lifetime: Duration,
    typ: Option<String>,
    clock_skew: Duration,
}

impl ClientAssertion {
    /// An assertion of `client_id` for `audience` (the issuer identifier, or
    /// the token endpoint's URL).
    pub fn new(client_id: impl Into<String>, audience: impl Into<String>) -> Self {
        ClientAssertion {
            client_id: client_id.into(),
            audience: audience.into(),
            lifetime: DEFAULT_ASSERTION_LIFETIME,
            typ: Some(CLIENT_AUTHENTICATION_JWT_TYPE.to_owned()),
            clock_skew: DEFAULT_ASSERTION_CLOCK_SKEW,
        }
    }

    /// How far `iat` and `nbf` lie before the moment the assertion is made,
    /// rounded up to whole seconds: a server whose clock runs that much
    /// behind still takes it as valid now. `exp` stays
    /// [`lifetime`](Self::lifetime) after the moment it is made. Longer than
    /// [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken as 24 hours.
    ///
    /// Default: [`DEFAULT_ASSERTION_CLOCK_SKEW`] (5 s).
    pub fn clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew.min(crate::policy::MAX_SETTING);
        self
    }

    /// How long after its making the assertion is valid (`exp - iat`),
    /// rounded up to whole seconds; longer than
    /// [`MAX_SETTING`](crate::MAX_SETTING) (24 hours) is taken as 24 hours.
    ///
    /// Default: [`DEFAULT_ASSERTION_LIFETIME`] (60 s).
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

    /// The `aud` the assertion is made for.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Makes and signs a new assertion with `key`.
    ///
    /// # Errors
    ///
    /// A [`TokenError`] of kind [`Signing`](TokenErrorKind::Signing) when the
    /// key (a custom signer) fails, or no random `jti` can be drawn.
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

    /// Makes and signs a new assertion with HMAC SHA-256 under `secret`
    /// (`client_secret_jwt`).
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
        let claims = json!({
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self.audience,
            "iat": issued,
            "nbf": issued,
            "exp": now.saturating_add(lifetime.max(1)),
            "jti": base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(jti),
        });
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
