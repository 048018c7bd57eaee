//! The token file's sealing key in the OS credential store (feature
//! `keyring`): one item per store file, read once a process, made with the
//! first write; every call bounded, and any failure said, never a key file
//! in its place.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::files::KeyPlace;
use crate::support::boxed::BoxFuture;

/// The longest a call to the OS credential store may take (as gh's).
pub(super) const KEYRING_TIMEOUT: Duration = Duration::from_secs(3);

/// The item that holds a token file's key: its service and user.
pub(super) struct KeyringItem {
    pub(super) service: String,
    pub(super) user: String,
}

impl KeyringItem {
    /// The item of the file at `path`, under `service`: its user is the
    /// file's path, so that each file has its own.
    pub(super) fn new(service: &str, path: &Path) -> Self {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        KeyringItem {
            service: service.to_owned(),
            user: format!("token-file:{}", path.display()),
        }
    }

    /// The key the item holds; `None` when there is no item.
    async fn read_key(&self) -> Result<Option<[u8; 32]>, String> {
        let (service, user) = (self.service.clone(), self.user.clone());
        let read = bounded(move || {
            let entry = keyring_core::Entry::new_in_store(&os_store()?, &service, &user)?;
            match entry.get_password() {
                Ok(text) => Ok(Some(text)),
                Err(keyring_core::Error::NoEntry) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await?;
        match read {
            None => Ok(None),
            Some(text) => decode(&text).map(Some).ok_or_else(|| {
                format!(
                    "the item `{}` of service `{}` in {} does not hold a token file's key \
                     (changed by someone?); delete it to start anew (the file's tokens are \
                     lost with it, and the next login makes a new key)",
                    self.user,
                    self.service,
                    store_name()
                )
            }),
        }
    }

    /// Stores `key` as the item, replacing any; `lock` is held on the
    /// call's thread until the store has answered, even after the wait for
    /// it timed out.
    async fn write_key(&self, key: &[u8; 32], lock: Option<File>) -> Result<(), String> {
        let (service, user) = (self.service.clone(), self.user.clone());
        let text = STANDARD.encode(key);
        bounded(move || {
            let entry = keyring_core::Entry::new_in_store(&os_store()?, &service, &user)?;
            let written = entry.set_password(&text);
            drop(lock);
            written
        })
        .await
    }
}

impl KeyPlace for KeyringItem {
    fn read(&self) -> BoxFuture<'_, Result<Option<[u8; 32]>, String>> {
        Box::pin(self.read_key())
    }

    fn write<'a>(
        &'a self,
        key: &'a [u8; 32],
        lock: Option<File>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.write_key(key, lock))
    }

    fn name(&self) -> String {
        format!(
            "{}, service `{}`, user `{}`",
            store_name(),
            self.service,
            self.user
        )
    }
}

/// A key as the item holds it: base64 of its 32 bytes.
fn decode(text: &str) -> Option<[u8; 32]> {
    let bytes = STANDARD.decode(text.trim()).ok()?;
    <[u8; 32]>::try_from(bytes.as_slice()).ok()
}

/// The name of this platform's credential store, for messages.
pub(super) fn store_name() -> &'static str {
    match std::env::consts::OS {
        "macos" => "the macOS Keychain",
        "windows" => "the Windows Credential Manager",
        _ => "the Secret Service (GNOME Keyring, KWallet)",
    }
}

/// This platform's credential store: the Secret Service on every system
/// but macOS and Windows.
fn os_store() -> keyring_core::Result<Arc<keyring_core::CredentialStore>> {
    #[cfg(target_os = "macos")]
    let store = apple_native_keyring_store::keychain::Store::new().map(|s| s as _);
    #[cfg(windows)]
    let store = windows_native_keyring_store::Store::new().map(|s| s as _);
    #[cfg(not(any(target_os = "macos", windows)))]
    let store = zbus_secret_service_keyring_store::Store::new().map(|s| s as _);
    store
}

/// Runs `call` on a thread of its own, within [`KEYRING_TIMEOUT`]: a store
/// that never answers (a Secret Service that hangs, a prompt no one
/// answers) gives an error, and the thread ends when the store answers.
async fn bounded<T: Send + 'static>(
    call: impl FnOnce() -> keyring_core::Result<T> + Send + 'static,
) -> Result<T, String> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("tower-oauth-keyring".into())
        .spawn(move || {
            let _ = answer.send(call());
        })
        .map_err(|e| format!("no thread for {}: {e}", store_name()))?;
    match tokio::time::timeout(KEYRING_TIMEOUT, answered).await {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(e))) => Err(describe(&e)),
        Ok(Err(_)) => Err(format!(
            "the call to {} ended without an answer",
            store_name()
        )),
        Err(_) => Err(format!(
            "{} did not answer within {} s (is it running, and unlocked?)",
            store_name(),
            KEYRING_TIMEOUT.as_secs()
        )),
    }
}

/// What a credential store's error means for a person, with what to do.
fn describe(error: &keyring_core::Error) -> String {
    let store = store_name();
    match error {
        keyring_core::Error::NoStorageAccess(e) => format!(
            "{store} refused access ({e}): unlock it (on Linux, the login keyring of GNOME \
             Keyring or KWallet) and try again"
        ),
        keyring_core::Error::PlatformFailure(e) => format!(
            "{store} failed ({e}); on Linux, a Secret Service must run on the session's D-Bus \
             (GNOME Keyring or KWallet; over SSH, start one with dbus-run-session)"
        ),
        keyring_core::Error::NotSupportedByStore(why) => format!("{store}: {why}"),
        e => format!("{store}: {e}"),
    }
}
