//! [`HandedOut`]: per store key, the token a store last handed out and its
//! sealed value, so that a refused token is deleted only while the store
//! still holds exactly it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::token::AccessToken;

/// How many keys' handed-out tokens a store remembers, in [`HandedOut`].
const MAX_HANDED_OUT: usize = 4096;

/// Per store key, the token a store last took or stored there, and its sealed
/// value. A refused token is deleted only if the store still holds exactly that
/// value. The map is bounded. Past [`MAX_HANDED_OUT`] keys, as when token slots
/// churn through the store, it starts afresh. A token refused meanwhile is left
/// in the store until it expires. Its refusals stay rate-limited.
#[derive(Default)]
pub(crate) struct HandedOut(Mutex<HashMap<String, (String, String)>>);

impl HandedOut {
    /// `token`, sealed as `sealed`, was handed out from `key`.
    pub(crate) fn put(&self, key: &str, token: &str, sealed: String) {
        let mut handed_out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if handed_out.len() >= MAX_HANDED_OUT && !handed_out.contains_key(key) {
            handed_out.clear();
        }
        handed_out.insert(key.to_owned(), (token.to_owned(), sealed));
    }

    /// The sealed value handed out from `key`, if it was `token`.
    pub(crate) fn sealed(&self, key: &str, token: &AccessToken) -> Option<String> {
        let handed_out = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match handed_out.get(key) {
            Some((t, sealed)) if t == token.expose_token() => Some(sealed.clone()),
            _ => None,
        }
    }
}
