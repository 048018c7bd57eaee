//! [`RedisStore`]: one token, and one token request, for a whole fleet.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::{Client, RedisError, Script};
use tokio::time::{sleep, timeout, Instant};

use super::redis_connection::{self, Connection, Deployment};
use super::seal::Sealer;
use super::{FetchContext, SharedToken, StoreEvent, TokenStore};
use crate::boxed::BoxFuture;
use crate::error::{ConfigError, TokenError, TokenErrorKind};
use crate::token::AccessToken;

/// Default of [`RedisStore::prefix`].
pub const DEFAULT_REDIS_PREFIX: &str = "tower-oauth:";
/// Default of [`RedisStore::timeout`].
pub const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// How many keys' handed-out tokens a store remembers (see
/// `RedisStore::handed_out`).
const MAX_HANDED_OUT: usize = 4096;

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

/// Reads the shared token (`KEYS[1]`) and failure (`KEYS[2]`) with their
/// remaining times, at one instant. A script rather than `MULTI`: a Redis
/// Cluster client follows a script to the node owning its keys (and follows
/// it again after a failover), which it does not do for a transaction.
const READ: &str = r#"
return {
    redis.call("GET", KEYS[1]), redis.call("PTTL", KEYS[1]),
    redis.call("GET", KEYS[2]), redis.call("PTTL", KEYS[2])
}
"#;

/// Stores `ARGV[1]` under `KEYS[1]` for `ARGV[2]` ms, deletes `KEYS[2]` (a
/// stale failure, when a token is stored) and publishes `ARGV[4]` on the
/// channel `ARGV[3]`, waking the waiting replicas.
const STORE: &str = r#"
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
if KEYS[2] then
    redis.call("DEL", KEYS[2])
end
redis.call("PUBLISH", ARGV[3], ARGV[4])
return 1
"#;

/// Deletes a key only if it still holds the value given: the lock for its
/// holder, the shared token only if it is still the refused one.
const DELETE_IF_EQUAL: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("DEL", KEYS[1])
end
return 0
"#;

/// Shares tokens among the replicas of a service through Redis (feature
/// `redis`): one server ([`new`](RedisStore::new)), a Redis Cluster
/// ([`cluster`](RedisStore::cluster), feature `redis-cluster`), or the
/// master Redis Sentinel names ([`sentinel`](RedisStore::sentinel), feature
/// `redis-sentinel`).
///
/// Replicas whose layers have the same token URL, client id, client
/// authentication and parameters share one token under one key
/// (`prefix{hash}`, never containing the secret), stored with a
/// time-to-live equal to its remaining usable time. A replica that needs a
/// token reads Redis first; only when there is no fresh one does it fetch,
/// under a lock (`SET NX PX` with a value of its own, released only by its
/// holder), so that concurrent cold starts and renewals across the fleet make
/// one token request. The others subscribe to the key's news and are woken
/// when the token (or a failure) is stored, looking again every 500 ms if
/// none comes (polling every 25 ms if they cannot subscribe). A lock
/// whose holder died expires on its own after the fetch timeout plus a
/// second. A token the API refused is deleted from Redis only if Redis still
/// holds that same token. A failed fetch is recorded for its back-off (the
/// endpoint's `Retry-After`, or the layer's minimum back-off): meanwhile the
/// other replicas get the same error without asking the endpoint.
///
/// Redis never fails a request: when it is unreachable, slow (each operation
/// is bounded by [`timeout`](RedisStore::timeout)) or holds garbage, the
/// replica fetches and caches on its own, warns once, and goes back to Redis
/// when it answers again. A renewal ahead of expiry, whose token in hand
/// still serves, first tries Redis again every 250 ms, for up to two fetch
/// timeouts and as long as the token leaves a fetch timeout and a second to
/// spare: a failover or restart that short passes without
/// every replica fetching a token of its own.
///
/// **Security**: the token (and a shared failure) is stored sealed, with
/// AES-256-GCM under a key derived (HKDF-SHA256) from the client's own
/// credential (its secret, its private key, or its TLS client key), which
/// every replica holds and Redis never sees, bound to its Redis key; or
/// under a key of yours ([`encryption_key`](RedisStore::encryption_key)).
/// Someone who can read Redis sees keys (hashes, never the secret), expiry
/// times and sealed values: no token. Someone who can write it can delete or
/// replace values, which replicas then cannot open: they count as no token,
/// and a replica fetches and overwrites (a warning says so once). A layer
/// with no credential of its own (a key in a KMS) and no
/// [`encryption_key`](RedisStore::encryption_key) does not share through
/// Redis at all, and says so once. Protect Redis all the same with a
/// password (`redis://:password@host`
/// or `redis://user:password@host`, ACLs) and, across networks, TLS:
/// `rediss://` URLs work once one of the `redis` crate's TLS features is
/// enabled in your build (e.g. `redis = { version = "1", features =
/// ["tokio-rustls-comp"] }`, with a rustls crypto provider); for your own CA
/// or client certificates build the client with `Client::build_with_tls` and
/// pass it to [`from_client`](RedisStore::from_client).
///
/// ```no_run
/// use tower_oauth::{OAuthLayer, RedisStore};
///
/// # fn main() -> Result<(), tower_oauth::ConfigError> {
/// let oauth = OAuthLayer::builder()
///     .auth_url("https://auth.example.com")
///     .client_id("my-client")
///     .client_secret("my-secret")
///     .token_store(RedisStore::new("redis://:password@redis.internal:6379")?.prefix("billing:"))
///     .build()?;
/// # Ok(()) }
/// ```
pub struct RedisStore {
    deployment: Deployment,
    scripts: Scripts,
    /// Made when first needed; through Sentinel, made again after an error.
    connection: Mutex<Option<Connection>>,
    prefix: String,
    timeout: Duration,
    degraded: AtomicBool,
    /// The user's sealing key, instead of the one derived from the client.
    sealing: Option<[u8; 32]>,
    /// Waiters subscribe to the news of a landed token.
    notifications: bool,
    /// Warned that a stored value did not open.
    warned_unopened: AtomicBool,
    /// Warned that nothing could be sealed.
    warned_unsealed: AtomicBool,
    /// Per Redis key, the token this replica last took or stored there and
    /// its sealed value: a refused token is deleted only if Redis still
    /// holds exactly that value.
    handed_out: Mutex<HashMap<String, (String, String)>>,
}

