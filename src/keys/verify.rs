//! A JWS a server signed (an ID token, a logout token), checked: its compact
//! form read within bounds, its algorithm, and its signature against a public
//! key of the server's JWK set or the client's secret (HMAC). The claims are
//! another module's to check.

use base64::Engine;
use serde_json::{Map, Value};

/// The longest JWS read: an ID token with many claims is a few kilobytes.
pub(crate) const MAX_JWS_LEN: usize = 16 * 1024;

/// The algorithms this crate checks signatures of. `none` is never one.
pub(crate) const CHECKED_ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA", "Ed25519",
    "HS256", "HS384", "HS512",
];

/// The signature algorithms the FAPI 2.0 Security Profile allows (its
/// section on cryptography): PS256, ES256 and EdDSA (Ed25519).
/// `Ed25519` is EdDSA's fully-specified name (RFC 9864).
pub(crate) const FAPI2_ALGORITHMS: &[&str] = &["PS256", "ES256", "EdDSA", "Ed25519"];

/// A compact JWS, read and not yet checked.
pub(crate) struct Jws {
    header: Map<String, Value>,
    claims: Map<String, Value>,
    /// `header.payload`, what the signature covers.
    signed: String,
    signature: Vec<u8>,
}

impl Jws {
    /// Reads `text`: three base64url parts, a JSON object header and payload.
    /// Why not, in words for a message.
    pub(crate) fn parse(text: &str) -> Result<Jws, String> {
        if text.len() > MAX_JWS_LEN {
            return Err(format!("it is over {MAX_JWS_LEN} bytes"));
        }
        let mut parts = text.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("it is not a compact JWS (three parts)".into());
        };
        let object = |part: &str, what: &str| match decode(part)
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        {
            Some(Value::Object(map)) => Ok(map),
            _ => Err(format!("its {what} is not base64url JSON object")),
        };
        Ok(Jws {
            header: object(header, "header")?,
            claims: object(payload, "payload")?,
            signed: format!("{header}.{payload}"),
            signature: decode(signature).ok_or("its signature is not base64url")?,
        })
    }

    /// The header's `alg`; empty for none.
    pub(crate) fn alg(&self) -> &str {
        self.text("alg").unwrap_or_default()
    }

    /// A member of the header, if it is a string.
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.header.get(name).and_then(Value::as_str)
    }

    /// Whether the header has member `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.header.contains_key(name)
    }

    /// The payload's claims, unchecked until a signature verified.
    pub(crate) fn into_claims(self) -> Map<String, Value> {
        self.claims
    }

    /// Whether the signature verifies with `jwk`, a public key that
    /// [`fits`] the header's algorithm.
    pub(crate) fn verifies_with(&self, jwk: &Map<String, Value>) -> bool {
        use ring::signature as sig;
        let member = |name: &str| jwk.get(name).and_then(Value::as_str).and_then(decode);
        let message = self.signed.as_bytes();
        let rsa = |params: &'static sig::RsaParameters| match (member("n"), member("e")) {
            (Some(n), Some(e)) => sig::RsaPublicKeyComponents { n: &n, e: &e }
                .verify(params, message, &self.signature)
                .is_ok(),
            _ => false,
        };
        let point = |alg: &'static sig::EcdsaVerificationAlgorithm, len: usize| match (
            member("x"),
            member("y"),
        ) {
            (Some(x), Some(y)) if x.len() == len && y.len() == len => {
                let mut point = vec![4];
                point.extend(x);
                point.extend(y);
                sig::UnparsedPublicKey::new(alg, point)
                    .verify(message, &self.signature)
                    .is_ok()
            }
            _ => false,
        };
        match self.alg() {
            "RS256" => rsa(&sig::RSA_PKCS1_2048_8192_SHA256),
            "RS384" => rsa(&sig::RSA_PKCS1_2048_8192_SHA384),
            "RS512" => rsa(&sig::RSA_PKCS1_2048_8192_SHA512),
            "PS256" => rsa(&sig::RSA_PSS_2048_8192_SHA256),
            "PS384" => rsa(&sig::RSA_PSS_2048_8192_SHA384),
            "PS512" => rsa(&sig::RSA_PSS_2048_8192_SHA512),
            "ES256" => point(&sig::ECDSA_P256_SHA256_FIXED, 32),
            "ES384" => point(&sig::ECDSA_P384_SHA384_FIXED, 48),
            "EdDSA" | "Ed25519" => match member("x") {
                Some(x) if x.len() == 32 => sig::UnparsedPublicKey::new(&sig::ED25519, x)
                    .verify(message, &self.signature)
                    .is_ok(),
                _ => false,
            },
            _ => false,
        }
    }

    /// Whether the signature is the HMAC of `secret` (`HS256`, `HS384`,
    /// `HS512`): the client's own secret, which the server shares.
    pub(crate) fn verifies_with_secret(&self, secret: &[u8]) -> bool {
        use ring::hmac;
        let algorithm = match self.alg() {
            "HS256" => hmac::HMAC_SHA256,
            "HS384" => hmac::HMAC_SHA384,
            "HS512" => hmac::HMAC_SHA512,
            _ => return false,
        };
        let key = hmac::Key::new(algorithm, secret);
        hmac::verify(&key, self.signed.as_bytes(), &self.signature).is_ok()
    }
}

