//! [`SigningKey`]: signing keys for JWTs. It reads RSA, EC P-256 and Ed25519
//! keys from PEM or JWK, and signs with them through `ring`. [`JwsSigner`] is
//! the seam for keys that never leave a KMS or HSM.

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use serde_json::Value;

use super::algorithm::Algorithm;
use super::jwk::PublicJwk;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::support::boxed::{BoxError, BoxFuture};

/// Signs JWS messages with a key kept elsewhere: a cloud KMS, an HSM, or a
/// signing service. The layer calls it once per token request, under
/// [`fetch_timeout`](crate::OAuthLayerBuilder::fetch_timeout). A signer that
/// fails or hangs is a
/// [`TokenErrorKind::Signing`](crate::TokenErrorKind::Signing) or
/// [`Timeout`](crate::TokenErrorKind::Timeout) failure, backed off like any
/// other.
///
/// ```
/// use tower_oauth::{BoxError, BoxFuture, client_auth::{Algorithm, JwsSigner, SigningKey}};
///
/// /// A key in a KMS (here a stand-in that refuses).
/// struct Kms {
///     key_name: String,
/// }
///
/// impl JwsSigner for Kms {
///     fn algorithm(&self) -> Algorithm {
///         Algorithm::Es256
///     }
///
///     fn key_id(&self) -> Option<&str> {
///         Some(&self.key_name)
///     }
///
///     fn sign<'a>(&'a self, message: &'a [u8]) -> BoxFuture<'a, Result<Vec<u8>, BoxError>> {
///         Box::pin(async move {
///             // Call the KMS with SHA-256(message) here; ES256 wants the
///             // 64-byte r || s form, not DER.
///             let _ = message;
///             Err("the KMS is not reachable from a doctest".into())
///         })
///     }
/// }
///
/// let key = SigningKey::custom(Kms { key_name: "client-key-1".into() });
/// assert_eq!(key.algorithm(), Algorithm::Es256);
/// ```
pub trait JwsSigner: Send + Sync + 'static {
    /// The algorithm of the signatures [`sign`](Self::sign) makes.
    fn algorithm(&self) -> Algorithm;

    /// The key's id, sent as the JWS header's `kid`.
    ///
    /// Default: none.
    fn key_id(&self) -> Option<&str> {
        None
    }

    /// Signs `message`, the JWS signing input `header.payload`. Returns the
    /// signature as the JWS wants it, by RFC 7518 section 3: for ES256 the
    /// 64-byte `r || s`, for RS256 and PS256 the RSA signature, and for EdDSA
    /// the 64-byte Ed25519 signature.
    ///
    /// # Errors
    ///
    /// Whatever kept the signature from being made. The layer reports it as
    /// a [`TokenErrorKind::Signing`](crate::TokenErrorKind::Signing) failure.
    fn sign<'a>(&'a self, message: &'a [u8]) -> BoxFuture<'a, Result<Vec<u8>, BoxError>>;

    /// The public key as a JWK, in the JSON text of RFC 7517, such as
    /// `{"kty":"EC","crv":"P-256","x":"...","y":"..."}`. A
    /// [`DpopKey`](crate::dpop::DpopKey) needs it, since its proofs carry it. Members
    /// beyond the key's own, such as `kid`, `alg` and `use`, are ignored.
    ///
    /// Default: none, which is enough for client assertions.
    fn public_jwk(&self) -> Option<String> {
        None
    }
}

