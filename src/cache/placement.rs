//! [`Placement`]: how a token is presented on a request (header, scheme,
//! DPoP), which the cache needs to make each token's header value once.

use http::HeaderName;

/// Where a token goes on a request.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    /// The header that carries the token.
    pub(crate) header_name: HeaderName,
    /// The scheme before the token (`Bearer`); empty for the bare token.
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
}
