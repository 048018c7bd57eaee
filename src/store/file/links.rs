//! What the token file keeps for logouts from the server's side: accounts
//! linked under a digest of who signed in (one entry, a JSON object of
//! sealed values by account digest, each with when it was linked and when
//! it runs out), and marks of logout tokens used, each with its expiry;
//! every change under the file's lock.

use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::files::live;
use super::FileStore;
use crate::store::codec::until_ms;

/// The most accounts one entry links: past it, the oldest link goes.
const MAX_MEMBERS: usize = 64;

impl FileStore {
    /// Links `value` as `member` under `key`, for `ttl` from now: the
    /// members that ran out go, and past [`MAX_MEMBERS`] the oldest.
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
            let oldest = members
                .iter()
                .min_by_key(|(_, m)| linked_at(m))
                .map(|(m, _)| m.clone());
            if let Some(oldest) = oldest {
                members.remove(&oldest);
            }
        }
        let until = until_ms(ttl);
        let mut entry = Map::new();
        entry.insert("value".into(), value.into());
        entry.insert("linked_ms".into(), until_ms(Duration::ZERO).into());
        entry.insert("expires_ms".into(), until.into());
        members.insert(member.to_owned(), Value::Object(entry));
        self.put_members(key, members).await?;
        drop(lock);
        Ok(true)
    }

    /// Removes `member` from the links under `key`; the entry goes with its
    /// last member.
    pub(super) async fn unlink(&self, key: &str, member: &str) -> Result<bool, String> {
        let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
        let key = format!("{key}:accounts");
        let mut members = self.members(&key).await?;
        if members.remove(member).is_some() {
            self.put_members(key, members).await?;
        }
        drop(lock);
        Ok(true)
    }

    /// The values linked under `key`.
    pub(super) async fn linked(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        let members = self.members(&format!("{key}:accounts")).await?;
        Ok(Some(
            members
                .values()
                .filter_map(|m| m.get("value").and_then(Value::as_str))
                .map(str::to_owned)
                .collect(),
        ))
    }

    /// Whether `key` is marked used, and the mark has not run out.
    pub(super) async fn used(&self, key: &str) -> Result<Option<bool>, String> {
        let now = until_ms(Duration::ZERO);
        let entries = self.entries().await?;
        Ok(Some(
            entries
                .get(&format!("{key}:used"))
                .is_some_and(|e| live(e, now)),
        ))
    }

    /// Marks `key` used for `ttl`: whether it was not before.
    pub(super) async fn mark_used(&self, key: &str, ttl: Duration) -> Result<Option<bool>, String> {
        let lock = self.lock(Instant::now() + Duration::from_secs(1)).await?;
        let used = self.used(key).await? == Some(true);
        if !used {
            let key = format!("{key}:used");
            self.put(key, String::new(), Some(until_ms(ttl))).await?;
        }
        drop(lock);
        Ok(Some(!used))
    }

    /// Writes `members` at `key` (under the lock the caller holds), living
    /// as long as its last member; removes the entry when none is left.
    async fn put_members(&self, key: String, members: Map<String, Value>) -> Result<(), String> {
        let until = members
            .values()
            .filter_map(|m| m.get("expires_ms").and_then(Value::as_u64))
            .max();
        match until {
            Some(until) => {
                let text = Value::Object(members).to_string();
                self.put(key, text, Some(until)).await
            }
            None => self.remove(vec![key]).await,
        }
    }

    /// The live members of the entry at `key`; empty for none. A member
    /// that ran out is left out (and goes at the entry's next write).
    async fn members(&self, key: &str) -> Result<Map<String, Value>, String> {
        let now = until_ms(Duration::ZERO);
        let entry = self.entries().await?.remove(key).filter(|e| live(e, now));
        let entry_until = entry
            .as_ref()
            .and_then(|e| e.get("expires_ms").and_then(Value::as_u64));
        let text = entry.and_then(|e| e.get("value").and_then(Value::as_str).map(str::to_owned));
        let Some(Ok(Value::Object(members))) = text.map(|t| serde_json::from_str::<Value>(&t))
        else {
            return Ok(Map::new());
        };
        // A member written before links had times (its sealed value alone)
        // counts as the oldest, living as long as the entry.
        let as_member = |m: Value| match m {
            Value::String(value) => {
                let mut member = Map::new();
                member.insert("value".into(), value.into());
                member.extend(entry_until.map(|at| ("expires_ms".to_owned(), at.into())));
                Some(Value::Object(member))
            }
            Value::Object(_) if live(&m, now) => Some(m),
            _ => None,
        };
        Ok(members
            .into_iter()
            .filter_map(|(k, m)| Some((k, as_member(m)?)))
            .collect())
    }
}

/// When a member was linked, in ms since the epoch.
fn linked_at(member: &Value) -> u64 {
    member
        .get("linked_ms")
        .and_then(Value::as_u64)
        .unwrap_or_default()
}