/// A private key that signs JWTs: the client's key for
/// [`ClientAuth::PrivateKeyJwt`](crate::client_auth::ClientAuth::PrivateKeyJwt).
///
/// Build it from a PEM file with [`from_pem`](Self::from_pem), from a JWK with
/// [`from_jwk`](Self::from_jwk), or from a signer of your own with
/// [`custom`](Self::custom). Cloning is cheap and shares the key. `Debug` shows
/// the algorithm and key id, never key material.
///
/// ```
/// use tower_oauth::{ConfigErrorKind, client_auth::{Algorithm, SigningKey}};
///
/// let err = SigningKey::from_pem("not a key", Algorithm::Es256).unwrap_err();
/// assert_eq!(err.kind(), ConfigErrorKind::InvalidKey);
/// ```
#[derive(Clone)]
pub struct SigningKey {
    signer: Arc<Signer>,
    key_id: Option<Arc<str>>,
    /// SHA-256 of the private key's bytes, for deriving other keys from it,
    /// such as a token store's sealing key. None for a custom signer.
    seed: Option<[u8; 32]>,
}

/// What makes the signatures.
enum Signer {
    Rsa(RsaKeyPair, Algorithm),
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
    Custom(Box<dyn JwsSigner>),
}

impl SigningKey {
    /// Reads a private key from PEM. It takes PKCS #8 (`BEGIN PRIVATE KEY`) for
    /// every algorithm, PKCS #1 (`BEGIN RSA PRIVATE KEY`) for RSA, and SEC 1
    /// (`BEGIN EC PRIVATE KEY`) for P-256. Text around the key, such as
    /// certificates and comments, is skipped.
    ///
    /// ```
    /// use tower_oauth::client_auth::{Algorithm, SigningKey};
    ///
    /// // openssl genpkey -algorithm ed25519
    /// let pem = "-----BEGIN PRIVATE KEY-----
    /// MC4CAQAwBQYDK2VwBCIEIDHKsTi6X1A78jfNuVMZMaPZUfC8Y6FBNRD1ccwLw7eH
    /// -----END PRIVATE KEY-----";
    /// let key = SigningKey::from_pem(pem, Algorithm::EdDsa)?.key_id("client-key-2026");
    /// assert_eq!(format!("{key:?}"), r#"SigningKey { algorithm: EdDSA, key_id: Some("client-key-2026"), key: "[redacted]" }"#);
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] of kind
    /// [`InvalidKey`](crate::ConfigErrorKind::InvalidKey) naming the problem,
    /// never showing key material. The PEM may hold no private key, an
    /// encrypted key, or a public key or certificate only. The key may be of
    /// another type than `algorithm` needs, or an RSA key under 2048 bits.
    pub fn from_pem(pem: impl AsRef<[u8]>, algorithm: Algorithm) -> Result<Self, ConfigError> {
        let pem = pem.as_ref();
        let key = PrivateKeyDer::from_pem_slice(pem).map_err(|_| no_key_in(pem))?;
        let rejected = |e: ring::error::KeyRejected| wrong_key(algorithm, e);
        let signer = match (algorithm, &key) {
            (Algorithm::Rs256 | Algorithm::Ps256, PrivateKeyDer::Pkcs8(der)) => Signer::Rsa(
                RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).map_err(rejected)?,
                algorithm,
            ),
            (Algorithm::Rs256 | Algorithm::Ps256, PrivateKeyDer::Pkcs1(der)) => Signer::Rsa(
                RsaKeyPair::from_der(der.secret_pkcs1_der()).map_err(rejected)?,
                algorithm,
            ),
            (Algorithm::Es256, PrivateKeyDer::Pkcs8(der)) => Signer::Ecdsa(
                EcdsaKeyPair::from_pkcs8(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    der.secret_pkcs8_der(),
                    &SystemRandom::new(),
                )
                .map_err(rejected)?,
            ),
            (Algorithm::Es256, PrivateKeyDer::Sec1(der)) => Signer::Ecdsa(
                EcdsaKeyPair::from_pkcs8(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    &p256_sec1_to_pkcs8(der.secret_sec1_der()),
                    &SystemRandom::new(),
                )
                .map_err(rejected)?,
            ),
            (Algorithm::EdDsa, PrivateKeyDer::Pkcs8(der)) => Signer::Ed25519(
                Ed25519KeyPair::from_pkcs8_maybe_unchecked(der.secret_pkcs8_der())
                    .map_err(rejected)?,
            ),
            (_, key) => {
                let form = match key {
                    PrivateKeyDer::Pkcs1(_) => "a PKCS #1 RSA key",
                    PrivateKeyDer::Sec1(_) => "a SEC 1 EC key",
                    _ => "a key in another form",
                };
                return Err(invalid_key(format!(
                    "the PEM holds {form}, but {algorithm} needs {}",
                    algorithm.key_kind()
                )));
            }
        };
        Ok(SigningKey {
            signer: Arc::new(signer),
            key_id: None,
            seed: Some(seed(key.secret_der())),
        })
    }

    /// Reads a private key from a JWK, as RFC 7517 defines it. It takes `kty`
    /// `EC` with `crv` `P-256`, `OKP` with `crv` `Ed25519`, or `RSA` with its
    /// CRT parameters. The algorithm is the JWK's `alg`, else ES256, EdDSA or
    /// RS256 by key type. The key id is its `kid`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] of kind
    /// [`InvalidKey`](crate::ConfigErrorKind::InvalidKey), never showing key
    /// material. The JWK may not be JSON, or hold a public key only, with no
    /// `d`. Its key type, curve or `alg` may be unsupported. Or its parts may
    /// not hold together.
    pub fn from_jwk(jwk: impl AsRef<str>) -> Result<Self, ConfigError> {
        let Ok(Value::Object(jwk)) = serde_json::from_str::<Value>(jwk.as_ref()) else {
            return Err(invalid_key("the JWK is not a JSON object"));
        };
        let text = |name: &str| jwk.get(name).and_then(Value::as_str);
        let bytes = |name: &str| -> Result<Vec<u8>, ConfigError> {
            let value =
                text(name).ok_or_else(|| invalid_key(format!("the JWK has no `{name}` member")))?;
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(value.trim_end_matches('='))
                .map_err(|_| invalid_key(format!("the JWK's `{name}` is not base64url")))
        };
        if text("d").is_none() {
            return Err(invalid_key(
                "the JWK is a public key (it has no `d`); signing needs the private key",
            ));
        }
        let kty = text("kty").unwrap_or_default();
        let crv = text("crv").unwrap_or_default();
        let algorithm = match (text("alg"), kty) {
            (Some(alg), _) => alg.parse()?,
            (None, "EC") => Algorithm::Es256,
            (None, "OKP") => Algorithm::EdDsa,
            (None, _) => Algorithm::Rs256,
        };
        let rejected = |e: ring::error::KeyRejected| wrong_key(algorithm, e);
        let signer = match (kty, crv, algorithm) {
            ("EC", "P-256", Algorithm::Es256) => {
                let mut public = vec![4u8];
                public.extend(bytes("x")?);
                public.extend(bytes("y")?);
                Signer::Ecdsa(
                    EcdsaKeyPair::from_private_key_and_public_key(
                        &ECDSA_P256_SHA256_FIXED_SIGNING,
                        &bytes("d")?,
                        &public,
                        &SystemRandom::new(),
                    )
                    .map_err(rejected)?,
                )
            }
            ("OKP", "Ed25519", Algorithm::EdDsa) => Signer::Ed25519(
                Ed25519KeyPair::from_seed_and_public_key(&bytes("d")?, &bytes("x")?)
                    .map_err(rejected)?,
            ),
            ("RSA", _, Algorithm::Rs256 | Algorithm::Ps256) => {
                let (n, e, d) = (bytes("n")?, bytes("e")?, bytes("d")?);
                let (p, q) = (bytes("p")?, bytes("q")?);
                let (dp, dq, qi) = (bytes("dp")?, bytes("dq")?, bytes("qi")?);
                let components = ring::rsa::KeyPairComponents {
                    public_key: ring::rsa::PublicKeyComponents {
                        n: &n[..],
                        e: &e[..],
                    },
                    d: &d[..],
                    p: &p[..],
                    q: &q[..],
                    dP: &dp[..],
                    dQ: &dq[..],
                    qInv: &qi[..],
                };
                Signer::Rsa(
                    RsaKeyPair::from_components(&components).map_err(rejected)?,
                    algorithm,
                )
            }
            _ => {
                return Err(invalid_key(format!(
                    "a JWK with kty `{kty}`{} cannot sign {algorithm}: use an EC P-256 key \
                     (ES256), an OKP Ed25519 key (EdDSA) or an RSA key (RS256, PS256)",
                    if crv.is_empty() {
                        String::new()
                    } else {
                        format!(" and crv `{crv}`")
                    }
                )))
            }
        };
        Ok(SigningKey {
            signer: Arc::new(signer),
            key_id: text("kid").map(Arc::from),
            seed: Some(seed(&bytes("d")?)),
        })
    }

    /// A new key for `algorithm`, EC P-256 or Ed25519, from the system's random
    /// source. RSA keys are not made here, since `ring` does not generate them.
    /// Read one with [`from_pem`](Self::from_pem).
    pub(crate) fn generate(algorithm: Algorithm) -> Result<Self, ConfigError> {
        let rng = SystemRandom::new();
        let no_random = |_| invalid_key("the system's random source gave no bytes for a new key");
        let rejected = |e: ring::error::KeyRejected| wrong_key(algorithm, e);
        let (signer, pkcs8) = match algorithm {
            Algorithm::Es256 => {
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .map_err(no_random)?;
                let pair = EcdsaKeyPair::from_pkcs8(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    pkcs8.as_ref(),
                    &rng,
                )
                .map_err(rejected)?;
                (Signer::Ecdsa(pair), pkcs8)
            }
            Algorithm::EdDsa => {
                let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(no_random)?;
                let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(rejected)?;
                (Signer::Ed25519(pair), pkcs8)
            }
            Algorithm::Rs256 | Algorithm::Ps256 => {
                return Err(invalid_key(format!(
                    "{algorithm} keys are not generated here (ring makes no RSA keys, and an \
                     RSA signature per request costs a millisecond): generate one with \
                     `openssl genpkey -algorithm rsa -pkeyopt rsa_keygen_bits:2048` and read it \
                     with from_pem, or use ES256"
                )))
            }
        };
        Ok(SigningKey {
            signer: Arc::new(signer),
            key_id: None,
            seed: Some(seed(pkcs8.as_ref())),
        })
    }

    /// A key that signs through `signer`: a KMS, an HSM, a signing service.
    pub fn custom(signer: impl JwsSigner) -> Self {
        SigningKey {
            signer: Arc::new(Signer::Custom(Box::new(signer))),
            key_id: None,
            seed: None,
        }
    }

    /// How the key is known in a token identity: its algorithm, id, and its
    /// public key's RFC 7638 thumbprint. A custom signer that gives no public
    /// key is known by its algorithm and id. Never key material.
    pub(crate) fn identity(&self) -> String {
        let thumbprint = self.jwk().map(|jwk| jwk.thumbprint().to_owned());
        format!(
            "{}:{}:{}",
            self.algorithm(),
            self.kid().unwrap_or(""),
            thumbprint.as_deref().unwrap_or("")
        )
    }

    /// SHA-256 of the private key's bytes. None for a custom signer.
    pub(crate) fn seed(&self) -> Option<&[u8]> {
        self.seed.as_ref().map(|s| s.as_slice())
    }

    /// Sets the key id sent as the JWS header's `kid`: the id under which the
    /// server knows the key, in the client's registered JWK set.
    ///
    /// Default: the JWK's `kid` with [`from_jwk`](Self::from_jwk), or the
    /// signer's with [`custom`](Self::custom). Otherwise none.
    pub fn key_id(mut self, kid: impl Into<String>) -> Self {
        self.key_id = Some(Arc::from(kid.into()));
        self
    }

    /// The algorithm the key signs with.
    pub fn algorithm(&self) -> Algorithm {
        match &*self.signer {
            Signer::Rsa(_, algorithm) => *algorithm,
            Signer::Ecdsa(_) => Algorithm::Es256,
            Signer::Ed25519(_) => Algorithm::EdDsa,
            Signer::Custom(signer) => signer.algorithm(),
        }
    }

    /// The key id sent as `kid`, if any.
    pub fn kid(&self) -> Option<&str> {
        match (&self.key_id, &*self.signer) {
            (Some(kid), _) => Some(kid),
            (None, Signer::Custom(signer)) => signer.key_id(),
            (None, _) => None,
        }
    }

    /// Signs `message`: at once for a key held here, through the signer for
    /// a custom one.
    pub(crate) async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, BoxError> {
        match &*self.signer {
            Signer::Custom(signer) => signer.sign(message).await,
            _ => self.sign_here(message),
        }
    }

    /// Signs `message` with a key held in this process.
    fn sign_here(&self, message: &[u8]) -> Result<Vec<u8>, BoxError> {
        self.sign_here_into(message, <[u8]>::to_vec)
            .unwrap_or_else(|| Err("a custom signer signs asynchronously".into()))
    }

    /// Signs `message` with a key held in this process, and hands the signature
    /// to `out`, allocating nothing. `None` for a custom signer, which signs
    /// asynchronously with [`sign`](Self::sign).
    pub(crate) fn sign_here_into<R>(
        &self,
        message: &[u8],
        out: impl FnOnce(&[u8]) -> R,
    ) -> Option<Result<R, BoxError>> {
        let failed = |_| -> BoxError { "the signature could not be made".into() };
        Some(match &*self.signer {
            Signer::Rsa(key, algorithm) => {
                let padding: &'static dyn ring::signature::RsaEncoding = match algorithm {
                    Algorithm::Ps256 => &ring::signature::RSA_PSS_SHA256,
                    _ => &ring::signature::RSA_PKCS1_SHA256,
                };
                // ring takes RSA keys of at most 8192 bits.
                let mut buffer = [0u8; 1024];
                let signature = &mut buffer[..key.public().modulus_len()];
                key.sign(padding, &SystemRandom::new(), message, signature)
                    .map(|()| out(signature))
                    .map_err(failed)
            }
            Signer::Ecdsa(key) => key
                .sign(&SystemRandom::new(), message)
                .map(|signature| out(signature.as_ref()))
                .map_err(failed),
            Signer::Ed25519(key) => Ok(out(key.sign(message).as_ref())),
            Signer::Custom(_) => return None,
        })
    }

    /// The length of the signatures of a key held here; `None` for a custom
    /// signer.
    pub(crate) fn signature_len(&self) -> Option<usize> {
        match &*self.signer {
            Signer::Rsa(key, _) => Some(key.public().modulus_len()),
            Signer::Ecdsa(_) | Signer::Ed25519(_) => Some(64),
            Signer::Custom(_) => None,
        }
    }

    /// The public key as a JWK. For a custom signer, it is the one the signer
    /// gives.
    ///
    /// # Errors
    ///
    /// A custom signer that gives no public JWK, or one that does not fit
    /// its algorithm.
    pub(crate) fn jwk(&self) -> Result<PublicJwk, ConfigError> {
        Ok(match &*self.signer {
            Signer::Rsa(key, _) => {
                let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(key.public());
                PublicJwk::rsa(&public.n, &public.e)
            }
            Signer::Ecdsa(key) => PublicJwk::p256(key.public_key().as_ref()),
            Signer::Ed25519(key) => PublicJwk::ed25519(key.public_key().as_ref()),
            Signer::Custom(signer) => {
                let text = signer.public_jwk().ok_or_else(|| {
                    invalid_key(
                        "the signer gives no public key (JwsSigner::public_jwk); a DPoP proof \
                         carries it",
                    )
                })?;
                PublicJwk::parse(&text, signer.algorithm())?
            }
        })
    }

    /// The public half of a key held here, as its raw bytes: the uncompressed
    /// point for P-256, the 32 bytes for Ed25519, or the DER `RSAPublicKey` for
    /// RSA. None for a custom signer.
    fn public_key(&self) -> Option<&[u8]> {
        match &*self.signer {
            Signer::Rsa(key, _) => Some(key.public_key().as_ref()),
            Signer::Ecdsa(key) => Some(key.public_key().as_ref()),
            Signer::Ed25519(key) => Some(key.public_key().as_ref()),
            Signer::Custom(_) => None,
        }
    }
}

