//! [`FileStore`]: tokens, and refresh-token chains, shared by the
//! processes of one machine through one file: an advisory lock across
//! processes, atomic replacement, owner-only permissions, sealed values.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::endpoint::ChainRecord;
use crate::error::{ConfigError, ConfigErrorKind, TokenError, TokenErrorKind};
use crate::store::chain::{ChainKeeper, Saved};
use crate::store::codec::{decode_failure, encode_failure, time_left, token_json, until_ms};
use crate::store::seal::Sealer;
use crate::store::{
    shared_as_failure, FetchContext, HandedOut, StoreEvent, StoredToken, TokenStore,
};
use crate::support::boxed::BoxFuture;
use crate::token::AccessToken;

use self::files::{blocking, live, lock_is_free, owner_only, Files, KeyPlace, HOLDING};

mod files;
#[cfg(feature = "keyring")]
mod keyring;
mod links;

/// Shares tokens, token requests and refresh-token chains among the processes
/// of one machine, through one file. It serves CLIs, desktop agents, developer
/// tools, and cron jobs that run at once or one after another.
///
/// A process that needs a token reads the file first. Only when it holds no
/// fresh token does the process take the file's lock. That is an advisory lock
/// on a file beside it, `<path>.lock`, which the system releases when a process
/// dies. The process then reads again, fetches, and writes the token before it
/// lets go. So the processes make one token request between them. With a
/// [refresh token](crate::grant::RefreshToken), the chain's current refresh token is
/// kept in the file too. It is read under the lock before each refresh, and
/// written back before the new access token is handed out. So none of the
/// processes sends a rotated refresh token again.
///
/// The file is replaced whole on every write: written to a temporary file
/// beside it, synced, and renamed over it. So a reader never sees half of it.
/// On Unix it is made readable and writable by its owner only, `0600`. Each
/// value is sealed with AES-256-GCM, as `RedisStore` seals its own. The key is
/// derived from the client's credential, and with a refresh token from the
/// refresh token the layer was configured with. A client with no credential,
/// such as a public client's [login](crate::login::Login), seals with the file's own
/// key: 32 random bytes in `<path>.key`, made once, owner only. `SECURITY.md`
/// has the details. The file alone gives away no token.
///
/// A process that waits for the lock longer than two fetch timeouts and a
/// second fetches on its own. A refresh fails instead, since a refresh token is
/// never sent outside the lock. With a [login](crate::login::Login), the wait is
/// longer by the login's timeout: another process may be logging a person in.
/// A login's chain has a lock of its own for that,
/// `<path>.<16 hex digits of the chain's key>.lock`, and takes the file's lock
/// only for each write: while a person signs in to one server, the layers of
/// the file's other servers go on refreshing.
///
/// ```no_run
/// use tower_oauth::{OAuthLayer, grant::RefreshToken, store::FileStore};
///
/// # fn main() -> Result<(), tower_oauth::ConfigError> {
/// let oauth = OAuthLayer::builder()
///     .token_url("https://login.example.com/oauth2/token")
///     .client_id("my-cli")
///     .refresh_token(RefreshToken::new("refresh-token-from-the-login"))
///     .token_store(FileStore::new("/home/me/.config/my-cli/tokens")?)
///     .build()?;
/// # Ok(()) }
/// ```
pub struct FileStore {
    inner: Arc<Files>,
    /// Warned that nothing could be sealed.
    warned_unsealed: AtomicBool,
    /// What this process took or stored, for deleting a refused token.
    handed_out: HandedOut,
    /// The file's own sealing key, once read or made.
    own_key: std::sync::OnceLock<[u8; 32]>,
    /// One reading (or making) of the key at a time in the process.
    key_turn: tokio::sync::Mutex<()>,
    /// This store made the file's own key, none being there: whatever the
    /// file holds sealed with an earlier one can never be opened, and counts
    /// as lost rather than as another key's.
    made_key: AtomicBool,
    /// Where the key lives instead of `<path>.key`: the OS credential
    /// store's item ([`key_in_keyring`](Self::key_in_keyring)).
    key_place: Option<Box<dyn KeyPlace>>,
}