/// The store's Lua scripts, their digests computed once.
struct Scripts {
    read: Script,
    store: Script,
    delete_if_equal: Script,
}

impl Scripts {
    fn new() -> Self {
        Scripts {
            read: Script::new(READ),
            store: Script::new(STORE),
            delete_if_equal: Script::new(DELETE_IF_EQUAL),
        }
    }
}

/// What went wrong: Redis (fall back), or the token request (report).
enum Problem {
    Redis(String),
    Token(TokenError),
}

impl From<RedisError> for Problem {
    fn from(e: RedisError) -> Self {
        // Redis errors name the command and the server's answer, never our
        // values; the URL (with a password) is not part of them.
        Problem::Redis(format!("{:?}: {}", e.kind(), e.detail().unwrap_or("")))
    }
}

impl RedisStore {
    /// A store on the Redis at `url` (`redis://`, `rediss://`, `unix://`;
    /// a password may be given in the URL). No connection is made until a
    /// token is needed.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when the URL cannot be used (the message never
    /// shows a password).
    pub fn new(url: impl AsRef<str>) -> Result<Self, ConfigError> {
        Ok(Self::from_client(redis_connection::client(url.as_ref())?))
    }

    /// A store on a Redis Cluster (feature `redis-cluster`), known by the
    /// URLs of some of its nodes (`redis://host:port`, `rediss://` with a
    /// TLS feature of the `redis` crate; a password in the first URL is used
    /// for every node). The cluster's other nodes, and where each key lives,
    /// are learnt from it, and learnt again when a master fails over.
    ///
    /// Every key of one token (the token, a shared failure, the lock, the
    /// channel its news goes out on) carries the same hash tag, so it lives
    /// in one hash slot, and reading the token and failure together stays
    /// atomic. Waiting replicas subscribe to the news on whichever of the
    /// given nodes answers (a cluster passes every message to every node).
    /// No connection is made until a token is needed.
    ///
    /// ```no_run
    /// use tower_oauth::{OAuthLayer, RedisStore};
    ///
    /// # fn main() -> Result<(), tower_oauth::ConfigError> {
    /// let store = RedisStore::cluster([
    ///     "redis://:password@redis-0.internal:6379",
    ///     "redis://:password@redis-1.internal:6379",
    ///     "redis://:password@redis-2.internal:6379",
    /// ])?;
    /// let oauth = OAuthLayer::builder()
    ///     .auth_url("https://auth.example.com")
    ///     .client_id("my-client")
    ///     .client_secret("my-secret")
    ///     .token_store(store)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when no URL is given, or one cannot be used (the
    /// message never shows a password).
    #[cfg(feature = "redis-cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis-cluster")))]
    pub fn cluster(nodes: impl IntoIterator<Item = impl AsRef<str>>) -> Result<Self, ConfigError> {
        Ok(Self::on(Deployment::cluster(nodes)?))
    }