/// Two keys are equal when they have the same algorithm, key id and public key.
/// Two custom signers are equal when one is a clone of the other.
impl PartialEq for SigningKey {
    fn eq(&self, other: &Self) -> bool {
        let same_key = match (self.public_key(), other.public_key()) {
            (Some(a), Some(b)) => a == b,
            _ => Arc::ptr_eq(&self.signer, &other.signer),
        };
        same_key && self.algorithm() == other.algorithm() && self.kid() == other.kid()
    }
}

impl Eq for SigningKey {}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &format_args!("{}", self.algorithm()))
            .field("key_id", &self.kid())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// SHA-256 of a private key's bytes.
fn seed(secret: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret);
    let mut seed = [0u8; 32];
    seed.copy_from_slice(digest.as_ref());
    seed
}

fn invalid_key(message: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::InvalidKey, message)
}

/// Why no private key was found in `pem`, by what it holds instead.
fn no_key_in(pem: &[u8]) -> ConfigError {
    let text = String::from_utf8_lossy(pem);
    let holds = |label: &str| text.contains(&format!("-----BEGIN {label}-----"));
    invalid_key(if holds("ENCRYPTED PRIVATE KEY") {
        "the PEM holds an encrypted private key; give it decrypted (openssl pkcs8 -in key.pem \
         -nocrypt) from a secret store"
    } else if holds("PUBLIC KEY") || holds("RSA PUBLIC KEY") {
        "the PEM holds a public key; signing needs the private key"
    } else if holds("CERTIFICATE") {
        "the PEM holds a certificate but no private key; signing needs the private key"
    } else {
        "no private key found: expected a PEM block BEGIN PRIVATE KEY, BEGIN RSA PRIVATE KEY \
         or BEGIN EC PRIVATE KEY"
    })
}

