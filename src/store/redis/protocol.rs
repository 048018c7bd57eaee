//! The Redis store's protocol: read the shared token and failure, take the
//! lock and fetch for the fleet, store and publish, wait to be woken, ride
//! out an outage on the token in hand, delete a refused token.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::{sleep, timeout, Instant};

use super::lock::lock_ttl;
use super::millis;
use super::{Problem, RedisStore};
use crate::endpoint::{ChainRecord, Lost};
use crate::error::TokenError;

use crate::store::chain::held_elsewhere;
use crate::store::codec::{decode_failure, encode_failure, time_left, token_json};
use crate::store::seal::Sealer;
use crate::store::{
    shared_as_failure, FetchContext, KeptChain, StoreEvent, StoredToken, TokenStore,
};
use crate::support::boxed::BoxFuture;
use crate::support::random::random_hex;
use crate::token::AccessToken;

/// How often a replica waiting for another one's token looks again when it
/// could not subscribe to the news of it.
const POLL: Duration = Duration::from_millis(25);

/// How often a replica whose token still serves tries Redis again while
/// Redis does not answer (a failover under way), before it fetches alone.
const RIDE_OUT_RETRY: Duration = Duration::from_millis(250);

/// What a replica riding out a Redis outage keeps of its token's time, on
/// top of a fetch timeout, for fetching alone in the end.
const RIDE_OUT_MARGIN: Duration = Duration::from_secs(1);

/// How long a subscribed waiter waits for the news before it looks anyway
/// (a message lost, a lock holder that died).
const WAKE_FALLBACK: Duration = Duration::from_millis(500);

impl RedisStore {
    /// What Redis holds for `key`: the shared token and its remaining time
    /// (if readable), and a failure another replica reported (if recent).
    async fn read(&self, key: &str, sealer: &Sealer<'_>) -> Result<Shared, Problem> {
        let mut con = self.connection().await?;
        let failure_key = failure_key(key);
        let (value, pttl, failure, failure_pttl): (Option<String>, i64, Option<String>, i64) = self
            .bounded(
                self.scripts
                    .read
                    .key(key)
                    .key(&failure_key)
                    .invoke_async(&mut con),
            )
            .await?;
        // A value that does not open, or garbage, counts as no token; a
        // fetch overwrites it.
        // What is left of each is the shorter of Redis's time-to-live and
        // the end sealed inside the value: a stretched time-to-live (or an
        // old value put back) does not make a token usable longer.
        let token = match (value, u64::try_from(pttl)) {
            (Some(value), Ok(ms)) => self.open(sealer, key, &value).and_then(|json| {
                let usable_for = time_left(&json, Duration::from_millis(ms))?;
                let token = AccessToken::from_json(&json).ok()?;
                let sealed = (token.expose_token().to_owned(), value);
                Some((StoredToken { token, usable_for }, sealed))
            }),
            _ => None,
        };
        let failure = match (failure, u64::try_from(failure_pttl)) {
            (Some(f), Ok(ms)) => self.open(sealer, &failure_key, &f).and_then(|json| {
                let left = time_left(&json, Duration::from_millis(ms))?;
                decode_failure(&String::from_utf8_lossy(&json), left)
            }),
            _ => None,
        };
        Ok(Shared { token, failure })
    }

