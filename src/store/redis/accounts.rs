//! What the Redis store does for accounts: pending web logins kept with an
//! expiry and taken once; accounts linked to who signed in; an account's
//! sign-out (its tokens deleted, the news published, and each watching
//! replica's word that it dropped them awaited) and its login elsewhere
//! (published); a chain read for a login's status.
//!
//! The replicas that watch (see `watch`) keep a heartbeat in a sorted set,
//! `<prefix>{accounts}:watchers`, scored by Redis's own clock (no replica's
//! clock counts). A sign-out waits until every replica in it has added its
//! id to the sign-out's own set, or has left the list (its heartbeat
//! stopped, or its store was dropped), within [`ACK_WAIT`]. A listing is
//! short ([`WATCH_TTL`]), so that a replica killed mid-way holds up a
//! sign-out for little more; and a replica whose own heartbeat has not
//! landed within it presents no account's token from memory
//! ([`AccountEvent::HeardUntil`](crate::store::AccountEvent::HeardUntil)),
//! so that a sign-out that stopped waiting for it is never undone by it.

use std::time::Duration;

use tokio::time::Instant;

use super::connection::Connection;
use super::scripts::Scripts;
use super::{Problem, RedisStore, EPOCH_TTL, WATCH_TTL};
use crate::endpoint::ChainRecord;
use crate::store::seal::Sealer;
use crate::store::{FetchContext, KeptChain};
use crate::support::random::random_hex;

/// The longest a sign-out waits for the watching replicas' word; past
/// [`WATCH_TTL`], so that a replica that went away meanwhile has left the
/// list by then.
const ACK_WAIT: Duration = Duration::from_secs(3);

/// The most accounts one person's (or session's) links hold: past it, the
/// oldest link goes.
const MAX_LINKS: u32 = 64;

/// How long a sign-out waits for a Redis replica to take its writes
/// (Sentinel's deployments).
const REPLICA_WAIT: Duration = Duration::from_secs(1);

/// How long a pending login taken stays under its taker's own key, for a
/// try again whose first reply came late.
const TAKEN_TTL: Duration = Duration::from_secs(60);

/// How often a sign-out looks whether every replica answered.
const ACK_POLL: Duration = Duration::from_millis(5);

/// Where the news goes, and what the watch task needs to answer it.
pub(super) struct Names {
    pub(super) scripts: Scripts,
    pub(super) channel: String,
    pub(super) watchers_key: String,
    /// What tells a Redis that lost its data from the one before.
    pub(super) epoch_key: String,
    pub(super) prefix: String,
    pub(super) id: String,
    pub(super) timeout: Duration,
}

impl RedisStore {
    /// Where the accounts' news is published.
    pub(super) fn accounts_channel(&self) -> String {
        format!("{}accounts", self.prefix)
    }

    pub(super) fn names(&self) -> Names {
        Names {
            scripts: self.scripts.clone(),
            channel: self.accounts_channel(),
            watchers_key: format!("{}{{accounts}}:watchers", self.prefix),
            epoch_key: format!("{}{{accounts}}:epoch", self.prefix),
            prefix: self.prefix.clone(),
            id: self.watch.id.clone(),
            timeout: self.timeout,
        }
    }

    pub(super) async fn keep_pending(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, String> {
        let key = format!("{}:pending-login", self.key(key));
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(value).arg("PX").arg(ttl_ms(ttl));
        self.query::<()>(&cmd).await?;
        Ok(true)
    }

    /// Takes a pending login once (the `TAKE` script). A reply after the
    /// store's bound is no proof the command failed: it is asked again with
    /// the same taker's key, which holds what a late first try took.
    pub(super) async fn take_pending(&self, key: &str) -> Result<Option<String>, String> {
        let pending = format!("{}:pending-login", self.key(key));
        let taken = format!("{pending}:taken:{}", random_hex());
        self.asked_again(|| async {
            let mut con = self.connection().await?;
            self.bounded(
                self.scripts
                    .take
                    .key(&pending)
                    .key(&taken)
                    .arg(ttl_ms(TAKEN_TTL))
                    .invoke_async::<Option<String>>(&mut con),
            )
            .await
        })
        .await
        .map_err(Problem::text)
    }

    /// `cmd` on the store's connection, bounded by its timeout. After an
    /// error, the next call asks Sentinel for the master again.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, String> {
        let queried = async {
            let mut con = self.connection().await?;
            self.bounded(cmd.query_async::<T>(&mut con)).await
        };
        queried.await.map_err(|e| {
            self.forget_master();
            e.text()
        })
    }

