//! Token slots: a token of its own for each set of [`TokenParams`] a request
//! selects (by extension or by `params_for`), each with everything the
//! default token has; at most a set number, the least recently used evicted.
//!
//! A request's supply: [`Slots::by_params`] (its extension's parameters),
//! [`Slots::routed`] or [`Slots::chosen`] (the layer's choice), then
//! [`Slots::cache_ref_for`]: a map lookup without a lock, or under the lock a new
//! slot, evicting the least recently used; the slot's cache then serves it
//! as the default cache serves other requests.

pub(crate) mod accounts;
pub(crate) mod factory;
mod parked;
pub(crate) mod routes;

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use self::accounts::Accounts;
use self::factory::SlotFactory;
use self::routes::{Destination, Routes};
use crate::cache::CacheRef;
use crate::error::{TokenError, TokenErrorKind};
use crate::telemetry::stats::Stats;
use crate::token::params::{CarriedHash, TokenParams};

/// Chooses a request's token parameters from the request itself.
pub(crate) type ParamsFor = Arc<dyn Fn(&http::request::Parts) -> Option<TokenParams> + Send + Sync>;

type SlotMap = HashMap<TokenParams, Arc<Slot>, BuildHasherDefault<CarriedHash>>;

/// One set of parameters' token.
struct Slot {
    cache_ref: Arc<CacheRef>,
    /// The slots' tick when a request last used it.
    used: AtomicU64,
}

/// A layer's token slots.
pub(crate) struct Slots {
    /// How to make a slot's cache. None for a layer on a token source.
    factory: Option<Arc<SlotFactory>>,
    params_for: Option<ParamsFor>,
    /// The protected resources whose requests get their own slots.
    routes: Routes,
    max: usize,
    map: ArcSwap<SlotMap>,
    /// Held while a slot is made, so that each is made once.
    making: Mutex<()>,
    /// Counts the slots made: the clock of least-recently-used eviction.
    tick: AtomicU64,
    /// The evicted slots' counters, for the totals.
    retired: Mutex<Stats>,
    warned: AtomicBool,
    /// The accounts' slots, kept apart: many more, each account's together.
    pub(crate) accounts: Arc<Accounts>,
    /// The layer's own factory, which makes each account's.
    root: Option<Arc<SlotFactory>>,
}

impl fmt::Debug for Slots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slots")
            .field("slots", &self.map.load().len())
            .field("max", &self.max)
            .field("account_slots", &self.accounts.len())
            .field("params_for", &self.params_for.is_some())
            .finish()
    }
}

impl Slots {
    /// No slots: a layer of one token (from a token source of the user's
    /// own).
    pub(crate) fn none() -> Self {
        Slots::new(None, None, (0, 1), Routes::default())
    }

    /// Slots made by `factory`, chosen by `params_for`, at most `max` kept.
    pub(crate) fn new(
        factory: Option<Arc<SlotFactory>>,
        params_for: Option<ParamsFor>,
        (max, max_accounts): (usize, usize),
        routes: Routes,
    ) -> Self {
        let has_store = factory.as_ref().is_some_and(|f| f.store.is_some());
        let accounts = Accounts::new(max_accounts, has_store);
        Slots::with_accounts(factory, params_for, max, routes, accounts)
    }

    fn with_accounts(
        factory: Option<Arc<SlotFactory>>,
        params_for: Option<ParamsFor>,
        max: usize,
        routes: Routes,
        accounts: Arc<Accounts>,
    ) -> Self {
        Slots {
            accounts,
            root: factory.clone(),
            factory,
            params_for,
            routes,
            max,
            map: ArcSwap::default(),
            making: Mutex::new(()),
            tick: AtomicU64::new(0),
            retired: Mutex::new(Stats::default()),
            warned: AtomicBool::new(false),
        }
    }

    /// The slots of a layer bound to one account, whose factory is
    /// `account`: the same choices and bounds, and the same accounts; a
    /// request's parameters without an account select that account's tokens.
    pub(crate) fn bound(&self, account: Arc<SlotFactory>) -> Slots {
        Slots {
            root: self.root.clone(),
            ..Slots::with_accounts(
                Some(account),
                self.params_for.clone(),
                self.max,
                self.routes.clone(),
                Arc::clone(&self.accounts),
            )
        }
    }

    /// Whether the layer chooses a slot from a request's head or URL
    /// (`params_for`, `protected_resources`): then every request is asked.
    pub(crate) fn chooses(&self) -> bool {
        self.params_for.is_some() || !self.routes.is_empty()
    }

    /// The slot a request with `params` in its extensions selects: `None`
    /// for the default token (empty parameters), else its reference or why
    /// there is none.
    #[inline(never)]
    pub(crate) fn by_params(
        &self,
        params: &TokenParams,
    ) -> Option<Result<Arc<CacheRef>, TokenError>> {
        (!params.is_empty()).then(|| self.cache_ref_for(params))
    }

    /// The slot `params_for` chooses for a request with head `parts`, as
    /// [`by_params`](Self::by_params) says.
    #[inline]
    pub(crate) fn chosen(
        &self,
        parts: &http::request::Parts,
    ) -> Option<Result<Arc<CacheRef>, TokenError>> {
        let params = self.params_for.as_ref()?(parts)?;
        self.by_params(&params)
    }

