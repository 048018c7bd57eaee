//! Keys: the signature algorithms, signing keys (in memory or behind a
//! [`JwsSigner`]) and their public JWKs and thumbprints. Used by client
//! assertions and DPoP. Knows nothing of tokens or requests.

mod algorithm;
pub(crate) mod jwk;
mod signing_key;

pub use self::algorithm::Algorithm;
pub use self::signing_key::{JwsSigner, SigningKey};
