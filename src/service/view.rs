//! [`View`]: one service instance's own view of its cache's current token. It
//! holds its own copy of the token's header value. It is what the hot path
//! reads, all in memory that no other thread writes.
//!
//! The view follows the cache by its
//! [version](crate::cache::TokenCache::version): one load and a comparison per
//! request. A new view is made when the token was replaced or dropped. A
//! request may use the view's header at once only before the token's renewal
//! point. That is the exact check against the clock that every request makes.
//! Past it, or without a bearer token, the request takes the cache's own way,
//! in [`TokenCache::check`](crate::cache::TokenCache::check).
//!
//! Why a copy? Every request clones the header value it puts on the request,
//! which counts a reference on the value's bytes. With one value for all,
//! threads that send at once fight over that count's cache line. With a copy of
//! its own, each instance counts on its own memory, and so does each thread,
//! each with its own clone of the service. The copy is made at the second
//! request that finds a new token. So an instance made for one request, as in
//! `svc.clone().oneshot(req)`, makes none.

use std::sync::Arc;

use http::{HeaderValue, Method};
use tokio::time::Instant;

use super::authorize::SentToken;
use crate::cache::{CacheRef, CachedToken};

/// The version of a view that follows no token yet, or whose own copy of
/// the header value is due: a version no cache reaches, so that the next
/// request renews the view.
const DUE: u64 = u64::MAX;

/// One service instance's view of its cache's current token.
pub(super) struct View {
    /// The cache's version this view was made at; [`DUE`] for none yet, or
    /// while the view's own copy of the header value is due.
    version: u64,
    /// Before this instant a plain request (see [`View::new`]) is sent
    /// with `header` as it is: the token's renewal point, or the past for
    /// a layer whose requests are never plain.
    plain_until: Instant,
    /// Before this instant any request that takes the layer's default
    /// token is sent with `header` as it is: the token's renewal point; for
    /// no token, or a DPoP-bound one, the past.
    fast_until: Instant,
    /// The token's header value: shared with the cache at first, then this
    /// instance's own copy.
    header: HeaderValue,
    /// Whether the next renewal of the same token makes the view's own
    /// copy of its header value.
    copy_due: bool,
    /// Whether the layer's requests may be plain.
    plain: bool,
    /// Whether the instance has a reference of its own (made with the view's
    /// own copy of the header value).
    own_ref: bool,
    /// The generation of the token (0 for none).
    generation: u64,
    /// The token, for what the hot path leaves to the cache: its renewal,
    /// its DPoP proof, its expiry.
    token: Option<Arc<CachedToken>>,
}

impl View {
    /// A view that follows no token yet: the first request makes one.
    /// `plain`: the layer puts its token in `Authorization`, replaces a
    /// request's own, and has no token slot a request could select but by
    /// its extensions, so that a request without extensions takes the
    /// default token as it is ([`plain_bearer`](Self::plain_bearer)).
    pub(super) fn new(epoch: Instant, plain: bool) -> Self {
        View {
            version: DUE,
            plain_until: epoch,
            fast_until: epoch,
            header: HeaderValue::from_static(""),
            copy_due: false,
            plain,
            own_ref: false,
            generation: 0,
            token: None,
        }
    }

    /// The header to send now with a plain request, if the view says its
    /// token may be sent as it is at `now`. Otherwise `None`: the request takes
    /// the service's other ways.
    #[inline]
    pub(super) fn plain_bearer(
        &mut self,
        cache_ref: &mut Arc<CacheRef>,
        now: Instant,
    ) -> Option<&HeaderValue> {
        self.follow(cache_ref, now);
        (now < self.plain_until).then_some(&self.header)
    }

    /// The header to send now with a request that takes the default token,
    /// if the view says its token may be sent as it is at `now`. Otherwise
    /// `None`: take the cache's way with [`token`](Self::token).
    #[inline]
    pub(super) fn bearer(
        &mut self,
        cache_ref: &mut Arc<CacheRef>,
        now: Instant,
    ) -> Option<&HeaderValue> {
        self.follow(cache_ref, now);
        (now < self.fast_until).then_some(&self.header)
    }

    /// The view made current: renewed if the cache's version moved (or
    /// the view's own copy is due).
    #[inline(always)]
    fn follow(&mut self, cache_ref: &mut Arc<CacheRef>, now: Instant) {
        if cache_ref.cache.version() != self.version {
            self.renew(cache_ref, now);
        }
    }

    /// What a request of `method` sent with the view's header carries to
    /// its answer.
    #[inline]
    pub(super) fn sent(&self, cache_ref: &Arc<CacheRef>, method: &Method) -> SentToken {
        SentToken::new(Arc::clone(cache_ref), self.generation, method)
    }

    /// The token of the view (after [`bearer`](Self::bearer) made it current).
    #[inline]
    pub(super) fn token(&self) -> Option<&CachedToken> {
        self.token.as_deref()
    }