    /// Links an account under `key` (the [`LINK`](super::scripts) script:
    /// `HSET`, its link time kept beside it, the oldest past
    /// [`MAX_LINKS`] and those that ran out dropped).
    pub(super) async fn link(
        &self,
        key: &str,
        member: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, String> {
        let key = format!("{}:accounts", self.key(key));
        let mut con = self.connection().await.map_err(Problem::text)?;
        let mut invocation = self.scripts.link.key(&key);
        invocation
            .key(format!("{key}:order"))
            .arg(member)
            .arg(value)
            .arg(ttl_ms(ttl))
            .arg(MAX_LINKS);
        self.bounded(invocation.invoke_async::<i64>(&mut con))
            .await
            .map_err(Problem::text)?;
        Ok(true)
    }

    /// Removes an account's link under `key`.
    pub(super) async fn unlink(&self, key: &str, member: &str) -> Result<bool, String> {
        let key = format!("{}:accounts", self.key(key));
        let mut con = self.connection().await.map_err(Problem::text)?;
        let mut invocation = self.scripts.unlink.key(&key);
        invocation.key(format!("{key}:order")).arg(member);
        self.bounded(invocation.invoke_async::<i64>(&mut con))
            .await
            .map_err(Problem::text)?;
        Ok(true)
    }

    /// The accounts linked under `key` (`HVALS`).
    pub(super) async fn linked(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        let mut cmd = redis::cmd("HVALS");
        cmd.arg(format!("{}:accounts", self.key(key)));
        self.query(&cmd).await.map(Some)
    }

    /// Whether `key` is marked used (`EXISTS`).
    pub(super) async fn used(&self, key: &str) -> Result<Option<bool>, String> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(format!("{}:used", self.key(key)));
        let found: i64 = self.query(&cmd).await?;
        Ok(Some(found > 0))
    }