    /// `value` opened, or `None` (said once) when it does not open.
    pub(super) fn open(&self, sealer: &Sealer<'_>, key: &str, value: &str) -> Option<Vec<u8>> {
        let opened = sealer.open(key, value);
        if opened.is_none() && !self.warned_unopened.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "a value in the Redis token store does not open (sealed under another key, \
                 changed by someone, or stored in clear by an older version): it counts as no \
                 token, and a new one overwrites it (reported once)"
            );
        }
        opened
    }

    /// The token from Redis, or fetched for the fleet under the lock.
    /// A wait for another replica's ends at `give_up`.
    async fn shared(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer<'_>,
        give_up: Instant,
    ) -> Result<StoredToken, Problem> {
        let key = self.key(ctx.identity());
        // A refresh-token chain is refreshed by one replica at a time for
        // all the layer's token slots: its lock and news are the chain's.
        let base = match ctx.chain {
            Some(kept) => self.key(kept.identity.key()),
            None => key.clone(),
        };
        let lock = format!("{base}:lock");
        let lock_ttl = lock_ttl(ctx);
        let nonce = random_hex();
        if let Some(e) = self.without_login(ctx, sealer, &base).await? {
            return Err(Problem::Token(e));
        }
        let mut waited = false;
        let mut wake: Option<Wake> = None;
        loop {
            let now = self.read(&key, sealer).await?;
            if let Some(shared) = self.take_fresh(ctx, &key, now.token) {
                return Ok(shared);
            }
            if let Some(failure) = now.failure.filter(|_| !ctx.begins_login()) {
                // Another replica just failed: do not ask the endpoint again
                // before its back-off is over.
                return Err(Problem::Token(failure));
            }
            if self.take_lock(&lock, &nonce, lock_ttl).await? {
                return self
                    .fetch_under_lock(ctx, sealer, (&key, &base), &lock, &nonce)
                    .await;
            }
            // Another replica is fetching: wait for its token (or failure)
            // to appear, or its lock to go (released, or expired with a dead
            // holder).
            if Instant::now() >= give_up {
                return Err(Problem::Redis(
                    "waited too long for another replica's token".into(),
                ));
            }
            if !waited {
                waited = true;
                ctx.record(StoreEvent::WaitedForAnother);
            }
            match &mut wake {
                Some(wake) => wake.wait(WAKE_FALLBACK).await,
                None => {
                    // Subscribed first, then read again at once: news
                    // published before the subscription is not missed.
                    if self.notifications {
                        wake = self.subscribe(&landed_channel(&base)).await;
                    }
                    if wake.is_none() {
                        sleep(POLL).await;
                    }
                }
            }
        }
    }

    /// "No login" for a chain with nothing to send or begin here, once the
    /// chain Redis holds under `base` is read (one script) and says so too,
    /// with no replica holding its lock (a login may be under way there).
    /// `None`: fetch as usual. A chain another replica's news marked is
    /// read the same way first.
    async fn without_login(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer<'_>,
        base: &str,
    ) -> Result<Option<TokenError>, Problem> {
        let Some(KeptChain {
            chain,
            identity: chain_identity,
        }) = ctx.chain
        else {
            return Ok(None);
        };
        let unverified = chain.take_unverified();
        if !unverified && ctx.login_required_now().is_none() {
            return Ok(None);
        }
        let key = format!("{base}:chain");
        let read = async {
            let mut con = self.connection().await?;
            self.bounded(
                self.scripts
                    .chain
                    .key(&key)
                    .key(format!("{base}:lock"))
                    .invoke_async::<(Option<String>, i64)>(&mut con),
            )
            .await
        };
        let (record, locked) = read.await.inspect_err(|_| {
            if unverified {
                chain.mark_unverified();
            }
        })?;
        let chain_sealer = sealer.beside(chain_identity.encoded());
        let record = record.and_then(|v| self.open(&chain_sealer, &key, &v));
        match record.map(ChainRecord::from_bytes) {
            // Read while the replica hears the news: no write since is
            // missed, and this copy may be written back after a loss.
            Some(record) if chain.adopt(&record) => chain.synced(ctx.hears_news),
            Some(_) => {}
            // Redis lost a chain that was there (and is written back).
            None if locked == 0 && chain.was_stored() => {
                if let Lost::Wait = chain.lost_by_store(ctx.hears_news) {
                    return Ok(Some(held_elsewhere()));
                }
            }
            None => {}
        }
        Ok(match locked {
            0 => ctx.login_required_now(),
            _ => None,
        })
    }

    /// The token a read of `key` found, if it is fresh for `ctx`: taken
    /// (counted so, and remembered as handed out, for a refusal).
    fn take_fresh(
        &self,
        ctx: &FetchContext<'_>,
        key: &str,
        token: Option<(StoredToken, (String, String))>,
    ) -> Option<StoredToken> {
        let (shared, (token, sealed)) = token.filter(|(t, _)| ctx.is_fresh(t))?;
        ctx.record(StoreEvent::TookShared);
        self.handed_out.put(key, &token, sealed);
        Some(shared)
    }

    /// A subscription to `channel`, or `None` (the waiter polls) when
    /// Redis does not give one in time.
    async fn subscribe(&self, channel: &str) -> Option<Wake> {
        let pubsub = self.deployment.subscribe(channel, self.timeout).await?;
        Some(Wake { pubsub })
    }

    /// Under the lock: a token another replica stored meanwhile, else one
    /// fetched (with the chain kept beside it) and stored; `base` is where
    /// the lock and its news live (the chain's, with a refresh token).
    async fn fetch_under_lock(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer<'_>,
        (key, base): (&str, &str),
        lock: &str,
        nonce: &str,
    ) -> Result<StoredToken, Problem> {
        // Another replica may have stored a token, or a failure, just before
        // we locked.
        let (token, failure) = match self.read(key, sealer).await {
            Ok(read) => (read.token, read.failure),
            Err(_) => (None, None),
        };
        let outcome = if let Some(shared) = self.take_fresh(ctx, key, token) {
            Ok(shared)
        } else if let Some(failure) = failure.filter(|_| !ctx.begins_login()) {
            Err(failure)
        } else {
            ctx.record(StoreEvent::FetchedForFleet);
            let fetched = self.fetch_chained(ctx, sealer, base);
            match self.holding(lock, nonce, lock_ttl(ctx), fetched).await {
                // A callback another replica took first: its login's token,
                // stored before that replica let the lock go.
                Err(e) if e.is_login_state() => {
                    let token = self.read(key, sealer).await.ok().and_then(|r| r.token);
                    self.take_fresh(ctx, key, token).ok_or(e)
                }
                outcome => outcome,
            }
        };
        // Shared with the other replicas: the outcome stands whatever
        // becomes of that (the connection made again, the random source),
        // and the lock is let go.
        let shared = async {
            let mut con = self.connection().await?;
            match &outcome {
                Ok(shared) => {
                    let Some(sealed) =
                        sealer.seal(key, token_json(&shared.token, shared.usable_for).as_bytes())
                    else {
                        return Ok(());
                    };
                    self.handed_out
                        .put(key, shared.token.expose_token(), sealed.clone());
                    self.bounded(
                        self.scripts
                            .store
                            .key(key)
                            .key(failure_key(key))
                            .arg(sealed)
                            .arg(millis(shared.usable_for).max(1))
                            .arg(landed_channel(base))
                            .arg("token")
                            .invoke_async::<()>(&mut con),
                    )
                    .await
                }
                // "No login" is the chain's state, which every replica reads
                // from the chain itself: not a failure to hold back for. The
                // waiters are woken to read it.
                Err(e) if !shared_as_failure(e) => {
                    let mut publish = redis::cmd("PUBLISH");
                    publish.arg(landed_channel(base)).arg("failure");
                    self.bounded(publish.query_async::<i64>(&mut con))
                        .await
                        .map(drop)
                }
                Err(e) => {
                    // The fleet holds back as long as this replica will.
                    let hold = ctx.hold_after(e);
                    let failure_key = failure_key(key);
                    let Some(sealed) =
                        sealer.seal(&failure_key, encode_failure(e, hold).as_bytes())
                    else {
                        return Ok(());
                    };
                    self.bounded(
                        self.scripts
                            .store
                            .key(failure_key)
                            .arg(sealed)
                            .arg(millis(hold).max(1))
                            .arg(landed_channel(base))
                            .arg("failure")
                            .invoke_async::<()>(&mut con),
                    )
                    .await
                }
            }
        }
        .await;
        if let Err(Problem::Redis(e)) = shared {
            // The outcome stands; only sharing it failed.
            self.redis_failed(&e);
        }
        self.let_go(lock, nonce).await;
        outcome.map_err(Problem::Token)
    }

    /// Through Sentinel: the next operation asks which server is master
    /// now. Called after any Redis error, on every path.
    pub(super) fn forget_master(&self) {
        if self.deployment.forget() {
            self.lock_connection().take();
        }
    }

    /// `op`, and once more after a Redis error, the master asked for again
    /// first (through Sentinel): the first error after a failover, or after
    /// a restart dropped the connection, is not Redis's answer.
    pub(super) async fn again<T, F>(&self, op: impl Fn() -> F) -> Result<T, String>
    where
        F: std::future::Future<Output = Result<T, String>>,
    {
        match op().await {
            Ok(done) => Ok(done),
            Err(_) => {
                self.forget_master();
                op().await.inspect_err(|_| self.forget_master())
            }
        }
    }

    fn redis_failed(&self, why: &str) {
        self.forget_master();
        if !self.degraded.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %why,
                "Redis token store unavailable; fetching and caching tokens locally until it answers"
            );
        }
    }

    fn redis_answered(&self) {
        if self.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis token store answers again; sharing tokens through it");
        }
    }
}

