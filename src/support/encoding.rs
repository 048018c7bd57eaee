//! The encodings the token request needs, from the crates everyone uses for
//! them: `application/x-www-form-urlencoded` for bodies (RFC 6749 appendix
//! B), percent-encoding for HTTP Basic credentials, base64, and reading a
//! JWT's claims (unverified: the client reads, never trusts, a JWT), and SHA-256
//! in hex.

use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Form-urlencodes `value` (the WHATWG byte serializer): ASCII letters,
/// digits and `*-._` stay, space becomes `+`, every other byte of its UTF-8
/// form becomes `%XX`.
pub(crate) fn form_urlencode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// What [`percent_encode`] leaves as it is: RFC 3986's unreserved
/// characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes `value`: RFC 3986's unreserved characters stay, every
/// other byte of its UTF-8 form (space included) becomes `%XX`. Read back
/// the same by a percent-decoder and by a form-decoder, since it never
/// writes a `+`.
pub(crate) fn percent_encode(value: &str) -> String {
    utf8_percent_encode(value, UNRESERVED).to_string()
}

/// Standard base64 with `=` padding (RFC 4648).
pub(crate) fn base64(input: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(input)
}

/// The claims of the JWT `token` (a JWS in compact form: three
/// dot-separated parts), unverified; or why it is not one, never showing it.
pub(crate) fn jwt_claims(token: &str) -> Result<serde_json::Value, &'static str> {
    jwt_part(
        token,
        1,
        ["its payload is not base64url", "its payload is not JSON"],
    )
}

/// The header of the JWT `token` (its `alg`, `kid`, `typ`), unverified.
pub(crate) fn jwt_header(token: &str) -> Result<serde_json::Value, &'static str> {
    jwt_part(
        token,
        0,
        ["its header is not base64url", "its header is not JSON"],
    )
}

/// Part `index` of the JWT `token`, decoded as JSON, or why it is no JWT
/// (`why`: not base64url, not JSON).
fn jwt_part(
    token: &str,
    index: usize,
    why: [&'static str; 2],
) -> Result<serde_json::Value, &'static str> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("a JWT has three dot-separated parts");
    };
    let part = if index == 0 { header } else { payload };
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| why[0])?;
    serde_json::from_slice(&json).map_err(|_| why[1])
}

/// SHA-256 of `bytes`, lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_urlencoding_follows_the_byte_serializer() {
        assert_eq!(form_urlencode("abcXYZ019*-._"), "abcXYZ019*-._");
        assert_eq!(form_urlencode("a b"), "a+b");
        assert_eq!(form_urlencode("a+b/c=d&e:f%"), "a%2Bb%2Fc%3Dd%26e%3Af%25");
        assert_eq!(form_urlencode("~"), "%7E");
        assert_eq!(form_urlencode("é"), "%C3%A9");
        assert_eq!(form_urlencode("\n"), "%0A");
    }

    #[test]
    fn percent_encoding_writes_no_plus() {
        assert_eq!(percent_encode("abcXYZ019-._~"), "abcXYZ019-._~");
        assert_eq!(percent_encode("a b+c"), "a%20b%2Bc");
        assert_eq!(percent_encode("/=&%:*"), "%2F%3D%26%25%3A%2A");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (input, expected) in [("", ""), ("f", "Zg=="), ("foobar", "Zm9vYmFy")] {
            assert_eq!(base64(input.as_bytes()), expected, "{input}");
        }
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// What Basic sends reads back exactly through a form-decoder and a
        /// percent-decoder (the crates' own), for any printable secret.
        #[test]
        fn basic_credentials_read_back_through_both_decoders(secret in "\\PC*") {
            let sent = percent_encode(&secret);
            let form: String = form_urlencoded::parse(sent.as_bytes())
                .next()
                .map(|(v, _)| v.into_owned())
                .unwrap_or_default();
            proptest::prop_assert_eq!(&form, &secret);
            let percent = percent_encoding::percent_decode_str(&sent).decode_utf8().unwrap();
            proptest::prop_assert_eq!(&*percent, secret.as_str());
        }
    }
}
