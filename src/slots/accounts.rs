//! Accounts: each person's token slots, kept together in shards, each under a
//! read-write lock; at most `max_accounts` slots in memory: past it, a new
//! slot evicts the least recently used of its own shard (an approximate LRU,
//! exact in its bound). An evicted account comes back from the layer's store.
//!
//! A request for an account: its shard (by the account's hash, with keys
//! drawn per process), a read lock, a map lookup by the whole
//! [`TokenParams`], whose equality compares the account id itself. Two
//! accounts never share a slot, whatever their hashes. An account's slots
//! share one factory, with the account's chain, while any of them lives.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use super::evict_oldest;
use super::factory::SlotFactory;
use crate::cache::CacheRef;
use crate::error::TokenError;
use crate::store::{AccountEvent, Links, PendingLogins};
use crate::telemetry::stats::Stats;
use crate::token::params::{account_digest, AccountDigest, CarriedHash, TokenParams};

type Shard = HashMap<TokenParams, Arc<Entry>, BuildHasherDefault<CarriedHash>>;

/// What the layer does once the store lost its data (see
/// [`Accounts::on_store_lost`]).
pub(crate) type Restore = Box<dyn Fn() + Send + Sync>;

/// One account's token for one set of parameters.
struct Entry {
    cache_ref: Arc<CacheRef>,
    /// The tick when a request last used it.
    used: AtomicU64,
    /// The account's factory: its chain lives as long as its slots.
    factory: Arc<SlotFactory>,
}

/// A layer's accounts.
pub(crate) struct Accounts {
    shards: Box<[RwLock<Shard>]>,
    /// The most slots in memory, and how many there are.
    max: usize,
    len: AtomicUsize,
    /// Counts the slots made: the clock of least-recently-used eviction.
    tick: AtomicU64,
    /// Each account's factory while any of its slots lives, so that a new
    /// slot of the account shares its chain.
    factories: Mutex<HashMap<AccountDigest, Weak<SlotFactory>>>,
    /// The evicted slots' counters, for the totals.
    retired: Mutex<Stats>,
    /// Whether evicted accounts come back from a store.
    has_store: bool,
    warned: AtomicBool,
    /// The web logins begun and not finished, where the store keeps none.
    pub(crate) pending: PendingLogins,
    /// Who signed in to which account, and the logout tokens used, where
    /// the store keeps none.
    pub(crate) links: Links,
    /// Itself, for the store's watch of sign-outs, begun with the first
    /// account.
    this: Weak<Accounts>,
    watching: AtomicBool,
    /// Whether this replica hears the store's news of sign-outs: accounts'
    /// tokens are presented from memory only while it does.
    hearing: Arc<crate::cache::Hearing>,
    /// What the layer does once the store lost its data.
    restore: std::sync::OnceLock<Restore>,
    /// Factories forgotten (a sign-out, a break in the news) that layers
    /// bound to their accounts still hold: they hear the news too.
    orphans: Mutex<Vec<Weak<SlotFactory>>>,
    /// When the store last lost its data, as this replica heard.
    lost_at: Mutex<Option<std::time::Instant>>,
}

impl Accounts {
    /// At most `max` slots in memory (at least one), in up to 64 shards of
    /// 128 or more slots on average.
    pub(crate) fn new(max: usize, has_store: bool) -> Arc<Self> {
        let max = max.max(1);
        let count = (max / 256).clamp(1, 64).next_power_of_two();
        Arc::new_cyclic(|this| Accounts {
            this: Weak::clone(this),
            watching: AtomicBool::new(false),
            shards: (0..count).map(|_| RwLock::default()).collect(),
            max,
            len: AtomicUsize::new(0),
            tick: AtomicU64::new(0),
            factories: Mutex::default(),
            retired: Mutex::default(),
            has_store,
            warned: AtomicBool::new(false),
            pending: PendingLogins::default(),
            links: Links::default(),
            hearing: Arc::default(),
            restore: std::sync::OnceLock::new(),
            orphans: Mutex::default(),
            lost_at: Mutex::default(),
        })
    }