/// A key `ring` refused for `algorithm`, named without its material.
fn wrong_key(algorithm: Algorithm, e: ring::error::KeyRejected) -> ConfigError {
    let why = match e.to_string().as_str() {
        "TooSmall" => "is too small (at least 2048 bits)".to_owned(),
        "TooLarge" => "is too large (at most 8192 bits)".to_owned(),
        "WrongAlgorithm" | "UnexpectedError" => format!("is not {}", algorithm.key_kind()),
        "InconsistentComponents" => "does not hold together (its parts do not match)".to_owned(),
        other => format!(
            "was refused ({other}); {algorithm} needs {}",
            algorithm.key_kind()
        ),
    };
    invalid_key(format!("the key {why} for {algorithm}"))
}

/// Wraps a SEC 1 `ECPrivateKey` for P-256 into the PKCS #8 `PrivateKeyInfo`
/// that `ring` reads (RFC 5915, RFC 5208).
fn p256_sec1_to_pkcs8(sec1: &[u8]) -> Vec<u8> {
    // AlgorithmIdentifier { id-ecPublicKey, prime256v1 }
    const ALGORITHM: &[u8] = &[
        0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
        0x48, 0xce, 0x3d, 0x03, 0x01, 0x07,
    ];
    let mut inner = vec![0x02, 0x01, 0x00]; // version 0
    inner.extend_from_slice(ALGORITHM);
    inner.push(0x04); // OCTET STRING
    der_length(&mut inner, sec1.len());
    inner.extend_from_slice(sec1);
    let mut out = vec![0x30]; // SEQUENCE
    der_length(&mut out, inner.len());
    out.extend(inner);
    out
}

/// Appends a DER length.
fn der_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}
