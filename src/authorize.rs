//! Putting a token on a request, and naming what was sent: the one place a
//! request gets its credential, whichever path it took to the token.

use std::sync::Arc;

use http::{HeaderName, Request};

use crate::cache::{CachedToken, TokenCache};

/// Where a token goes on a request.
#[derive(Clone, Debug)]
pub(crate) struct Placement {
    /// The header that carries the token.
    pub(crate) header_name: HeaderName,
    /// The scheme before the token (`Bearer`); empty for the bare token.
    pub(crate) auth_scheme: String,
    /// Leave a request's own header of that name in place.
    pub(crate) keep_existing: bool,
}

impl Placement {
    /// Whether `req` brought its own credential, to be left alone.
    #[inline]
    pub(crate) fn keeps<B>(&self, req: &Request<B>) -> bool {
        self.keep_existing && req.headers().contains_key(&self.header_name)
    }
}

/// One service instance's link to its cache, which the response future of
/// each request it sends takes a reference to. Each instance has a link of
/// its own (a clone makes a new one), so that this per-request reference is
/// counted on memory that no other thread touches: a count shared by every
/// instance, fought over by threads, would cost more than the rest of the
/// hot path together (see BENCHMARKS.md).
#[derive(Debug)]
pub(crate) struct Link(pub(crate) Arc<TokenCache>);

/// A token sent with a request: if the API refuses it, the cache drops it
/// (if it is still the current one) and fetches another.
#[derive(Debug)]
pub(crate) struct Sent {
    link: Arc<Link>,
    generation: u64,
}

impl Sent {
    /// The API refused the token (HTTP 401, gRPC `UNAUTHENTICATED`).
    pub(crate) fn refused(&self) {
        self.link.0.refused(self.generation);
    }
}

/// Puts `token` on `req`, replacing a header of that name, and names what
/// was sent.
#[inline]
pub(crate) fn authorize<B>(req: &mut Request<B>, link: &Arc<Link>, token: &CachedToken) -> Sent {
    req.headers_mut()
        .insert(link.0.placement().header_name.clone(), token.header.clone());
    Sent {
        link: Arc::clone(link),
        generation: token.generation,
    }
}
