//! The floor of a signing benchmark: a raw signature with `ring`, the
//! library the crate signs with, for the same key and algorithm.

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::PrivateKeyDer;
use tower_oauth::client_auth::Algorithm;

/// Signs a message, returning the signature's length.
pub type Sign = Box<dyn Fn(&[u8]) -> usize + Send + Sync>;

/// A raw signature with `ring` over `message`, for `algorithm`.
pub fn raw_signer(pem: &str, algorithm: Algorithm) -> Sign {
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
