//! A chain as a store keeps it: the [`ChainRecord`] written, read back,
//! checked as an answer is, and adopted when it is newer; and what the
//! store's news says of it, which decides whether this copy may be written
//! back to a store that lost it.

use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{check_value, Chain, ChainRecord, Ended, State};
use super::{LoginClient, RegisteredSecret};

/// How long a replica whose copy of a chain is older than the newest the
/// news told of (or which has none) waits for the replica holding that one
/// to write it back, each token request meanwhile a `Transport` error,
/// before it says that a login is needed (which it says no longer once the
/// chain is written back: an account's "no login" is read from the store
/// each time).
const WRITE_BACK_WAIT: Duration = Duration::from_secs(10);

/// What the store's news told of a chain's writes.
#[derive(Debug, Default)]
pub(super) struct News {
    /// The newest generation written, on any replica, that the news told
    /// of.
    heard: u64,
    /// Whether this copy was last read from (or written to) the store while
    /// the replica heard its news, with no break in the news since that
    /// could hide a write: then a copy of the newest generation heard is
    /// the newest there is.
    vouched: bool,
    /// When a token request first found that the store lost the chain,
    /// while another replica held a newer copy.
    lost_at: Option<Instant>,
}

/// What a replica does with its copy of a chain the store lost.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lost {
    /// The copy is the newest the news told of, and the replica hears the
    /// news now: it is written back.
    WriteBack,
    /// Another replica holds a newer copy, which it writes back; or this
    /// one does not hear the news now, and will know once it does: try
    /// again.
    Wait,
    /// Nothing says which copy is the newest: a login is needed.
    Unknown,
}

impl Chain {
    fn news(&self) -> MutexGuard<'_, News> {
        self.news.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The news told of a write of the chain with generation `gen`.
    pub(crate) fn heard_of(&self, gen: u64) {
        let mut news = self.news();
        news.heard = news.heard.max(gen);
    }

    /// The chain was read from (or written to) the store, while the replica
    /// heard its news (`hears`) or not.
    pub(crate) fn synced(&self, hears: bool) {
        let mut news = self.news();
        news.vouched = hears;
        news.lost_at = None;
    }

    /// The news broke off and a write may have been missed: this copy is
    /// not written back until it is read again.
    pub(crate) fn unvouch(&self) {
        self.news().vouched = false;
    }

    /// What to do with this copy, now that the store no longer holds the
    /// chain (`hears`: the replica hears the store's news now).
    pub(crate) fn lost_by_store(&self, hears: bool) -> Lost {
        // The generation this copy's record has, written or about to be.
        let gen = {
            let state = self.state();
            state.gen.saturating_add(u64::from(state.unsaved))
        };
        let mut news = self.news();
        let newest_here = news.vouched && gen >= news.heard;
        if newest_here && hears {
            return Lost::WriteBack;
        }
        // Another replica wrote a newer one, which it writes back; or this
        // one's may be the newest, once it hears the news again: for a
        // while (the other may be gone, or this one cut off for good).
        if !newest_here && gen >= news.heard {
            return Lost::Unknown;
        }
        let since = *news.lost_at.get_or_insert_with(Instant::now);
        match since.elapsed() < WRITE_BACK_WAIT {
            true => Lost::Wait,
            false => Lost::Unknown,
        }
    }

    /// Whether the news told of a write of this chain.
    pub(crate) fn heard_of_any(&self) -> bool {
        self.news().heard > 0
    }

    /// The generation the chain's record will have once the answer to a
    /// refresh sent now is stored.
    pub(crate) fn next_generation(&self) -> u64 {
        self.state().gen.saturating_add(1)
    }

    /// A refresh went out whose answer was told to have `generation`: the
    /// chain's next write reaches it, whatever the answer (none, an error,
    /// the same refresh token), so that the store holds what the news told.
    pub(crate) fn reach(&self, generation: u64) {
        let mut state = self.state();
        if state.gen.saturating_add(u64::from(state.unsaved)) < generation {
            state.unsaved = true;
        }
    }

    /// The newest generation the news told of.
    pub(super) fn heard_gen(&self) -> u64 {
        self.news().heard
    }

    /// The chain as a store keeps it.
    pub(crate) fn record(&self) -> ChainRecord {
        let state = self.state();
        let mut map = Map::new();
        map.insert("refresh_token".into(), state.current.clone().into());
        map.insert("login".into(), state.login.clone().into());
        map.insert("login_at".into(), state.login_at.into());
        // The generation this record will have once stored.
        let gen = state.gen.saturating_add(u64::from(state.unsaved));
        map.insert("gen".into(), gen.into());
        map.insert("seq".into(), state.seq.into());
        if !state.issuer.is_empty() {
            map.insert("issuer".into(), state.issuer.clone().into());
            map.insert("scope".into(), state.scope.clone().into());
        }
        if let Some(client) = &state.client {
            map.insert("client_id".into(), client.id.clone().into());
            map.insert("client_issuer".into(), client.issuer.clone().into());
            if let Some(uri) = &client.redirect_uri {
                map.insert("client_redirect_uri".into(), uri.clone().into());
            }
            if let Some(secret) = &client.secret {
                map.insert("client_secret".into(), secret.secret().into());
                map.insert("client_auth".into(), secret.method().into());
            }
        }
        if let Some(ended) = &state.dead {
            map.insert("dead".into(), ended.text().into());
            let flag = match ended {
                Ended::SignedOut => Some("signed_out"),
                Ended::StoreLost => Some("store_lost"),
                Ended::Refused(_) => None,
            };
            if let Some(flag) = flag {
                map.insert(flag.into(), true.into());
            }
        }
        if !state.id_token.is_empty() {
            map.insert("id_token".into(), state.id_token.clone().into());
        }
        ChainRecord(Value::Object(map).to_string().into_bytes())
    }