impl FileStore {
    /// A store in the file at `path`, made if missing (its folder must
    /// exist), beside its lock file `<path>.lock`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] of kind
    /// [`InvalidSetting`](ConfigErrorKind::InvalidSetting) when the file or
    /// its lock file cannot be made or opened, or the lock cannot be
    /// taken on this file system.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref().to_path_buf();
        let mut lock_path = path.clone().into_os_string();
        lock_path.push(".lock");
        let files = Files {
            path,
            lock_path: PathBuf::from(lock_path),
        };
        let fail = |what: &str, e: std::io::Error| {
            ConfigError::new(
                ConfigErrorKind::InvalidSetting,
                format!("FileStore: {what}: {e}"),
            )
        };
        let lock = owner_only(&files.lock_path).map_err(|e| {
            fail(
                &format!("`{}` cannot be opened", files.lock_path.display()),
                e,
            )
        })?;
        lock_is_free(&lock).map_err(|e| {
            fail(
                &format!("`{}` cannot be locked", files.lock_path.display()),
                e,
            )
        })?;
        if !files.path.exists() {
            files
                .write(&Map::new())
                .map_err(|e| fail(&format!("`{}` cannot be made", files.path.display()), e))?;
        }
        Ok(FileStore {
            inner: Arc::new(files),
            warned_unsealed: AtomicBool::new(false),
            handed_out: HandedOut::default(),
            own_key: std::sync::OnceLock::new(),
            key_turn: tokio::sync::Mutex::new(()),
            made_key: AtomicBool::new(false),
            key_place: None,
        })
    }

    /// Keeps the store's sealing key in the OS credential store, under
    /// `service` (your program's name), instead of in `<path>.key` beside
    /// the file: the macOS Keychain, the Windows Credential Manager, or the
    /// Secret Service on Linux (GNOME Keyring, KWallet). The store keeps its
    /// file, its lock and its rules; its tokens, refresh tokens included,
    /// are sealed with that key, for every layer on the file (a confidential
    /// client's too, whose key would otherwise derive from its secret). One
    /// item per store file (its user is `token-file:<the file's path>`),
    /// made with the first write; no `<path>.key` is written.
    ///
    /// It fails closed: where the OS store is missing, locked or refuses,
    /// a token request through the store fails with a
    /// [`Transport`](crate::TokenErrorKind::Transport) error saying which
    /// store, why and what to do, and nothing is written to the file. Each
    /// call to the OS store is bounded (3 seconds), so one that never
    /// answers gives that error, never a hang. The key is read once per
    /// process and held in memory: the warm path never touches the OS
    /// store. An item deleted or replaced leaves the file unreadable: its
    /// tokens and its chain are gone, and the next token request logs in
    /// anew (or fails with
    /// [`LoginRequired`](crate::TokenErrorKind::LoginRequired)).
    ///
    /// ```no_run
    /// use tower_oauth::store::FileStore;
    ///
    /// # fn main() -> Result<(), tower_oauth::ConfigError> {
    /// let store = FileStore::new("/home/me/.config/my-cli/tokens")?.key_in_keyring("my-cli");
    /// # let _ = store; Ok(()) }
    /// ```
    ///
    /// Default: the key in `<path>.key`, owner only (feature `keyring`).
    #[cfg(feature = "keyring")]
    pub fn key_in_keyring(mut self, service: impl AsRef<str>) -> Self {
        let item = keyring::KeyringItem::new(service.as_ref(), &self.inner.path);
        self.key_place = Some(Box::new(item));
        self
    }

    /// Whether the sealing key lives in the OS credential store.
    fn keeps_key_in_os_store(&self) -> bool {
        self.key_place.is_some()
    }

    /// The key that seals what the file keeps for `ctx`: the OS credential
    /// store's ([`key_in_keyring`](Self::key_in_keyring)); else one derived
    /// from the client's credential; else the file's own, beside it. `None`:
    /// the OS store has none yet, and `make` is false.
    async fn key_for(
        &self,
        ctx: &FetchContext<'_>,
        make: bool,
    ) -> Result<Option<[u8; 32]>, String> {
        match (self.keeps_key_in_os_store(), ctx.sealing_key) {
            (false, Some(key)) => Ok(Some(*key)),
            _ => self.own_key(make).await,
        }
    }

    /// The error of a token request whose key the OS credential store did
    /// not give.
    fn no_os_key(&self, why: &str) -> TokenError {
        TokenError::new(TokenErrorKind::Transport).with_message(format!(
            "FileStore `{}` keeps its sealing key in the OS credential store, which did not \
             give it: {why}; nothing was written to the file",
            self.inner.path.display()
        ))
    }

    /// The fresh token at `key`, if the file holds one for `ctx`.
    fn fresh(
        &self,
        entries: &Map<String, Value>,
        key: &str,
        sealer: &Sealer<'_>,
        ctx: &FetchContext<'_>,
    ) -> Option<StoredToken> {
        let (json, sealed) = open_entry(entries, key, sealer)?;
        let usable_for = time_left(&json, Duration::MAX)?;
        let token = AccessToken::from_json(&json).ok()?;
        let shared = StoredToken { token, usable_for };
        if !ctx.is_fresh(&shared) {
            return None;
        }
        self.handed_out
            .put(key, shared.token.expose_token(), sealed);
        Some(shared)
    }

    /// What the file settles for `ctx` now, without a token request: a fresh
    /// token (counted as taken), or the failure the processes hold back for;
    /// outside the lock (`locked` false), also "no login" when the chain
    /// in the same read says so too and no process holds the lock.
    async fn settled(
        &self,
        key: &str,
        sealer: &Sealer<'_>,
        ctx: &FetchContext<'_>,
        locked: bool,
    ) -> Option<Result<StoredToken, TokenError>> {
        let entries = match self.entries().await {
            Ok(entries) => entries,
            // Fails closed: no token request, and nothing written over it.
            Err(why) => {
                return Some(Err(
                    TokenError::new(TokenErrorKind::Transport).with_message(why)
                ))
            }
        };
        if let Some(shared) = self.fresh(&entries, key, sealer, ctx) {
            ctx.record(StoreEvent::TookShared);
            return Some(Ok(shared));
        }
        if let Some(failure) = failure(&entries, key, sealer, ctx) {
            return Some(Err(failure));
        }
        if locked {
            return None;
        }
        self.without_login(&entries, sealer, ctx).await.map(Err)
    }

    /// "No login" for a chain with nothing to send or begin here, once the
    /// chain `entries` hold says so too, with no process holding the lock
    /// (a login may be under way there).
    async fn without_login(
        &self,
        entries: &Map<String, Value>,
        sealer: &Sealer<'_>,
        ctx: &FetchContext<'_>,
    ) -> Option<TokenError> {
        let (chain, chain_identity) = ctx.chain.map(|kept| (kept.chain, kept.identity))?;
        // (The file tells no news: nothing marks a chain unverified here.)
        ctx.login_required_now()?;
        let chain_sealer = sealer.beside(chain_identity.encoded());
        if let Some((json, _)) = open_entry(entries, chain_identity.key(), &chain_sealer) {
            chain.adopt(&ChainRecord::from_bytes(json));
        }
        let required = ctx.login_required_now()?;
        let path = self.fetch_lock_path(ctx);
        let free = blocking(move || {
            owner_only(&path)
                .and_then(|file| lock_is_free(&file))
                .map_err(|e| e.to_string())
        })
        .await;
        free.unwrap_or(false).then_some(required)
    }

    /// Under the lock: a token another process stored meanwhile, else one
    /// fetched (with the chain kept in the file) and stored.
    async fn fetch_locked(
        &self,
        ctx: &FetchContext<'_>,
        key: &str,
        sealer: &Sealer<'_>,
    ) -> Result<StoredToken, TokenError> {
        if let Some(settled) = self.settled(key, sealer, ctx, true).await {
            return settled;
        }
        ctx.record(StoreEvent::FetchedForFleet);
        let outcome = match ctx.chain.map(|kept| kept.identity) {
            Some(chain_identity) => {
                let keeper = FileChain {
                    store: self,
                    key: chain_identity.key(),
                    sealer: sealer.beside(chain_identity.encoded()),
                    write_wait: ctx.fetch_timeout() + Duration::from_secs(1),
                };
                ctx.fetch_kept(Some(&keeper)).await
            }
            None => ctx.fetch().await,
        };
        // A callback another process took first: its login's token, stored
        // before that process let the lock go.
        if matches!(&outcome, Err(e) if e.is_login_state()) {
            if let Some(Ok(shared)) = self.settled(key, sealer, ctx, true).await {
                return Ok(shared);
            }
        }
        // The token for the others, or the failure they hold back for (as
        // long as this process will). "No login" is the chain's state, read
        // from the chain itself: no failure to hold back for.
        let (at, json, lasts) = match &outcome {
            Err(e) if !shared_as_failure(e) => return outcome,
            Ok(shared) => (
                key.to_owned(),
                token_json(&shared.token, shared.usable_for),
                shared.usable_for,
            ),
            Err(e) => {
                let hold = ctx.hold_after(e);
                (failure_key(key), encode_failure(e, hold), hold)
            }
        };
        if let Some(sealed) = sealer.seal(&at, json.as_bytes()) {
            if let Ok(shared) = &outcome {
                self.handed_out
                    .put(key, shared.token.expose_token(), sealed.clone());
            }
            let expires = until_ms(lasts);
            let deadline = Instant::now() + ctx.fetch_timeout() + Duration::from_secs(1);
            let written = self.put_locked(at, sealed, Some(expires), deadline).await;
            if let Err(e) = written {
                tracing::warn!(error = %e, "the token file could not be written");
            }
        }
        outcome
    }
}

