//! The accounts' news as a replica hears it: the task that subscribes to
//! the store's channel, keeps the replica in the list of those that
//! answer (its heartbeat), answers sign-outs, and passes each event to
//! the layers that watch.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::accounts::Names;
use super::connection::Connection;
use super::scripts::Scripts;
use super::{RedisStore, EPOCH_TTL, WATCH_TTL};
use crate::store::{AccountEvent, AccountWatcher};
use crate::support::random::random_hex;

/// How long the watch waits before subscribing again after its
/// subscription ended or failed.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// How often a watching replica says it still watches.
const HEARTBEAT: Duration = Duration::from_millis(250);

/// What a replica takes off its own listing's end, for clocks that do not
/// run at quite the same rate: it stops presenting before Redis drops it.
const HEARING_MARGIN: Duration = Duration::from_millis(100);

/// The least time the watch's own operations (its heartbeat, its answers)
/// are given, whatever the store's timeout: they hold up no request.
const WATCH_OP_TIMEOUT: Duration = Duration::from_secs(2);

/// The layers that watch the accounts' news, the task that hears it, and
/// this store's id among the replicas.
pub(super) struct Watch {
    watchers: Arc<Mutex<Vec<AccountWatcher>>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
    pub(super) id: String,
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

impl RedisStore {
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
            let mut rejoin = Rejoin::default();
            loop {
                let patience = names.timeout.max(WATCH_OP_TIMEOUT);
                if let Some(pubsub) = deployment.subscribe(&names.channel, patience).await {
                    if let Ok(con) = deployment.connect(patience).await {
                        hear(pubsub, con, (&watchers, &heard), &names, &mut rejoin).await;
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

/// What the watch knows across its subscriptions: the store's epoch as its
/// last beat found it, and whether it still heard the news when its last
/// subscription ended.
#[derive(Default)]
struct Rejoin {
    epoch: Option<String>,
    heard_to_the_end: bool,
}

impl Rejoin {
    /// What the layers are told when a subscription's first beat lands,
    /// sent at `sent`, finding `epoch`; `last`, the end of the replica's
    /// listing as its previous beat left it.
    fn event(&self, epoch: &str, last: Option<Instant>, sent: Instant) -> AccountEvent<'static> {
        match &self.epoch {
            // The first subscription: nothing heard before.
            None => AccountEvent::Resync,
            // Redis lost its data (restarted empty, flushed): a write made
            // before the loss that this replica did not hear of would have
            // had to come while it still heard the news.
            Some(before) if before != epoch && self.heard_to_the_end => AccountEvent::StoreLost,
            // Listed all along: a sign-out waited for this replica's word.
            Some(before) if before == epoch && last.is_some_and(|last| last > sent) => {
                AccountEvent::Reread
            }
            Some(_) => AccountEvent::Resync,
        }
    }
}

/// Hears the accounts' news on `pubsub` until the subscription ends: each
/// event passed to the watchers still there, each sign-out answered on
/// `con`, the heartbeat kept (tried again at each beat until it lands).
/// The first beat that lands says what may have been missed since the last
/// subscription ([`Rejoin::event`]).
async fn hear(
    mut pubsub: redis::aio::PubSub,
    mut con: Connection,
    (watchers, heard): (&Mutex<Vec<AccountWatcher>>, &Mutex<Option<Instant>>),
    names: &Names,
    rejoin: &mut Rejoin,
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
    // runs out. A beat that lands gives the store's epoch.
    let beat = async |con: &mut Connection| {
        let mut invocation = heartbeat.key(&names.watchers_key);
        invocation
            .key(&names.epoch_key)
            .arg(&names.id)
            .arg(ttl)
            .arg(random_hex())
            .arg(super::millis(EPOCH_TTL));
        let sent = Instant::now();
        let beat = invocation.invoke_async::<String>(con);
        match tokio::time::timeout(names.timeout.max(WATCH_OP_TIMEOUT), beat).await {
            Ok(Ok(epoch)) => Some((sent, epoch)),
            _ => {
                tracing::debug!(
                    "the accounts' watch could not say it still watches; trying again \
                     (accounts' tokens are read from the store meanwhile)"
                );
                None
            }
        }
    };
    let mut first = true;
    let mut landed = |sent: Instant, epoch: String| {
        let until = sent + WATCH_TTL - HEARING_MARGIN;
        let last = heard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(until);
        if std::mem::take(&mut first) {
            tell(watchers, rejoin.event(&epoch, last, sent));
        } else if rejoin.epoch.as_deref() != Some(epoch.as_str()) {
            // Flushed while this replica heard it all.
            tell(watchers, AccountEvent::StoreLost);
        } else if last.is_some_and(|last| last <= sent) {
            // Deaf since the last word (stopped, starved, cut off): news
            // may wait unread; everything is read from the store again
            // before the layers present anything.
            tell(watchers, AccountEvent::Resync);
        }
        rejoin.epoch = Some(epoch);
        tell(watchers, AccountEvent::HeardUntil(until));
    };
    let mut landed_at = Instant::now();
    if let Some((sent, epoch)) = beat(&mut con).await {
        landed(sent, epoch);
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
                if let Some((sent, epoch)) = beat(&mut con).await {
                    landed(sent, epoch);
                    landed_at = Instant::now();
                } else if landed_at.elapsed() > WATCH_TTL {
                    break;
                }
                next_beat = Instant::now() + HEARTBEAT;
                continue;
            }
            Ok(None) => break,
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
            Some(Heard::ChainSaved(account, generation)) => {
                tell(watchers, AccountEvent::ChainSaved(account, generation));
            }
            _ => {}
        }
    }
    // Whether every word up to the end was heard: the listing had not run
    // out when the subscription ended, and Redis, asked once more, is gone
    // (or came back with a new epoch). A subscription that ended while
    // Redis lived on (a proxy, a killed client) hears no writes from then
    // on: after a later loss, the chains are not kept.
    let until = *heard.lock().unwrap_or_else(PoisonError::into_inner);
    let in_time = until.is_some_and(|until| until > Instant::now());
    rejoin.heard_to_the_end = in_time && {
        // (Read, not beaten: this replica no longer answers sign-outs.)
        let mut get = redis::cmd("GET");
        get.arg(&names.epoch_key);
        let asked = get.query_async::<Option<String>>(&mut con);
        match tokio::time::timeout(names.timeout.max(WATCH_OP_TIMEOUT), asked).await {
            Ok(Ok(epoch)) => rejoin.epoch != epoch,
            _ => true,
        }
    };
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
    /// An account's digest, and the generation its chain was written with.
    ChainSaved(&'a str, u64),
}

/// Reads a message of the accounts' channel; `None` for anything but
/// news in the store's own words (a digest of 64 hex digits, ids of 32,
/// an answers set under `prefix`, a generation in decimal).
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
        // (A generation no chain reaches: far below where sums overflow.)
        "chain-saved" if last.len() <= 20 && last.bytes().all(|b| b.is_ascii_digit()) => {
            let generation: u64 = last.parse().ok()?;
            (generation < 1 << 62).then_some(Heard::ChainSaved(account, generation))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a subscription's first beat tells: a new epoch after news heard
    /// to the end is a loss (chains kept); the same epoch within the
    /// listing, a short break (chains kept, read again); anything else,
    /// everything forgotten.
    #[test]
    fn a_rejoin_keeps_the_chains_only_when_nothing_can_have_been_missed() {
        let sent = Instant::now();
        let (within, past) = (
            Some(sent + Duration::from_millis(1)),
            Some(sent - Duration::from_millis(1)),
        );
        let first = Rejoin::default();
        assert_eq!(first.event("e1", within, sent), AccountEvent::Resync);
        let heard = Rejoin {
            epoch: Some("e1".into()),
            heard_to_the_end: true,
        };
        assert_eq!(heard.event("e2", past, sent), AccountEvent::StoreLost);
        assert_eq!(heard.event("e1", within, sent), AccountEvent::Reread);
        assert_eq!(heard.event("e1", past, sent), AccountEvent::Resync);
        let deaf = Rejoin {
            epoch: Some("e1".into()),
            heard_to_the_end: false,
        };
        assert_eq!(deaf.event("e2", within, sent), AccountEvent::Resync);
        assert_eq!(deaf.event("e1", within, sent), AccountEvent::Reread);
    }

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
        assert_eq!(
            read_event(&format!("chain-saved {digest} 4294967298"), "tower-oauth:"),
            Some(Heard::ChainSaved(&digest, 4_294_967_298))
        );
        for hostile in [
            format!("signed-out {digest} other:{{accounts}}:answers:{id}"),
            format!("signed-out {digest} tower-oauth:{{accounts}}:answers:{id}x"),
            format!("signed-out {digest}"),
            format!("signed-out {} {answers}", "a".repeat(63)),
            format!("logged-in {digest} {id} extra"),
            format!("logged-out {digest} {id}"),
            format!("chain-saved {digest} -1"),
            format!("chain-saved {digest} 99999999999999999999"),
            format!("chain-saved {digest} 1e3"),
            format!("chain-saved {digest} {}", 1u64 << 62),
            digest.clone(),
            String::new(),
        ] {
            assert_eq!(read_event(&hostile, "tower-oauth:"), None, "{hostile}");
        }
    }
}
