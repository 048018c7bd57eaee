//! What a cache hands out and who holds it: [`CachedToken`], a token ready
//! to present with its timings, and [`CacheRef`], one service instance's
//! reference to its cache.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use http::HeaderValue;

use super::TokenCache;
use crate::token::AccessToken;

/// One service instance's reference to its cache, which the response future of
/// each request it sends takes a reference to. Each instance has a reference of
/// its own (a clone makes a new one), so that this per-request reference is
/// counted on memory that no other thread touches: a count shared by every
/// instance, fought over by threads, would cost more than the rest of the
/// hot path together (see BENCHMARKS.md). Padded to over 128 bytes (two
/// cache lines, as adjacent-line prefetchers pair them): references of instances
/// made one after another, on one thread, for two others, would otherwise
/// share a cache line, and their counts would fight as if they were one.
/// (Padded rather than aligned: an aligned allocation takes the allocator's
/// slower path, once per service instance.)
#[derive(Debug)]
pub(crate) struct CacheRef {
    pub(crate) cache: Arc<TokenCache>,
    /// Never read: it only keeps other references off this one's cache lines.
    _padding: [u64; 14],
}

impl CacheRef {
    /// A reference of its own to `cache`.
    pub(crate) fn new(cache: Arc<TokenCache>) -> Self {
        CacheRef {
            cache,
            _padding: [0; 14],
        }
    }
}

/// A token ready to present, with its timings.
pub(crate) struct CachedToken {
    /// `Bearer <token>` (or as configured), marked sensitive.
    pub(crate) header: HeaderValue,
    pub(crate) timings: crate::policy::Timings,
    /// Identifies this token within its cache (tokens are compared by it).
    pub(crate) generation: u64,
    /// The token and what the endpoint said about it.
    pub(crate) token: AccessToken,
    /// `base64url(SHA-256(token))` for the proofs of a DPoP-bound token.
    /// None for a bearer token.
    pub(crate) ath: Option<Box<str>>,
    /// When a renewal may next be started, in nanoseconds since the cache's
    /// epoch: the claim that keeps concurrent requests past the renewal
    /// point from all taking the lock.
    pub(super) renew_after: AtomicU64,
}

impl CachedToken {
    /// Whether each request needs a DPoP proof with this token.
    #[inline]
    pub(crate) fn needs_proof(&self) -> bool {
        self.ath.is_some()
    }
}

impl fmt::Debug for CachedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedToken")
            .field("generation", &self.generation)
            .field("timings", &self.timings)
            .finish_non_exhaustive()
    }
}
