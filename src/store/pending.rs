//! Pending web logins: sealed, and kept in the layer's store when it keeps
//! them (so that a callback on another replica finishes the login), else in
//! this process's memory; taken once, so that a replayed callback finds
//! nothing.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::links::make_room;
use super::seal::Sealer;
use super::TokenStore;
use crate::token::identity::TokenIdentity;

/// The pending logins a layer keeps itself, sealed, with when each expires.
#[derive(Default)]
pub(crate) struct PendingLogins {
    memory: Mutex<HashMap<String, (String, Instant)>>,
}

impl PendingLogins {
    /// Keeps `plaintext` under `key` for `ttl`: sealed with `sealing_key`,
    /// in `store` when it keeps pending logins, else here. Without a sealing
    /// key (a public client), here and unsealed: it never leaves the process.
    pub(crate) async fn keep(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        sealing_key: Option<&[u8; 32]>,
        plaintext: &[u8],
        ttl: Duration,
    ) -> Result<(), String> {
        let Some(sealing_key) = sealing_key else {
            let text = String::from_utf8_lossy(plaintext).into_owned();
            self.keep_here(key.key(), text, ttl);
            return Ok(());
        };
        let sealer = Sealer::new(sealing_key, key.encoded());
        let sealed = sealer
            .seal(key.key(), plaintext)
            .ok_or("the system's random source failed")?;
        if let Some(store) = store {
            if store.keep_pending_login(key.key(), &sealed, ttl).await? {
                return Ok(());
            }
        }
        self.keep_here(key.key(), sealed, ttl);
        Ok(())
    }

    fn keep_here(&self, key: &str, value: String, ttl: Duration) {
        let now = Instant::now();
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        make_room(&mut memory, now, |(_, until)| *until);
        memory.insert(key.to_owned(), (value, now + ttl));
    }

    /// Takes what is kept under `key`, here or in `store`, opened: `None`
    /// when nothing is (never kept, taken already, expired) or it does not
    /// open (another layer's key, tampered with).
    pub(crate) async fn take(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        sealing_key: Option<&[u8; 32]>,
    ) -> Result<Option<Vec<u8>>, String> {
        let here = {
            let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
            memory.remove(key.key())
        };
        let value = match here {
            Some((value, until)) if until > Instant::now() => Some(value),
            Some(_) => None,
            None => match (store, sealing_key) {
                (Some(store), Some(_)) => store.take_pending_login(key.key()).await?,
                _ => None,
            },
        };
        let Some(value) = value else {
            return Ok(None);
        };
        Ok(match sealing_key {
            Some(sealing_key) => Sealer::new(sealing_key, key.encoded()).open(key.key(), &value),
            None => Some(value.into_bytes()),
        })
    }
}
