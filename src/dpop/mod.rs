//! DPoP (RFC 9449): tokens bound to a key the client holds, with [`DpopKey`].
#![doc = ""]
#![doc = include_str!("../../docs/dpop.md")]

// Inside, the layer's DPoP state holds the key, the nonces servers gave,
// and whether a bearer token may stand in. A request's way through it:
//
// 1. `service::authorize` calls `Dpop::prove` when the token is DPoP-bound.
// 2. It finds the request's `htu`, with `proof::Htu`.
// 3. It looks up the nonce of the request's origin, in `nonces::NonceBook`.
// 4. It signs a proof, in `proof`.
// 5. When the answer comes back, `Dpop::answered` keeps a new nonce. It
//    tells a nonce challenge from a refused token.

pub(crate) mod nonces;
mod proof;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, Uri};

use crate::error::{ConfigError, TokenError, TokenErrorKind};
use crate::keys::jwk::PublicJwk;
use crate::keys::{Algorithm, JwsSigner, SigningKey};
use crate::support::boxed::BoxFuture;

pub(crate) use self::nonces::NonceBook;
pub(crate) use self::proof::Htu;

/// The request header that carries a DPoP proof, from RFC 9449 section 4.1.
pub(crate) const DPOP: http::HeaderName = http::HeaderName::from_static("dpop");

/// The `typ` of a DPoP proof, from RFC 9449 section 4.2.
pub const PROOF_TYP: &str = "dpop+jwt";

/// The key that binds the layer's tokens to this client, with DPoP, by RFC
/// 9449. The token endpoint issues a token bound to its public key: the token's
/// `cnf.jkt` is the key's [`thumbprint`](Self::thumbprint). Every request
/// carries a fresh proof signed with it, so a token stolen alone is of no use.
/// Give it to [`OAuthLayerBuilder::dpop`](crate::OAuthLayerBuilder::dpop).
///
/// ES256 is the usual choice, and the fastest. [`generate`](Self::generate)
/// makes one per process, or read one from a file. Each request costs one
/// signature. Cloning is cheap and shares the key. `Debug` shows the algorithm
/// and thumbprint, never key material.
///
/// ```
/// use tower_oauth::{client_auth::Algorithm, dpop::DpopKey};
///
/// let key = DpopKey::generate(Algorithm::Es256)?;
/// assert_eq!(key.algorithm(), Algorithm::Es256);
/// assert_eq!(key.thumbprint().len(), 43); // base64url of a SHA-256 digest
/// assert!(format!("{key:?}").starts_with("DpopKey { algorithm: ES256, thumbprint: "));
/// # Ok::<_, tower_oauth::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct DpopKey {
    inner: Arc<KeyInner>,
}

struct KeyInner {
    key: SigningKey,
    jwk: PublicJwk,
    /// `base64url(header) "."`, the same for every proof.
    header: String,
}

impl DpopKey {
    /// A new key made from the system's random source, for ES256, the
    /// recommended one, or EdDSA. Replicas that share tokens through a store
    /// must share the key too. Read it from a file with
    /// [`from_pem`](Self::from_pem).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] of kind
    /// [`InvalidKey`](crate::ConfigErrorKind::InvalidKey) for RS256 and PS256,
    /// since `ring` makes no RSA keys. Read one with
    /// [`from_pem`](Self::from_pem) instead.
    pub fn generate(algorithm: Algorithm) -> Result<Self, ConfigError> {
        Self::new(SigningKey::generate(algorithm)?)
    }

    /// Reads a private key from PEM, as
    /// [`SigningKey::from_pem`](crate::client_auth::SigningKey::from_pem) does: PKCS #8
    /// for every algorithm, PKCS #1 for RSA, SEC 1 for P-256.
    ///
    /// # Errors
    ///
    /// As [`SigningKey::from_pem`](crate::client_auth::SigningKey::from_pem).
    pub fn from_pem(pem: impl AsRef<[u8]>, algorithm: Algorithm) -> Result<Self, ConfigError> {
        Self::new(SigningKey::from_pem(pem, algorithm)?)
    }

    /// Reads a private key from a JWK, as
    /// [`SigningKey::from_jwk`](crate::client_auth::SigningKey::from_jwk) does.
    ///
    /// # Errors
    ///
    /// As [`SigningKey::from_jwk`](crate::client_auth::SigningKey::from_jwk).
    pub fn from_jwk(jwk: impl AsRef<str>) -> Result<Self, ConfigError> {
        Self::new(SigningKey::from_jwk(jwk)?)
    }

    /// A key that signs through `signer`, such as an HSM or a KMS. The signer
    /// must give its public key, in [`JwsSigner::public_jwk`]. It is called for
    /// every request, under
    /// [`fetch_timeout`](crate::OAuthLayerBuilder::fetch_timeout). A slow
    /// signer makes every request slow.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] of kind
    /// [`InvalidKey`](crate::ConfigErrorKind::InvalidKey) when the signer gives
    /// no public JWK. The same when the JWK has private members, or is of
    /// another key type than the signer's algorithm.
    pub fn custom(signer: impl JwsSigner) -> Result<Self, ConfigError> {
        Self::new(SigningKey::custom(signer))
    }

