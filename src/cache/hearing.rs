//! [`Hearing`]: whether this replica hears the token store's news of other
//! replicas' sign-outs. Accounts' tokens are presented from memory only while
//! it does; past the last word, each request reads them from the store.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::{CachedToken, TokenCache};

/// No word yet: a store that tells no news (or has not begun to) leaves
/// the tokens as they are.
const UNGUARDED: u64 = u64::MAX;

/// Until when the store's news reaches this replica, as its store last said.
#[derive(Debug)]
pub(crate) struct Hearing {
    base: Instant,
    /// Nanoseconds after `base`; [`UNGUARDED`] before the first word.
    until: AtomicU64,
}

impl Default for Hearing {
    fn default() -> Self {
        Hearing {
            base: Instant::now(),
            until: AtomicU64::new(UNGUARDED),
        }
    }
}

impl Hearing {
    /// The store hears the news until `until` at least: a sign-out waits
    /// for this replica's word until then.
    pub(crate) fn heard_until(&self, until: Instant) {
        let nanos = until.saturating_duration_since(self.base).as_nanos();
        let nanos = u64::try_from(nanos)
            .unwrap_or(UNGUARDED - 1)
            .min(UNGUARDED - 1);
        // Only forward, but out of the unguarded state at the first word.
        let _ = self
            .until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now == UNGUARDED || nanos > now).then_some(nanos)
            });
    }

    /// Until when tokens in memory may be presented; `None`: no guard.
    #[inline]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.until.load(Ordering::Acquire) {
            UNGUARDED => None,
            nanos => Some(self.base + Duration::from_nanos(nanos)),
        }
    }

    /// Whether tokens in memory may be presented at `now`.
    #[inline]
    pub(crate) fn hears(&self, now: Instant) -> bool {
        self.deadline().is_none_or(|until| now < until)
    }
}

impl TokenCache {
    /// Until when the view of an instance may present `token` without
    /// asking the cache: its renewal point, or for an account's token the
    /// end of the store's last word, if sooner.
    #[inline]
    pub(crate) fn presentable_until(&self, token: &CachedToken) -> Instant {
        match self.hearing.as_ref().and_then(|h| h.deadline()) {
            Some(until) => until.min(token.timings.refresh_at),
            None => token.timings.refresh_at,
        }
    }

    /// Whether a token in memory may be presented at `now`: always, but for
    /// an account's token while this replica hears the store's news.
    #[inline]
    pub(super) fn hears(&self, now: Instant) -> bool {
        self.hearing.as_ref().is_none_or(|h| h.hears(now))
    }

    /// Whether the cache's tokens are presented only while this replica
    /// hears the store's news.
    #[inline]
    pub(crate) fn guarded(&self) -> bool {
        self.hearing.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokens_are_presented_while_the_last_word_lasts() {
        let hearing = Hearing::default();
        assert!(hearing.hears(Instant::now()), "no word: no guard");
        let now = Instant::now();
        hearing.heard_until(now + Duration::from_secs(1));
        assert!(hearing.hears(now));
        // An older word does not move it back.
        hearing.heard_until(now);
        assert!(hearing.hears(now + Duration::from_millis(999)));
        assert!(!hearing.hears(now + Duration::from_secs(1)));
        hearing.heard_until(now + Duration::from_secs(3));
        assert!(hearing.hears(now + Duration::from_secs(2)));
    }
}
