//! One DPoP proof (RFC 9449 section 4.2): the request's `htu`, the claims,
//! and the signature, built with as little work per request as the
//! signature leaves room for (the header is encoded once per key).

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::write::EncoderStringWriter;
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
pub(crate) struct Target {
    /// Boxed, not a `String`: a request's response future carries it, and a
    /// smaller future is moved faster on every request.
    htu: Box<str>,
}

impl Target {
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
        Ok(Target {
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
    /// given.
    pub(crate) fn signing_input(
        &self,
        htm: &str,
        htu: &str,
        ath: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, TokenError> {
        let mut jti = [0u8; 16];
        getrandom::getrandom(&mut jti).map_err(|_| {
            TokenError::new(TokenErrorKind::Signing)
                .with_message("no random bytes for the DPoP proof's jti")
        })?;
        let mut jti_text = [0u8; 22];
        let jti_len = URL_SAFE_NO_PAD
            .encode_slice(jti, &mut jti_text)
            .expect("16 bytes are 22 base64 characters");
        let iat = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let header = &self.inner.header;
        // Room for the signature too: at most 1024 bytes (RSA 8192), as
        // base64url.
        let claims_len = 80 + htm.len() + htu.len() + ath.map_or(0, |a| a.len() + 8);
        let claims_len = claims_len + nonce.map_or(0, |n| n.len() + 10);
        let signature_len = match self.algorithm() {
            crate::Algorithm::Es256 | crate::Algorithm::EdDsa => 86,
            _ => 1366,
        };
        let mut input =
            String::with_capacity(header.len() + claims_len * 4 / 3 + 2 + signature_len);
        input.push_str(header);
        let mut claims = EncoderStringWriter::from_consumer(&mut input, &URL_SAFE_NO_PAD);
        // Writing to a String cannot fail; the strings are escaped by
        // serde_json.
        let _ = claims.write_all(b"{\"jti\":\"");
        let _ = claims.write_all(&jti_text[..jti_len]);
        let _ = claims.write_all(b"\",\"htm\":");
        let _ = serde_json::to_writer(&mut claims, htm);
        let _ = claims.write_all(b",\"htu\":");
        let _ = serde_json::to_writer(&mut claims, htu);
        let _ = write!(claims, ",\"iat\":{iat}");
        if let Some(ath) = ath {
            let _ = claims.write_all(b",\"ath\":");
            let _ = serde_json::to_writer(&mut claims, ath);
        }
        if let Some(nonce) = nonce {
            let _ = claims.write_all(b",\"nonce\":");
            let _ = serde_json::to_writer(&mut claims, nonce);
        }
        let _ = claims.write_all(b"}");
        claims.into_inner();
        Ok(input)
    }

    /// Appends `.signature` to `input`, signed here; `None` for a custom
    /// signer ([`finish`](Self::finish)).
    pub(crate) fn finish_here(&self, input: &mut String) -> Option<Result<(), TokenError>> {
        // base64url of at most 1024 bytes, on the stack.
        let mut encoded = [0u8; 1368];
        let signed = self.inner.key.sign_here_into(input.as_bytes(), |s| {
            URL_SAFE_NO_PAD
                .encode_slice(s, &mut encoded)
                .expect("a signature of at most 1024 bytes")
        })?;
        Some(match signed {
            Ok(len) => {
                input.push('.');
                input.push_str(std::str::from_utf8(&encoded[..len]).expect("base64url is ASCII"));
                Ok(())
            }
            Err(e) => Err(signing_failed(&*e)),
        })
    }

    /// Signs `input` with whatever signer the key has, and makes the header
    /// value.
    pub(crate) async fn finish(self, mut input: String) -> Result<HeaderValue, TokenError> {
        if let Some(done) = self.finish_here(&mut input) {
            return done.map(|()| header_value(input));
        }
        let signature = self
            .inner
            .key
            .sign(input.as_bytes())
            .await
            .map_err(|e| signing_failed(&*e))?;
        input.push('.');
        URL_SAFE_NO_PAD.encode_string(&signature, &mut input);
        Ok(header_value(input))
    }
}

fn signing_failed(e: &(dyn std::error::Error + Send + Sync)) -> TokenError {
    TokenError::new(TokenErrorKind::Signing)
        .with_message(format!("the DPoP proof could not be signed: {e}"))
}

/// A finished proof as a header value.
pub(crate) fn header_value(proof: String) -> HeaderValue {
    HeaderValue::from_maybe_shared(Bytes::from(proof)).expect("a proof is base64url and dots")
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
        let t = Target::of(&uri.parse().unwrap()).unwrap();
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
    fn a_relative_uri_fails_the_request() {
        let e = Target::of(&"/pkg.Service/Call".parse().unwrap()).unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidRequest);
        assert!(e.to_string().contains("absolute"), "{e}");
    }
}