    fn new(key: SigningKey) -> Result<Self, ConfigError> {
        let jwk = key.jwk()?;
        let header = format!(
            r#"{{"typ":"{PROOF_TYP}","alg":"{}","jwk":{}}}"#,
            key.algorithm().name(),
            jwk.json()
        );
        let mut encoded = proof::base64url(header.as_bytes());
        encoded.push('.');
        Ok(DpopKey {
            inner: Arc::new(KeyInner {
                key,
                jwk,
                header: encoded,
            }),
        })
    }

    /// The algorithm of the proofs.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.key.algorithm()
    }

    /// The key's JWK SHA-256 thumbprint of RFC 7638, in base64url. It is the
    /// `jkt` a bound token names in its `cnf` claim, and the `dpop_jkt` of an
    /// authorization request.
    pub fn thumbprint(&self) -> &str {
        self.inner.jwk.thumbprint()
    }

    /// The public key as the JWK every proof carries: its required members
    /// only, in RFC 7638's canonical order.
    pub fn public_jwk(&self) -> &str {
        self.inner.jwk.json()
    }

    /// A new proof for a request of `method` to `uri`, for code outside a
    /// layer. The layer makes its own. `htu` is `uri` without query and
    /// fragment. `ath` is the hash of `access_token`, given for a resource
    /// request and not for a token request. `nonce` is the server's last
    /// `DPoP-Nonce`.
    ///
    /// ```
    /// use tower_oauth::{client_auth::Algorithm, dpop::DpopKey};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_oauth::BoxError> {
    /// let key = DpopKey::generate(Algorithm::Es256)?;
    /// let uri = "https://api.example.com/orders?page=2".parse()?;
    /// let proof = key.proof(&http::Method::GET, &uri, Some("the-access-token"), None).await?;
    /// assert_eq!(proof.split('.').count(), 3);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`TokenError`] of kind
    /// [`InvalidRequest`](TokenErrorKind::InvalidRequest) for a URI without
    /// scheme and host. [`Signing`](TokenErrorKind::Signing) when the signature
    /// cannot be made.
    pub async fn proof(
        &self,
        method: &Method,
        uri: &Uri,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, TokenError> {
        let target = Htu::of(uri)?;
        let ath = access_token.map(proof::ath);
        let input = self.signing_input(method.as_str(), target.htu(), ath.as_deref(), nonce)?;
        let value = self.clone().finish(input).await?;
        Ok(String::from_utf8(value.as_bytes().to_vec()).expect("a proof is base64url and dots"))
    }
}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpopKey")
            .field("algorithm", &format_args!("{}", self.algorithm()))
            .field("thumbprint", &self.thumbprint())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// A layer's DPoP state, shared by its cache for API requests and by its token
/// request.
pub(crate) struct Dpop {
    pub(crate) key: DpopKey,
    /// The latest nonce of each server, the token endpoint's included.
    pub(crate) nonces: NonceBook,
    /// Accept a bearer token from a token endpoint that ignores DPoP.
    pub(crate) allow_bearer: bool,
    /// How long a custom signer may take for one proof.
    pub(crate) sign_timeout: Duration,
}

impl fmt::Debug for Dpop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dpop")
            .field("key", &self.key)
            .field("allow_bearer", &self.allow_bearer)
            .finish_non_exhaustive()
    }
}

/// What a request needs before it goes out, once its proof is begun.
pub(crate) enum Proof {
    /// The `DPoP` header, signed here.
    Ready(HeaderValue),
    /// A custom signer is signing it.
    Signing(BoxFuture<'static, Result<HeaderValue, TokenError>>),
}

/// What a response said about DPoP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DpopAnswer {
    /// Nothing that concerns the token.
    Accepted,
    /// A `401` asking for a new nonce: resend with a new proof. The token is
    /// fine.
    UseNonce,
    /// A `401` refusing the proof, not the token.
    InvalidProof,
    /// A `401` that refuses the token.
    Refused,
}

impl Dpop {
    /// A proof for `req`, bound to the token whose hash is `ath`, with the
    /// latest nonce of the request's origin. It comes with the request's
    /// target, to read the answer by. A proof a custom signer makes takes time.
    /// Once it is made, the token, usable until `usable_until`, is checked
    /// again. A token that ran out meanwhile fails the request rather than go
    /// with it.
    pub(crate) fn prove(
        &self,
        req: &impl crate::message::Outgoing,
        ath: &str,
        usable_until: tokio::time::Instant,
    ) -> Result<(Proof, Htu), TokenError> {
        let uri = req.uri().ok_or_else(|| {
            TokenError::new(TokenErrorKind::InvalidRequest)
                .with_message("the request's URL cannot be read as a URI for its DPoP proof")
        })?;
        let target = Htu::of(&uri)?;
        let input = self.nonces.with(target.origin(), |nonce| {
            self.key
                .signing_input(req.method().as_str(), target.htu(), Some(ath), nonce)
        })?;
        let proof = match self.sign(input)? {
            Proof::Signing(signing) => Proof::Signing(Box::pin(async move {
                let started = tokio::time::Instant::now();
                let proof = signing.await?;
                let now = tokio::time::Instant::now();
                if now >= usable_until {
                    return Err(
                        TokenError::new(TokenErrorKind::Timeout).with_message(format!(
                            "the token ran out while the DPoP signer made the request's proof (it \
                         took {:?}); the request was not sent, and the next one gets a new token",
                            now - started
                        )),
                    );
                }
                Ok(proof)
            })),
            ready => ready,
        };
        Ok((proof, target))
    }

