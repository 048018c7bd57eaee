//! [`RedisStore`]: one token, and one token request, for a whole fleet.
//!
//! This file holds its settings and deployments. `protocol` reads, locks,
//! fetches, stores and wakes; `lock` keeps the lock alive while its holder
//! works, and fences the chain's writes by it. `accounts` keeps pending
//! logins, links and sign-outs; `watch` hears the accounts' news. `scripts` holds its Lua scripts. `connection`
//! connects to one server, a cluster, or Sentinel's master.

mod accounts;
mod connection;
mod lock;
mod protocol;
mod scripts;
mod watch;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redis::{Client, RedisError};

use self::connection::{Connection, Deployment};
use self::scripts::Scripts;
use crate::error::{ConfigError, TokenError};

/// Default of [`RedisStore::prefix`]: `tower-oauth:`.
const DEFAULT_REDIS_PREFIX: &str = "tower-oauth:";

/// Default of [`RedisStore::timeout`]: 250 ms.
const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// How long a replica stays in the list after its last heartbeat: a
/// replica gone (or cut off from Redis) leaves it by then, so a sign-out
/// waits at most this long for one that was killed. Six beats. A replica
/// slower than that for a while (a busy machine, a stopped process) leaves
/// the list, and until a beat of its own lands again it presents no
/// account's token from memory (each request reads the store).
const WATCH_TTL: Duration = Duration::from_millis(1500);

/// How long the store's epoch (what tells a Redis that lost its data from
/// the one before) lives after the last beat of any replica.
const EPOCH_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Shares tokens among the replicas of a service through Redis, with feature
/// `redis`. The Redis may be one server ([`new`](RedisStore::new)), a Redis
/// Cluster ([`cluster`](RedisStore::cluster), feature `redis-cluster`), or the
/// master that Redis Sentinel names ([`sentinel`](RedisStore::sentinel),
/// feature `redis-sentinel`).
///
/// **One token for the fleet.** Replicas share one token under one key when
/// their layers have the same token URL, client id, client authentication,
/// client certificate, DPoP key and parameters. The key is `prefix{hash}`. The
/// hash is the SHA-256 of the token's identity, and never contains the secret.
/// The token is stored with a time-to-live equal to its remaining usable time.
///
/// **One token request.** A replica that needs a token reads Redis first. Only
/// when there is no fresh one does it fetch. It fetches under a lock, `SET NX
/// PX` with a value of its own, which only its holder releases. So concurrent
/// cold starts and renewals across the fleet make one token request. The others
/// subscribe to the key's news. They are woken when the token or a failure is
/// stored. If none comes, they look again every 500 ms. If they cannot
/// subscribe, they poll every 25 ms. A lock whose holder died expires on its
/// own, a second after the fetch timeout.
///
/// **Refusals and failures.** A token the API refused is deleted from Redis
/// only if Redis still holds that same token. A failed fetch is recorded for
/// its back-off: the endpoint's `Retry-After`, or the layer's minimum back-off.
/// Meanwhile the other replicas get the same error without asking the endpoint.
///
/// **Redis never fails a request.** Redis may be unreachable, slow or hold
/// garbage. Each operation is bounded by [`timeout`](RedisStore::timeout). The
/// replica then fetches and caches on its own, warns once, and goes back to
/// Redis when it answers again. A renewal ahead of expiry, whose token in hand
/// still serves, first tries Redis again every 250 ms. It tries for up to two
/// fetch timeouts, as long as the token leaves a fetch timeout and a second to
/// spare. A failover or restart that short passes without every replica
/// fetching a token of its own.
///
/// **Security.** The token and a shared failure are stored sealed with
/// AES-256-GCM. The key is derived with HKDF-SHA256 from the client's own
/// credential: its secret, its private key, or its TLS client key. Every
/// replica holds that credential, and Redis never sees it. You can give a key
/// of yours instead, with [`encryption_key`](RedisStore::encryption_key). Each
/// value is bound to its Redis key and to the whole identity of the token, as
/// SECURITY.md says.
///
/// - Someone who can read Redis sees keys, expiry times and sealed values, but
///   no token. The keys are hashes, never the secret.
/// - Someone who can write Redis can delete or replace values. Replicas cannot
///   open a replaced value. It counts as no token, a replica fetches and
///   overwrites it, and a warning says so once.
/// - A layer with no credential of its own, such as one whose key is in a KMS,
///   and no [`encryption_key`](RedisStore::encryption_key) does not share
///   through Redis at all. It says so once.
///
/// Protect Redis all the same. Use a password, as in `redis://:password@host`
/// or `redis://user:password@host`, or ACLs. Across networks, use TLS:
/// `rediss://` URLs work once one of the `redis` crate's TLS features is
/// enabled in your build. For example, `redis = { version = "1", features =
/// ["tokio-rustls-comp"] }`, with a rustls crypto provider. For your own CA or
/// client certificates, build the client with `Client::build_with_tls` and pass
/// it to [`from_client`](RedisStore::from_client).
///
/// ```no_run
/// use tower_oauth::{OAuthLayer, store::RedisStore};
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
    deployment: std::sync::Arc<Deployment>,
    scripts: Scripts,
    /// Made when first needed. Through Sentinel, made again after an error.
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
    handed_out: crate::store::HandedOut,
    /// The layers that watch the accounts' news, and the task that hears it.
    watch: watch::Watch,
}