/// A chain kept in the file, under its lock.
struct FileChain<'a> {
    store: &'a FileStore,
    key: &'a str,
    sealer: Sealer<'a>,
    /// How long a write waits for the file's lock, which another process's
    /// fetch may hold (under a chain's own lock, this one does not).
    write_wait: Duration,
}

impl ChainKeeper for FileChain<'_> {
    fn load(&self) -> BoxFuture<'_, Result<Option<ChainRecord>, String>> {
        Box::pin(async move {
            let entries = self.store.entries().await?;
            if !entries.contains_key(self.key) {
                return Ok(None);
            }
            match open_entry(&entries, self.key, &self.sealer) {
                Some((json, _)) => Ok(Some(ChainRecord::from_bytes(json))),
                // Sealed with a key that is gone for good: lost.
                None if self.store.made_key.load(Ordering::SeqCst) => Ok(None),
                None => Err(
                    "the token file's refresh-token chain does not open (sealed with \
                             another key, or written in another format): it is left as it is; \
                             give the key it was sealed with, or remove the file, to start again"
                        .to_owned(),
                ),
            }
        })
    }

    fn save<'a>(&'a self, record: &'a ChainRecord) -> BoxFuture<'a, Result<Saved, String>> {
        Box::pin(async move {
            let sealed = self
                .sealer
                .seal(self.key, record.as_bytes())
                .ok_or("the system's random source failed")?;
            let deadline = Instant::now() + self.write_wait;
            let key = self.key.to_owned();
            // The chain's lock is the OS's, held until this process lets it
            // go or ends: it never runs out under a holder that stalls.
            self.store.put_locked(key, sealed, None, deadline).await?;
            Ok(Saved::Stored)
        })
    }
}

