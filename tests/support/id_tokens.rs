//! ID tokens and logout tokens as an OpenID provider signs them, made with
//! an implementation other than the crate's: keys from rcgen (or openssl, in
//! the tests that give their own), JWS signatures from `jsonwebtoken`
//! (RustCrypto). The public keys are served as the provider's JWK set, and
//! what a test wants broken (a claim, the header, the key) is a hook.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

/// The back-channel logout event's member (OpenID Connect Back-Channel
/// Logout 1.0 section 2.4).
pub const BACK_CHANNEL_EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";

/// What changes a token before it is signed: its claims and its header.
pub type Hook = Box<dyn Fn(&mut Value, &mut Header) + Send + Sync>;

/// A signing key, its algorithm and its public JWK.
pub struct SigningKey {
    pub alg: Algorithm,
    pub key: EncodingKey,
    pub public_jwk: Value,
}

impl SigningKey {
    /// A fresh P-256 key (rcgen), for ES256, with key id `kid`.
    pub fn es256(kid: &str) -> SigningKey {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let point = pair.public_key_raw();
        assert_eq!(point.len(), 65, "an uncompressed point");
        SigningKey {
            alg: Algorithm::ES256,
            key: EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap(),
            public_jwk: json!({
                "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                "x": b64(&point[1..33]), "y": b64(&point[33..]),
            }),
        }
    }

    /// A key from its PKCS #8 PEM and its private JWK (whose private
    /// members are left out of the public one), for `alg`.
    pub fn from_pem(alg: Algorithm, pem: &str, private_jwk: &str, kid: &str) -> SigningKey {
        let key = match alg {
            Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(pem.as_bytes()),
            Algorithm::EdDSA => EncodingKey::from_ed_pem(pem.as_bytes()),
            _ => EncodingKey::from_rsa_pem(pem.as_bytes()),
        }
        .unwrap();
        let mut public_jwk: Value = serde_json::from_str(private_jwk).unwrap();
        let jwk = public_jwk.as_object_mut().unwrap();
        for private in ["d", "p", "q", "dp", "dq", "qi"] {
            jwk.remove(private);
        }
        jwk.insert("kid".into(), kid.into());
        jwk.insert("alg".into(), format!("{alg:?}").into());
        SigningKey {
            alg,
            key,
            public_jwk,
        }
    }

    fn kid(&self) -> String {
        self.public_jwk["kid"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A provider's signing keys and the tokens it signs with them.
pub struct Issuer {
    /// The key that signs; the keys served (that one first).
    signing: Mutex<SigningKey>,
    served: Mutex<Vec<Value>>,
    /// Reads of the JWK set.
    pub jwks_reads: AtomicUsize,
    /// What the next ID tokens are changed by, if anything.
    pub id_token_hook: Mutex<Option<Hook>>,
    /// The whole ID token instead, as a test writes it (`alg: none`).
    pub raw_id_token: Mutex<Option<String>>,
}

impl Default for Issuer {
    fn default() -> Self {
        let key = SigningKey::es256("key-1");
        Issuer {
            served: Mutex::new(vec![key.public_jwk.clone()]),
            signing: Mutex::new(key),
            jwks_reads: AtomicUsize::new(0),
            id_token_hook: Mutex::new(None),
            raw_id_token: Mutex::new(None),
        }
    }
}

impl Issuer {
    /// The JWK set, counted.
    pub fn jwks(&self) -> Value {
        self.jwks_reads.fetch_add(1, Ordering::SeqCst);
        json!({ "keys": self.served.lock().unwrap().clone() })
    }

    /// The algorithm it signs with, as its metadata lists it.
    pub fn alg(&self) -> String {
        format!("{:?}", self.signing.lock().unwrap().alg)
    }

    /// Signs with `key` from now on, and serves it (with the others, or
    /// alone when `alone`): a key rotation.
    pub fn rotate(&self, key: SigningKey, alone: bool) {
        let mut served = self.served.lock().unwrap();
        if alone {
            served.clear();
        }
        served.insert(0, key.public_jwk.clone());
        *self.signing.lock().unwrap() = key;
    }

    /// Signs with `key` without serving it (a key the provider's set does
    /// not hold).
    pub fn sign_unpublished(&self, key: SigningKey) {
        *self.signing.lock().unwrap() = key;
    }

    /// `claims` signed, with the header's `typ`.
    pub fn sign(&self, claims: &Value, typ: Option<&str>, hook: Option<&Hook>) -> String {
        let signing = self.signing.lock().unwrap();
        let mut header = Header::new(signing.alg);
        header.kid = Some(signing.kid());
        header.typ = typ.map(str::to_owned);
        let mut claims = claims.clone();
        if let Some(hook) = hook {
            hook(&mut claims, &mut header);
        }
        jsonwebtoken::encode(&header, &claims, &signing.key).unwrap()
    }

    /// An ID token for `sub` at `issuer`, for `client_id`, with `nonce` and
    /// `sid` where given, as the hooks change it.
    pub fn id_token(
        &self,
        issuer: &str,
        client_id: &str,
        sub: &str,
        nonce: Option<&str>,
        sid: &str,
    ) -> String {
        if let Some(raw) = self.raw_id_token.lock().unwrap().clone() {
            return raw;
        }
        let now = now();
        let mut claims = json!({
            "iss": issuer, "sub": sub, "aud": client_id, "iat": now, "exp": now + 300,
            "sid": sid, "name": format!("The person {sub}"), "email": format!("{sub}@example.com"),
        });
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        let hook = self.id_token_hook.lock().unwrap();
        self.sign(&claims, Some("JWT"), hook.as_ref())
    }

    /// A logout token for `sub` and `sid` (either may be left out) at
    /// `issuer`, for `client_id`, as `hook` changes it.
    pub fn logout_token(
        &self,
        issuer: &str,
        client_id: &str,
        sub: Option<&str>,
        sid: Option<&str>,
        hook: Option<&Hook>,
    ) -> String {
        let now = now();
        let mut claims = json!({
            "iss": issuer, "aud": client_id, "iat": now, "exp": now + 120,
            "jti": format!("jti-{}", rand_hex()),
            "events": { BACK_CHANNEL_EVENT: {} },
        });
        if let Some(sub) = sub {
            claims["sub"] = sub.into();
        }
        if let Some(sid) = sid {
            claims["sid"] = sid.into();
        }
        self.sign(&claims, Some("logout+jwt"), hook)
    }
}

/// A token with `alg: none` (and no `typ`) and no signature, for `claims`.
pub fn unsigned(claims: &Value) -> String {
    format!(
        "{}.{}.",
        b64(br#"{"alg":"none"}"#),
        b64(claims.to_string().as_bytes())
    )
}

/// `claims` signed with HS256 keyed with `secret` (an RSA public key's PEM,
/// in the key-confusion attack), by `jsonwebtoken`.
pub fn hs256(claims: &Value, secret: &[u8], kid: &str) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).unwrap()
}

/// The claims of a JWT, unverified (to read back what a server signed).
pub fn claims_of(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn rand_hex() -> String {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
