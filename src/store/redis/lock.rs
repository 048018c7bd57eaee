//! The fetch lock: taken (asked again with the same nonce after a late
//! reply), kept alive while its holder works, let go; and the
//! refresh-token chain read and written under it, each write landing only
//! over the record its writer read, so that a holder that stalled past the
//! lock writes nothing over what came after (a sign-out, another
//! replica's rotation).

use std::time::Duration;

use tokio::time::sleep;

use super::{millis, Problem, RedisStore};
use crate::endpoint::ChainRecord;
use crate::error::TokenError;
use crate::store::chain::{ChainKeeper, Saved};
use crate::store::seal::Sealer;
use crate::store::{FetchContext, KeptChain, StoredToken};
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

/// How many times a command whose reply may have come late is asked again
/// (with the same nonce, so that its first landing counts).
const TRIES: usize = 3;

impl RedisStore {
    /// Takes the fetch lock `lock` for `nonce`, for `ttl`: whether it was
    /// free (or this nonce's already). A reply after the store's bound is
    /// no proof that the command failed: it is asked again with the same
    /// nonce, and if every try fails, the lock is let go should one of them
    /// have landed, so that no replica waits on a lock nobody works under.
    pub(super) async fn take_lock(
        &self,
        lock: &str,
        nonce: &str,
        ttl: Duration,
    ) -> Result<bool, Problem> {
        let taken = self
            .asked_again(|| async {
                let mut con = self.connection().await?;
                self.bounded(
                    self.scripts
                        .lock
                        .key(lock)
                        .arg(nonce)
                        .arg(millis(ttl))
                        .invoke_async::<i64>(&mut con),
                )
                .await
            })
            .await;
        if taken.is_err() {
            self.let_go(lock, nonce).await;
        }
        taken.map(|taken| taken == 1)
    }

    /// `op`, a command whose reply may come late, asked up to [`TRIES`]
    /// times: `op` must name what a landing is (the same nonce, the same
    /// key), so that a try whose reply came late counts. After each Redis
    /// error, the master is asked for again (through Sentinel).
    pub(super) async fn asked_again<T, F>(&self, op: impl Fn() -> F) -> Result<T, Problem>
    where
        F: std::future::Future<Output = Result<T, Problem>>,
    {
        let mut failed = String::new();
        for _ in 0..TRIES {
            match op().await {
                Err(Problem::Redis(why)) => {
                    self.forget_master();
                    failed = why;
                }
                done => return done,
            }
        }
        Err(Problem::Redis(failed))
    }

    /// Lets the lock go if `nonce` holds it (bounded, and best effort: it
    /// runs out by itself).
    pub(super) async fn let_go(&self, lock: &str, nonce: &str) {
        if let Ok(mut con) = self.connection().await {
            let _ = self
                .bounded(
                    self.scripts
                        .delete_if_equal
                        .key(lock)
                        .arg(nonce)
                        .invoke_async::<i64>(&mut con),
                )
                .await;
        }
    }

    /// The fetch under the lock, the chain (with a refresh token) read
    /// from and written to `{base}:chain`.
    pub(super) async fn fetch_chained(
        &self,
        ctx: &FetchContext<'_>,
        sealer: &Sealer<'_>,
        base: &str,
    ) -> Result<StoredToken, TokenError> {
        let Some(KeptChain {
            chain,
            identity: chain_identity,
        }) = ctx.chain
        else {
            return ctx.fetch().await;
        };
        // An account's chain writes are news for the replicas that watch.
        let news = (chain.account()).map(|account| (self.accounts_channel(), account.0.clone()));
        let keeper = RedisChain {
            store: self,
            key: format!("{base}:chain"),
            sealer: sealer.beside(chain_identity.encoded()),
            read: std::sync::Mutex::new(String::new()),
            sealed: std::sync::Mutex::new(None),
            news,
            hears_news: ctx.hears_news,
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
                    self.forget_master();
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
                match extended {
                    // Lost: the chain's save is fenced off, nothing more to do.
                    Ok(0) => std::future::pending::<()>().await,
                    Ok(_) => {}
                    // Through Sentinel, the next try asks for the master
                    // again: a failover does not let the lock run out.
                    Err(_) => self.forget_master(),
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
    /// The last record written, and its sealed value: a write tried again
    /// (its first reply came late) sends the same value, which lands over
    /// itself.
    sealed: std::sync::Mutex<Option<(Vec<u8>, String)>>,
    /// For an account's chain: the accounts' channel, and the account's
    /// digest, which each write's news names.
    news: Option<(String, String)>,
    /// Whether the replica hears that news now.
    hears_news: bool,
}

impl RedisChain<'_> {
    /// A Redis error's text, the master asked for again (through Sentinel)
    /// before the chain's next try: a save is tried again on the new master.
    fn failed(&self, problem: Problem) -> String {
        self.store.forget_master();
        problem.text()
    }

    /// `record` sealed, the same value each time the same record is written.
    fn sealed_once(&self, record: &ChainRecord) -> Result<String, String> {
        let mut last = self
            .sealed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((bytes, sealed)) = &*last {
            if bytes == record.as_bytes() {
                return Ok(sealed.clone());
            }
        }
        let sealed = self
            .sealer
            .seal(&self.key, record.as_bytes())
            .ok_or("the system's random source failed")?;
        *last = Some((record.as_bytes().to_vec(), sealed.clone()));
        Ok(sealed)
    }

    fn read(&self) -> std::sync::MutexGuard<'_, String> {
        self.read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ChainKeeper for RedisChain<'_> {
    fn hears_news(&self) -> bool {
        self.news.is_some() && self.hears_news
    }

    fn sending(&self, generation: u64) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let Some((channel, account)) = &self.news else {
                return Ok(());
            };
            let mut con = self.store.connection().await.map_err(|e| self.failed(e))?;
            let mut publish = redis::cmd("PUBLISH");
            publish
                .arg(channel)
                .arg(format!("chain-saved {account} {generation}"));
            self.store
                .bounded(publish.query_async::<i64>(&mut con))
                .await
                .map(drop)
                .map_err(|e| self.failed(e))
        })
    }

    fn load(&self) -> BoxFuture<'_, Result<Option<ChainRecord>, String>> {
        Box::pin(async move {
            let mut con = self.store.connection().await.map_err(|e| self.failed(e))?;
            let value: Option<String> = self
                .store
                .bounded(redis::cmd("GET").arg(&self.key).query_async(&mut con))
                .await
                .map_err(|e| self.failed(e))?;
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
            let sealed = self.sealed_once(record)?;
            let expected = self.read().clone();
            let (channel, message) = match &self.news {
                Some((channel, account)) => (
                    channel.as_str(),
                    format!("chain-saved {account} {}", record.generation()),
                ),
                None => ("", String::new()),
            };
            let mut con = self.store.connection().await.map_err(|e| self.failed(e))?;
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
                        .arg(channel)
                        .arg(message)
                        .invoke_async::<i64>(&mut con),
                )
                .await
                .map_err(|e| self.failed(e))?;
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
