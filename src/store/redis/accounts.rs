//! What the Redis store does for accounts: pending web logins kept with an
//! expiry and taken once (`GETDEL`); an account's tokens deleted at its
//! sign-out, and the sign-out published to every replica, which a task
//! subscribed to the channel passes to the layers that watch.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{Problem, RedisStore};
use crate::store::SignOutWatcher;

/// How long the watch waits before subscribing again after its
/// subscription ended or failed.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// The layers that watch sign-outs, and the task that hears them.
#[derive(Default)]
pub(super) struct SignOuts {
    watchers: Arc<Mutex<Vec<SignOutWatcher>>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for SignOuts {
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
    fn sign_out_channel(&self) -> String {
        format!("{}sign-out", self.prefix)
    }

    pub(super) async fn keep_pending(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, String> {
        let key = format!("{}:pending-login", self.key(key));
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut con = self.connection().await.map_err(Problem::text)?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(value).arg("PX").arg(millis);
        self.bounded(cmd.query_async::<()>(&mut con))
            .await
            .map_err(Problem::text)?;
        Ok(true)
    }

    pub(super) async fn take_pending(&self, key: &str) -> Result<Option<String>, String> {
        let key = format!("{}:pending-login", self.key(key));
        let mut con = self.connection().await.map_err(Problem::text)?;
        let mut cmd = redis::cmd("GETDEL");
        cmd.arg(&key);
        self.bounded(cmd.query_async::<Option<String>>(&mut con))
            .await
            .map_err(Problem::text)
    }

    pub(super) async fn erase_and_publish(&self, account: &str, identities: &[String]) {
        let Ok(mut con) = self.connection().await else {
            tracing::warn!(
                "the Redis token store did not answer: a sign-out reached only this replica"
            );
            return;
        };
        for identity in identities {
            let key = self.key(identity);
            let mut cmd = redis::cmd("DEL");
            cmd.arg(&key).arg(format!("{key}:failure"));
            if let Err(Problem::Redis(why)) = self.bounded(cmd.query_async::<i64>(&mut con)).await {
                tracing::warn!(error = %why, "deleting a signed-out account's token failed");
            }
        }
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.sign_out_channel()).arg(account);
        if let Err(Problem::Redis(why)) = self.bounded(cmd.query_async::<i64>(&mut con)).await {
            tracing::warn!(error = %why, "publishing a sign-out failed: other replicas see it at their next refresh");
        }
    }

    pub(super) fn watch(&self, watcher: SignOutWatcher) {
        let sign_outs = &self.sign_outs;
        sign_outs
            .watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
        let mut task = sign_outs
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if task.is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let watchers = Arc::clone(&sign_outs.watchers);
        let deployment = Arc::clone(&self.deployment);
        let (channel, timeout) = (self.sign_out_channel(), self.timeout);
        let handle = runtime.spawn(async move {
            loop {
                if let Some(pubsub) = deployment.subscribe(&channel, timeout).await {
                    hear(pubsub, &watchers).await;
                }
                tokio::time::sleep(RESUBSCRIBE).await;
            }
        });
        *task = Some(handle.abort_handle());
    }
}

/// Passes each sign-out heard on `pubsub` to the watchers still there,
/// until the subscription ends.
async fn hear(mut pubsub: redis::aio::PubSub, watchers: &Mutex<Vec<SignOutWatcher>>) {
    use futures_core::Stream;
    let mut messages = std::pin::pin!(pubsub.on_message());
    while let Some(message) = std::future::poll_fn(|cx| messages.as_mut().poll_next(cx)).await {
        let Ok(account) = message.get_payload::<String>() else {
            continue;
        };
        // Only a digest of 64 hex digits names an account.
        if account.len() != 64 || !account.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        // Called outside the lock; those whose layer is gone leave.
        let current: Vec<SignOutWatcher> = watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let gone: Vec<SignOutWatcher> = current
            .into_iter()
            .filter(|watch| !watch(&account))
            .collect();
        if !gone.is_empty() {
            let mut list = watchers.lock().unwrap_or_else(PoisonError::into_inner);
            list.retain(|watch| !gone.iter().any(|g| Arc::ptr_eq(g, watch)));
        }
    }
}