    /// A store on the master that Redis Sentinel names (feature
    /// `redis-sentinel`): `sentinels` are the URLs of some of the Sentinels
    /// (`redis://host:26379`; a username and password in the first are
    /// used for the Sentinels and for the master alike), `master_name` the
    /// name they monitor it under. The master is asked for when a
    /// connection is first needed, and asked for again after any Redis
    /// error, so a failover costs the fleet no more than the time Sentinel
    /// takes to promote a replica (meanwhile a renewal ahead waits on the
    /// token in hand, and a replica without a usable token fetches alone). No connection is made until a token is
    /// needed.
    ///
    /// ```no_run
    /// use tower_oauth::RedisStore;
    ///
    /// # fn main() -> Result<(), tower_oauth::ConfigError> {
    /// let store = RedisStore::sentinel(
    ///     [
    ///         "redis://:password@sentinel-0.internal:26379",
    ///         "redis://:password@sentinel-1.internal:26379",
    ///         "redis://:password@sentinel-2.internal:26379",
    ///     ],
    ///     "tokens",
    /// )?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when no URL is given, one cannot be used (the
    /// message never shows a password), or `master_name` is empty.
    #[cfg(feature = "redis-sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis-sentinel")))]
    pub fn sentinel(
        sentinels: impl IntoIterator<Item = impl AsRef<str>>,
        master_name: impl AsRef<str>,
    ) -> Result<Self, ConfigError> {
        Ok(Self::on(Deployment::sentinel(
            sentinels,
            master_name.as_ref(),
        )?))
    }

    /// A store on an already configured [`redis::Client`] (of the `redis`
    /// crate, version 1): for TLS with your own roots or client certificates
    /// (`Client::build_with_tls`), or any other connection setting. No
    /// connection is made until a token is needed.
    pub fn from_client(client: Client) -> Self {
        Self::on(Deployment::Server(client))
    }

    fn on(deployment: Deployment) -> Self {
        RedisStore {
            deployment,
            scripts: Scripts::new(),
            connection: Mutex::new(None),
            prefix: DEFAULT_REDIS_PREFIX.to_owned(),
            timeout: DEFAULT_REDIS_TIMEOUT,
            degraded: AtomicBool::new(false),
            sealing: None,
            notifications: true,
            warned_unopened: AtomicBool::new(false),
            warned_unsealed: AtomicBool::new(false),
            handed_out: Mutex::new(HashMap::new()),
        }
    }

    /// Whether replicas waiting for another's fetch subscribe to the news
    /// that its token landed (Redis pub/sub, one channel per key) and are
    /// woken at once; without, they poll every 25 ms: for a Redis whose ACL
    /// refuses `SUBSCRIBE`. Fetching replicas publish either way.
    ///
    /// Default: `true`.
    #[must_use]
    pub fn notifications(mut self, on: bool) -> Self {
        self.notifications = on;
        self
    }

    /// Seals stored values under `key` (32 bytes, from your secret store)
    /// instead of the key derived from the client's credential: for clients
    /// whose key never leaves a KMS, or to rotate client secrets without the
    /// fleet losing its shared token. Every replica sharing the token needs
    /// the same key.
    ///
    /// Default: derived from the client's credential.
    #[must_use]
    pub fn encryption_key(mut self, key: [u8; 32]) -> Self {
        self.sealing = Some(key);
        self
    }

    /// The start of every key this store writes, to keep apart applications
    /// sharing one Redis. Leave braces out of it: the part of a key in the
    /// first pair of braces is what a Redis Cluster hashes, and the store
    /// puts the token's identity there.
    ///
    /// Default: `tower-oauth:`.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest one Redis operation may take before the replica stops
    /// waiting for Redis and fetches on its own.
    ///
    /// Default: 250 ms.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The key of the shared token for `identity`: the prefix, then the
    /// identity in braces (`tower-oauth:{…}`). The braces make it the key's
    /// hash tag: the token's other keys
    /// (`…:failure`, `…:lock`, and the channel `…:landed`) extend this one,
    /// so on a Redis Cluster they all live in one hash slot.
    pub fn key(&self, identity: &str) -> String {
        format!("{}{{{}}}", self.prefix, identity)
    }