impl TokenStore for FileStore {
    fn read_chain<'a>(&'a self, ctx: &'a FetchContext<'a>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some((chain, chain_identity)) = ctx.chain.map(|kept| (kept.chain, kept.identity))
            else {
                return Ok(());
            };
            let Some(sealing_key) = self.key_for(ctx, false).await? else {
                return Ok(());
            };
            let sealer = Sealer::new(&sealing_key, chain_identity.encoded());
            let entries = self.entries().await?;
            if let Some((json, _)) = open_entry(&entries, chain_identity.key(), &sealer) {
                chain.adopt(&ChainRecord::from_bytes(json));
            }
            Ok(())
        })
    }

    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<StoredToken, TokenError>> {
        Box::pin(async move {
            // The OS credential store's key; else one derived from the
            // client's credential; else (a public client's login, a key in
            // a KMS) the file's own key.
            let own = match self.key_for(ctx, true).await {
                Ok(Some(key)) => key,
                // Fails closed: nothing in clear, no key file instead.
                failed if self.keeps_key_in_os_store() => {
                    return Err(self.no_os_key(&failed.err().unwrap_or_default()))
                }
                failed => {
                    if !self.warned_unsealed.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            error = %failed.err().unwrap_or_default(),
                            "the token file has no key to seal tokens with: tokens are not \
                             shared through it"
                        );
                    }
                    ctx.record(StoreEvent::FellBackToLocal);
                    return ctx.fetch().await;
                }
            };
            let sealing_key = &own;
            let key = ctx.identity();
            let sealer = Sealer::new(sealing_key, ctx.identity.encoded());
            if let Some(settled) = self.settled(key, &sealer, ctx, false).await {
                return settled;
            }
            let deadline = Instant::now() + 2 * ctx.fetch_timeout() + Duration::from_secs(1);
            let held = self.fetch_lock_path(ctx);
            match self.lock_at(&held, deadline).await {
                Ok(lock) => {
                    let outcome = HOLDING
                        .scope(held, self.fetch_locked(ctx, key, &sealer))
                        .await;
                    drop(lock);
                    outcome
                }
                Err(why) if ctx.chain.is_some() => Err(TokenError::new(TokenErrorKind::Transport)
                    .with_message(format!(
                        "the token file's lock could not be taken ({why}); a refresh token is \
                         sent only under it, since another process may be rotating it"
                    ))),
                Err(why) => {
                    tracing::warn!(error = %why, "the token file's lock could not be taken; fetching alone");
                    ctx.record(StoreEvent::FellBackToLocal);
                    ctx.fetch().await
                }
            }
        })
    }

    fn refused<'a>(&'a self, identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Not a token this process had from the file: nothing to delete.
            let Some(sealed) = self.handed_out.sealed(identity, token) else {
                return;
            };
            let Ok(lock) = self.lock(Instant::now() + Duration::from_secs(1)).await else {
                return;
            };
            if let Ok(entries) = self.entries().await {
                let held = entries
                    .get(identity)
                    .and_then(|e| e.get("value"))
                    .and_then(Value::as_str);
                if held == Some(sealed.as_str()) {
                    let _ = self.remove(vec![identity.to_owned()]).await;
                }
            }
            drop(lock);
        })
    }

    fn link_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.link(key, member, value, ttl))
    }

    fn linked_accounts<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<String>>, String>> {
        Box::pin(self.linked(key))
    }

    fn use_once<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<bool>, String>> {
        Box::pin(self.mark_used(key, ttl))
    }

    fn used_before<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        Box::pin(self.used(key))
    }

    fn unlink_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(self.unlink(key, member))
    }

    fn keep_pending_login<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
            let key = format!("{key}:pending-login");
            self.put(key, value.to_owned(), Some(until_ms(ttl))).await?;
            drop(lock);
            Ok(true)
        })
    }

    fn take_pending_login<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
            let key = format!("{key}:pending-login");
            let entry = self.entries().await?.remove(&key);
            let now = until_ms(Duration::ZERO);
            let value = entry
                .filter(|e| live(e, now))
                .and_then(|e| e.get("value").and_then(Value::as_str).map(str::to_owned));
            self.remove(vec![key]).await?;
            drop(lock);
            Ok(value)
        })
    }

    /// The account's tokens leave the file. The file tells no one: the
    /// other processes see the sign-out at their next token request for the
    /// account (its renewal, or after a refusal), from the ended chain.
    fn signed_out<'a>(
        &'a self,
        _account: &'a str,
        identities: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
            let keys = identities
                .iter()
                .flat_map(|key| [key.clone(), failure_key(key)]);
            let removed = self.remove(keys.collect()).await;
            drop(lock);
            removed
        })
    }
}

impl fmt::Debug for FileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileStore")
            .field("path", &self.inner.path)
            .field("key_in", &self.key_place.as_ref().map(|p| p.name()))
            .finish_non_exhaustive()
    }
}

/// Where the failure of the token at `key` is kept.
fn failure_key(key: &str) -> String {
    format!("{key}:failure")
}

/// The failure another process reported for the token at `key`, while
/// the processes hold back for it (not for a new login handed over here).
fn failure(
    entries: &Map<String, Value>,
    key: &str,
    sealer: &Sealer<'_>,
    ctx: &FetchContext<'_>,
) -> Option<TokenError> {
    if ctx.begins_login() {
        return None;
    }
    let key = failure_key(key);
    let (json, _) = open_entry(entries, &key, sealer)?;
    let left = time_left(&json, Duration::MAX)?;
    decode_failure(&String::from_utf8_lossy(&json), left)
}

/// The opened value at `key`, and its sealed form.
fn open_entry(
    entries: &Map<String, Value>,
    key: &str,
    sealer: &Sealer<'_>,
) -> Option<(Vec<u8>, String)> {
    let sealed = entries.get(key)?.get("value")?.as_str()?;
    Some((sealer.open(key, sealed)?, sealed.to_owned()))
}
