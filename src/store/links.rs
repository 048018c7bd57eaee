//! Who signed in to which account, for logouts from the server's side: each
//! account linked (its id sealed) under digests of its issuer and subject and
//! of its session; and the logout tokens' `jti`, each used once. In the
//! layer's store where it keeps them, so that every replica finds them, else
//! in this process's memory, bounded.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::seal::Sealer;
use super::TokenStore;
use crate::token::identity::TokenIdentity;

/// The most keys one process keeps in memory, of pending logins, links and
/// used marks each: past it, the expired go, then the oldest.
const MAX_IN_MEMORY: usize = 10_000;

/// The most accounts one person's (or session's) links hold in memory.
const MAX_MEMBERS: usize = 64;

/// An entry's members: each account (by its digest) with the instant it
/// was linked, the oldest dropped first.
type Members = HashMap<String, (String, Instant)>;

/// A layer's links and used marks where its store keeps none.
#[derive(Default)]
pub(crate) struct Links {
    links: Mutex<HashMap<String, (Members, Instant)>>,
    used: Mutex<HashMap<String, Instant>>,
}

impl Links {
    /// Links `account` (member `member`, its digest) under `key` for
    /// `ttl`: sealed with `sealing_key`, in `store` when it keeps links,
    /// else here. Without a sealing key (a public client), here only.
    pub(crate) async fn link(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        sealing_key: Option<&[u8; 32]>,
        (member, account): (&str, &str),
        ttl: Duration,
    ) -> Result<(), String> {
        if let (Some(store), Some(sealing_key)) = (store, sealing_key) {
            let sealer = Sealer::new(sealing_key, key.encoded());
            let sealed = sealer
                .seal(key.key(), account.as_bytes())
                .ok_or("the system's random source failed")?;
            if store.link_account(key.key(), member, &sealed, ttl).await? {
                return Ok(());
            }
        }
        let now = Instant::now();
        let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
        make_room(&mut links, now, |(_, until)| *until);
        let (members, until) = links
            .entry(key.key().to_owned())
            .or_insert_with(|| (Members::new(), now));
        if members.len() >= MAX_MEMBERS && !members.contains_key(member) {
            // The oldest link alone goes: every other session stays found.
            let oldest = members
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(m, _)| m.clone());
            if let Some(oldest) = oldest {
                members.remove(&oldest);
            }
        }
        members.insert(member.to_owned(), (account.to_owned(), now));
        *until = (*until).max(now + ttl);
        Ok(())
    }

    /// Removes member `member` from the links under `key`, here and in
    /// `store`.
    pub(crate) async fn unlink(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        member: &str,
    ) -> Result<(), String> {
        {
            let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((members, _)) = links.get_mut(key.key()) {
                members.remove(member);
                if members.is_empty() {
                    links.remove(key.key());
                }
            }
        }
        if let Some(store) = store {
            store.unlink_account(key.key(), member).await?;
        }
        Ok(())
    }

    /// The accounts linked under `key`, here and in `store`, opened (a
    /// value that does not open is left out).
    pub(crate) async fn linked(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        sealing_key: Option<&[u8; 32]>,
    ) -> Result<Vec<String>, String> {
        let mut accounts: Vec<String> = {
            let links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
            match links.get(key.key()) {
                Some((members, until)) if *until > Instant::now() => members
                    .values()
                    .map(|(account, _)| account.clone())
                    .collect(),
                _ => Vec::new(),
            }
        };
        if let (Some(store), Some(sealing_key)) = (store, sealing_key) {
            let sealer = Sealer::new(sealing_key, key.encoded());
            for sealed in store.linked_accounts(key.key()).await?.unwrap_or_default() {
                let opened = sealer
                    .open(key.key(), &sealed)
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                if let Some(account) = opened {
                    if !accounts.contains(&account) {
                        accounts.push(account);
                    }
                }
            }
        }
        Ok(accounts)
    }

    /// Whether `key` was marked used (and the mark has not run out): asked
    /// of `store` where it keeps marks, else of this process's memory. A
    /// store that keeps marks but cannot look one up without making it
    /// (one of yours with `use_once` and no `used_before`) marks it now,
    /// for `ttl`: a replay is refused all the same, though a retry after a
    /// failure is then refused too.
    pub(crate) async fn used_before(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        ttl: Duration,
    ) -> Result<bool, String> {
        if let Some(store) = store {
            if let Some(used) = store.used_before(key.key()).await? {
                return Ok(used);
            }
            if let Some(first) = store.use_once(key.key(), ttl).await? {
                return Ok(!first);
            }
        }
        let used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(used
            .get(key.key())
            .is_some_and(|until| *until > Instant::now()))
    }

    /// Marks `key` used for `ttl`: in `store` where it keeps marks, else
    /// here. Whether it was not marked before.
    pub(crate) async fn mark_used(
        &self,
        store: Option<&dyn TokenStore>,
        key: &TokenIdentity,
        ttl: Duration,
    ) -> Result<bool, String> {
        if let Some(store) = store {
            if let Some(first) = store.use_once(key.key(), ttl).await? {
                return Ok(first);
            }
        }
        let now = Instant::now();
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if used.get(key.key()).is_some_and(|until| *until > now) {
            return Ok(false);
        }
        make_room(&mut used, now, |until| *until);
        used.insert(key.key().to_owned(), now + ttl);
        Ok(true)
    }
}