    /// The generation of the view's token (0 for none): what a request
    /// that carries [`bearer`](Self::bearer)'s header was sent with.
    #[inline]
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// An account's token past the store's last word the view knew: the
    /// view's own deadline moved to the store's latest word (the cache
    /// checks it again before the token goes), so that the next requests
    /// take the hot path again while the replica hears the news.
    #[cold]
    pub(super) fn heard_again(&mut self, cache: &crate::cache::TokenCache) {
        if let Some(token) = self.token.as_deref().filter(|t| !t.needs_proof()) {
            self.fast_until = cache.presentable_until(token);
            if self.plain {
                self.plain_until = self.fast_until;
            }
        }
    }

    /// A new view of the cache's current token, at `now`. For the token
    /// the view has, its own copy of the header value, when due, and the
    /// instance's own `cache_ref` with the first such copy.
    #[cold]
    #[inline(never)]
    fn renew(&mut self, cache_ref: &mut Arc<CacheRef>, now: Instant) {
        let cache = &cache_ref.cache;
        // The version first: the token loaded after it is at least as new.
        let version = cache.version();
        let token = cache.current().load_full();
        let same = match (&token, &self.token) {
            (Some(new), Some(old)) => Arc::ptr_eq(new, old),
            _ => false,
        };
        if same && self.copy_due {
            // The second request that finds this token: the copy.
            self.header = own_copy(&self.header);
            self.copy_due = false;
            self.version = version;
            if !self.own_ref {
                *cache_ref = Arc::new(CacheRef::new(Arc::clone(&cache_ref.cache)));
                self.own_ref = true;
            }
            return;
        }
        match &token {
            Some(token) if !token.needs_proof() => {
                self.header = token.header.clone();
                self.copy_due = true;
                self.fast_until = cache.presentable_until(token);
            }
            _ => {
                self.header = HeaderValue::from_static("");
                self.copy_due = false;
                // Now, past for every later request: each takes the
                // cache's way.
                self.fast_until = now;
            }
        }
        self.plain_until = if self.plain { self.fast_until } else { now };
        self.generation = token.as_ref().map_or(0, |t| t.generation);
        self.token = token;
        self.version = if self.copy_due { DUE } else { version };
    }
}

/// A copy of `value` in bytes of its own, marked sensitive as the cache's
/// header values are.
fn own_copy(value: &HeaderValue) -> HeaderValue {
    let mut copy = HeaderValue::from_maybe_shared(crate::cache::shared_bytes(value.as_bytes()))
        .unwrap_or_else(|_| value.clone());
    copy.set_sensitive(value.is_sensitive());
    copy
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use http::{Request, Response};
    use tower::{Layer, Service, ServiceExt};

    use crate::support::boxed::BoxFuture;
    use crate::{AccessToken, OAuthLayer, TokenError, TokenSource};

    /// Hands out `t1`, `t2`, ... for an hour each.
    #[derive(Default)]
    struct Numbered(AtomicUsize);

    impl TokenSource for Numbered {
        fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                Ok(AccessToken::new(format!("t{n}")).with_expires_in(Duration::from_secs(3600)))
            })
        }
    }

    #[tokio::test]
    async fn the_view_copies_the_header_at_the_second_request_and_follows_a_new_token() {
        let layer = OAuthLayer::builder()
            .token_source(Numbered::default())
            .build()
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let mut svc = layer.layer(tower::service_fn(move |req: Request<()>| {
            let header = req.headers()[http::header::AUTHORIZATION].clone();
            record.lock().unwrap().push(header);
            async { Ok::<_, std::convert::Infallible>(Response::new(())) }
        }));
        let mut send = async || {
            svc.ready().await.unwrap();
            svc.call(Request::new(())).await.unwrap();
        };
        layer.token().await.unwrap();
        send().await;
        let shared = layer.default_cache().current().load_full().unwrap();
        // The first request sends the cache's own value.
        assert_eq!(
            seen.lock().unwrap()[0].as_bytes().as_ptr(),
            shared.header.as_bytes().as_ptr()
        );
        send().await;
        send().await;
        {
            let seen = seen.lock().unwrap();
            // From the second on, the instance's own copy: equal, sensitive,
            // elsewhere in memory.
            for header in &seen[1..] {
                assert_eq!(header, &shared.header);
                assert!(header.is_sensitive());
                assert_ne!(
                    header.as_bytes().as_ptr(),
                    shared.header.as_bytes().as_ptr()
                );
            }
            assert_eq!(seen[1].as_bytes().as_ptr(), seen[2].as_bytes().as_ptr());
        }
        // A dropped token: the view follows the cache to the next one.
        assert!(layer.force_renewal());
        layer.token().await.unwrap();
        send().await;
        assert_eq!(seen.lock().unwrap()[3], "Bearer t2");
    }
}
