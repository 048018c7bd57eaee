//! What `private_key_jwt` adds to a token request: making and signing a
//! client assertion, per algorithm, next to a raw `ring` signature of the
//! same algorithm over a message of the same size (the floor). Keys are
//! made by openssl, as in the tests.
//!
//! `cargo bench --features jwt --bench assertion`

#[path = "../tests/support/keys.rs"]
mod keys;

use criterion::{criterion_group, criterion_main, Criterion};
use keys::{Kind, TestKey};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use tower_oauth::{Algorithm, ClientAssertion, SigningKey};

/// Signs a message, returning the signature's length.
type Sign = Box<dyn Fn(&[u8]) -> usize>;

/// A raw signature with `ring` over `message`, for `algorithm`.
fn raw_signer(pem: &str, algorithm: Algorithm) -> Sign {
    let der = PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap();
    let pkcs8 = der.secret_der().to_vec();
    let rng = SystemRandom::new();
    match algorithm {
        Algorithm::Rs256 | Algorithm::Ps256 => {
            let key = RsaKeyPair::from_pkcs8(&pkcs8).unwrap();
            let padding: &'static dyn signature::RsaEncoding = if algorithm == Algorithm::Ps256 {
                &signature::RSA_PSS_SHA256
            } else {
                &signature::RSA_PKCS1_SHA256
            };
            Box::new(move |message| {
                let mut out = vec![0; key.public().modulus_len()];
                key.sign(padding, &rng, message, &mut out).unwrap();
                out.len()
            })
        }
        Algorithm::Es256 => {
            let key =
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng)
                    .unwrap();
            Box::new(move |message| key.sign(&rng, message).unwrap().as_ref().len())
        }
        Algorithm::EdDsa => {
            let key = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8).unwrap();
            Box::new(move |message| key.sign(message).as_ref().len())
        }
        _ => unreachable!(),
    }
}

fn assertions(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("client_assertion");
    for (kind, algorithm) in [
        (Kind::P256, Algorithm::Es256),
        (Kind::Ed25519, Algorithm::EdDsa),
        (Kind::Rsa(2048), Algorithm::Rs256),
        (Kind::Rsa(2048), Algorithm::Ps256),
    ] {
        let key = TestKey::new(kind);
        let signing = SigningKey::from_pem(&key.pkcs8, algorithm)
            .unwrap()
            .key_id("client-key-1");
        let claims = ClientAssertion::new("bench-client", "https://login.example.com/oauth2/token");
        let jwt = rt.block_on(claims.sign(&signing)).unwrap();
        // The signing input is the JWT up to its last dot.
        let message = vec![b'x'; jwt.rfind('.').unwrap()];
        let raw = raw_signer(&key.pkcs8, algorithm);
        group.bench_function(format!("{algorithm}/raw_signature"), |b| {
            b.iter(|| raw(std::hint::black_box(&message)))
        });
        group.bench_function(format!("{algorithm}/assertion"), |b| {
            b.iter(|| rt.block_on(claims.sign(&signing)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, assertions);
criterion_main!(benches);