    /// `record`, the chain's state when it was read, was stored.
    pub(crate) fn saved(&self, record: &ChainRecord) {
        let mut state = self.state();
        if let Some(stored) = Self::read(record).filter(|stored| {
            stored.current == state.current && stored.seq == state.seq && stored.dead == state.dead
        }) {
            state.unsaved = false;
            state.gen = stored.gen;
        }
    }

    /// Takes what a store holds, when it is newer than what this chain knows: a
    /// later rotation of the same login, or a record of a later generation.
    /// A login made here and not stored yet stands: it is the newest the
    /// store's lock has seen. Whether the record reads: one that does not
    /// is left alone, and the caller does not refresh over it.
    pub(crate) fn adopt(&self, record: &ChainRecord) -> bool {
        let Some(stored) = Self::read(record) else {
            tracing::warn!("the token store holds a refresh-token chain that does not read");
            return false;
        };
        let mut state = self.state();
        let new_here = state.unsaved && state.seq == 0 && state.login_at > 0;
        let signed_out = stored.dead == Some(Ended::SignedOut);
        let newer = if stored.login == state.login {
            stored.seq > state.seq || stored.seq == state.seq && stored.dead.is_some()
        } else if new_here {
            // Made after this process read the store, under its lock: only
            // a sign-out written since (its save failed, or was fenced off)
            // stands over it.
            signed_out && stored.gen > state.gen
        } else if stored.gen == 0 && state.gen == 0 {
            // Two records from before generations: by their login's time.
            stored.login_at > state.login_at
        } else {
            // Two records of one generation (writes a failover lost): the
            // same one on every replica.
            stored.gen > state.gen || stored.gen == state.gen && stored.login > state.login
        };
        if newer {
            let announced = state.announced.clone();
            *state = State {
                announced,
                unsaved: false,
                ..stored
            };
        } else {
            // A client another process registered serves a new login here.
            if state.client.is_none() && stored.client.is_some() {
                state.client = stored.client.clone();
            }
            if *state != stored && !state.unsaved {
                // This process knows more (a new login here): the store gets it.
                state.unsaved = stored.login != state.login || stored.seq < state.seq;
            }
            // The next write goes above what the store holds.
            state.gen = state.gen.max(stored.gen);
        }
        true
    }

    /// A stored record, checked as an answer is: anything else counts as
    /// no record.
    pub(super) fn read(record: &ChainRecord) -> Option<State> {
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&record.0) else {
            return None;
        };
        let current = map.get("refresh_token")?.as_str()?.to_owned();
        // Empty: a login that brought no refresh token.
        if !current.is_empty() {
            check_value(&current).ok()?;
        }
        let login = map.get("login")?.as_str()?.to_owned();
        Some(State {
            current,
            announced: (String::new(), 0),
            login,
            login_at: map.get("login_at")?.as_u64()?,
            // Absent from records written before generations.
            gen: map.get("gen").and_then(Value::as_u64).unwrap_or(0),
            seq: map.get("seq")?.as_u64()?,
            issuer: map
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            scope: map
                .get("scope")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            client: match (
                map.get("client_id").and_then(Value::as_str),
                map.get("client_issuer").and_then(Value::as_str),
            ) {
                (Some(id), Some(issuer)) => Some(LoginClient {
                    id: id.to_owned(),
                    issuer: issuer.to_owned(),
                    secret: match (
                        map.get("client_secret").and_then(Value::as_str),
                        map.get("client_auth").and_then(Value::as_str),
                    ) {
                        (Some(secret), Some(method)) => {
                            RegisteredSecret::new(method, secret.to_owned())
                        }
                        _ => None,
                    },
                    // Written by this crate: a loopback URI, checked again
                    // before a listener binds it.
                    redirect_uri: map
                        .get("client_redirect_uri")
                        .and_then(Value::as_str)
                        .filter(|uri| uri.len() <= 2048)
                        .map(str::to_owned),
                }),
                _ => None,
            },
            dead: match map.get("dead").and_then(Value::as_str) {
                _ if map.get("signed_out") == Some(&Value::Bool(true)) => Some(Ended::SignedOut),
                _ if map.get("store_lost") == Some(&Value::Bool(true)) => Some(Ended::StoreLost),
                why => why.map(|why| Ended::Refused(why.to_owned())),
            },
            // Written by this crate once verified; sealed in the store.
            id_token: map
                .get("id_token")
                .and_then(Value::as_str)
                .filter(|t| t.len() <= crate::keys::verify::MAX_JWS_LEN)
                .unwrap_or_default()
                .to_owned(),
            unsaved: false,
        })
    }
}
