//! One DPoP proof (RFC 9449 section 4.2): the request's `htu`, the claims,
//! and the signature, built with as little work per request as the
//! signature leaves room for (the header is encoded once per key).

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use http::{HeaderValue, Uri};

use super::DpopKey;
use crate::error::{TokenError, TokenErrorKind};

/// A request's target URI as a proof's `htu`: scheme and host in lower
/// case, no default port (RFC 3986 sections 6.2.2.1 and 6.2.3), the path as
/// sent (`/` when empty), no query, no fragment (RFC 9449 section 4.2); its
/// origin is the part before the path.
#[derive(Debug)]
pub(crate) struct Htu {
    /// Boxed, not a `String`: a request's response future carries it, and a
    /// smaller future is moved faster on every request.
    htu: Box<str>,
}

impl Htu {
    /// The target of a request to `uri`, which must be absolute.
    pub(crate) fn of(uri: &Uri) -> Result<Self, TokenError> {
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(
                TokenError::new(TokenErrorKind::InvalidRequest).with_message(format!(
                    "a DPoP proof names the request's URI, and `{}` has no scheme and host: \
                     give requests absolute URIs (https://host/path) before the OAuth layer",
                    uri.path()
                )),
            );
        };
        let default_port = if scheme.eq_ignore_ascii_case("https") {
            443
        } else if scheme.eq_ignore_ascii_case("http") {
            80
        } else {
            0
        };
        let port = authority.port_u16().filter(|p| *p != default_port);
        // The path as sent: servers compare it with the path they receive.
        let path = match uri.path() {
            "" => "/",
            path => path,
        };
        let host = authority.host();
        // Exactly the length, so that boxing does not reallocate.
        let port_len = port.map_or(0, |p| 2 + p.checked_ilog10().unwrap_or(0) as usize);
        let mut htu = String::with_capacity(scheme.len() + 3 + host.len() + port_len + path.len());
        push_lower(&mut htu, scheme);
        htu.push_str("://");
        push_lower(&mut htu, host);
        if let Some(port) = port {
            let _ = write!(htu, ":{port}");
        }
        htu.push_str(path);
        Ok(Htu {
            htu: htu.into_boxed_str(),
        })
    }

    /// The `htu` claim.
    pub(crate) fn htu(&self) -> &str {
        &self.htu
    }

    /// `scheme://host[:port]`: whose nonce the proof carries.
    pub(crate) fn origin(&self) -> &str {
        let host = self.htu.find("://").map_or(0, |i| i + 3);
        let end = self.htu[host..]
            .find('/')
            .map_or(self.htu.len(), |i| host + i);
        &self.htu[..end]
    }
}

fn push_lower(out: &mut String, text: &str) {
    out.extend(text.chars().map(|c| c.to_ascii_lowercase()));
}