/// What Redis holds for one identity.
struct Shared {
    /// The token, with the token itself and the sealed value it came in.
    token: Option<(StoredToken, (String, String))>,
    failure: Option<TokenError>,
}

fn failure_key(key: &str) -> String {
    format!("{key}:failure")
}

/// Where the replica that fetched announces that a token (or a failure)
/// landed under `key`.
fn landed_channel(key: &str) -> String {
    format!("{key}:landed")
}

/// A waiter's subscription to the news that a token landed.
struct Wake {
    pubsub: redis::aio::PubSub,
}

impl Wake {
    /// Until a message arrives, or `fallback` passes.
    async fn wait(&mut self, fallback: Duration) {
        use futures_core::Stream;
        let mut messages = std::pin::pin!(self.pubsub.on_message());
        let next = std::future::poll_fn(|cx| messages.as_mut().poll_next(cx));
        let _ = timeout(fallback, next).await;
    }
}

/// Whether a fetch whose Redis did not answer may wait and try Redis again
/// rather than fetch alone: before `until`, and while the layer's token in
/// hand (asked anew: it may have been refused meanwhile) leaves a fetch
/// timeout and a margin after the wait.
fn may_ride_out(ctx: &FetchContext<'_>, until: Instant) -> bool {
    let spare = RIDE_OUT_RETRY + ctx.fetch_timeout() + RIDE_OUT_MARGIN;
    Instant::now() + RIDE_OUT_RETRY < until && ctx.serving_for().is_some_and(|left| left > spare)
}

