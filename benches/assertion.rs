//! What `private_key_jwt` adds to a token request: making and signing a
//! client assertion, per algorithm, next to a raw `ring` signature of the
//! same algorithm over a message of the same size (the floor). Keys are
//! made by openssl, as in the tests.
//!
//! `cargo bench --bench assertion`

#[path = "../tests/support/keys.rs"]
mod keys;
#[path = "support/raw_signature.rs"]
mod raw_signature;

use criterion::{criterion_group, criterion_main, Criterion};
use keys::{Kind, TestKey};
use raw_signature::raw_signer;
use tower_oauth::client_auth::{Algorithm, ClientAssertion, SigningKey};

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