impl DpopKey {
    /// `base64url(header) . base64url(claims)` of a new proof: a `jti` of
    /// 128 random bits, `htm`, `htu`, `iat` now, and `ath` and `nonce` when
    /// given. Sized to hold the signature too: for a key held here the
    /// finished proof fills it exactly, so that it becomes a header value
    /// without another allocation.
    pub(crate) fn signing_input(
        &self,
        htm: &str,
        htu: &str,
        ath: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<Vec<u8>, TokenError> {
        let mut jti = [0u8; 16];
        getrandom::getrandom(&mut jti).map_err(|_| {
            TokenError::new(TokenErrorKind::Signing)
                .with_message("no random bytes for the DPoP proof's jti")
        })?;
        let mut jti_text = [0u8; 22];
        URL_SAFE_NO_PAD
            .encode_slice(jti, &mut jti_text)
            .expect("16 bytes are 22 base64 characters");
        let iat = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut iat_text = [0u8; 20];
        let iat_len = {
            let mut cursor = std::io::Cursor::new(&mut iat_text[..]);
            let _ = write!(cursor, "{iat}");
            cursor.position() as usize
        };
        let (htm, htu) = (JsonText::of(htm), JsonText::of(htu));
        let (ath, nonce) = (ath.map(JsonText::of), nonce.map(JsonText::of));

        // The claims' pieces, then the claims on the stack (on the heap for
        // a very long URI).
        let mut parts = Parts::default();
        parts.push(b"{\"jti\":\"");
        parts.push(&jti_text);
        parts.push(b"\",\"htm\":");
        parts.push_json(&htm);
        parts.push(b",\"htu\":");
        parts.push_json(&htu);
        parts.push(b",\"iat\":");
        parts.push(&iat_text[..iat_len]);
        if let Some(ath) = &ath {
            parts.push(b",\"ath\":");
            parts.push_json(ath);
        }
        if let Some(nonce) = &nonce {
            parts.push(b",\"nonce\":");
            parts.push_json(nonce);
        }
        let parts = parts.as_slice();
        let claims_len = parts.iter().map(|p| p.len()).sum::<usize>() + 1;
        let mut stack = [0u8; 512];
        let mut heap = Vec::new();
        let claims: &mut [u8] = if claims_len <= stack.len() {
            &mut stack[..claims_len]
        } else {
            heap.resize(claims_len, 0);
            &mut heap
        };
        let mut at = 0;
        for part in parts {
            claims[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        claims[at] = b'}';

        let header = self.inner.header.as_bytes();
        let signature_len = self.inner.key.signature_len().unwrap_or(512);
        let mut input = Vec::with_capacity(
            header.len() + encoded_len(claims_len) + 1 + encoded_len(signature_len),
        );
        input.extend_from_slice(header);
        append_base64url(&mut input, claims);
        Ok(input)
    }

    /// Appends `.signature` to `input`, signed here; `None` for a custom
    /// signer ([`finish`](Self::finish)).
    pub(crate) fn finish_here(&self, input: &mut Vec<u8>) -> Option<Result<(), TokenError>> {
        // At most 1024 bytes (RSA 8192), on the stack.
        let mut signature = [0u8; 1024];
        let signed = self.inner.key.sign_here_into(input, |s| {
            signature[..s.len()].copy_from_slice(s);
            s.len()
        })?;
        Some(match signed {
            Ok(len) => {
                input.push(b'.');
                append_base64url(input, &signature[..len]);
                Ok(())
            }
            Err(e) => Err(signing_failed(&*e)),
        })
    }

    /// Signs `input` with whatever signer the key has, and makes the header
    /// value.
    pub(crate) async fn finish(self, mut input: Vec<u8>) -> Result<HeaderValue, TokenError> {
        if let Some(done) = self.finish_here(&mut input) {
            return done.map(|()| header_value(input));
        }
        let signature = self
            .inner
            .key
            .sign(&input)
            .await
            .map_err(|e| signing_failed(&*e))?;
        input.push(b'.');
        append_base64url(&mut input, &signature);
        Ok(header_value(input))
    }
}

/// A JSON string, quoted: as it is when nothing in it needs escaping (a
/// method, a URI, a nonce, a hash), else escaped by serde_json.
enum JsonText<'a> {
    Plain([&'a [u8]; 3]),
    Escaped(Vec<u8>),
}

impl<'a> JsonText<'a> {
    fn of(text: &'a str) -> Self {
        if text
            .bytes()
            .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f)
        {
            JsonText::Plain([b"\"", text.as_bytes(), b"\""])
        } else {
            JsonText::Escaped(serde_json::to_vec(text).expect("a string serializes"))
        }
    }
}

/// Up to 24 pieces of bytes, in order.
#[derive(Default)]
struct Parts<'a> {
    parts: [&'a [u8]; 24],
    len: usize,
}

impl<'a> Parts<'a> {
    fn push(&mut self, part: &'a [u8]) {
        self.parts[self.len] = part;
        self.len += 1;
    }

    fn push_json(&mut self, text: &'a JsonText<'a>) {
        match text {
            JsonText::Plain(parts) => parts.iter().for_each(|p| self.push(p)),
            JsonText::Escaped(text) => self.push(text),
        }
    }

    fn as_slice(&self) -> &[&'a [u8]] {
        &self.parts[..self.len]
    }
}

fn encoded_len(len: usize) -> usize {
    (len * 4).div_ceil(3)
}

/// Appends base64url of `bytes` to `out`, without padding.
fn append_base64url(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + encoded_len(bytes.len()), 0);
    URL_SAFE_NO_PAD
        .encode_slice(bytes, &mut out[start..])
        .expect("the exact length");
}

fn signing_failed(e: &(dyn std::error::Error + Send + Sync)) -> TokenError {
    TokenError::new(TokenErrorKind::Signing)
        .with_message(format!("the DPoP proof could not be signed: {e}"))
}

/// A finished proof as a header value.
pub(crate) fn header_value(proof: Vec<u8>) -> HeaderValue {
    let mut value =
        HeaderValue::from_maybe_shared(Bytes::from(proof)).expect("a proof is base64url and dots");
    // Unique to one request: never worth indexing, and kept out of logs.
    value.set_sensitive(true);
    value
}

/// base64url without padding.
pub(crate) fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `base64url(SHA-256(token))`.
pub(crate) fn ath(token: &str) -> String {
    base64url(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn htu(uri: &str) -> (String, String) {
        let t = Htu::of(&uri.parse().unwrap()).unwrap();
        (t.htu().to_owned(), t.origin().to_owned())
    }

    #[test]
    fn htu_is_normalised_without_query_and_fragment() {
        assert_eq!(
            htu("https://API.Example.com:443/a/b?x=1#frag"),
            (
                "https://api.example.com/a/b".into(),
                "https://api.example.com".into()
            )
        );
        assert_eq!(
            htu("HTTP://127.0.0.1:80"),
            ("http://127.0.0.1/".into(), "http://127.0.0.1".into())
        );
        assert_eq!(
            htu("http://127.0.0.1:8080/p%2fq%7e?q"),
            (
                "http://127.0.0.1:8080/p%2fq%7e".into(),
                "http://127.0.0.1:8080".into()
            )
        );
        assert_eq!(htu("https://user:pw@host:8443/").0, "https://host:8443/");
        assert_eq!(htu("https://[::1]:443/x").0, "https://[::1]/x");
    }

    #[test]
    fn claims_are_json_whatever_the_text() {
        let key = DpopKey::generate(crate::keys::Algorithm::Es256).unwrap();
        let long = format!("https://a/{}", "p".repeat(2000));
        for (htu, nonce) in [
            ("https://a/\"x\\y\u{7f}", Some("n-1")),
            ("https://a/b", None),
            (long.as_str(), Some("x")),
        ] {
            let input = key.signing_input("GET", htu, Some("h"), nonce).unwrap();
            let claims = input.split(|b| *b == b'.').nth(1).unwrap();
            let claims: serde_json::Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
            assert_eq!(claims["htu"], htu);
            assert_eq!(claims["htm"], "GET");
            assert_eq!(claims["ath"], "h");
            assert_eq!(claims["nonce"].as_str(), nonce);
            assert_eq!(claims["jti"].as_str().unwrap().len(), 22);
            assert!(claims["iat"].as_u64().unwrap() > 1_700_000_000);
        }
    }

    #[test]
    fn a_relative_uri_fails_the_request() {
        let e = Htu::of(&"/pkg.Service/Call".parse().unwrap()).unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidRequest);
        assert!(e.to_string().contains("absolute"), "{e}");
    }
}