    /// The slot of the protected resource at `destination` (asked for only when
    /// the layer has protected resources), if it lies under one.
    #[inline]
    pub(crate) fn routed<'p>(
        &self,
        destination: impl FnOnce() -> Option<Destination<'p>>,
    ) -> Option<Result<Arc<CacheRef>, TokenError>> {
        if self.routes.is_empty() {
            return None;
        }
        Some(self.cache_ref_for(self.routes.for_destination(&destination()?)?))
    }

    /// The reference to `params`' slot, made if need be.
    pub(crate) fn cache_ref_for(&self, params: &TokenParams) -> Result<Arc<CacheRef>, TokenError> {
        if params.get_account().is_some() {
            return self.accounts.cache_ref_for(params, self.root()?);
        }
        if let Some(slot) = self.map.load().get(params) {
            // Recency counts in slots made: a store only when one was made
            // since this slot was last used.
            let tick = self.tick.load(Ordering::Relaxed);
            if slot.used.load(Ordering::Relaxed) != tick {
                slot.used.store(tick, Ordering::Relaxed);
            }
            return Ok(Arc::clone(&slot.cache_ref));
        }
        self.make(params)
    }

    /// Makes `params`' slot (unless another request just did), evicting the
    /// least recently used one when all are taken.
    #[cold]
    fn make(&self, params: &TokenParams) -> Result<Arc<CacheRef>, TokenError> {
        let _making = self.making.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = self.map.load().get(params) {
            return Ok(Arc::clone(&slot.cache_ref));
        }
        let factory = self.factory.as_ref().ok_or_else(no_factory)?;
        let slot = Arc::new(Slot {
            cache_ref: Arc::new(CacheRef::new(factory.slot(params)?)),
            used: AtomicU64::new(self.tick.fetch_add(1, Ordering::Relaxed) + 1),
        });
        let mut map = SlotMap::clone(&self.map.load());
        if map.len() >= self.max {
            self.evict(&mut map);
        }
        map.insert(params.clone(), Arc::clone(&slot));
        self.map.store(Arc::new(map));
        tracing::debug!(params = ?params, "new token slot");
        Ok(Arc::clone(&slot.cache_ref))
    }

    /// The layer's own factory, which makes each account's; an error for a
    /// layer on a token source.
    pub(crate) fn root(&self) -> Result<&Arc<SlotFactory>, TokenError> {
        self.root.as_ref().ok_or_else(no_factory)
    }

    /// Removes the least recently used slot from `map`. Its cache, and any
    /// fetch of it, go when the last request using it is done.
    fn evict(&self, map: &mut SlotMap) {
        let Some(oldest) = evict_oldest(map, &self.retired, |slot| (&slot.used, &slot.cache_ref))
        else {
            return;
        };
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                max_token_slots = self.max,
                evicted = ?oldest,
                "more distinct TokenParams than max_token_slots: evicting the least recently \
                 used token slot (reported once). If parameters carry per-request values, \
                 such as an id in the scope, every request fetches a token"
            );
        }
    }

    /// Each live slot's parameters and stats.
    pub(crate) fn stats(&self) -> Vec<(TokenParams, Stats)> {
        self.map
            .load()
            .iter()
            .map(|(params, slot)| (params.clone(), slot.cache_ref.cache.stats()))
            .collect()
    }

    /// The chain of refresh tokens the layer's caches refresh, if any.
    pub(crate) fn chain(&self) -> Option<&Arc<crate::endpoint::Chain>> {
        self.factory.as_ref()?.spec.grant.chain()
    }

    /// Every live slot's cache.
    pub(crate) fn caches(&self) -> Vec<Arc<crate::cache::TokenCache>> {
        self.map
            .load()
            .values()
            .map(|slot| Arc::clone(&slot.cache_ref.cache))
            .collect()
    }

    /// The counters of every slot, live or evicted, summed.
    pub(crate) fn totals(&self) -> Stats {
        let mut total = *self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        total.add(&self.accounts.totals());
        for slot in self.map.load().values() {
            total.add(&slot.cache_ref.cache.stats());
        }
        total
    }
}

/// The error of a request with parameters, on a layer on a token source.
fn no_factory() -> TokenError {
    TokenError::new(TokenErrorKind::InvalidRequest).with_message(
        "the request carries TokenParams, but the layer takes its token from a token source, \
         which has one token",
    )
}

/// Removes the least recently used of `map` (by the tick `of` gives for
/// each), its cache's counters added to `retired`: its parameters, if `map`
/// had any. The cache goes when the last request using it is done.
pub(crate) fn evict_oldest<V>(
    map: &mut HashMap<TokenParams, Arc<V>, BuildHasherDefault<CarriedHash>>,
    retired: &Mutex<Stats>,
    of: impl Fn(&V) -> (&AtomicU64, &Arc<CacheRef>),
) -> Option<TokenParams> {
    let oldest = map
        .iter()
        .min_by_key(|(_, value)| of(value).0.load(Ordering::Relaxed))
        .map(|(params, _)| params.clone())?;
    if let Some(value) = map.remove(&oldest) {
        retired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(&of(&value).1.cache.stats());
    }
    Some(oldest)
}
