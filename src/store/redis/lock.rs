//! The fetch lock's holder at work: the lock kept alive while it works, and
//! the refresh-token chain read and written under it, each write fenced by
//! the lock, so that a holder that stalled past it writes nothing over what
//! came after (a sign-out, another replica's rotation).

use std::time::Duration;

use tokio::time::sleep;

use super::{millis, Problem, RedisStore};
use crate::endpoint::ChainRecord;
use crate::error::TokenError;
use crate::store::chain::{ChainKeeper, Saved};
use crate::store::seal::Sealer;
use crate::store::{FetchContext, StoredToken};
use crate::support::boxed::BoxFuture;

/// How long a chain of refresh tokens stays in Redis after its last
/// write: longer than the refresh tokens of the servers in the field live
/// (90 days at most, for most), so that no key outlives its logins for
/// ever.
const CHAIN_TTL: Duration = Duration::from_secs(400 * 24 * 60 * 60);

/// How long the fetch lock lives: a holder that died releases it by then.
pub(super) fn lock_ttl(ctx: &FetchContext<'_>) -> Duration {
    ctx.fetch_timeout() + Duration::from_secs(1)
}

impl RedisStore {
    /// The fetch under the lock, the chain (with a refresh token) read
    /// from and written to `{base}:chain`.
    pub(super) async fn fetch_chained(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer<'_>,
        base: &str,
    ) -> Result<StoredToken, TokenError> {
        let Some(chain_identity) = ctx.chain_identity else {
            return ctx.fetch().await;
        };
        let keeper = RedisChain {
            store: self,
            key: format!("{base}:chain"),
            sealer: sealer.beside(chain_identity.encoded()),
            read: std::sync::Mutex::new(String::new()),
        };
        ctx.fetch_kept(Some(&keeper)).await
    }

    /// Runs `work` under the lock `lock` (held with `nonce`), extending the
    /// lock to `ttl` from now every third of it while the work goes on: the
    /// lock lasts as long as its holder works (a refresh awaited past the
    /// fetch timeout, a save's retries), and runs out within `ttl` of a
    /// holder that died or stalled.
    pub(super) async fn holding<T>(
        &self,
        lock: &str,
        nonce: &str,
        ttl: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let keep = async {
            loop {
                sleep(ttl / 3).await;
                let Ok(mut con) = self.connection().await else {
                    continue;
                };
                let extended = self
                    .bounded(
                        self.scripts
                            .extend
                            .key(lock)
                            .arg(nonce)
                            .arg(millis(ttl))
                            .invoke_async::<i64>(&mut con),
                    )
                    .await;
                if matches!(extended, Ok(0)) {
                    // Lost: the chain's save is fenced off, nothing more to do.
                    std::future::pending::<()>().await;
                }
            }
        };
        use std::future::Future;
        let mut work = std::pin::pin!(work);
        let mut keep = std::pin::pin!(keep);
        std::future::poll_fn(|cx| {
            if let std::task::Poll::Ready(done) = work.as_mut().poll(cx) {
                return std::task::Poll::Ready(done);
            }
            let _ = keep.as_mut().poll(cx);
            std::task::Poll::Pending
        })
        .await
    }
}

/// A refresh-token chain kept in Redis, under the chain's lock.
struct RedisChain<'a> {
    store: &'a RedisStore,
    key: String,
    sealer: Sealer<'a>,
    /// The sealed record last read (or written) here, `""` for none: a
    /// write lands only over it (see `SAVE_FENCED`).
    read: std::sync::Mutex<String>,
}

impl RedisChain<'_> {
    fn read(&self) -> std::sync::MutexGuard<'_, String> {
        self.read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ChainKeeper for RedisChain<'_> {
    fn load(&self) -> BoxFuture<'_, Result<Option<ChainRecord>, String>> {
        Box::pin(async move {
            let mut con = self.store.connection().await.map_err(Problem::text)?;
            let value: Option<String> = self
                .store
                .bounded(redis::cmd("GET").arg(&self.key).query_async(&mut con))
                .await
                .map_err(Problem::text)?;
            *self.read() = value.clone().unwrap_or_default();
            let Some(value) = value else {
                return Ok(None);
            };
            match self.store.open(&self.sealer, &self.key, &value) {
                Some(record) => Ok(Some(ChainRecord::from_bytes(record))),
                None => Err(format!(
                    "Redis's refresh-token chain at {} does not open (sealed with another key, \
                     or written in another format): it is left as it is; delete it, or give \
                     the key it was sealed with, to start again",
                    self.key
                )),
            }
        })
    }

    fn save<'a>(&'a self, record: &'a ChainRecord) -> BoxFuture<'a, Result<Saved, String>> {
        Box::pin(async move {
            let sealed = self
                .sealer
                .seal(&self.key, record.as_bytes())
                .ok_or("the system's random source failed")?;
            let expected = self.read().clone();
            let mut con = self.store.connection().await.map_err(Problem::text)?;
            let written = self
                .store
                .bounded(
                    self.store
                        .scripts
                        .save_fenced
                        .key(&self.key)
                        .arg(&sealed)
                        .arg(expected)
                        .arg(millis(CHAIN_TTL))
                        .invoke_async::<i64>(&mut con),
                )
                .await
                .map_err(Problem::text)?;
            Ok(match written {
                1 => {
                    *self.read() = sealed;
                    Saved::Stored
                }
                _ => Saved::Fenced,
            })
        })
    }
}