/// Whether `jwk` is a public signing key for `alg`: its `kty` (and `crv`)
/// the algorithm's, not an encryption key (`use`), its own `alg` (where it
/// names one) the same, and no private member.
pub(crate) fn fits(jwk: &Map<String, Value>, alg: &str) -> bool {
    let text = |name: &str| jwk.get(name).and_then(Value::as_str);
    if text("use").is_some_and(|u| u != "sig")
        || text("alg").is_some_and(|a| a != alg)
        || jwk.contains_key("d")
    {
        return false;
    }
    match (text("kty"), text("crv")) {
        (Some("RSA"), _) => alg.starts_with("RS") || alg.starts_with("PS"),
        (Some("EC"), Some("P-256")) => alg == "ES256",
        (Some("EC"), Some("P-384")) => alg == "ES384",
        (Some("OKP"), Some("Ed25519")) => alg == "EdDSA" || alg == "Ed25519",
        _ => false,
    }
}

/// Whether `alg` is an HMAC algorithm, keyed with a secret both ends hold.
pub(crate) fn is_hmac(alg: &str) -> bool {
    alg.starts_with("HS")
}

fn decode(part: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    #[test]
    fn refuses_what_is_not_a_jws() {
        assert!(Jws::parse("a.b").is_err());
        assert!(Jws::parse("a.b.c.d").is_err());
        assert!(Jws::parse(&"a".repeat(MAX_JWS_LEN + 1)).is_err());
        let header = b64(br#"{"alg":"none"}"#);
        assert!(Jws::parse(&format!("{header}.{}.", b64(b"[]"))).is_err());
        let jws = Jws::parse(&format!("{header}.{}.", b64(b"{}"))).unwrap();
        assert_eq!(jws.alg(), "none");
        // No key verifies `none`, and no secret.
        let key: Map<String, Value> = serde_json::from_str(
            r#"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
        )
        .unwrap();
        assert!(!jws.verifies_with(&key));
        assert!(!jws.verifies_with_secret(b"secret"));
    }

    #[test]
    fn a_key_fits_its_algorithm_only() {
        let key = |json: &str| serde_json::from_str::<Map<String, Value>>(json).unwrap();
        assert!(fits(&key(r#"{"kty":"RSA"}"#), "PS256"));
        assert!(!fits(&key(r#"{"kty":"RSA","use":"enc"}"#), "RS256"));
        assert!(!fits(&key(r#"{"kty":"RSA","alg":"RS256"}"#), "PS256"));
        assert!(!fits(&key(r#"{"kty":"EC","crv":"P-256"}"#), "ES384"));
        assert!(!fits(&key(r#"{"kty":"RSA","d":"x"}"#), "RS256"));
        assert!(!fits(&key(r#"{"kty":"oct"}"#), "HS256"));
    }
}
