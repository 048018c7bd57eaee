//! What the token file keeps for logouts from the server's side: accounts
//! linked under a digest of who signed in (one entry, a JSON object of
//! sealed values by account digest), and marks of logout tokens used, each
//! with its expiry; every change under the file's lock.

use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::files::live;
use super::FileStore;
use crate::store::codec::until_ms;

/// The most accounts one entry links.
const MAX_MEMBERS: usize = 64;

impl FileStore {
    /// Links `value` as `member` under `key`, for `ttl` from now.
    pub(super) async fn link(
        &self,
        key: &str,
        member: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, String> {
        let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
        let key = format!("{key}:accounts");
        let mut members = self.members(&key).await?;
        if members.len() >= MAX_MEMBERS && !members.contains_key(member) {
            members.clear();
        }
        members.insert(member.to_owned(), value.into());
        let text = Value::Object(members).to_string();
        self.put(key, text, Some(until_ms(ttl))).await?;
        drop(lock);
        Ok(true)
    }

    /// The values linked under `key`.
    pub(super) async fn linked(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        let members = self.members(&format!("{key}:accounts")).await?;
        Ok(Some(
            members
                .values()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ))
    }

    /// Marks `key` used for `ttl`: whether it was not before.
    pub(super) async fn mark_used(&self, key: &str, ttl: Duration) -> Result<Option<bool>, String> {
        let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
        let key = format!("{key}:used");
        let now = until_ms(Duration::ZERO);
        let used = self
            .entries()
            .await?
            .get(&key)
            .is_some_and(|e| live(e, now));
        if !used {
            self.put(key, String::new(), Some(until_ms(ttl))).await?;
        }
        drop(lock);
        Ok(Some(!used))
    }

    /// The live entry at `key` as an object; empty for none.
    async fn members(&self, key: &str) -> Result<Map<String, Value>, String> {
        let now = until_ms(Duration::ZERO);
        let entry = self.entries().await?.remove(key);
        let text = entry
            .filter(|e| live(e, now))
            .and_then(|e| e.get("value").and_then(Value::as_str).map(str::to_owned));
        Ok(match text.map(|t| serde_json::from_str::<Value>(&t)) {
            Some(Ok(Value::Object(members))) => members,
            _ => Map::new(),
        })
    }
}
