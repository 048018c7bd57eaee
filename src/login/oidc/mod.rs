//! Who signed in, by OpenID Connect: the [`Identity`] a verified ID token
//! names; [`Checks`], of the ID token (`id_token`) and of a logout token
//! (`logout`), each after its signature is checked with the server's keys
//! ([`KeySets`], `jwks`).

mod id_token;
mod jwks;
mod logout;

pub(crate) use self::id_token::{Expected, LoginAsked, Occasion};
pub(crate) use self::jwks::KeySets;
pub(crate) use self::logout::{
    refused as logout_refused, LogoutClaims, MAX_VALID_FOR as MAX_LOGOUT_VALID_FOR,
};

use std::fmt;

use base64::Engine;
use serde_json::{Map, Value};

use crate::endpoint::TokenRequest;

/// The checks of the JWTs a server signs, an ID token for a login (in
/// `id_token`: `verified_id_token`, `with_identity`) and a logout token for a
/// back-channel logout (in `logout`: `verified_logout_token`): made through
/// `request`, which gives its client, its settings and its transport, with
/// the layer's `keys`.
#[derive(Clone, Copy)]
pub(crate) struct Checks<'a> {
    pub(crate) request: &'a TokenRequest,
    pub(crate) keys: &'a KeySets,
}

/// The person a login signed in, as the server's verified ID token names
/// them (OpenID Connect Core 1.0): [`OAuthLayer::finish_login`] returns it,
/// and [`OAuthLayer::identity`] gives it again, from memory or the store.
///
/// A web app keys its own user by [`issuer`](Self::issuer) and
/// [`subject`](Self::subject) together: a subject is unique at its issuer
/// only, and never reassigned there, where an email address may change.
///
/// `Debug` leaves the ID token out.
///
/// [`OAuthLayer::finish_login`]: crate::OAuthLayer::finish_login
/// [`OAuthLayer::identity`]: crate::OAuthLayer::identity
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    issuer: String,
    subject: String,
    session_id: Option<String>,
    claims: Map<String, Value>,
    id_token: String,
}

impl Identity {
    /// The `sub` claim: who signed in, unique and never reassigned at the
    /// issuer.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The `iss` claim: the server that signed the person in.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The `sid` claim, the person's session at the server, where it sends
    /// one: a back-channel logout may name the session rather than the
    /// person.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Every claim of the ID token, verified: `name`, `email`,
    /// `email_verified` and the rest the scope asked for, as JSON.
    pub fn claims(&self) -> &Map<String, Value> {
        &self.claims
    }

    /// The ID token itself, for the `id_token_hint` of a logout (see
    /// [`OAuthLayer::end_session_url`](crate::OAuthLayer::end_session_url)).
    /// Keep it as you keep tokens: it says who the person is.
    pub fn id_token(&self) -> &str {
        &self.id_token
    }

    /// The identity an ID token names, read back from where the layer kept
    /// it after its checks (memory, or a sealed store): its claims, with an
    /// `iss` and a `sub`. `None` for anything else.
    pub(crate) fn from_id_token(id_token: &str) -> Option<Identity> {
        let payload = id_token.split('.').nth(1)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .ok()?;
        let Ok(Value::Object(claims)) = serde_json::from_slice::<Value>(&bytes) else {
            return None;
        };
        Self::from_claims(claims, id_token)
    }

    /// The identity of verified `claims`, which hold an `iss` and a `sub`.
    fn from_claims(claims: Map<String, Value>, id_token: &str) -> Option<Identity> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
        Some(Identity {
            issuer: text("iss")?,
            subject: text("sub")?,
            session_id: text("sid"),
            id_token: id_token.to_owned(),
            claims,
        })
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("issuer", &self.issuer)
            .field("subject", &self.subject)
            .field("session_id", &self.session_id)
            .field("id_token", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// The digest an identity's issuer and subject (`what` = `sub`), or its
/// issuer and session id (`sid`), or a logout token's `jti`, are kept
/// under to find its accounts: an HMAC-SHA256 under `key`, the store's
/// sealing key, so that a reader of the store who guesses a subject (an
/// e-mail address) cannot test the guess; a plain SHA-256 where there is
/// no key, and the links stay in this process's memory.
pub(crate) fn session_digest(
    key: Option<&[u8; 32]>,
    issuer: &str,
    what: &str,
    value: &str,
) -> String {
    let text = format!("tower-oauth session\0{issuer}\0{what}\0{value}");
    match key {
        Some(key) => {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
            crate::support::encoding::hex(ring::hmac::sign(&key, text.as_bytes()).as_ref())
        }
        None => crate::support::encoding::sha256_hex(text.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::session_digest;

    /// Under a key, the digest is HMAC-SHA256 of the parts (the vector
    /// from Python's `hmac`); without the key, nobody who guesses the
    /// subject finds it; without a key at all, a plain SHA-256.
    #[test]
    fn session_digests_are_keyed_with_the_sealing_key() {
        let key: [u8; 32] = std::array::from_fn(|i| i as u8);
        let (issuer, sub) = ("https://idp.example", "alice@example.com");
        assert_eq!(
            session_digest(Some(&key), issuer, "sub", sub),
            "1f2401c2e8e563f8e1b2e46c2dcff79c5ae615ddf2a71d4fe1716191ad4faef9"
        );
        let plain = session_digest(None, issuer, "sub", sub);
        assert_eq!(
            plain,
            "12b0e15b353f7b8c5cc72d936dd89c1157092041bc18c37f4d90dbc5494f9af8"
        );
        let other: [u8; 32] = [7; 32];
        assert_ne!(session_digest(Some(&other), issuer, "sub", sub), plain);
        assert_ne!(
            session_digest(Some(&other), issuer, "sub", sub),
            session_digest(Some(&key), issuer, "sub", sub)
        );
    }
}
