//! What the Redis store does for accounts: pending web logins kept with an
//! expiry and taken once (`GETDEL`); an account's sign-out (its tokens
//! deleted, the news published, and each watching replica's word that it
//! dropped them awaited) and its login elsewhere (published); and the task
//! that hears this news for the layers that watch, keeps the replica in the
//! list of those that answer, and answers; a chain read for a login's
//! status.
//!
//! The replicas that watch keep a heartbeat in a sorted set,
//! `<prefix>{accounts}:watchers`, scored by Redis's own clock (no replica's
//! clock counts). A sign-out waits until every replica in it has added its
//! id to the sign-out's own set, or has left the list (its heartbeat
//! stopped, or its store was dropped), within [`ACK_WAIT`]. A listing is
//! short ([`WATCH_TTL`]), so that a replica killed mid-way holds up a
//! sign-out for little more; and a replica whose own heartbeat has not
//! landed within it presents no account's token from memory
//! ([`AccountEvent::HeardUntil`]), so that a sign-out that stopped waiting
//! for it is never undone by it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::connection::Connection;
use super::scripts::Scripts;
use super::{Problem, RedisStore};
use crate::endpoint::ChainRecord;
use crate::store::seal::Sealer;
use crate::store::{AccountEvent, AccountWatcher, FetchContext};
use crate::support::random::random_hex;

/// How long the watch waits before subscribing again after its
/// subscription ended or failed.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// How often a watching replica says it still watches.
const HEARTBEAT: Duration = Duration::from_millis(250);

/// How long a replica stays in the list after its last heartbeat: a
/// replica gone (or cut off from Redis) leaves it by then, so a sign-out
/// waits at most this long for one that was killed. Six beats. A replica
/// slower than that for a while (a busy machine, a stopped process) leaves
/// the list, and until a beat of its own lands again it presents no
/// account's token from memory (each request reads the store).
const WATCH_TTL: Duration = Duration::from_millis(1500);

/// What a replica takes off its own listing's end, for clocks that do not
/// run at quite the same rate: it stops presenting before Redis drops it.
const HEARING_MARGIN: Duration = Duration::from_millis(100);

/// The longest a sign-out waits for the watching replicas' word; past
/// [`WATCH_TTL`], so that a replica that went away meanwhile has left the
/// list by then.
const ACK_WAIT: Duration = Duration::from_secs(3);

/// The least time the watch's own operations (its heartbeat, its answers)
/// are given, whatever the store's timeout: they hold up no request.
const WATCH_OP_TIMEOUT: Duration = Duration::from_secs(2);

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

