//! Test keys made by openssl (Debian's `openssl` package): private keys in
//! every PEM form, their public halves, and private JWKs read from
//! openssl's own text dump, so nothing about a key comes from the crate.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;

/// A key made by openssl, in the files of a temporary directory.
pub struct TestKey {
    dir: PathBuf,
    /// The private key, PKCS #8 PEM.
    pub pkcs8: String,
    /// The public key, SPKI PEM.
    pub public: String,
}

/// Which key to make.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Rsa(u32),
    P256,
    P384,
    Ed25519,
}

fn openssl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is needed for the key tests (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl TestKey {
    pub fn new(kind: Kind) -> TestKey {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tower-oauth-keys-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let bits = match kind {
            Kind::Rsa(bits) => format!("rsa_keygen_bits:{bits}"),
            _ => String::new(),
        };
        let args: Vec<&str> = match kind {
            Kind::Rsa(_) => vec!["genpkey", "-algorithm", "RSA", "-pkeyopt", &bits],
            Kind::P256 => vec![
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ],
            Kind::P384 => vec![
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-384",
            ],
            Kind::Ed25519 => vec!["genpkey", "-algorithm", "ed25519"],
        };
        let mut args = args;
        args.extend(["-out", "key.pem"]);
        openssl(&dir, &args);
        let pkcs8 = std::fs::read_to_string(dir.join("key.pem")).unwrap();
        let public = openssl(&dir, &["pkey", "-in", "key.pem", "-pubout"]);
        TestKey { dir, pkcs8, public }
    }

    /// The key in its traditional form: PKCS #1 for RSA, SEC 1 for EC.
    pub fn traditional(&self) -> String {
        openssl(&self.dir, &["pkey", "-in", "key.pem", "-traditional"])
    }

    /// The key encrypted with a passphrase (PKCS #8).
    pub fn encrypted(&self) -> String {
        openssl(
            &self.dir,
            &[
                "pkey",
                "-in",
                "key.pem",
                "-aes256",
                "-passout",
                "pass:secret",
            ],
        )
    }

    /// The private key as a JWK, from openssl's text dump of it.
    pub fn jwk(&self, kind: Kind) -> String {
        let text = openssl(&self.dir, &["pkey", "-in", "key.pem", "-text", "-noout"]);
        let raw = |name: &str| b64(&hex_field(&text, name));
        // Integers may carry a zero byte in front, which a JWK leaves out.
        let field = |name: &str| {
            let bytes = hex_field(&text, name);
            let skip = bytes.iter().take_while(|b| **b == 0).count();
            b64(&bytes[skip..])
        };
        match kind {
            Kind::P256 => {
                let public = hex_field(&text, "pub:");
                assert_eq!(public[0], 4, "an uncompressed point");
                serde_json::json!({
                    "kty": "EC", "crv": "P-256", "kid": "jwk-ec",
                    "d": b64(&fixed32(&hex_field(&text, "priv:"))),
                    "x": b64(&public[1..33]), "y": b64(&public[33..]),
                })
            }
            Kind::P384 => {
                let public = hex_field(&text, "pub:");
                assert_eq!(public[0], 4, "an uncompressed point");
                let d = hex_field(&text, "priv:");
                let mut d48 = vec![0u8; 48 - d.len().min(48)];
                d48.extend_from_slice(&d[d.len().saturating_sub(48)..]);
                serde_json::json!({
                    "kty": "EC", "crv": "P-384", "kid": "jwk-ec384",
                    "d": b64(&d48), "x": b64(&public[1..49]), "y": b64(&public[49..]),
                })
            }
            Kind::Ed25519 => serde_json::json!({
                "kty": "OKP", "crv": "Ed25519", "kid": "jwk-ed",
                "d": raw("priv:"), "x": raw("pub:"),
            }),
            Kind::Rsa(_) => {
                let e: u64 = text
                    .lines()
                    .find(|l| l.starts_with("publicExponent:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .unwrap()
                    .parse()
                    .unwrap();
                let e = e.to_be_bytes();
                let skip = e.iter().take_while(|b| **b == 0).count();
                serde_json::json!({
                    "kty": "RSA", "kid": "jwk-rsa", "alg": "PS256",
                    "n": field("modulus:"), "e": b64(&e[skip..]),
                    "d": field("privateExponent:"), "p": field("prime1:"), "q": field("prime2:"),
                    "dp": field("exponent1:"), "dq": field("exponent2:"), "qi": field("coefficient:"),
                })
            }
        }
        .to_string()
    }
}

impl Drop for TestKey {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The bytes of a hex block `name` of openssl's text dump (`aa:bb:...`
/// over indented lines), without the leading zero openssl adds to keep an
/// integer positive.
fn hex_field(text: &str, name: &str) -> Vec<u8> {
    let mut lines = text.lines().skip_while(|l| l.trim() != name).skip(1);
    let mut hex = String::new();
    for line in lines.by_ref() {
        if !line.starts_with(' ') {
            break;
        }
        hex.push_str(line.trim());
    }
    let bytes: Vec<u8> = hex
        .split(':')
        .filter(|h| !h.is_empty())
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    assert!(!bytes.is_empty(), "no {name} in openssl's dump");
    bytes
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A P-256 scalar as its 32 bytes.
fn fixed32(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 32 - bytes.len().min(32)];
    out.extend_from_slice(&bytes[bytes.len().saturating_sub(32)..]);
    out
}