/// What went wrong: Redis (fall back), or the token request (report).
enum Problem {
    Redis(String),
    Token(TokenError),
}

impl Problem {
    /// What went wrong, as text.
    pub(super) fn text(self) -> String {
        match self {
            Problem::Redis(why) => why,
            Problem::Token(e) => e.to_string(),
        }
    }
}

impl From<RedisError> for Problem {
    fn from(e: RedisError) -> Self {
        Problem::Redis(describe(&e))
    }
}

/// Why Redis failed, for a log line. It gives the error's kind, and what went
/// wrong on the connection when it is an I/O error: refused, timed out or
/// dropped. It then gives the error's own text: the server's answer, or the I/O
/// or TLS error, such as "Connection refused (os error 111)". Redis errors name
/// the command and the server's answer, never our values. The URL, which may
/// hold a password, is not part of them.
fn describe(e: &RedisError) -> String {
    let what = if e.is_connection_refusal() {
        " (connection refused)"
    } else if e.is_timeout() {
        " (timed out)"
    } else if e.is_connection_dropped() {
        " (connection dropped)"
    } else {
        ""
    };
    let text = match e.detail() {
        Some(detail) => detail.to_owned(),
        None => e.to_string(),
    };
    crate::error::clip(&format!("{:?}{what}: {text}", e.kind()))
}

impl RedisStore {
    /// A store on the Redis at `url`: `redis://`, `rediss://` or `unix://`. A
    /// password may be given in the URL. No connection is made until a token is
    /// needed.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when the URL cannot be used. The message never shows a
    /// password.
    pub fn new(url: impl AsRef<str>) -> Result<Self, ConfigError> {
        Ok(Self::from_client(connection::client(url.as_ref())?))
    }

    /// A store on a Redis Cluster, with feature `redis-cluster`. The cluster is
    /// known by the URLs of some of its nodes: `redis://host:port`, or
    /// `rediss://` with a TLS feature of the `redis` crate. A password in the
    /// first URL is used for every node. The store learns the cluster's other
    /// nodes, and where each key lives, from them. It learns them again when a
    /// master fails over.
    ///
    /// Every key of one token carries the same hash tag: the token, a shared
    /// failure, the lock and the channel its news goes out on. So they live in
    /// one hash slot, and reading the token and failure together stays atomic.
    /// Waiting replicas subscribe to the news on whichever of the given nodes
    /// answers. A cluster passes every message to every node. No connection is
    /// made until a token is needed.
    ///
    /// ```no_run
    /// use tower_oauth::{OAuthLayer, store::RedisStore};
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
    /// A [`ConfigError`] when no URL is given, or when one cannot be used. The
    /// message never shows a password.
    #[cfg(feature = "redis-cluster")]
    pub fn cluster(nodes: impl IntoIterator<Item = impl AsRef<str>>) -> Result<Self, ConfigError> {
        Ok(Self::on(Deployment::cluster(nodes)?))
    }