/// Past [`MAX_IN_MEMORY`] keys: the expired go, then the one that expires
/// first (a pending login, a link or a mark; `until` reads its expiry).
pub(super) fn make_room<V>(
    map: &mut HashMap<String, V>,
    now: Instant,
    until: impl Fn(&V) -> Instant,
) {
    if map.len() < MAX_IN_MEMORY {
        return;
    }
    map.retain(|_, v| until(v) > now);
    if map.len() >= MAX_IN_MEMORY {
        let first = map
            .iter()
            .min_by_key(|(_, v)| until(v))
            .map(|(k, _)| k.clone());
        if let Some(first) = first {
            map.remove(&first);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::identity::{IdentityBase, Origin, Parts};

    fn key(name: &str) -> TokenIdentity {
        IdentityBase::new(Parts {
            origin: Origin::Issuer("https://idp.example"),
            client_id: "app",
            client_auth: None,
            credential: None,
            certificate: None,
            dpop_thumbprint: None,
            grant: None,
        })
        .signed_in(crate::token::identity::SignedInBy::Subject, name)
    }

    #[tokio::test]
    async fn links_and_marks_in_memory() {
        let links = Links::default();
        let hour = Duration::from_secs(3600);
        let alice = key("alice");
        for (member, account) in [("d1", "alice@app"), ("d2", "alice-work@app")] {
            links
                .link(None, &alice, None, (member, account), hour)
                .await
                .unwrap();
        }
        let mut linked = links.linked(None, &alice, None).await.unwrap();
        linked.sort();
        assert_eq!(linked, ["alice-work@app", "alice@app"]);
        assert!(links
            .linked(None, &key("bob"), None)
            .await
            .unwrap()
            .is_empty());
        assert!(!links.used_before(None, &alice, hour).await.unwrap());
        assert!(links.mark_used(None, &alice, hour).await.unwrap());
        assert!(links.used_before(None, &alice, hour).await.unwrap());
        assert!(!links.mark_used(None, &alice, hour).await.unwrap());
        assert!(links.mark_used(None, &key("bob"), hour).await.unwrap());
        links.unlink(None, &alice, "d1").await.unwrap();
        assert_eq!(
            links.linked(None, &alice, None).await.unwrap(),
            ["alice-work@app"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_entry_drops_its_oldest_link_alone() {
        let links = Links::default();
        let hour = Duration::from_secs(3600);
        let alice = key("alice");
        for n in 0..=MAX_MEMBERS {
            let account = format!("login-{n}");
            links
                .link(None, &alice, None, (&format!("d{n}"), &account), hour)
                .await
                .unwrap();
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let linked = links.linked(None, &alice, None).await.unwrap();
        assert_eq!(linked.len(), MAX_MEMBERS);
        assert!(!linked.contains(&"login-0".to_owned()));
        assert!(linked.contains(&"login-1".to_owned()));
        assert!(linked.contains(&format!("login-{MAX_MEMBERS}")));
    }
}
