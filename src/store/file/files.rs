//! The file itself: read whole, replaced whole (a temporary file beside it,
//! synced, renamed over it), owner only; its lock, taken across processes
//! and once per task; its own sealing key; blocking work off the runtime.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::{failure_key, FileStore};
use crate::store::codec::until_ms;
use crate::store::{FetchContext, KeptChain};
use crate::support::boxed::BoxFuture;

/// The first member of the file: its format and version.
pub(super) const FORMAT: &str = "tower-oauth/file-store/1";

tokio::task_local! {
    /// The lock file the current task holds while it fetches under it.
    pub(super) static HOLDING: PathBuf;
}

/// How often a process waiting for the lock tries it again.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// The largest file read: far above what a few hundred tokens take.
const MAX_FILE: u64 = 16 * 1024 * 1024;

/// The store's file and its lock file.
pub(super) struct Files {
    pub(super) path: PathBuf,
    pub(super) lock_path: PathBuf,
}

impl FileStore {
    /// The file's values.
    pub(super) async fn entries(&self) -> Result<Map<String, Value>, String> {
        let files = Arc::clone(&self.inner);
        blocking(move || files.read()).await
    }

    /// Sets the value at `key` to `sealed`, expiring at `expires_ms` if
    /// given, under the lock.
    pub(super) async fn put(
        &self,
        key: String,
        sealed: String,
        expires_ms: Option<u64>,
    ) -> Result<(), String> {
        let files = Arc::clone(&self.inner);
        blocking(move || {
            let mut entries = files.read()?;
            let mut entry = Map::new();
            entry.insert("value".into(), sealed.into());
            if let Some(at) = expires_ms {
                entry.insert("expires_ms".into(), at.into());
            }
            // A token stored ends the failure recorded for it.
            entries.remove(&failure_key(&key));
            entries.insert(key, Value::Object(entry));
            files.write(&entries).map_err(|e| e.to_string())
        })
        .await
    }

    /// Removes the values at `keys`, under the lock: one write for all.
    pub(super) async fn remove(&self, keys: Vec<String>) -> Result<(), String> {
        let files = Arc::clone(&self.inner);
        blocking(move || {
            let mut entries = files.read()?;
            for key in &keys {
                entries.remove(key);
            }
            files.write(&entries).map_err(|e| e.to_string())
        })
        .await
    }

    /// `put`, under the file's lock: taken here (before `deadline`) unless
    /// this task holds it. A fetch under a chain's own lock writes so.
    pub(super) async fn put_locked(
        &self,
        key: String,
        sealed: String,
        expires_ms: Option<u64>,
        deadline: Instant,
    ) -> Result<(), String> {
        let _lock = self.lock(deadline).await?;
        self.put(key, sealed, expires_ms).await
    }

    /// The file's lock, taken before `deadline`; `None` when this task
    /// holds it already (a web login's callback, taken within a fetch
    /// under the lock).
    pub(super) async fn lock(&self, deadline: Instant) -> Result<Option<File>, String> {
        self.lock_at(&self.inner.lock_path, deadline).await
    }

    /// Where a fetch for `ctx` takes its lock: a person's login chain its
    /// own, `<path>.<16 hex digits of the chain's key>.lock`, since its
    /// fetch may wait minutes for the person, and the file's other chains
    /// go on meanwhile; any other fetch the file's (short) lock. (An
    /// account's chain takes the file's lock whatever the layer's login, so
    /// that every process on the file takes the same one for it.)
    pub(super) fn fetch_lock_path(&self, ctx: &FetchContext<'_>) -> PathBuf {
        match ctx.chain {
            Some(KeptChain { chain, identity }) if chain.logs_in() => {
                let mut path = self.inner.path.clone().into_os_string();
                let short = identity.key().get(..16).unwrap_or(identity.key());
                path.push(format!(".{short}.lock"));
                PathBuf::from(path)
            }
            _ => self.inner.lock_path.clone(),
        }
    }

    /// The lock file at `path`, taken before `deadline`; `None` when this
    /// task holds it already.
    pub(super) async fn lock_at(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Option<File>, String> {
        if HOLDING.try_with(|held| held == path).unwrap_or(false) {
            return Ok(None);
        }
        let path = path.to_path_buf();
        let file = blocking(move || owner_only(&path).map_err(|e| e.to_string())).await?;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Some(file)),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    tokio::time::sleep(LOCK_POLL).await;
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err("another process held the lock too long".into())
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(e.to_string()),
            }
        }
    }
}

