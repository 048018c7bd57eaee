//! Where the Redis store's commands and subscriptions go: one server, a
//! Redis Cluster (feature `redis-cluster`), or the master Redis Sentinel
//! names (feature `redis-sentinel`).

#[cfg(feature = "redis-cluster")]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::{Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};

use std::future::Future;
use std::sync::PoisonError;

use redis::RedisError;
use tokio::time::timeout;

use super::Problem;
use crate::error::{ConfigError, ConfigErrorKind};

/// The store's connection, made on first use and kept; its operations,
/// bounded by its timeout.
impl super::RedisStore {
    pub(super) async fn connection(&self) -> Result<Connection, Problem> {
        if let Some(c) = self.lock_connection().as_ref() {
            return Ok(c.clone());
        }
        let made = self.deployment.connect(self.timeout).await?;
        Ok(self.lock_connection().get_or_insert(made).clone())
    }

    pub(super) fn lock_connection(&self) -> std::sync::MutexGuard<'_, Option<Connection>> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one Redis operation, bounded by the store's timeout.
    pub(super) async fn bounded<T>(
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
}

/// The Redis a store talks to.
pub(super) enum Deployment {
    /// One server (or a proxy in front of several).
    Server(Client),
    /// The master a set of Sentinels names: asked for when connecting, and
    /// again after an error (the master may have failed over).
    #[cfg(feature = "redis-sentinel")]
    Sentinel {
        sentinel: Box<tokio::sync::Mutex<redis::sentinel::SentinelClient>>,
        /// The master last named, until an error.
        master: std::sync::Mutex<Option<Client>>,
    },
    /// A Redis Cluster, known by some of its nodes.
    #[cfg(feature = "redis-cluster")]
    Cluster {
        /// Boxed: it is larger than a server's client, and read only when
        /// connecting.
        client: Box<redis::cluster::ClusterClient>,
        /// The nodes given, each on its own: news of landed tokens is
        /// subscribed to on any one of them (the cluster passes every
        /// `PUBLISH` to every node).
        nodes: Vec<Client>,
        /// The node the last subscription was made on, tried first.
        subscribed_at: AtomicUsize,
    },
}

/// A connection that commands and pipelines are sent over, cheap to clone.
#[derive(Clone)]
pub(super) enum Connection {
    Server(ConnectionManager),
    #[cfg(feature = "redis-cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

/// A URL for the `redis` crate, or an error that never shows its password.
pub(super) fn client(url: &str) -> Result<Client, ConfigError> {
    Client::open(url).map_err(|e| {
        ConfigError::new(
            ConfigErrorKind::InvalidUrl,
            format!("the Redis URL cannot be used ({:?})", e.kind()),
        )
    })
}

impl Deployment {
    /// A cluster known by `nodes` (at least one; each a Redis URL).
    #[cfg(feature = "redis-cluster")]
    pub(super) fn cluster(
        nodes: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<Self, ConfigError> {
        let nodes = nodes
            .into_iter()
            .map(|url| client(url.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if nodes.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidUrl,
                "a Redis Cluster needs the URL of at least one of its nodes",
            ));
        }
        let client = redis::cluster::ClusterClient::builder(
            nodes.iter().map(|n| n.get_connection_info().clone()),
        )
        .build()
        .map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::InvalidUrl,
                format!("the Redis Cluster nodes cannot be used ({:?})", e.kind()),
            )
        })?;
        Ok(Deployment::Cluster {
            client: Box::new(client),
            nodes,
            subscribed_at: AtomicUsize::new(0),
        })
    }

    /// The master the Sentinels named (feature `redis-sentinel`), known
    /// by `sentinels` (URLs; a username and password in the first are used
    /// for the Sentinels and the master alike).
    #[cfg(feature = "redis-sentinel")]
    pub(super) fn sentinel(
        sentinels: impl IntoIterator<Item = impl AsRef<str>>,
        master_name: &str,
    ) -> Result<Self, ConfigError> {
        use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
        let sentinels = sentinels
            .into_iter()
            .map(|url| client(url.as_ref()).map(|c| c.get_connection_info().clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(first) = sentinels.first() else {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidUrl,
                "Redis Sentinel needs the URL of at least one Sentinel",
            ));
        };
        if master_name.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidSetting,
                "Redis Sentinel needs the name of the master it monitors",
            ));
        }
        let master = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(first.redis_settings().clone());
        // A `String`: `build` takes one, or any `AsRef<str>` when the
        // `redis` crate's `tls-rustls` feature is on.
        let name: String = master_name.into();
        let sentinel =
            SentinelClient::build(sentinels, name, Some(master), SentinelServerType::Master)
                .map_err(|e| {
                    ConfigError::new(
                        ConfigErrorKind::InvalidUrl,
                        format!("the Redis Sentinel URLs cannot be used ({:?})", e.kind()),
                    )
                })?;
        Ok(Deployment::Sentinel {
            sentinel: Box::new(tokio::sync::Mutex::new(sentinel)),
            master: std::sync::Mutex::new(None),
        })
    }

    /// A connection that connects (and reconnects) on its own when first
    /// used, each attempt and answer bounded by `timeout`. Through Sentinel,
    /// to the master it names now. Needs a Tokio runtime.
    pub(super) async fn connect(&self, timeout: Duration) -> RedisResult<Connection> {
        match self {
            Deployment::Server(client) => server_connection(client.clone(), timeout),
            #[cfg(feature = "redis-sentinel")]
            Deployment::Sentinel { .. } => server_connection(self.master(timeout).await?, timeout),
            #[cfg(feature = "redis-cluster")]
            Deployment::Cluster { client, .. } => {
                let config = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(timeout)
                    .set_response_timeout(timeout);
                Ok(Connection::Cluster(
                    client.get_pending_async_connection_with_config(config),
                ))
            }
        }
    }

    /// The master the Sentinels name, as last asked, or asked now.
    #[cfg(feature = "redis-sentinel")]
    async fn master(&self, timeout: Duration) -> RedisResult<Client> {
        let Deployment::Sentinel { sentinel, master } = self else {
            unreachable!("only a Sentinel deployment has a master to ask for")
        };
        let known = master
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(client) = known {
            return Ok(client);
        }
        let asked = async { sentinel.lock().await.async_get_client().await };
        let client = tokio::time::timeout(timeout, asked).await.map_err(|_| {
            redis::RedisError::from((redis::ErrorKind::Io, "no Sentinel named the master in time"))
        })??;
        *master
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }

    /// Whether the deployment has replicas of its master by design
    /// (Sentinel's): a write that must survive a failover waits for one.
    pub(super) fn has_replicas(&self) -> bool {
        match self {
            #[cfg(feature = "redis-sentinel")]
            Deployment::Sentinel { .. } => true,
            _ => false,
        }
    }

    /// After an error: whether connections made so far should be dropped
    /// (through Sentinel, the master may have changed: it is asked for
    /// again).
    pub(super) fn forget(&self) -> bool {
        match self {
            #[cfg(feature = "redis-sentinel")]
            Deployment::Sentinel { master, .. } => {
                *master
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                true
            }
            _ => false,
        }
    }

    /// A subscription to `channel`, each attempt bounded by `timeout`. On a
    /// cluster, on the first node (of those given) that answers. Through
    /// Sentinel, on the master.
    pub(super) async fn subscribe(&self, channel: &str, timeout: Duration) -> Option<PubSub> {
        match self {
            Deployment::Server(client) => subscribe_on(client, channel, timeout).await,
            #[cfg(feature = "redis-sentinel")]
            Deployment::Sentinel { .. } => {
                let master = self.master(timeout).await.ok()?;
                subscribe_on(&master, channel, timeout).await
            }
            #[cfg(feature = "redis-cluster")]
            Deployment::Cluster {
                nodes,
                subscribed_at,
                ..
            } => {
                let first = subscribed_at.load(Ordering::Relaxed);
                for i in (0..nodes.len()).map(|i| (first + i) % nodes.len()) {
                    if let Some(pubsub) = subscribe_on(&nodes[i], channel, timeout).await {
                        subscribed_at.store(i, Ordering::Relaxed);
                        return Some(pubsub);
                    }
                }
                None
            }
        }
    }
}

/// A connection manager for one server.
fn server_connection(client: Client, timeout: Duration) -> RedisResult<Connection> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_secs(1));
    Ok(Connection::Server(ConnectionManager::new_lazy_with_config(
        client, config,
    )?))
}

async fn subscribe_on(client: &Client, channel: &str, limit: Duration) -> Option<PubSub> {
    let mut pubsub = tokio::time::timeout(limit, client.get_async_pubsub())
        .await
        .ok()?
        .ok()?;
    tokio::time::timeout(limit, pubsub.subscribe(channel))
        .await
        .ok()?
        .ok()?;
    Some(pubsub)
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Server(c) => c.req_packed_command(cmd),
            #[cfg(feature = "redis-cluster")]
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Server(c) => c.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "redis-cluster")]
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Server(c) => c.get_db(),
            #[cfg(feature = "redis-cluster")]
            Connection::Cluster(c) => c.get_db(),
        }
    }
}
