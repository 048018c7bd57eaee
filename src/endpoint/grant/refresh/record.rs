//! A chain as a store keeps it: the [`ChainRecord`] written, read back,
//! checked as an answer is, and adopted when it is newer.

use serde_json::{Map, Value};

use super::LoginClient;
use super::{check_value, Chain, ChainRecord, Ended, State};

impl Chain {
    /// The chain as a store keeps it.
    pub(crate) fn record(&self) -> ChainRecord {
        let state = self.state();
        let mut map = Map::new();
        map.insert("refresh_token".into(), state.current.clone().into());
        map.insert("login".into(), state.login.clone().into());
        map.insert("login_at".into(), state.login_at.into());
        // The generation this record will have once stored.
        let gen = state.gen + u64::from(state.unsaved);
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
            if let Some((secret, method)) = &client.secret {
                map.insert("client_secret".into(), secret.clone().into());
                map.insert("client_auth".into(), method.clone().into());
            }
        }
        if let Some(ended) = &state.dead {
            map.insert("dead".into(), ended.text().into());
            if *ended == Ended::SignedOut {
                map.insert("signed_out".into(), true.into());
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
    fn read(record: &ChainRecord) -> Option<State> {
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
                            Some((secret.to_owned(), method.to_owned()))
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
            dead: match map.get("signed_out").and_then(Value::as_bool) {
                Some(true) => Some(Ended::SignedOut),
                _ => map
                    .get("dead")
                    .and_then(Value::as_str)
                    .map(|why| Ended::Refused(why.to_owned())),
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
