//! DPoP nonces (RFC 9449 sections 8 and 9): the latest one each server
//! gave, per origin and bounded, and the `use_dpop_nonce` challenge.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::{HeaderMap, HeaderName, HeaderValue};

use crate::message::challenge::challenges;

/// The response header that carries a server's nonce.
pub(crate) const DPOP_NONCE: HeaderName = HeaderName::from_static("dpop-nonce");

/// How many origins' nonces are kept. Past it the one stored longest ago
/// goes.
pub(crate) const MAX_ORIGINS: usize = 64;

/// The longest nonce kept: a server's nonce is short (RFC 9449 section 8.1
/// suggests no size, servers use tens of bytes); a longer value is ignored.
const MAX_NONCE_LEN: usize = 1024;

/// The latest nonce per origin. Read on every proof (a load, no lock, no
/// count taken). Written when a server sends a new one, by copying the
/// small map.
#[derive(Default)]
pub(crate) struct NonceBook {
    nonces: ArcSwap<HashMap<Box<str>, Entry>>,
    clock: AtomicU64,
}

#[derive(Clone)]
struct Entry {
    nonce: Arc<str>,
    /// When it was stored, on the book's own counter.
    stored: u64,
}

impl NonceBook {
    /// Calls `f` with `origin`'s latest nonce, if any.
    pub(crate) fn with<R>(&self, origin: &str, f: impl FnOnce(Option<&str>) -> R) -> R {
        let nonces = self.nonces.load();
        f(nonces.get(origin).map(|e| &*e.nonce))
    }

    /// Keeps `value`, a `DPoP-Nonce` header, as `origin`'s latest nonce if
    /// it is one and differs from the one kept.
    pub(crate) fn remember(&self, origin: &str, value: &HeaderValue) {
        // NQCHAR (RFC 9449 section 8.1): visible ASCII but `"` and `\`.
        let nonce = value.as_bytes();
        if nonce.is_empty()
            || nonce.len() > MAX_NONCE_LEN
            || !nonce
                .iter()
                .all(|b| b.is_ascii_graphic() && *b != b'"' && *b != b'\\')
        {
            tracing::debug!(origin, "ignoring a DPoP-Nonce that is not a nonce");
            return;
        }
        let nonce = std::str::from_utf8(nonce).expect("ASCII");
        if self.with(origin, |kept| kept == Some(nonce)) {
            return;
        }
        let stored = self.clock.fetch_add(1, Ordering::Relaxed);
        let entry = Entry {
            nonce: Arc::from(nonce),
            stored,
        };
        self.nonces.rcu(|nonces| {
            let mut nonces = HashMap::clone(nonces);
            if nonces.len() >= MAX_ORIGINS && !nonces.contains_key(origin) {
                let oldest = nonces
                    .iter()
                    .min_by_key(|(_, e)| e.stored)
                    .map(|(o, _)| o.clone());
                if let Some(oldest) = oldest {
                    nonces.remove(&oldest);
                }
            }
            nonces.insert(Box::from(origin), entry.clone());
            nonces
        });
        tracing::debug!(origin, "the server gave a new DPoP nonce");
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.nonces.load().len()
    }
}

/// The `DPoP-Nonce` header in `headers`, if any.
#[inline]
pub(crate) fn nonce_in(headers: &HeaderMap) -> Option<&HeaderValue> {
    headers.get(DPOP_NONCE)
}

/// The `error` of a `WWW-Authenticate: DPoP` challenge, if `headers` have
/// one (RFC 9449 section 7.1), read by the challenge grammar of RFC 9110
/// section 11 ([`challenges`]).
pub(crate) fn dpop_error(headers: &HeaderMap) -> Option<String> {
    challenges(headers)
        .iter()
        .filter(|c| c.is("DPoP"))
        .find_map(|c| c.param("error").map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[test]
    fn reads_the_dpop_challenge_among_others() {
        let error = |v: &str| dpop_error(&headers(&[("www-authenticate", v)]));
        assert_eq!(
            error(r#"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#).as_deref(),
            Some("use_dpop_nonce")
        );
        assert_eq!(
            error(r#"Bearer realm="api", error="invalid_token", DPoP algs="ES256 PS256", error=invalid_dpop_proof"#).as_deref(),
            Some("invalid_dpop_proof")
        );
        assert_eq!(error(r#"Bearer error="use_dpop_nonce""#), None);
        assert_eq!(
            error(r#"Basic abc==, DPoP error = "a\"b""#).as_deref(),
            Some("a\"b")
        );
        assert_eq!(error(r#"dpop"#), None);
        assert_eq!(error(r#"DPoP error="""#).as_deref(), Some(""));
        // An unterminated quoted string is malformed: no error read from it.
        assert_eq!(error(r#"DPoP error="use_dpop_nonce"#), None);
        let two = headers(&[
            ("www-authenticate", r#"Bearer realm="api""#),
            ("www-authenticate", r#"DPoP error="use_dpop_nonce""#),
        ]);
        assert_eq!(dpop_error(&two).as_deref(), Some("use_dpop_nonce"));
    }

    #[test]
    fn keeps_the_latest_nonce_per_origin_and_stays_bounded() {
        let book = NonceBook::default();
        let nonce = |o: &str| book.with(o, |n| n.map(str::to_owned));
        let remember = |o: &str, h: HeaderMap| {
            if let Some(v) = nonce_in(&h) {
                book.remember(o, v);
            }
        };
        remember("https://a", headers(&[("dpop-nonce", "n1")]));
        remember("https://b", headers(&[("dpop-nonce", "m1")]));
        remember("https://a", headers(&[("dpop-nonce", "n2")]));
        assert_eq!(nonce("https://a").as_deref(), Some("n2"));
        assert_eq!(nonce("https://b").as_deref(), Some("m1"));
        remember("https://a", headers(&[("dpop-nonce", "bad\"nonce")]));
        remember("https://a", headers(&[]));
        assert_eq!(nonce("https://a").as_deref(), Some("n2"));
        for i in 0..200 {
            remember(&format!("https://h{i}"), headers(&[("dpop-nonce", "x")]));
        }
        assert_eq!(book.len(), MAX_ORIGINS);
        assert_eq!(nonce("https://h199").as_deref(), Some("x"));
        assert_eq!(nonce("https://a"), None);
    }
}