    /// The proof of a token request to `url`, with the endpoint's nonce.
    pub(crate) async fn prove_token_request(&self, url: &Uri) -> Result<HeaderValue, TokenError> {
        let target = Htu::of(url)?;
        let input = self.nonces.with(target.origin(), |nonce| {
            self.key.signing_input("POST", target.htu(), None, nonce)
        })?;
        match self.sign(input)? {
            Proof::Ready(value) => Ok(value),
            Proof::Signing(signing) => signing.await,
        }
    }

    /// Signs `input` here, or starts the custom signer on it.
    fn sign(&self, mut input: Vec<u8>) -> Result<Proof, TokenError> {
        match self.key.finish_here(&mut input) {
            Some(done) => done.map(|()| Proof::Ready(proof::header_value(input))),
            None => {
                let key = self.key.clone();
                let limit = self.sign_timeout;
                Ok(Proof::Signing(Box::pin(async move {
                    tokio::time::timeout(limit, key.finish(input))
                        .await
                        .unwrap_or_else(|_| {
                            Err(
                                TokenError::new(TokenErrorKind::Timeout).with_message(format!(
                                    "the DPoP signer did not answer within {limit:?}"
                                )),
                            )
                        })
                })))
            }
        }
    }

    /// Reads a response from `origin` to the request `target`. `grpc` says
    /// whether it [may be a gRPC call](crate::message::may_be_grpc). Keeps the
    /// nonce the response sent, and says whether a `401` refused the token or
    /// only the proof.
    pub(crate) fn answered(
        &self,
        target: &Htu,
        response: &impl crate::message::Answer,
        grpc: bool,
    ) -> DpopAnswer {
        if let Some(nonce) = nonces::nonce_in(response.headers()) {
            self.nonces.remember(target.origin(), nonce);
        }
        if !crate::message::is_unauthorized(response, grpc) {
            return DpopAnswer::Accepted;
        }
        verdict(response.headers())
    }

    /// Whether a token of `token_type` may be used, and how. `Ok(true)` means
    /// bound to the key, as `DPoP`. `Ok(false)` means as a bearer token, only
    /// with `dpop_allow_bearer`.
    pub(crate) fn binds(&self, token_type: Option<&str>) -> Result<bool, TokenError> {
        if token_type.is_some_and(|t| t.eq_ignore_ascii_case("DPoP")) {
            return Ok(true);
        }
        if self.allow_bearer {
            return Ok(false);
        }
        Err(
            TokenError::new(TokenErrorKind::InvalidResponse).with_message(format!(
                "the token endpoint issued a `{}` token, not a DPoP-bound one, though the \
                 request carried a DPoP proof: the server or this client's registration does \
                 not use DPoP. Enable DPoP for the client at the server, or accept bearer \
                 tokens with dpop_allow_bearer(true)",
                token_type.map_or_else(|| "(no token_type)".to_owned(), crate::error::clip)
            )),
        )
    }

    /// Checks the token a token request brought, warning when a bearer
    /// token stands in.
    pub(crate) fn check_issued(&self, token_type: Option<&str>) -> Result<(), TokenError> {
        if !self.binds(token_type)? {
            tracing::warn!(
                token_type = token_type.unwrap_or("(none)"),
                "the token endpoint ignored the DPoP proof and issued a bearer token; sending \
                 it as a bearer token, without proofs (dpop_allow_bearer)"
            );
        }
        Ok(())
    }

    /// Keeps the nonce a token endpoint at `url` sent.
    pub(crate) fn remember_from(&self, url: &Uri, headers: &HeaderMap) {
        if let (Some(nonce), Ok(target)) = (nonces::nonce_in(headers), Htu::of(url)) {
            self.nonces.remember(target.origin(), nonce);
        }
    }
}

/// What a `401`'s `WWW-Authenticate: DPoP` challenge says.
fn verdict(headers: &HeaderMap) -> DpopAnswer {
    match nonces::dpop_error(headers).as_deref() {
        Some("use_dpop_nonce") => DpopAnswer::UseNonce,
        Some("invalid_dpop_proof") => DpopAnswer::InvalidProof,
        _ => DpopAnswer::Refused,
    }
}

/// Whether a token endpoint's error asks for a nonce, by RFC 9449 section 8.
pub(crate) fn asks_for_nonce(error: &TokenError) -> bool {
    error.error_code() == Some("use_dpop_nonce")
}

/// `base64url(SHA-256(token))`: a proof's `ath` for `token`.
pub(crate) fn ath(token: &str) -> Box<str> {
    proof::ath(token).into_boxed_str()
}