impl TokenStore for RedisStore {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<StoredToken, TokenError>> {
        Box::pin(async move {
            let Some(key) = self.sealing.as_ref().or(ctx.sealing_key()) else {
                if !self.warned_unsealed.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the Redis token store has no key to seal tokens with (the client \
                         has no credential of its own, such as a key in a KMS): tokens are not \
                         shared; give one with RedisStore::encryption_key"
                    );
                }
                ctx.record(StoreEvent::FellBackToLocal);
                return ctx.fetch().await;
            };
            let sealer = Sealer::new(key, ctx.identity.encoded());
            let started = Instant::now();
            // Waiting on another replica ends by then; with a fetch alone
            // after it, the whole stays within the layer's bound for a fetch.
            // (A chain's holder may await its refresh's answer longer: the
            // layer's bound on the fetch ends such a wait first.)
            let longest = match ctx.chain {
                Some(_) => ctx.refresh_answer_bound(),
                None => ctx.fetch_timeout(),
            };
            let give_up = started + lock_ttl(ctx) + longest;
            // A renewal ahead, while the token in hand still serves, tries
            // Redis again for a while rather than fetch alone: a failover
            // passes, and the fleet still makes one token request.
            let ride_out_until = started + 2 * ctx.fetch_timeout();
            let mut outcome = self.shared(ctx, &sealer, give_up).await;
            // The first error after a failover (or a restart that dropped
            // the connection) is not Redis's answer: once more at once, on
            // the master Sentinel names now.
            if let Err(Problem::Redis(why)) = &outcome {
                self.redis_failed(why);
                outcome = self.shared(ctx, &sealer, give_up).await;
            }
            while let Err(Problem::Redis(why)) = &outcome {
                self.redis_failed(why);
                if !may_ride_out(ctx, ride_out_until) {
                    break;
                }
                tracing::debug!(
                    identity = ctx.identity(),
                    "Redis did not answer; the token in hand serves on, trying Redis again"
                );
                sleep(RIDE_OUT_RETRY).await;
                outcome = self.shared(ctx, &sealer, give_up).await;
            }
            match outcome {
                Ok(shared) => {
                    self.redis_answered();
                    Ok(shared)
                }
                Err(Problem::Token(e)) => {
                    self.redis_answered();
                    Err(e)
                }
                // A refresh token is sent only under the fleet's lock:
                // another replica may have rotated it.
                Err(Problem::Redis(why)) if ctx.chain.is_some() => Err(TokenError::new(
                    crate::error::TokenErrorKind::Transport,
                )
                .with_message(format!(
                    "the Redis token store did not answer ({why}); a refresh token is \
                             sent only under its lock, since another replica may be rotating it"
                ))),
                Err(Problem::Redis(_)) => {
                    ctx.record(StoreEvent::FellBackToLocal);
                    ctx.fetch().await
                }
            }
        })
    }

    fn refused<'a>(&'a self, identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key = self.key(identity);
            // Not a token this replica had from Redis: nothing to delete.
            let Some(sealed) = self.handed_out.sealed(&key, token) else {
                return;
            };
            let Ok(mut con) = self.connection().await else {
                return;
            };
            let forgot = self
                .bounded(
                    self.scripts
                        .delete_if_equal
                        .key(&key)
                        .arg(sealed)
                        .invoke_async::<i64>(&mut con),
                )
                .await;
            if let Err(Problem::Redis(why)) = forgot {
                self.redis_failed(&why);
            }
        })
    }

    fn link_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.again(move || self.link(key, member, value, ttl)))
    }

    fn linked_accounts<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<String>>, String>> {
        Box::pin(self.linked(key))
    }

    fn use_once<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<bool>, String>> {
        Box::pin(self.mark_used(key, ttl))
    }

    fn used_before<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        Box::pin(self.used(key))
    }

    fn unlink_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.again(move || self.unlink(key, member)))
    }

    fn keep_pending_login<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.keep_pending(key, value, ttl))
    }

    fn take_pending_login<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(self.take_pending(key))
    }

    fn signed_out<'a>(
        &'a self,
        account: &'a str,
        identities: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.sign_out_everywhere(account, identities)
                .await
                .inspect_err(|_| self.forget_master())
        })
    }

    fn logged_in<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.publish_login(account))
    }

    fn read_chain<'a>(&'a self, ctx: &'a FetchContext<'a>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.again(move || self.read_chain_into(ctx)))
    }

    fn watch_accounts(&self, watcher: crate::store::AccountWatcher) {
        self.watch(watcher);
    }
}