    #[inline]
    fn shard(&self, params: &TokenParams) -> &RwLock<Shard> {
        // A power of two: the low bits of a keyed hash.
        let index = params.account_hash() as usize & (self.shards.len() - 1);
        &self.shards[index]
    }

    /// The reference to the slot `params` (which name an account) select,
    /// made from `root` if need be.
    #[inline]
    pub(crate) fn cache_ref_for(
        &self,
        params: &TokenParams,
        root: &Arc<SlotFactory>,
    ) -> Result<Arc<CacheRef>, TokenError> {
        {
            let shard = self
                .shard(params)
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = shard.get(params) {
                let tick = self.tick.load(Ordering::Relaxed);
                if entry.used.load(Ordering::Relaxed) != tick {
                    entry.used.store(tick, Ordering::Relaxed);
                }
                return Ok(Arc::clone(&entry.cache_ref));
            }
        }
        self.make(params, root)
    }

    /// Makes the slot (unless another request just did), evicting the
    /// least recently used one of a full shard.
    #[cold]
    fn make(
        &self,
        params: &TokenParams,
        root: &Arc<SlotFactory>,
    ) -> Result<Arc<CacheRef>, TokenError> {
        let factory = self.factory(params, root);
        let cache = factory.slot(&params.without_account())?;
        let mut shard = self
            .shard(params)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = shard.get(params) {
            return Ok(Arc::clone(&entry.cache_ref));
        }
        // Full: the shard's own least recently used goes (an empty shard
        // of a full layer lets the bound pass by one, rarely).
        if self.len.load(Ordering::Relaxed) >= self.max && self.evict(&mut shard) {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(Entry {
            cache_ref: Arc::new(CacheRef::new(cache)),
            used: AtomicU64::new(self.tick.fetch_add(1, Ordering::Relaxed) + 1),
            factory,
        });
        shard.insert(params.clone(), Arc::clone(&entry));
        Ok(Arc::clone(&entry.cache_ref))
    }

    /// The factory of the account `params` name: the one its live slots
    /// share, or a new one (its chain read from the store at its first
    /// fetch).
    pub(crate) fn factory(
        &self,
        params: &TokenParams,
        root: &Arc<SlotFactory>,
    ) -> Arc<SlotFactory> {
        let digest = account_digest(params.get_account().unwrap_or_default());
        let mut factories = self
            .factories
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(factory) = factories.get(&digest).and_then(Weak::upgrade) {
            return factory;
        }
        // Dead entries go once they outnumber what memory may hold.
        if factories.len() >= 2 * self.max + 64 {
            factories.retain(|_, factory| factory.strong_count() > 0);
        }
        let factory = root.for_account(digest.clone(), Arc::clone(&self.hearing));
        factories.insert(digest, Arc::downgrade(&factory));
        drop(factories);
        self.watch(root);
        factory
    }

    /// Has the layer's store tell of other replicas' sign-outs and logins,
    /// once. A sign-out: the account's slots leave memory, with their
    /// tokens, and its chain reads the store's before anything else. A login:
    /// the account's tokens are dropped, to come from the store. A break in
    /// the news: every account is forgotten so, or for a short one (or a
    /// store that lost its data) only their tokens. A chain's write: the
    /// account's chain learns its generation. The watch ends with the
    /// layer.
    fn watch(&self, root: &SlotFactory) {
        let Some(store) = &root.store else {
            return;
        };
        if self.watching.swap(true, Ordering::Relaxed) {
            return;
        }
        let this = Weak::clone(&self.this);
        store.watch_accounts(Arc::new(move |event: AccountEvent<'_>| {
            let Some(accounts) = this.upgrade() else {
                return false;
            };
            match event {
                AccountEvent::SignedOut(digest) => accounts.forget(Some(digest)),
                AccountEvent::LoggedIn(digest) => accounts.restart(digest),
                AccountEvent::Resync => accounts.forget(None),
                AccountEvent::Reread => accounts.reread(true),
                AccountEvent::StoreLost => {
                    *accounts
                        .lost_at
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(std::time::Instant::now());
                    accounts.reread(false);
                    if let Some(restore) = accounts.restore.get() {
                        restore();
                    }
                }
                AccountEvent::ChainSaved(digest, gen) => {
                    for factory in accounts.all_of(digest) {
                        if let Some(chain) = factory.chain() {
                            chain.heard_of(gen);
                        }
                    }
                }
                AccountEvent::HeardUntil(until) => accounts.hearing.heard_until(until),
            }
            true
        }));
    }

