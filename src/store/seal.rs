//! Sealing what a store keeps: AES-256-GCM with a random 96-bit nonce per
//! value, under a key derived (HKDF-SHA256) from the client's credential or
//! given by the user; the associated data is the value's own store key and
//! the whole encoding of the token's identity, so a value opens only under
//! the key it was stored at, for the identity it was stored for.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};

/// What a sealed value starts with. Anything else (a token stored in clear
/// by an older version, garbage) does not open.
const PREFIX: &str = "sealed2.";

/// The first bytes of the associated data: its format and version.
const AAD_VERSION: &[u8] = b"tower-oauth/sealed/2";

/// Seals and opens the values of one token identity under one key.
pub(crate) struct Sealer<'a> {
    key: LessSafeKey,
    /// The key's bytes, for sealing a chain beside the token.
    raw: [u8; 32],
    /// The token identity's encoding.
    identity: &'a [u8],
}

impl<'a> Sealer<'a> {
    pub(crate) fn new(key: &[u8; 32], identity: &'a [u8]) -> Self {
        Sealer {
            key: LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key")),
            raw: *key,
            identity,
        }
    }

    /// The same key, bound to `identity`: a refresh-token chain's, sealed
    /// beside the token.
    pub(crate) fn beside<'b>(&self, identity: &'b [u8]) -> Sealer<'b> {
        Sealer::new(&self.raw, identity)
    }

    /// The associated data of a value at `store_key`: the version, the
    /// store key's length (4 bytes, big-endian) and bytes, the identity.
    fn aad(&self, store_key: &str) -> Vec<u8> {
        let len = u32::try_from(store_key.len()).unwrap_or(u32::MAX);
        let mut aad =
            Vec::with_capacity(AAD_VERSION.len() + 4 + store_key.len() + self.identity.len());
        aad.extend_from_slice(AAD_VERSION);
        aad.extend_from_slice(&len.to_be_bytes());
        aad.extend_from_slice(store_key.as_bytes());
        aad.extend_from_slice(self.identity);
        aad
    }

    /// `plaintext` sealed for the store key `aad`, as text; `None` only if
    /// the system's random source fails.
    pub(crate) fn seal(&self, aad: &str, plaintext: &[u8]) -> Option<String> {
        let aad = self.aad(aad);
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::getrandom(&mut nonce).ok()?;
        let mut sealed = plaintext.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad[..]),
                &mut sealed,
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend(sealed);
        Some(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(out)))
    }

    /// The plaintext of `value` sealed for `aad`; `None` when it does not
    /// open: another key, another store key, tampering, or not sealed.
    pub(crate) fn open(&self, aad: &str, value: &str) -> Option<Vec<u8>> {
        let aad = self.aad(aad);
        let bytes = URL_SAFE_NO_PAD.decode(value.strip_prefix(PREFIX)?).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(&aad[..]), &mut sealed)
            .ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::derive_sealing_key as derive;

    #[test]
    fn opens_only_what_it_sealed_for_that_key() {
        let sealer = Sealer::new(&derive(b"s3cr3t"), b"identity one");
        let sealed = sealer.seal("k1", b"{\"access_token\":\"abc\"}").unwrap();
        assert!(!sealed.contains("abc"));
        assert_eq!(
            sealer.open("k1", &sealed).unwrap(),
            b"{\"access_token\":\"abc\"}"
        );
        assert_ne!(
            sealed,
            sealer.seal("k1", b"{\"access_token\":\"abc\"}").unwrap()
        );
        assert_eq!(sealer.open("k2", &sealed), None, "bound to its store key");
        assert_eq!(
            Sealer::new(&derive(b"other"), b"identity one").open("k1", &sealed),
            None
        );
        assert_eq!(
            Sealer::new(&derive(b"s3cr3t"), b"identity two").open("k1", &sealed),
            None,
            "bound to its identity"
        );
        let mut tampered = sealed.clone().into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            sealer.open("k1", std::str::from_utf8(&tampered).unwrap()),
            None
        );
        assert_eq!(sealer.open("k1", "{\"access_token\":\"abc\"}"), None);
        assert_eq!(sealer.open("k1", "sealed2.AAAA"), None);
        assert_eq!(derive(b"s3cr3t"), derive(b"s3cr3t"));
    }
}
