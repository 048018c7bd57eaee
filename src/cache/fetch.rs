//! [`Fetcher`]: one token request as the fetch task ([`FetchTask`]) makes it: from the
//! token source, or through the token store, bounded by the fetch timeout,
//! and with a panic in either turned into an error rather than a task that
//! dies without a word.

use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use tokio::time::Instant;

use super::{FetchOutcome, Flight, Reason, TokenCache};
use crate::endpoint::Chain;
use crate::error::{TokenError, TokenErrorKind};
use crate::policy::Policy;
use crate::source::{ask_counted, caught, TokenSource};
use crate::store::{refresh, FetchContext, KeptChain, ServingUntil, StoreUse};
use crate::token::AccessToken;

/// What the fetch task needs, and nothing of the cache: so that a fetch
/// under way never keeps a dropped layer alive.
pub(crate) struct Fetcher {
    /// Where tokens come from. Replaced when a step-up widens the scope.
    pub(crate) supply: ArcSwap<TokenSupply>,
    pub(crate) policy: Policy,
    /// What the store did for this layer's fetches.
    pub(crate) fleet: crate::store::FleetCounters,
    /// A token a refresh brought after its fetch gave up, with where the
    /// chain stood then and the supply it was asked of (see `fetch_to_end`).
    pub(crate) late: std::sync::Mutex<Option<Late>>,
    /// For an account's tokens: whether the replica hears the store's news.
    pub(crate) hearing: Option<Arc<super::Hearing>>,
}

/// A token a refresh brought after its fetch gave up: where the chain
/// stood, and the supply (its scope) it was asked of.
pub(crate) struct Late {
    position: (String, u64),
    supply: Weak<TokenSupply>,
    fetched: Fetched,
}

/// A token source, and the store it is shared through.
pub(crate) struct TokenSupply {
    pub(crate) source: Arc<dyn TokenSource>,
    /// See [`StoreUse`].
    pub(crate) store: Option<StoreUse>,
    /// The chain of refresh tokens, when the source refreshes one.
    pub(crate) chain: Option<Arc<Chain>>,
}

/// A token just fetched, and when it runs out.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) token: AccessToken,
    pub(crate) expires_at: Instant,
}

impl Fetcher {
    /// A new token: from the store when there is one (telling it first that
    /// `refused` was refused, and letting it ask until when the token in
    /// hand serves), else from the source.
    ///
    /// A chain of refresh tokens takes its turn first, here (the layer's
    /// caches refresh one at a time): a fetch that gives up while it waits
    /// for the turn sends nothing. With the turn, the refresh runs on a task
    /// of its own, so that a refresh the server answered is stored to the
    /// end even if the layer, or the fetch, is dropped meanwhile (a rotated
    /// refresh token is never lost to a cancellation). That task ends within
    /// `refresh_answer_timeout` and the store's bounds. A token it brings
    /// after its fetch gave up is kept for the next turn, while the chain
    /// stands where that refresh left it.
    pub(crate) async fn fetch_to_end(
        self: &Arc<Self>,
        refused: Option<AccessToken>,
        serving_until: impl Fn() -> Option<Instant> + Send + Sync + 'static,
    ) -> Result<Fetched, TokenError> {
        let supply = self.supply.load_full();
        let Some(chain) = supply.chain.clone() else {
            return self.fetch_by(&supply, refused, &serving_until).await;
        };
        let turn = chain.turn().await;
        // (Not when this fetch begins something: a sign-out, a login.)
        if !chain.needs_login() {
            if let Some(fetched) = self.take_late(&chain, &supply) {
                return Ok(fetched);
            }
        }
        let fetcher = Arc::clone(self);
        let asked = Arc::downgrade(&supply);
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let fetched = fetcher.fetch_by(&supply, refused, &serving_until).await;
            // A new refresh token is announced once stored (a store's write
            // may have failed, or been fenced off).
            if supply.store.is_none() || !chain.unsaved() {
                chain.announce();
            }
            if let Err(Ok(late)) = tx.send(fetched) {
                // Nobody waits any more: kept for the next turn.
                fetcher.keep_late(&chain, asked, late);
            }
            drop(turn);
        });
        rx.await.unwrap_or_else(|_| {
            Err(TokenError::new(TokenErrorKind::Panic)
                .with_message("the refresh task ended without an answer"))
        })
    }

    /// Keeps `fetched`, which a refresh of `supply` brought after its fetch
    /// gave up, for the next turn of `chain` (without a store: a store
    /// keeps it).
    fn keep_late(&self, chain: &Chain, supply: Weak<TokenSupply>, fetched: Fetched) {
        if self.supply.load().store.is_none() {
            *self.late() = Some(Late {
                position: chain.position(),
                supply,
                fetched,
            });
        }
    }

    /// The token the last turn's refresh brought after its fetch gave up,
    /// if the chain still stands where that refresh left it (no rotation,
    /// login or sign-out since) and it was asked of `supply` (no step-up
    /// since).
    fn take_late(&self, chain: &Chain, supply: &Arc<TokenSupply>) -> Option<Fetched> {
        let late = self.late().take()?;
        (late.position == chain.position()
            && std::ptr::eq(late.supply.as_ptr(), Arc::as_ptr(supply))
            && late.fetched.expires_at > Instant::now())
        .then_some(late.fetched)
    }

    fn late(&self) -> std::sync::MutexGuard<'_, Option<Late>> {
        self.late
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn fetch_by(
        &self,
        supply: &TokenSupply,
        refused: Option<AccessToken>,
        serving_until: &ServingUntil<'_>,
    ) -> Result<Fetched, TokenError> {
        let Some(store_use) = &supply.store else {
            // Reckoned from the moment before the request was sent.
            let sent_at = Instant::now();
            // A refresh's answer may carry the only copy of a rotated
            // refresh token: it is awaited past the fetch timeout.
            let bound = match &supply.chain {
                Some(_) => self.policy.refresh_answer_bound(),
                None => self.policy.fetch_timeout,
            };
            let ask = || ask_counted(&*supply.source, bound, &self.fleet.token_requests);
            let token = match &supply.chain {
                Some(chain) => refresh(chain, None, ask).await?,
                None => ask().await?,
            };
            // A login's token counts from its own request.
            let expires_at = token.sent_at.unwrap_or(sent_at).max(sent_at) + token.lifetime();
            return Ok(Fetched { token, expires_at });
        };
        caught("token store", async {
            if let Some(refused) = &refused {
                let identity = store_use.identity.key();
                store_use.store.refused(identity, refused).await;
            }
            let ctx = self.context(supply, store_use, serving_until);
            let shared = store_use.store.get_or_fetch(&ctx).await?;
            let lifetime = shared.token.lifetime();
            let expires_at = self
                .policy
                .expires_at(lifetime, Instant::now(), shared.usable_for);
            Ok(Fetched {
                token: shared.token,
                expires_at,
            })
        })
        .await
    }
}