    /// Has `restore` called each time the store lost its data (restarted
    /// empty, flushed) while this replica heard its news: the layer writes
    /// back what it holds, and links its accounts again. Once per layer.
    pub(crate) fn on_store_lost(&self, restore: Restore) {
        let _ = self.restore.set(restore);
    }

    /// Whether the store lost its data (as this replica heard) within
    /// `window`.
    pub(crate) fn lost_within(&self, window: std::time::Duration) -> bool {
        let lost_at = *self.lost_at.lock().unwrap_or_else(PoisonError::into_inner);
        lost_at.is_some_and(|at| at.elapsed() < window)
    }

    /// Each account with a slot in memory, once: its id, and its factory.
    pub(crate) fn held(&self) -> Vec<(String, Arc<SlotFactory>)> {
        let mut held: Vec<(String, Arc<SlotFactory>)> = Vec::new();
        // By the factory's address: one look each, however many accounts.
        let mut seen = std::collections::HashSet::new();
        for shard in self.shards.iter() {
            let shard = shard.read().unwrap_or_else(PoisonError::into_inner);
            for (params, entry) in shard.iter() {
                let Some(account) = params.get_account() else {
                    continue;
                };
                if seen.insert(Arc::as_ptr(&entry.factory)) {
                    held.push((account.to_owned(), Arc::clone(&entry.factory)));
                }
            }
        }
        held
    }