impl Files {
    /// The values in the file; none when it is missing. A file that is too
    /// large, does not parse, or holds another format is an error that
    /// names it and says why, and is never written over: every login it
    /// holds would be lost.
    pub(super) fn read(&self) -> Result<Map<String, Value>, String> {
        let file = self.path.display();
        let size = match std::fs::metadata(&self.path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(format!("the token file {file} could not be read: {e}")),
        };
        if size > MAX_FILE {
            return Err(format!(
                "the token file {file} is {size} bytes, over the {MAX_FILE}-byte bound: it is \
                 not read, and nothing is written over it (move it aside to start afresh)"
            ));
        }
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("the token file {file} could not be read: {e}"))?;
        let mut whole = serde_json::from_slice::<Value>(&bytes).map_err(|e| {
            let why = match e.classify() {
                serde_json::error::Category::Eof => "it is cut short",
                _ => "not JSON",
            };
            format!(
                "the token file {file} does not parse ({why}: it stops at line {}, column {}); \
                 nothing is written over it (move it aside to start afresh)",
                e.line(),
                e.column()
            )
        })?;
        match whole.get("format").and_then(Value::as_str) {
            Some(FORMAT) => {}
            Some(other) => {
                return Err(format!(
                    "the token file {file} holds the format `{}`, which this version does not \
                     read (it reads `{FORMAT}`); nothing is written over it",
                    crate::error::clip(other)
                ))
            }
            None => {
                return Err(format!(
                    "the token file {file} names no format (not a token file?); nothing is \
                     written over it"
                ))
            }
        }
        match whole.get_mut("entries").map(Value::take) {
            Some(Value::Object(entries)) => Ok(entries),
            _ => Err(format!(
                "the token file {file} has no `entries` object; nothing is written over it"
            )),
        }
    }

    /// Replaces the file with `entries` (less those that ran out): written
    /// beside it, synced, renamed over it.
    pub(super) fn write(&self, entries: &Map<String, Value>) -> std::io::Result<()> {
        let now = until_ms(Duration::ZERO);
        let kept: Map<String, Value> = entries
            .iter()
            .filter(|(_, e)| live(e, now))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut whole = Map::new();
        whole.insert("format".into(), FORMAT.into());
        whole.insert("entries".into(), Value::Object(kept));
        let mut temp = self.path.clone().into_os_string();
        temp.push(format!(
            ".{}.{:016x}.tmp",
            std::process::id(),
            crate::support::random::random_u64()
        ));
        let temp = PathBuf::from(temp);
        let written = (|| {
            let mut file = owner_only(&temp)?;
            file.write_all(Value::Object(whole).to_string().as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }
}

/// Whether `entry` has not run out at `now` (ms since the epoch); one
/// without an expiry never does.
pub(super) fn live(entry: &Value, now: u64) -> bool {
    entry
        .get("expires_ms")
        .and_then(Value::as_u64)
        .is_none_or(|at| at > now)
}

/// Whether the lock `file` is free now: taken and let go at once. An error
/// when it cannot be taken on this file system at all.
pub(super) fn lock_is_free(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(true)
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Opens `path` for writing, made if missing, readable and writable by its
/// owner only where the system says so.
pub(super) fn owner_only(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Where a token file's key lives other than beside it (the OS credential
/// store): read, and written once when there is none.
pub(super) trait KeyPlace: Send + Sync {
    /// The key it holds; `None` when it holds none.
    fn read(&self) -> BoxFuture<'_, Result<Option<[u8; 32]>, String>>;
    /// Keeps `key`, replacing any, holding `lock` (the file's) until the
    /// write has ended, even past an answer given early (a write that timed
    /// out and still runs): no other process makes a key meanwhile, so the
    /// place never ends up holding another key than the file's.
    fn write<'a>(
        &'a self,
        key: &'a [u8; 32],
        lock: Option<File>,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// What it is called in logs.
    fn name(&self) -> String;
}

/// 32 bytes from the system's random source.
fn random_key() -> Result<[u8; 32], String> {
    let mut key = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(key)
}

impl FileStore {
    /// The file's own sealing key: in the OS credential store where the
    /// store keeps it there (made when missing and `make` says so: `None`
    /// otherwise), else beside the file.
    pub(super) async fn own_key(&self, make: bool) -> Result<Option<[u8; 32]>, String> {
        let _turn = self.key_turn.lock().await;
        if let Some(key) = self.own_key.get() {
            return Ok(Some(*key));
        }
        let Some(place) = &self.key_place else {
            return self.key_file().await.map(Some);
        };
        if let Some(key) = place.read().await? {
            return Ok(Some(*self.own_key.get_or_init(|| key)));
        }
        if !make {
            return Ok(None);
        }
        // Made under the file's lock: two processes never make two. The
        // write holds the lock until it has ended, however long it runs.
        let mut lock = self.lock(Instant::now() + Duration::from_secs(5)).await?;
        let key = match place.read().await? {
            Some(key) => key,
            None => {
                let key = random_key()?;
                place.write(&key, lock.take()).await?;
                self.made_key
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                tracing::info!(
                    place = %place.name(),
                    "the token file's sealing key is made"
                );
                key
            }
        };
        drop(lock);
        Ok(Some(*self.own_key.get_or_init(|| key)))
    }

    /// The file's key beside it, for layers whose client has no credential
    /// to derive one from: 32 random bytes in `<path>.key`, made once, owner
    /// only. Two processes that make it at once keep the first one linked.
    async fn key_file(&self) -> Result<[u8; 32], String> {
        if let Some(key) = self.own_key.get() {
            return Ok(*key);
        }
        let mut path = self.inner.path.clone().into_os_string();
        path.push(".key");
        let path = PathBuf::from(path);
        let key = blocking(move || {
            let read = |path: &Path| -> Result<Option<[u8; 32]>, String> {
                match std::fs::read(path) {
                    Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
                        .map(Some)
                        .map_err(|_| format!("`{}` does not hold a key", path.display())),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(format!("`{}`: {e}", path.display())),
                }
            };
            if let Some(key) = read(&path)? {
                return Ok((key, false));
            }
            let key = random_key()?;
            let mut temp = path.clone().into_os_string();
            temp.push(format!(
                ".{}.{}",
                std::process::id(),
                crate::support::random::random_u64()
            ));
            let temp = PathBuf::from(temp);
            let made = (|| {
                let mut file = owner_only(&temp)?;
                file.write_all(&key)?;
                file.sync_all()?;
                // Linked only where no key is: the first process's stays.
                std::fs::hard_link(&temp, &path)
            })();
            let _ = std::fs::remove_file(&temp);
            match made {
                Ok(()) => Ok((key, true)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path)?
                    .map(|key| (key, false))
                    .ok_or_else(|| format!("`{}` vanished", path.display())),
                Err(e) => Err(format!("`{}` cannot be made: {e}", path.display())),
            }
        })
        .await?;
        let (key, made) = key;
        if made {
            self.made_key
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(*self.own_key.get_or_init(|| key))
    }
}

/// Runs `f` off the runtime's workers (file I/O and its syncs).
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(format!("the file task failed: {e}")))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A place whose writes answer "timed out" after `answer_within`,
    /// and land after `lands_after`, on a thread that holds the lock it
    /// was given until then (as the keyring's calls do).
    struct Slow {
        held: Arc<Mutex<Option<[u8; 32]>>>,
        lands_after: Duration,
        answer_within: Duration,
    }

    impl KeyPlace for Slow {
        fn read(&self) -> BoxFuture<'_, Result<Option<[u8; 32]>, String>> {
            let held = *self.held.lock().unwrap();
            Box::pin(async move { Ok(held) })
        }

        fn write<'a>(
            &'a self,
            key: &'a [u8; 32],
            lock: Option<File>,
        ) -> BoxFuture<'a, Result<(), String>> {
            let (held, key, lands_after) = (Arc::clone(&self.held), *key, self.lands_after);
            let (done, landed) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(lands_after);
                *held.lock().unwrap() = Some(key);
                drop(lock);
                let _ = done.send(());
            });
            let within = self.answer_within;
            Box::pin(async move {
                tokio::time::timeout(within, landed)
                    .await
                    .map(|_| ())
                    .map_err(|_| "the place did not answer in time".to_owned())
            })
        }

        fn name(&self) -> String {
            "a slow place".into()
        }
    }

    /// A key write that timed out but still runs keeps the file's lock
    /// until it lands: another process then reads that key rather than
    /// make (and seal with) another one.
    #[tokio::test]
    async fn a_key_write_that_timed_out_keeps_the_lock_until_it_lands() {
        let dir = std::env::temp_dir().join(format!(
            "tower-oauth-slow-key-{}-{:016x}",
            std::process::id(),
            crate::support::random::random_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        let held = Arc::new(Mutex::new(None));
        let store = |lands_after: Duration, answer_within: Duration| {
            let mut store = FileStore::new(&path).unwrap();
            store.key_place = Some(Box::new(Slow {
                held: Arc::clone(&held),
                lands_after,
                answer_within,
            }));
            store
        };
        let first = store(Duration::from_millis(700), Duration::from_millis(50));
        let e = first.own_key(true).await.unwrap_err();
        assert!(e.contains("did not answer"), "{e}");
        // Another process makes no key of its own: it waits for the lock,
        // then reads the one written.
        let second = store(Duration::ZERO, Duration::from_secs(5));
        let key = second.own_key(true).await.unwrap().unwrap();
        assert_eq!(Some(key), *held.lock().unwrap());
        assert_eq!(first.own_key(true).await.unwrap(), Some(key));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