impl Fetcher {
    /// What the store gets for a fetch (or a read) of `supply`'s tokens
    /// through `store_use`.
    fn context<'a>(
        &'a self,
        supply: &'a TokenSupply,
        store_use: &'a StoreUse,
        serving_until: &'a ServingUntil<'a>,
    ) -> FetchContext<'a> {
        FetchContext {
            identity: &store_use.identity,
            source: &*supply.source,
            policy: &self.policy,
            fleet: &self.fleet,
            sealing_key: store_use.sealing_key.as_ref(),
            serving_until,
            chain: supply
                .chain
                .as_deref()
                .zip(store_use.chain_identity.as_ref())
                .map(|(chain, identity)| KeptChain { chain, identity }),
            // Guarded, and the last word still runs.
            hears_news: self
                .hearing
                .as_ref()
                .is_some_and(|h| h.deadline().is_some_and(|until| Instant::now() < until)),
        }
    }

    /// The chain of refresh tokens, read from the store into memory: no
    /// lock, no token request (a login's status). Within `bound`.
    pub(crate) async fn read_stored_chain(&self, bound: std::time::Duration) -> Result<(), String> {
        let supply = self.supply.load_full();
        let (Some(store_use), Some(_)) = (&supply.store, &supply.chain) else {
            return Ok(());
        };
        let no_token = || None;
        let ctx = self.context(&supply, store_use, &no_token);
        match tokio::time::timeout(bound, store_use.store.read_chain(&ctx)).await {
            Ok(read) => read,
            Err(_) => Err(format!("the token store did not answer within {bound:?}")),
        }
    }
}

/// One fetch, on its own task.
pub(super) struct FetchTask {
    pub(super) cache: Weak<TokenCache>,
    pub(super) flight: Arc<Flight>,
    pub(super) reason: Reason,
}

impl FetchTask {
    pub(super) async fn run(self, fetcher: Arc<Fetcher>, refused: Option<AccessToken>) {
        let sent_at = Instant::now();
        // Until when the token in hand serves, asked anew each time: a
        // token refused meanwhile serves no more.
        let cache = Weak::clone(&self.cache);
        let serving_until = move || {
            let token = cache.upgrade()?.serving(Instant::now())?;
            Some(token.timings.usable_until)
        };
        // Bounded here, not only by each step: a store or a source that
        // never answers still finishes the flight, with no other request
        // coming to find it overdue. A refresh already sent goes on to its
        // answer on its own task (see `fetch_to_end`).
        let bound = fetcher.policy.fetch_bound();
        let fetch = fetcher.fetch_to_end(refused, serving_until);
        // (On a runtime without timers the bound panics as it is made:
        // `caught` says why.)
        let outcome = caught("token fetch", async {
            match tokio::time::timeout(bound, fetch).await {
                Ok(outcome) => outcome,
                Err(_) => Err(past_bound(bound)),
            }
        })
        .await;
        if let Some(cache) = self.cache.upgrade() {
            cache.finish(&self.flight, outcome, self.reason, sent_at);
        }
    }
}

/// The error of a fetch that had no outcome within its `bound`.
fn past_bound(bound: std::time::Duration) -> TokenError {
    TokenError::new(TokenErrorKind::Timeout).with_message(format!(
        "no token within {bound:?}, the fetch's bound (four fetch timeouts and 4 s, for the \
         token store's waits, the token request and the store's write): the token store or \
         the token endpoint did not answer in time (a refresh token's request, once sent, is \
         awaited on, and its answer kept)"
    ))
}

impl Drop for FetchTask {
    /// Finishes the flight as cut off if the task ends without an outcome (its
    /// runtime shut down, its layer was dropped), so that nobody waits for
    /// it. The cache forgets a finished flight the next time it looks
    /// ([`Control::under_way`](super::control::Control::under_way)). The lock is not taken here: a task can be
    /// dropped inside `spawn`, which runs under it.
    fn drop(&mut self) {
        self.flight.finish(FetchOutcome::CutOff);
    }
}