    /// The factory of the account of `digest`, while any of its slots (or a
    /// layer bound to it) lives.
    fn live(&self, digest: &str) -> Option<Arc<SlotFactory>> {
        self.factories
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&AccountDigest(digest.to_owned()))
            .and_then(Weak::upgrade)
    }

    /// Drops the tokens of the account of `digest`, on every slot and layer
    /// bound to it: its next request reads them from the store.
    fn restart(&self, digest: &str) {
        for cache in self.live(digest).iter().flat_map(|f| f.caches()) {
            cache.restart();
        }
    }

    /// After a break in the store's news that no sign-out answered `Ok` can
    /// have hidden: every account's tokens are dropped, to be read from the
    /// store, and each chain is read from it before anything else; the
    /// chains themselves stay. `missed_writes`: a chain write may have been
    /// missed too, so no copy here is written back before it is read again.
    fn reread(&self, missed_writes: bool) {
        let mut factories: Vec<Arc<SlotFactory>> = self
            .factories
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        let orphans = self.orphans.lock().unwrap_or_else(PoisonError::into_inner);
        factories.extend(orphans.iter().filter_map(Weak::upgrade));
        drop(orphans);
        for factory in &factories {
            if let Some(chain) = factory.chain() {
                if missed_writes {
                    chain.unvouch();
                }
                chain.mark_unverified();
            }
            for cache in factory.caches() {
                cache.restart();
            }
        }
    }

    /// Removes the least recently used slot of `shard`, if it has one. Its
    /// cache goes when the last request using it is done.
    fn evict(&self, shard: &mut Shard) -> bool {
        let Some(oldest) = evict_oldest(shard, &self.retired, |entry| {
            (&entry.used, &entry.cache_ref)
        }) else {
            return false;
        };
        if !self.warned.swap(true, Ordering::Relaxed) {
            match self.has_store {
                true => tracing::info!(
                    evicted = ?oldest,
                    "more accounts' tokens than max_accounts: the least recently used leave \
                     memory and come back from the token store (reported once)"
                ),
                false => tracing::warn!(
                    evicted = ?oldest,
                    "more accounts' tokens than max_accounts, and no token store: an account \
                     that leaves memory loses its login, and its person must sign in again \
                     (reported once); give the layer a token store"
                ),
            }
        }
        true
    }

    /// Takes the account's slots out of memory (at its sign-out): their
    /// parameters, without the account.
    pub(crate) fn remove(&self, account: &TokenParams) -> Vec<TokenParams> {
        let mut shard = self
            .shard(account)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut removed = Vec::new();
        shard.retain(|params, _| {
            let theirs = params.get_account() == account.get_account();
            if theirs {
                removed.push(params.without_account());
            }
            !theirs
        });
        self.len.fetch_sub(removed.len(), Ordering::Relaxed);
        removed
    }

    /// Forgets the account of `digest` (another replica signed it out), or
    /// every account (`None`: news may have been missed). Their slots leave
    /// memory; their tokens are dropped, on every slot and on the layers
    /// bound to them; their chains read the store's before anything else.
    pub(crate) fn forget(&self, digest: Option<&str>) {
        let mut factories: Vec<Arc<SlotFactory>> = {
            let mut factories = self
                .factories
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match digest {
                Some(digest) => factories
                    .remove(&AccountDigest(digest.to_owned()))
                    .into_iter()
                    .collect::<Vec<_>>(),
                None => factories.drain().map(|(_, factory)| factory).collect(),
            }
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
        };
        // The account's slots, whichever factory made them: a slot made
        // while an earlier forget ran may hold a factory no longer listed.
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.write().unwrap_or_else(PoisonError::into_inner);
            shard.retain(|_, entry| {
                let account = entry.factory.chain().and_then(|chain| chain.account());
                let theirs = match digest {
                    Some(digest) => account.is_some_and(|a| a.0 == digest),
                    None => true,
                };
                if theirs {
                    removed += 1;
                    if !factories.iter().any(|f| Arc::ptr_eq(f, &entry.factory)) {
                        factories.push(Arc::clone(&entry.factory));
                    }
                }
                !theirs
            });
        }
        self.len.fetch_sub(removed, Ordering::Relaxed);
        for factory in &factories {
            if let Some(chain) = factory.chain() {
                chain.mark_unverified();
                // News may have been missed: not written back before it is
                // read again.
                chain.unvouch();
            }
            for cache in factory.caches() {
                cache.restart();
            }
        }
        // Those a layer bound to the account still holds go on hearing the
        // news of its chain.
        let mut orphans = self.orphans.lock().unwrap_or_else(PoisonError::into_inner);
        orphans.retain(|o| o.strong_count() > 0);
        orphans.extend(factories.iter().map(Arc::downgrade));
    }

    /// Every live factory of the account of `digest`: the one its slots
    /// share, and those layers bound to it hold since it was forgotten.
    fn all_of(&self, digest: &str) -> Vec<Arc<SlotFactory>> {
        let mut all: Vec<Arc<SlotFactory>> = self.live(digest).into_iter().collect();
        let orphans = self.orphans.lock().unwrap_or_else(PoisonError::into_inner);
        all.extend(orphans.iter().filter_map(Weak::upgrade).filter(|f| {
            f.chain()
                .and_then(|chain| chain.account())
                .is_some_and(|a| a.0 == digest)
        }));
        all
    }

    /// The counters of every slot, live or evicted, summed.
    pub(crate) fn totals(&self) -> Stats {
        let mut total = *self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        for shard in self.shards.iter() {
            let shard = shard.read().unwrap_or_else(PoisonError::into_inner);
            for entry in shard.values() {
                total.add(&entry.cache_ref.cache.stats());
            }
        }
        total
    }

    /// How many slots are in memory.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}