    /// A store on the master that Redis Sentinel names, with feature
    /// `redis-sentinel`. `sentinels` are the URLs of some of the Sentinels,
    /// such as `redis://host:26379`. A username and password in the first URL
    /// are used for the Sentinels and for the master alike. `master_name` is
    /// the name they monitor the master under.
    ///
    /// The master is asked for when a connection is first needed. It is asked
    /// for again after any Redis error. So a failover costs the fleet no more
    /// than the time Sentinel takes to promote a replica. Meanwhile a renewal
    /// ahead waits on the token in hand, and a replica without a usable token
    /// fetches alone. No connection is made until a token is needed.
    ///
    /// ```no_run
    /// use tower_oauth::store::RedisStore;
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
    /// A [`ConfigError`] when no URL is given, when one cannot be used, or when
    /// `master_name` is empty. The message never shows a password.
    #[cfg(feature = "redis-sentinel")]
    pub fn sentinel(
        sentinels: impl IntoIterator<Item = impl AsRef<str>>,
        master_name: impl AsRef<str>,
    ) -> Result<Self, ConfigError> {
        Ok(Self::on(Deployment::sentinel(
            sentinels,
            master_name.as_ref(),
        )?))
    }

    /// A store on an already configured [`redis::Client`] of the `redis` crate,
    /// version 1. Use it for TLS with your own roots or client certificates,
    /// built with `Client::build_with_tls`, or for any other connection
    /// setting. No connection is made until a token is needed.
    pub fn from_client(client: Client) -> Self {
        Self::on(Deployment::Server(client))
    }

    fn on(deployment: Deployment) -> Self {
        RedisStore {
            deployment: std::sync::Arc::new(deployment),
            scripts: Scripts::new(),
            connection: Mutex::new(None),
            prefix: DEFAULT_REDIS_PREFIX.to_owned(),
            timeout: DEFAULT_REDIS_TIMEOUT,
            degraded: AtomicBool::new(false),
            sealing: None,
            notifications: true,
            warned_unopened: AtomicBool::new(false),
            warned_unsealed: AtomicBool::new(false),
            handed_out: Default::default(),
            watch: Default::default(),
        }
    }

    /// Whether replicas that wait for another's fetch subscribe to the news
    /// that its token landed, and are woken at once. The news goes through
    /// Redis pub/sub, one channel per key. Without it, they poll every 25 ms.
    /// Turn it off for a Redis whose ACL refuses `SUBSCRIBE`. Fetching replicas
    /// publish either way.
    ///
    /// Default: `true`.
    #[must_use]
    pub fn notifications(mut self, on: bool) -> Self {
        self.notifications = on;
        self
    }

    /// Seals stored values under `key`, 32 bytes from your secret store,
    /// instead of the key derived from the client's credential. Use it for
    /// clients whose key never leaves a KMS, or to rotate client secrets
    /// without the fleet losing its shared token. Every replica that shares the
    /// token needs the same key.
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
    /// waiting for Redis and fetches on its own. Anything longer than 24
    /// hours is taken as 24 hours.
    ///
    /// Default: 250 ms.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.min(crate::policy::MAX_SETTING);
        self
    }

    /// The key of the shared token for `identity`: the prefix, then the
    /// identity in braces, as in `tower-oauth:{…}`. The braces make it the
    /// key's hash tag. The token's other keys extend this one: `…:failure`,
    /// `…:lock`, and the channel `…:landed`. So on a Redis Cluster they all
    /// live in one hash slot.
    pub fn key(&self, identity: &str) -> String {
        format!("{}{{{}}}", self.prefix, identity)
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

/// `d` in whole milliseconds, as Redis takes a time.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