    /// Marks `key` used (`SET NX PX`): whether it was not before.
    pub(super) async fn mark_used(&self, key: &str, ttl: Duration) -> Result<Option<bool>, String> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(format!("{}:used", self.key(key)))
            .arg("1")
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms(ttl));
        let set: Option<String> = self.query(&cmd).await?;
        Ok(Some(set.is_some()))
    }

    /// The chain `ctx` refreshes, read (one `GET`, no lock) into the
    /// layer's memory: what a login's status reads.
    pub(super) async fn read_chain_into(&self, ctx: &FetchContext<'_>) -> Result<(), String> {
        let Some(KeptChain {
            chain,
            identity: chain_identity,
        }) = ctx.chain
        else {
            return Ok(());
        };
        let Some(sealing_key) = self.sealing.as_ref().or(ctx.sealing_key()) else {
            return Ok(());
        };
        let at = format!("{}:chain", self.key(chain_identity.key()));
        let mut con = self.connection().await.map_err(Problem::text)?;
        let value = self
            .bounded(
                redis::cmd("GET")
                    .arg(&at)
                    .query_async::<Option<String>>(&mut con),
            )
            .await
            .map_err(Problem::text)?;
        let sealer = Sealer::new(sealing_key, chain_identity.encoded());
        if let Some(record) = value.and_then(|v| self.open(&sealer, &at, &v)) {
            chain.adopt(&ChainRecord::from_bytes(record));
        }
        Ok(())
    }

    /// Deletes the signed-out account's tokens, tells the replicas, and
    /// waits for each watching one's word that it dropped them.
    pub(super) async fn sign_out_everywhere(
        &self,
        account: &str,
        identities: &[String],
    ) -> Result<(), String> {
        let names = self.names();
        // Deleted once more after an error, on the master Sentinel names
        // then: a failover's first error is not Redis's answer.
        let delete = || async {
            for identity in identities {
                let key = self.key(identity);
                let mut cmd = redis::cmd("DEL");
                cmd.arg(&key).arg(format!("{key}:failure"));
                self.query::<i64>(&cmd)
                    .await
                    .map_err(|e| format!("deleting the account's tokens failed: {e}"))?;
            }
            Ok(())
        };
        self.again(delete).await?;
        let mut con = self.connection().await.map_err(Problem::text)?;
        if self.deployment.has_replicas() && self.replicas_of_master(&mut con).await? > 0 {
            // Through Sentinel, with a replica connected: the chain's end
            // and the deletes are on a replica before the sign-out answers,
            // so that a failover now does not undo them. On the connection
            // that wrote them (`WAIT` counts its own writes), within its
            // reply's bound.
            let patience = REPLICA_WAIT.min(self.timeout * 4 / 5);
            let mut wait = redis::cmd("WAIT");
            wait.arg(1).arg(ttl_ms(patience));
            let acked = self.bounded(wait.query_async::<i64>(&mut con)).await;
            if !matches!(acked, Ok(n) if n > 0) {
                self.forget_master();
                return Err(format!(
                    "no Redis replica took the sign-out's writes within {patience:?}: a \
                     failover now could undo it; sign out again"
                ));
            }
        }
        self.after_a_loss(&mut con, &names).await;
        let answers = format!("{}{{accounts}}:answers:{}", names.prefix, random_hex());
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&names.channel)
            .arg(format!("signed-out {account} {answers}"));
        self.bounded(cmd.query_async::<i64>(&mut con))
            .await
            .map_err(|e| format!("publishing the sign-out failed: {}", e.text()))?;
        let deadline = Instant::now() + ACK_WAIT;
        loop {
            let missing: i64 = self
                .bounded(
                    names
                        .scripts
                        .unanswered
                        .key(&names.watchers_key)
                        .key(&answers)
                        .invoke_async(&mut con),
                )
                .await
                .map_err(|e| format!("reading the replicas' answers failed: {}", e.text()))?;
            if missing == 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{missing} watching replica(s) did not say within {ACK_WAIT:?} that they \
                     dropped the account's tokens; they drop them when they hear of it"
                ));
            }
            tokio::time::sleep(ACK_POLL).await;
        }
    }

    /// How long ago Redis's data began (its epoch, begun now if missing),
    /// by its own clock.
    async fn epoch_age(&self, con: &mut Connection, names: &Names) -> Result<Duration, String> {
        let age = self
            .bounded(
                names
                    .scripts
                    .epoch_age
                    .key(&names.epoch_key)
                    .arg(random_hex())
                    .arg(super::millis(EPOCH_TTL))
                    .invoke_async::<i64>(con),
            )
            .await
            .map_err(Problem::text)?;
        Ok(Duration::from_millis(u64::try_from(age).unwrap_or(0)))
    }

    /// Waits, when Redis lost its data (restarted empty, flushed) less than
    /// a listing ago, until the listing of every replica that watched
    /// before has run out: the list of those that watch was lost too, and
    /// a replica that has not beaten since presents its accounts' tokens
    /// from memory until then. Past it, each such replica either heard the
    /// news again (and is listed, and answers) or reads every token from
    /// the store.
    async fn after_a_loss(&self, con: &mut Connection, names: &Names) {
        let wait = match self.epoch_age(con, names).await {
            Ok(age) => WATCH_TTL.saturating_sub(age),
            Err(_) => WATCH_TTL,
        };
        if !wait.is_zero() {
            tracing::info!(
                wait = ?wait,
                "Redis lost its data a moment ago: the sign-out waits until every replica that \
                 watched before reads its tokens from the store"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// How many replicas the master has connected (`INFO replication`); an
    /// error when it does not answer (a sign-out is not said to be safe
    /// from a failover when nobody knows).
    async fn replicas_of_master(&self, con: &mut Connection) -> Result<usize, String> {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let text = self
            .bounded(info.query_async::<String>(con))
            .await
            .map_err(|e| {
                self.forget_master();
                format!(
                    "Redis did not say whether a replica takes the sign-out's writes ({}); sign \
                     out again",
                    e.text()
                )
            })?;
        Ok(text
            .lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0))
    }

    /// Tells the other replicas that `account` logged in here.
    pub(super) async fn publish_login(&self, account: &str) {
        let names = self.names();
        let Ok(mut con) = self.connection().await else {
            return;
        };
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&names.channel)
            .arg(format!("logged-in {account} {}", names.id));
        if let Err(Problem::Redis(why)) = self.bounded(cmd.query_async::<i64>(&mut con)).await {
            tracing::debug!(error = %why, "publishing a login failed: other replicas read it from the store");
        }
    }
}

/// A time to live in milliseconds, at least one (Redis refuses zero).
fn ttl_ms(ttl: Duration) -> u64 {
    super::millis(ttl).max(1)
}
