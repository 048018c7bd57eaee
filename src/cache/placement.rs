//! [`Placement`]: how a token is presented on a request (header, scheme,
//! DPoP), which the cache needs to make each token's header value once.

use http::{HeaderName, HeaderValue};

use crate::error::{TokenError, TokenErrorKind};
use crate::token::AccessToken;

/// Where a token goes on a request.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    /// The header that carries the token.
    pub(crate) header_name: HeaderName,
    /// The scheme before the token (`Bearer`). Empty for the bare token.
    pub(crate) auth_scheme: String,
    /// Leave a request's own header of that name in place.
    pub(crate) keep_existing: bool,
    /// Sign a DPoP proof for each request that carries a bound token.
    pub(crate) dpop: Option<std::sync::Arc<crate::dpop::Dpop>>,
}

impl Placement {
    /// Whether `req` brought its own credential, to be left alone.
    #[inline]
    pub(crate) fn keeps(&self, req: &impl crate::message::Outgoing) -> bool {
        self.keep_existing && req.headers().contains_key(&self.header_name)
    }

    /// Whether a request is served as the usual one: the token in
    /// `Authorization`, replacing a header the request has.
    pub(crate) fn plain(&self) -> bool {
        !self.keep_existing && self.header_name == http::header::AUTHORIZATION
    }

    /// Puts `value` on `headers` in the token's header, replacing one of
    /// that name. (`Authorization`, the usual one, as the constant: no
    /// clone of the configured name.)
    #[inline]
    pub(crate) fn put(&self, headers: &mut http::HeaderMap, value: HeaderValue) {
        if self.header_name == http::header::AUTHORIZATION {
            headers.insert(http::header::AUTHORIZATION, value);
        } else {
            headers.insert(self.header_name.clone(), value);
        }
    }

    /// The header value that presents `token` (`Bearer <token>`, as
    /// configured, or `DPoP <token>` for a token bound to the layer's key,
    /// with the `ath` its proofs carry), marked sensitive. An error for a
    /// token that cannot be sent in a header, or a bearer token a strict
    /// DPoP layer must refuse.
    pub(crate) fn header_for(
        &self,
        token: &AccessToken,
    ) -> Result<(HeaderValue, Option<Box<str>>), TokenError> {
        let value = token.expose_token();
        let invalid = |m: &str| TokenError::new(TokenErrorKind::InvalidResponse).with_message(m);
        if value.bytes().any(|b| !b.is_ascii_graphic()) {
            return Err(invalid(
                "`access_token` holds characters that cannot be sent in a header \
                 (only visible ASCII is allowed)",
            ));
        }
        let ath = match &self.dpop {
            Some(dpop) if dpop.binds(token.token_type())? => Some(crate::dpop::ath(value)),
            _ => None,
        };
        let scheme = match ath {
            Some(_) => "DPoP",
            None => &self.auth_scheme,
        };
        let text = if scheme.is_empty() {
            value.to_owned()
        } else {
            format!("{scheme} {value}")
        };
        let mut header = HeaderValue::from_maybe_shared(shared_bytes(text.as_bytes()))
            .map_err(|_| invalid("`access_token` cannot be sent in a header"))?;
        header.set_sensitive(true);
        Ok((header, ath))
    }
}

/// A copy of `text` as bytes whose clones share one reference count from
/// the start: `Bytes` from a vector with room to spare takes that form,
/// where a full one starts "promotable" and pays a check on every clone of
/// the header (one per request) for it.
pub(crate) fn shared_bytes(text: &[u8]) -> bytes::Bytes {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text);
    bytes::Bytes::from(bytes)
}
