//! [`LoginStatus`]: whether a layer's person is signed in, read from memory
//! and the token store, with no token request and no browser.

use std::time::Duration;

use crate::endpoint::{Ended, Standing, Stands};

/// Where a layer's login stands, as
/// [`OAuthLayer::login_status`](crate::OAuthLayer::login_status) reads it:
/// signed in, or why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoginState {
    /// Signed in: a refresh token the server has not refused, or an access
    /// token that still serves.
    SignedIn,
    /// No one has signed in: not here, and not in the token store.
    NeverSignedIn,
    /// The login ended: the server refused its refresh token (it expired,
    /// or was revoked at the server), or it gave none and the last access
    /// token ran out. [`LoginStatus::ended_because`] says what the server
    /// said.
    Ended,
    /// Signed out, with [`OAuthLayer::logout`](crate::OAuthLayer::logout)
    /// (or [`sign_out`](crate::OAuthLayer::sign_out)), here or in another
    /// process on the same token store.
    SignedOut,
    /// The layer acts for no person: its credential is a machine's, and
    /// there is nothing to sign in to.
    NoPerson,
}

/// Whether a layer's person is signed in (until when, with which scopes),
/// or needs a login and why. See
/// [`OAuthLayer::login_status`](crate::OAuthLayer::login_status). It holds
/// no secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginStatus {
    pub(crate) state: LoginState,
    pub(crate) ended_because: Option<String>,
    pub(crate) scope: String,
    pub(crate) issuer: Option<String>,
    pub(crate) refresh_token: bool,
    pub(crate) access_token_usable_for: Option<Duration>,
    pub(crate) store_unread: Option<String>,
}

impl LoginStatus {
    /// The status of a chain that stands as `standing`, with an access
    /// token usable for `usable` more.
    pub(crate) fn of(standing: &Standing, usable: Option<Duration>) -> Self {
        let state = match &standing.stands {
            Stands::Live => LoginState::SignedIn,
            Stands::NoRefreshToken if usable.is_some() => LoginState::SignedIn,
            Stands::NoRefreshToken => LoginState::Ended,
            Stands::NeverLoggedIn => LoginState::NeverSignedIn,
            Stands::Ended(Ended::SignedOut) => LoginState::SignedOut,
            Stands::Ended(Ended::Refused(_) | Ended::StoreLost) => LoginState::Ended,
        };
        let signed_in = state == LoginState::SignedIn;
        LoginStatus {
            state,
            ended_because: match &standing.stands {
                Stands::Ended(Ended::Refused(why)) => Some(why.clone()),
                _ => None,
            },
            scope: standing.scope.clone(),
            issuer: (!standing.issuer.is_empty()).then(|| standing.issuer.clone()),
            refresh_token: standing.stands == Stands::Live,
            access_token_usable_for: usable.filter(|_| signed_in),
            store_unread: None,
        }
    }

    /// The status of a layer that acts for no person.
    pub(crate) fn no_person() -> Self {
        LoginStatus {
            state: LoginState::NoPerson,
            ended_because: None,
            scope: String::new(),
            issuer: None,
            refresh_token: false,
            access_token_usable_for: None,
            store_unread: None,
        }
    }

    /// Whether the person is signed in: the layer's requests get tokens
    /// without a login.
    pub fn is_signed_in(&self) -> bool {
        self.state == LoginState::SignedIn
    }

    /// Signed in, or why not.
    pub fn state(&self) -> LoginState {
        self.state
    }

    /// For a login that [ended](LoginState::Ended) with a refused refresh
    /// token: what the server said (its `error` and description, clipped
    /// and escaped).
    pub fn ended_because(&self) -> Option<&str> {
        self.ended_because.as_deref()
    }

    /// The scopes the login asked for, and the person approved at the
    /// server's consent page; empty for a refresh token given, or before a
    /// login.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scope.split_whitespace()
    }

    /// The authorization server the login was made at, if a login of this
    /// layer's made it.
    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// Whether the layer holds a refresh token: signed in beyond the
    /// current access token, until the server refuses it. Servers seldom say
    /// how long a refresh token lasts, so the layer cannot say either.
    pub fn has_refresh_token(&self) -> bool {
        self.refresh_token
    }

    /// How much longer the current access token may be presented, if the
    /// layer holds a usable one; a refresh renews it.
    pub fn access_token_usable_for(&self) -> Option<Duration> {
        self.access_token_usable_for
    }

    /// Why the token store could not be read, if it could not: the status
    /// is then this process's own, and may miss a sign-in or sign-out made
    /// elsewhere.
    pub fn store_unread(&self) -> Option<&str> {
        self.store_unread.as_deref()
    }
}