/// The layers that watch the accounts' news, the task that hears it, and
/// this store's id among the replicas.
pub(super) struct Watch {
    watchers: Arc<Mutex<Vec<AccountWatcher>>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
    id: String,
    /// Until when the watch last said it hears (none yet: the past).
    heard: Arc<Mutex<Option<Instant>>>,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            watchers: Arc::default(),
            task: Mutex::default(),
            id: random_hex(),
            heard: Arc::default(),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

/// Where the news goes, and what the watch task needs to answer it.
struct Names {
    scripts: Scripts,
    channel: String,
    watchers_key: String,
    prefix: String,
    id: String,
    timeout: Duration,
}

impl RedisStore {
    fn names(&self) -> Names {
        Names {
            scripts: self.scripts.clone(),
            channel: format!("{}accounts", self.prefix),
            watchers_key: format!("{}{{accounts}}:watchers", self.prefix),
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
        let (Some(chain), Some(chain_identity)) = (ctx.chain, ctx.chain_identity) else {
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
        if self.deployment.has_replicas() && self.replicas_of_master(&mut con).await > 0 {
            // Through Sentinel, with a replica connected: the chain's end
            // and the deletes are on a replica before the sign-out answers,
            // so that a failover now does not undo them.
            let mut wait = redis::cmd("WAIT");
            wait.arg(1).arg(ttl_ms(REPLICA_WAIT));
            let acked = tokio::time::timeout(
                REPLICA_WAIT + self.timeout,
                wait.query_async::<i64>(&mut con),
            )
            .await;
            if !matches!(acked, Ok(Ok(n)) if n > 0) {
                self.forget_master();
                return Err(format!(
                    "no Redis replica took the sign-out's writes within {REPLICA_WAIT:?}: a \
                     failover now could undo it; sign out again"
                ));
            }
        }
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

    /// How many replicas the master has connected (`INFO replication`); 0
    /// when it does not say.
    async fn replicas_of_master(&self, con: &mut Connection) -> usize {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let Ok(text) = self.bounded(info.query_async::<String>(con)).await else {
            return 0;
        };
        text.lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
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

    pub(super) fn watch(&self, watcher: AccountWatcher) {
        let watch = &self.watch;
        // Guarded from its first account on: it hears only once a beat of
        // the watch has landed (the past until then).
        let heard = *watch.heard.lock().unwrap_or_else(PoisonError::into_inner);
        watcher(AccountEvent::HeardUntil(heard.unwrap_or_else(Instant::now)));
        watch
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
        let mut task = watch.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let watchers = Arc::clone(&watch.watchers);
        let heard = Arc::clone(&watch.heard);
        let deployment = Arc::clone(&self.deployment);
        let names = self.names();
        let handle = runtime.spawn(async move {
            loop {
                let patience = names.timeout.max(WATCH_OP_TIMEOUT);
                if let Some(pubsub) = deployment.subscribe(&names.channel, patience).await {
                    if let Ok(con) = deployment.connect(patience).await {
                        hear(pubsub, con, (&watchers, &heard), &names).await;
                    }
                }
                // Through Sentinel, the master is asked for again: after a
                // failover, the watch follows it.
                deployment.forget();
                tokio::time::sleep(RESUBSCRIBE).await;
            }
        });
        *task = Some(handle.abort_handle());
    }
}

/// Hears the accounts' news on `pubsub` until the subscription ends: each
/// event passed to the watchers still there, each sign-out answered on
/// `con`, the heartbeat kept. It begins with an [`AccountEvent::Resync`]
/// (news published before it may have been missed) and a heartbeat, tried
/// again at each beat until it lands.
async fn hear(
    mut pubsub: redis::aio::PubSub,
    mut con: Connection,
    (watchers, heard): (&Mutex<Vec<AccountWatcher>>, &Mutex<Option<Instant>>),
    names: &Names,
) {
    use futures_core::Stream;
    let Scripts {
        heartbeat, answer, ..
    } = &names.scripts;
    let ttl = super::millis(WATCH_TTL);
    // A beat that landed keeps this replica listed until WATCH_TTL after
    // Redis took it, which is after it was sent: the layers hear of it as
    // lasting until WATCH_TTL after it was sent (less a margin), and no
    // longer. A beat that does not land says nothing, and the last word
    // runs out.
    let beat = async |con: &mut Connection| {
        let mut invocation = heartbeat.key(&names.watchers_key);
        invocation.arg(&names.id).arg(ttl);
        let sent = Instant::now();
        let beat = invocation.invoke_async::<i64>(con);
        let landed = tokio::time::timeout(names.timeout.max(WATCH_OP_TIMEOUT), beat)
            .await
            .is_ok_and(|r| r.is_ok());
        match landed {
            true => {
                let until = sent + WATCH_TTL - HEARING_MARGIN;
                let last = heard
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .replace(until);
                // Deaf since the last word (stopped, starved, cut off): news
                // may wait unread; everything is read from the store again
                // before the layers present anything.
                if last.is_some_and(|last| last <= sent) {
                    tell(watchers, AccountEvent::Resync);
                }
                tell(watchers, AccountEvent::HeardUntil(until));
            }
            false => tracing::debug!(
                "the accounts' watch could not say it still watches; trying again (accounts' \
                 tokens are read from the store meanwhile)"
            ),
        }
        landed
    };
    tell(watchers, AccountEvent::Resync);
    let mut landed_at = Instant::now();
    if beat(&mut con).await {
        landed_at = Instant::now();
    }
    let mut next_beat = Instant::now() + HEARTBEAT;
    let mut messages = std::pin::pin!(pubsub.on_message());
    loop {
        let next = std::future::poll_fn(|cx| messages.as_mut().poll_next(cx));
        let message = match tokio::time::timeout_at(next_beat, next).await {
            Err(_) => {
                // A heartbeat that fails leaves the list in time: sign-outs
                // do not wait for a replica that cannot answer. Failing for
                // longer than the listing (a master demoted, a connection
                // stuck), the watch begins again, on the master then.
                if beat(&mut con).await {
                    landed_at = Instant::now();
                } else if landed_at.elapsed() > WATCH_TTL {
                    return;
                }
                next_beat = Instant::now() + HEARTBEAT;
                continue;
            }
            Ok(None) => return,
            Ok(Some(message)) => message,
        };
        let Ok(text) = message.get_payload::<String>() else {
            continue;
        };
        match read_event(&text, &names.prefix) {
            Some(Heard::SignedOut(account, answers)) => {
                tell(watchers, AccountEvent::SignedOut(account));
                let mut invocation = answer.key(answers);
                invocation.arg(&names.id).arg(ttl.saturating_mul(10));
                let answered = invocation.invoke_async::<i64>(&mut con);
                let patience = names.timeout.max(WATCH_OP_TIMEOUT);
                let _ = tokio::time::timeout(patience, answered).await;
            }
            Some(Heard::LoggedIn(account, origin)) if origin != names.id => {
                tell(watchers, AccountEvent::LoggedIn(account));
            }
            _ => {}
        }
    }
}

/// Passes `event` to the watchers still there; those whose layer is gone
/// leave.
fn tell(watchers: &Mutex<Vec<AccountWatcher>>, event: AccountEvent<'_>) {
    // Called outside the lock.
    let current: Vec<AccountWatcher> = watchers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let gone: Vec<AccountWatcher> = current.into_iter().filter(|w| !w(event)).collect();
    if !gone.is_empty() {
        let mut list = watchers.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|watch| !gone.iter().any(|g| Arc::ptr_eq(g, watch)));
    }
}

/// One piece of news, as heard.
#[derive(Debug, PartialEq)]
enum Heard<'a> {
    /// An account's digest, and the set its answers go to.
    SignedOut(&'a str, &'a str),
    /// An account's digest, and the id of the replica it logged in on.
    LoggedIn(&'a str, &'a str),
}

/// Reads a message of the accounts' channel; `None` for anything but
/// news in the store's own words (a digest of 64 hex digits, ids of 32,
/// an answers set under `prefix`).
fn read_event<'a>(text: &'a str, prefix: &str) -> Option<Heard<'a>> {
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let mut parts = text.split(' ');
    let (kind, account, last) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !hex(account, 64) {
        return None;
    }
    match kind {
        "signed-out" => {
            let id = last
                .strip_prefix(prefix)?
                .strip_prefix("{accounts}:answers:")?;
            hex(id, 32).then_some(Heard::SignedOut(account, last))
        }
        "logged-in" => hex(last, 32).then_some(Heard::LoggedIn(account, last)),
        _ => None,
    }
}

/// A time to live in milliseconds, at least one (Redis refuses zero).
fn ttl_ms(ttl: Duration) -> u64 {
    super::millis(ttl).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_stores_own_news_is_read() {
        let digest = "a".repeat(64);
        let id = "b".repeat(32);
        let answers = format!("tower-oauth:{{accounts}}:answers:{id}");
        assert_eq!(
            read_event(&format!("signed-out {digest} {answers}"), "tower-oauth:"),
            Some(Heard::SignedOut(&digest, &answers))
        );
        assert_eq!(
            read_event(&format!("logged-in {digest} {id}"), "tower-oauth:"),
            Some(Heard::LoggedIn(&digest, &id))
        );
        for hostile in [
            format!("signed-out {digest} other:{{accounts}}:answers:{id}"),
            format!("signed-out {digest} tower-oauth:{{accounts}}:answers:{id}x"),
            format!("signed-out {digest}"),
            format!("signed-out {} {answers}", "a".repeat(63)),
            format!("logged-in {digest} {id} extra"),
            format!("logged-out {digest} {id}"),
            digest.clone(),
            String::new(),
        ] {
            assert_eq!(read_event(&hostile, "tower-oauth:"), None, "{hostile}");
        }
    }
}
