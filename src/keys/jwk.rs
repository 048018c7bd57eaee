//! Public keys as JWKs (RFC 7517) and their thumbprints (RFC 7638): the
//! `jwk` a DPoP proof carries, and the `jkt` a token is bound to.

use base64::Engine;
use serde_json::{Map, Value};

use super::algorithm::Algorithm;
use crate::error::{ConfigError, ConfigErrorKind};

/// A public key as a JWK of its required members only, in RFC 7638's
/// canonical form (members in lexicographic order, no white space), and its
/// SHA-256 thumbprint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PublicJwk {
    json: String,
    thumbprint: String,
}

impl PublicJwk {
    /// An EC P-256 key from its uncompressed point (`04 || x || y`).
    pub(crate) fn p256(point: &[u8]) -> Self {
        let (x, y) = point[1..].split_at(32);
        Self::canonical(format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            b64(x),
            b64(y)
        ))
    }

    /// An Ed25519 key from its 32 bytes.
    pub(crate) fn ed25519(x: &[u8]) -> Self {
        Self::canonical(format!(
            r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
            b64(x)
        ))
    }

    /// An RSA key from its modulus and exponent (big-endian, unsigned).
    pub(crate) fn rsa(n: &[u8], e: &[u8]) -> Self {
        Self::canonical(format!(
            r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
            b64(strip_zeros(e)),
            b64(strip_zeros(n))
        ))
    }

    /// Reads the public JWK a [`JwsSigner`](crate::client_auth::JwsSigner) gives, for a
    /// key that signs `algorithm`; members beyond the required ones (`kid`,
    /// `alg`, `use`) are dropped.
    pub(crate) fn parse(text: &str, algorithm: Algorithm) -> Result<Self, ConfigError> {
        let Ok(Value::Object(jwk)) = serde_json::from_str::<Value>(text) else {
            return Err(invalid("the signer's public JWK is not a JSON object"));
        };
        if ["d", "p", "q", "dp", "dq", "qi", "k"]
            .iter()
            .any(|m| jwk.contains_key(*m))
        {
            return Err(invalid(
                "the signer's public JWK holds private key members; give the public key only",
            ));
        }
        let member = |name: &str| member(&jwk, name);
        let kty = jwk.get("kty").and_then(Value::as_str).unwrap_or_default();
        let crv = jwk.get("crv").and_then(Value::as_str).unwrap_or_default();
        match (algorithm, kty, crv) {
            (Algorithm::Es256, "EC", "P-256") => {
                let (x, y) = (member("x")?, member("y")?);
                if x.len() != 32 || y.len() != 32 {
                    return Err(invalid(
                        "the signer's P-256 JWK has coordinates of the wrong length",
                    ));
                }
                let mut point = vec![4];
                point.extend(x);
                point.extend(y);
                Ok(Self::p256(&point))
            }
            (Algorithm::EdDsa, "OKP", "Ed25519") => {
                let x = member("x")?;
                if x.len() != 32 {
                    return Err(invalid(
                        "the signer's Ed25519 JWK has an `x` of the wrong length",
                    ));
                }
                Ok(Self::ed25519(&x))
            }
            (Algorithm::Rs256 | Algorithm::Ps256, "RSA", _) => {
                let (n, e) = (member("n")?, member("e")?);
                if strip_zeros(&n).len() < 256 {
                    return Err(invalid("the signer's RSA JWK is under 2048 bits"));
                }
                Ok(Self::rsa(&n, &e))
            }
            _ => Err(invalid(format!(
                "the signer signs {algorithm}, but its public JWK has kty `{kty}`{}",
                if crv.is_empty() {
                    String::new()
                } else {
                    format!(" and crv `{crv}`")
                }
            ))),
        }
    }

    fn canonical(json: String) -> Self {
        let digest = ring::digest::digest(&ring::digest::SHA256, json.as_bytes());
        PublicJwk {
            thumbprint: b64(digest.as_ref()),
            json,
        }
    }

    /// The JWK's JSON: its required members in canonical form.
    pub(crate) fn json(&self) -> &str {
        &self.json
    }

    /// The RFC 7638 thumbprint: base64url of SHA-256 of [`json`](Self::json).
    pub(crate) fn thumbprint(&self) -> &str {
        &self.thumbprint
    }
}

fn member(jwk: &Map<String, Value>, name: &str) -> Result<Vec<u8>, ConfigError> {
    let value = jwk
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("the signer's public JWK has no `{name}` member")))?;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value)
        .map_err(|_| {
            invalid(format!(
                "the signer's public JWK's `{name}` is not base64url"
            ))
        })
}

fn strip_zeros(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take_while(|b| **b == 0).count();
    &bytes[skip.min(bytes.len().saturating_sub(1))..]
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::InvalidKey, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7638 section 3.1's example key and thumbprint.
    #[test]
    fn rfc_7638_example() {
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        let text =
            format!(r#"{{"kty":"RSA","n":"{n}","e":"AQAB","alg":"RS256","kid":"2011-04-29"}}"#);
        let jwk = PublicJwk::parse(&text, Algorithm::Rs256).unwrap();
        assert_eq!(
            jwk.thumbprint(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
        assert_eq!(
            jwk.json(),
            format!(r#"{{"e":"AQAB","kty":"RSA","n":"{n}"}}"#)
        );
    }

    #[test]
    fn refuses_private_or_mismatched_keys() {
        let private = r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}"#;
        let e = PublicJwk::parse(private, Algorithm::EdDsa).unwrap_err();
        assert!(e.to_string().contains("private"), "{e}");
        let public =
            r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#;
        assert!(PublicJwk::parse(public, Algorithm::EdDsa).is_ok());
        let e = PublicJwk::parse(public, Algorithm::Es256).unwrap_err();
        assert!(e.to_string().contains("kty `OKP`"), "{e}");
        assert!(PublicJwk::parse("[]", Algorithm::EdDsa).is_err());
    }
}
