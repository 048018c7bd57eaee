//! Keys: the signature algorithms, signing keys (in memory or behind a
//! [`JwsSigner`]) and their public JWKs and thumbprints, used by client
//! assertions and DPoP; and the signatures of JWTs a server signed, checked.
//! Knows nothing of tokens or requests.

mod algorithm;
pub(crate) mod jwk;
mod signing_key;
pub(crate) mod verify;

pub use self::algorithm::Algorithm;
pub use self::signing_key::{JwsSigner, SigningKey};
