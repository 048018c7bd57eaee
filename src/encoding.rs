//! The two encodings the token request may need, written out rather than
//! pulled in: `application/x-www-form-urlencoded` (WHATWG URL standard's
//! byte serializer, as RFC 6749 appendix B asks) and standard base64 with
//! padding (RFC 4648, for HTTP Basic).

/// Form-urlencodes `value`: ASCII letters, digits and `*-._` stay, space
/// becomes `+`, every other byte of its UTF-8 form becomes `%XX`.
pub(crate) fn form_urlencode(value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(value.len());
    for &b in value.as_bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => {
                out.push('%');
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
    }
    out
}

/// Standard base64 with `=` padding.
pub(crate) fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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
    fn base64_matches_rfc_4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected, "{input}");
        }
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }
}