    async fn connection(&self) -> Result<Connection, Problem> {
        if let Some(c) = self.lock_connection().as_ref() {
            return Ok(c.clone());
        }
        let made = self.deployment.connect(self.timeout).await?;
        Ok(self.lock_connection().get_or_insert(made).clone())
    }

    fn lock_connection(&self) -> std::sync::MutexGuard<'_, Option<Connection>> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one Redis operation, bounded by the store's timeout.
    async fn bounded<T>(
        &self,
        op: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, Problem> {
        match timeout(self.timeout, op).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(Problem::Redis(format!(
                "no answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// What Redis holds for `key`: the shared token and its remaining time
    /// (if readable), and a failure another replica reported (if recent).
    async fn read(&self, key: &str, sealer: &Sealer) -> Result<Shared, Problem> {
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
        let token = match (value, u64::try_from(pttl)) {
            (Some(value), Ok(ms)) => self
                .open(sealer, key, &value)
                .and_then(|json| AccessToken::from_json(&json).ok())
                .map(|token| {
                    let sealed = (token.expose_token().to_owned(), value);
                    (
                        SharedToken {
                            token,
                            usable_for: Duration::from_millis(ms),
                        },
                        sealed,
                    )
                }),
            _ => None,
        };
        let failure = match (failure, u64::try_from(failure_pttl)) {
            (Some(f), Ok(ms)) => self.open(sealer, &failure_key, &f).and_then(|json| {
                decode_failure(&String::from_utf8_lossy(&json), Duration::from_millis(ms))
            }),
            _ => None,
        };
        Ok(Shared { token, failure })
    }

    /// `value` opened, or `None` (said once) when it does not open.
    fn open(&self, sealer: &Sealer, key: &str, value: &str) -> Option<Vec<u8>> {
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

    /// Remembers that `token`, sealed as `sealed`, was handed out from `key`.
    /// Bounded: past [`MAX_HANDED_OUT`] keys (token slots churned through
    /// the store) it starts afresh, and a token refused meanwhile is left in
    /// Redis until it expires (its refusals stay rate-limited).
    fn handed_out(&self, key: &str, token: &str, sealed: String) {
        let mut handed_out = self
            .handed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if handed_out.len() >= MAX_HANDED_OUT && !handed_out.contains_key(key) {
            handed_out.clear();
        }
        handed_out.insert(key.to_owned(), (token.to_owned(), sealed));
    }

    /// The token from Redis, or fetched for the fleet under the lock;
    /// waiting for another replica's no later than `give_up`.
    async fn shared(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer,
        give_up: Instant,
    ) -> Result<SharedToken, Problem> {
        let key = self.key(ctx.identity());
        let lock = format!("{key}:lock");
        let lock_ttl = lock_ttl(ctx);
        let nonce = random_hex();
        let mut waited = false;
        let mut wake: Option<Wake> = None;
        loop {
            let now = self.read(&key, sealer).await?;
            if let Some((shared, (token, sealed))) = now.token.filter(|(t, _)| ctx.is_fresh(t)) {
                ctx.record(StoreEvent::TookShared);
                self.handed_out(&key, &token, sealed);
                return Ok(shared);
            }
            if let Some(failure) = now.failure {
                // Another replica just failed: do not ask the endpoint again
                // before its back-off is over.
                return Err(Problem::Token(failure));
            }
            let mut con = self.connection().await?;
            let acquired: Option<String> = self
                .bounded(
                    redis::cmd("SET")
                        .arg(&lock)
                        .arg(&nonce)
                        .arg("NX")
                        .arg("PX")
                        .arg(millis(lock_ttl))
                        .query_async(&mut con),
                )
                .await?;
            if acquired.is_some() {
                return self
                    .fetch_under_lock(ctx, sealer, &key, &lock, &nonce)
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
                        wake = self.subscribe(&landed_channel(&key)).await;
                    }
                    if wake.is_none() {
                        sleep(POLL).await;
                    }
                }
            }
        }
    }

    /// A subscription to `channel`, or `None` (the waiter polls) when
    /// Redis does not give one in time.
    async fn subscribe(&self, channel: &str) -> Option<Wake> {
        let pubsub = self.deployment.subscribe(channel, self.timeout).await?;
        Some(Wake { pubsub })
    }

    async fn fetch_under_lock(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer,
        key: &str,
        lock: &str,
        nonce: &str,
    ) -> Result<SharedToken, Problem> {
        // Another replica may have stored a token, or a failure, just before
        // we locked.
        let outcome = match self.read(key, sealer).await {
            Ok(Shared {
                token: Some((shared, (token, sealed))),
                ..
            }) if ctx.is_fresh(&shared) => {
                ctx.record(StoreEvent::TookShared);
                self.handed_out(key, &token, sealed);
                Ok(shared)
            }
            Ok(Shared {
                failure: Some(failure),
                ..
            }) => Err(failure),
            _ => {
                ctx.record(StoreEvent::FetchedForFleet);
                ctx.fetch().await
            }
        };
        let mut con = self.connection().await?;
        let shared = match &outcome {
            Ok(shared) => {
                let Some(sealed) = sealer.seal(key, token_json(&shared.token).as_bytes()) else {
                    return outcome.map_err(Problem::Token);
                };
                self.handed_out(key, shared.token.expose_token(), sealed.clone());
                self.bounded(
                    self.scripts
                        .store
                        .key(key)
                        .key(failure_key(key))
                        .arg(sealed)
                        .arg(millis(shared.usable_for).max(1))
                        .arg(landed_channel(key))
                        .arg("token")
                        .invoke_async::<()>(&mut con),
                )
                .await
            }
            Err(e) => {
                // The fleet holds back as long as this replica will.
                let hold = ctx.hold_after(e);
                let failure_key = failure_key(key);
                let Some(sealed) = sealer.seal(&failure_key, encode_failure(e).as_bytes()) else {
                    return outcome.map_err(Problem::Token);
                };
                self.bounded(
                    self.scripts
                        .store
                        .key(failure_key)
                        .arg(sealed)
                        .arg(millis(hold).max(1))
                        .arg(landed_channel(key))
                        .arg("failure")
                        .invoke_async::<()>(&mut con),
                )
                .await
            }
        };
        if let Err(Problem::Redis(e)) = shared {
            // The outcome stands; only sharing it failed.
            self.redis_failed(&e);
        }
        let _ = self
            .bounded(
                self.scripts
                    .delete_if_equal
                    .key(lock)
                    .arg(nonce)
                    .invoke_async::<i64>(&mut con),
            )
            .await;
        outcome.map_err(Problem::Token)
    }

    fn redis_failed(&self, why: &str) {
        if self.deployment.forget() {
            // Through Sentinel: the next operation asks which server is
            // master now.
            self.lock_connection().take();
        }
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
    token: Option<(SharedToken, (String, String))>,
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

/// A failed fetch as JSON, for the other replicas: its kind, status, the
/// endpoint's code and text (already scrubbed of the secret) and message.
fn encode_failure(e: &TokenError) -> String {
    let mut map = serde_json::Map::new();
    map.insert("kind".into(), kind_name(e.kind()).into());
    if let Some(status) = e.status() {
        map.insert("status".into(), status.as_u16().into());
    }
    if let Some(code) = e.error_code() {
        map.insert("error".into(), code.into());
    }
    if let Some(text) = e.error_description() {
        map.insert("error_description".into(), text.into());
    }
    if let Some(detail) = e.detail() {
        map.insert("message".into(), detail.into());
    }
    serde_json::Value::Object(map).to_string()
}

/// The failure another replica reported; `left` is how long the fleet still
/// holds back. Anything unreadable counts as no failure.
fn decode_failure(json: &str, left: Duration) -> Option<TokenError> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let text = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let kind = match text("kind")?.as_str() {
        "transport" => TokenErrorKind::Transport,
        "timeout" => TokenErrorKind::Timeout,
        "status" => TokenErrorKind::Status,
        "invalid_response" => TokenErrorKind::InvalidResponse,
        "panic" => TokenErrorKind::Panic,
        "signing" => TokenErrorKind::Signing,
        "invalid_request" => TokenErrorKind::InvalidRequest,
        _ => TokenErrorKind::Runtime,
    };
    let status = value
        .get("status")
        .and_then(|s| s.as_u64())
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| http::StatusCode::from_u16(s).ok());
    let by_another = "reported by another replica sharing this token";
    let error = TokenError::new(kind).with_message(match text("message") {
        Some(detail) => format!("{detail} ({by_another})"),
        None => by_another.to_owned(),
    });
    Some(match (kind, status) {
        (TokenErrorKind::Status, Some(status)) => {
            error.with_status(status, text("error"), text("error_description"), Some(left))
        }
        _ => error.with_retry_after(left),
    })
}

fn kind_name(kind: TokenErrorKind) -> &'static str {
    match kind {
        TokenErrorKind::Transport => "transport",
        TokenErrorKind::Timeout => "timeout",
        TokenErrorKind::Status => "status",
        TokenErrorKind::InvalidResponse => "invalid_response",
        TokenErrorKind::Runtime => "runtime",
        TokenErrorKind::Panic => "panic",
        TokenErrorKind::Signing => "signing",
        TokenErrorKind::InvalidRequest => "invalid_request",
    }
}

/// The token as JSON in the token endpoint's shape (read back with
/// [`AccessToken::from_json`]); `expires_in` is the lifetime first announced.
fn token_json(token: &AccessToken) -> String {
    let mut map = serde_json::Map::new();
    map.insert("access_token".into(), token.expose_token().into());
    let fields = [
        ("token_type", token.token_type()),
        ("scope", token.scope()),
        ("application_name", token.application_name()),
        ("developer.email", token.developer_email()),
        ("issued_at", token.issued_at()),
        ("client_id", token.client_id()),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            map.insert(name.into(), value.into());
        }
    }
    // The lifetime the layer uses, whatever its source (`expires_in`, a
    // JWT's `exp`, or the default), so that every replica reckons the same.
    map.insert("expires_in".into(), token.lifetime().as_secs_f64().into());
    if let Some(r) = token.refresh_in() {
        map.insert("refresh_in".into(), r.as_secs_f64().into());
    }
    serde_json::Value::Object(map).to_string()
}

/// 128 random bits as hex: a lock value no other replica holds.
fn random_hex() -> String {
    use crate::random::random_u64;
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// Whether a fetch whose Redis did not answer may wait and try Redis again
/// rather than fetch alone: before `until`, and while the layer's token in
/// hand (asked anew: it may have been refused meanwhile) leaves a fetch
/// timeout and a margin after the wait.
fn may_ride_out(ctx: &FetchContext<'_>, until: Instant) -> bool {
    let spare = RIDE_OUT_RETRY + ctx.fetch_timeout() + RIDE_OUT_MARGIN;
    Instant::now() + RIDE_OUT_RETRY < until && ctx.serving_for().is_some_and(|left| left > spare)
}

/// How long the fetch lock lives: a holder that died releases it by then.
fn lock_ttl(ctx: &FetchContext<'_>) -> Duration {
    ctx.fetch_timeout() + Duration::from_secs(1)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl TokenStore for RedisStore {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<SharedToken, TokenError>> {
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
            let sealer = Sealer::new(key);
            let started = Instant::now();
            // Waiting on another replica ends by then; with a fetch alone
            // after it, the whole stays within the layer's bound for a fetch.
            let give_up = started + lock_ttl(ctx) + ctx.fetch_timeout();
            // A renewal ahead, while the token in hand still serves, tries
            // Redis again for a while rather than fetch alone: a failover
            // passes, and the fleet still makes one token request.
            let ride_out_until = started + 2 * ctx.fetch_timeout();
            let mut outcome = self.shared(ctx, &sealer, give_up).await;
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
            let sealed = {
                let handed_out = self
                    .handed_out
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                match handed_out.get(&key) {
                    Some((t, sealed)) if t == token.expose_token() => sealed.clone(),
                    // Not a token this replica had from Redis.
                    _ => return,
                }
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
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connection info holds the password: not shown.
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("degraded", &self.degraded.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_token_reads_back_the_same() {
        let t = AccessToken::from_json(
            br#"{"access_token":"abc","token_type":"BearerToken","expires_in":"1799",
                 "scope":"","application_name":"app","developer.email":"d@example.com",
                 "issued_at":"1416157639014","client_id":"cid","unknown":"x"}"#,
        )
        .unwrap();
        assert_eq!(
            AccessToken::from_json(token_json(&t).as_bytes()).unwrap(),
            t
        );
    }

    #[test]
    fn lock_values_differ() {
        let (a, b) = (random_hex(), random_hex());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
