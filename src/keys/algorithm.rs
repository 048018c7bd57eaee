//! [`Algorithm`]: the JWS signature algorithms (RFC 7518) the crate signs
//! with, their names and the keys they take.

use std::fmt;

use crate::error::{ConfigError, ConfigErrorKind};

/// A JWS signature algorithm (RFC 7518) for a [`SigningKey`](crate::client_auth::SigningKey).
///
/// | algorithm | key | signature |
/// |---|---|---|
/// | [`Es256`](Algorithm::Es256) (recommended) | EC P-256 | ECDSA with SHA-256, 64 bytes |
/// | [`EdDsa`](Algorithm::EdDsa) | Ed25519 | Ed25519 (RFC 8037), 64 bytes |
/// | [`Rs256`](Algorithm::Rs256) | RSA, 2048 bits or more | RSASSA-PKCS1-v1_5 with SHA-256 |
/// | [`Ps256`](Algorithm::Ps256) | RSA, 2048 bits or more | RSASSA-PSS with SHA-256 |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// `RS256`: RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// `PS256`: RSASSA-PSS with SHA-256 and MGF1 with SHA-256.
    Ps256,
    /// `ES256`: ECDSA on P-256 with SHA-256.
    Es256,
    /// `EdDSA`: Ed25519.
    EdDsa,
}

impl Algorithm {
    /// The `alg` value of a JWS header: `RS256`, `PS256`, `ES256` or `EdDSA`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Rs256 => "RS256",
            Algorithm::Ps256 => "PS256",
            Algorithm::Es256 => "ES256",
            Algorithm::EdDsa => "EdDSA",
        }
    }

    /// The key this algorithm signs with, for messages.
    pub(crate) fn key_kind(self) -> &'static str {
        match self {
            Algorithm::Rs256 | Algorithm::Ps256 => "an RSA key",
            Algorithm::Es256 => "an EC P-256 key",
            Algorithm::EdDsa => "an Ed25519 key",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = ConfigError;

    /// Parses a JWS `alg` name, ignoring case: `RS256`, `PS256`, `ES256`,
    /// `EdDSA`.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name.trim().to_ascii_uppercase().as_str() {
            "RS256" => Ok(Algorithm::Rs256),
            "PS256" => Ok(Algorithm::Ps256),
            "ES256" => Ok(Algorithm::Es256),
            "EDDSA" | "ED25519" => Ok(Algorithm::EdDsa),
            _ => Err(ConfigError::new(
                ConfigErrorKind::InvalidKey,
                format!(
                    "unsupported signature algorithm `{name}`: use RS256, PS256, ES256 or EdDSA"
                ),
            )),
        }
    }
}
