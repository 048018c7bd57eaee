//! A person's chain: the login that begins it (when a token request needs
//! one, or only when asked), what the login covers (its server, its
//! scopes), and where the chain stands, for a status that changes nothing.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Chain, Owner};
use crate::error::{TokenError, TokenErrorKind};

/// Where a chain stands, as memory holds it (after a read of the store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Standing {
    /// Whether it has a refresh token to send, and if not, why.
    pub(crate) stands: Stands,
    /// The scopes its login asked for, space-separated.
    pub(crate) scope: String,
    /// The server its login was made at; empty for a refresh token given.
    pub(crate) issuer: String,
}

/// Whether a chain has a refresh token to send, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stands {
    /// A refresh token the server has not refused.
    Live,
    /// No login began the chain, here or in another process.
    NeverLoggedIn,
    /// A login began it, and brought no refresh token (an access token
    /// alone may still serve).
    NoRefreshToken,
    /// It ended: a sign-out, the server's refusal, a store's loss.
    Ended(Ended),
}

/// What ended a chain. A type, not a sentence: no words of a server's
/// can pass for a sign-out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Signed out, here or in another process or replica.
    SignedOut,
    /// The server refused the refresh token; what it said (clipped).
    Refused(String),
    /// The token store lost the chain, and this copy was not the newest
    /// for sure: it is not sent (a person's login that runs by itself
    /// begins again).
    StoreLost,
}

impl Ended {
    /// What ended it, in words.
    pub(crate) fn text(&self) -> &str {
        match self {
            Ended::SignedOut => "signed out",
            Ended::Refused(why) => why,
            Ended::StoreLost => "the token store lost the login's chain",
        }
    }
}

/// Why a chain has no refresh token to send, for its "no login" error. A
/// type, not a sentence: the errors word each case their own way.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NoLogin<'a> {
    /// No login has begun the chain yet.
    Yet,
    /// The chain ended.
    Ended(&'a Ended),
    /// A login is needed, for this reason, in words.
    Needed(&'a str),
}

/// A stronger or more recent sign-in an API asked for
/// (`insufficient_user_authentication`, RFC 9470): the next login asks for
/// it, and its ID token must show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reauthentication {
    /// The authentication contexts asked for, space-separated, checked.
    pub(crate) acr_values: Option<String>,
    /// The longest since the person signed in, in seconds.
    pub(crate) max_age: Option<u64>,
}

impl Reauthentication {
    /// What a challenge's `acr_values` and `max_age` ask for, once checked
    /// (server text: printable ASCII of at most 1 KiB, whole seconds of at
    /// most a year); `None` when neither is usable.
    pub(crate) fn from_challenge(acr_values: Option<&str>, max_age: Option<&str>) -> Option<Self> {
        let acr_values = acr_values
            .map(str::trim)
            .filter(|v| {
                !v.is_empty() && v.len() <= 1024 && v.bytes().all(|b| (0x20..0x7f).contains(&b))
            })
            .map(str::to_owned);
        let max_age = max_age
            .filter(|m| !m.is_empty() && m.len() <= 10 && m.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|m| m.parse::<u64>().ok())
            .filter(|m| *m <= 366 * 24 * 60 * 60);
        (acr_values.is_some() || max_age.is_some()).then_some(Reauthentication {
            acr_values,
            max_age,
        })
    }
}

/// The re-authentications an API asked for of a chain: the one its next
/// login asks for, and when the last one's login ended.
#[derive(Debug, Default)]
pub(crate) struct Reauthenticating {
    pending: Option<Reauthentication>,
    done_at: Option<std::time::Instant>,
}

impl Chain {
    fn reauthenticating(&self) -> std::sync::MutexGuard<'_, Reauthenticating> {
        self.reauthentication
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An API asked for `asked` (RFC 9470): the next token request logs the
    /// person in again with it, whatever the chain holds (the newest
    /// challenge over one not begun yet). At most once per `gap` after the
    /// last such login ended, however it ended and whatever is asked: an
    /// API that a new login does not satisfy gets no loop of logins, and a
    /// person who refused is not asked again at once. Whether a login will
    /// ask.
    pub(crate) fn ask_reauthentication(&self, asked: Reauthentication, gap: Duration) -> bool {
        let mut state = self.reauthenticating();
        if state.pending.is_none() && state.done_at.is_some_and(|at| at.elapsed() < gap) {
            return false;
        }
        state.pending = Some(asked);
        true
    }

    /// The login that asked for a re-authentication ended (approved,
    /// refused, failed): the next one waits out the gap.
    pub(crate) fn reauthentication_ended(&self) {
        self.reauthenticating().done_at = Some(std::time::Instant::now());
    }

    /// A login took `asked` and did not end (a backchannel request the
    /// person has not approved yet): the next token request asks again,
    /// unless a newer challenge came meanwhile.
    pub(crate) fn restore_reauthentication(&self, asked: Reauthentication) {
        self.reauthenticating().pending.get_or_insert(asked);
    }

    /// Whether a re-authentication was asked for and has not begun.
    pub(crate) fn reauthentication_asked(&self) -> bool {
        self.reauthenticating().pending.is_some()
    }

    /// The re-authentication asked for, taken by the login that runs it.
    pub(crate) fn take_reauthentication(&self) -> Option<Reauthentication> {
        self.reauthenticating().pending.take()
    }

    /// A chain that a person's login begins: no refresh token until then.
    /// Every process configured with the same login shares it. `automatic`:
    /// a token request that needs the login runs it; otherwise only
    /// `OAuthLayer::login` does. `reauthenticates`: the login can ask for
    /// the sign-in an API's challenge asks for (RFC 9470).
    pub(crate) fn for_login(automatic: bool, reauthenticates: bool) -> Chain {
        Chain {
            owner: Owner::Person {
                automatic,
                reauthenticates,
            },
            ..Chain::empty("login")
        }
    }

    /// This chain, which logs a person in when it has no refresh token or
    /// its refresh token was refused (`automatic`), or when asked.
    pub(crate) fn with_login(&self, automatic: bool, reauthenticates: bool) -> Chain {
        Chain {
            owner: Owner::Person {
                automatic,
                reauthenticates,
            },
            ..self.copy()
        }
    }

    /// Whether the person's login can ask for the sign-in an API's
    /// challenge asks for.
    pub(crate) fn reauthenticates(&self) -> bool {
        matches!(
            self.owner,
            Owner::Person {
                reauthenticates: true,
                ..
            }
        )
    }

    /// Whether a person logs in when the chain has no refresh token.
    pub(crate) fn logs_in(&self) -> bool {
        matches!(self.owner, Owner::Person { .. })
    }

    /// Whether a token request may begin the login by itself: a person's
    /// automatic login, or an account's backchannel login (a request that
    /// names the account's person asks them; after a sign-out too, which
    /// the person approves again).
    pub(crate) fn logs_in_by_itself(&self) -> bool {
        self.person_logs_in_by_itself() || matches!(self.owner, Owner::Account { asks: true, .. })
    }

    /// Whether this is a person's chain whose login runs by itself: one the
    /// store lost begins again with a login, not with another replica's
    /// copy (an account's waits for the replica that holds the newest).
    pub(crate) fn person_logs_in_by_itself(&self) -> bool {
        matches!(
            self.owner,
            Owner::Person {
                automatic: true,
                ..
            }
        )
    }

    /// The next token request runs the login, whatever the chain holds
    /// (`OAuthLayer::login`).
    pub(crate) fn ask_login(&self) {
        self.login_asked.store(true, Ordering::SeqCst);
    }

    /// Whether a login was asked for; it is taken once, by the login.
    pub(crate) fn take_login_asked(&self) -> bool {
        self.login_asked.swap(false, Ordering::SeqCst)
    }

    /// Whether a login was asked for and has not begun yet.
    pub(super) fn login_asked(&self) -> bool {
        self.login_asked.load(Ordering::SeqCst)
    }

    /// Whether the next token request is a login: there is a login that
    /// may run now, and no refresh token to send (none yet, or a refused
    /// one); or something begins here (a login asked for, a code, a
    /// sign-out).
    pub(crate) fn needs_login(&self) -> bool {
        if self.begins_here() || self.reauthentication_asked() {
            return true;
        }
        let state = self.state();
        self.logs_in_by_itself() && (state.current.is_empty() || state.dead.is_some())
    }

    /// A login at `issuer` ended with `refresh_token` (none: the server gave
    /// none, and the next token after this one needs a login again): a new
    /// chain, whose refresh tokens go to `issuer` only.
    pub(crate) fn logged_in(&self, refresh_token: Option<&str>, issuer: &str, scope: &str) {
        self.replace(refresh_token.unwrap_or_default());
        let mut state = self.state();
        state.issuer = issuer.to_owned();
        state.scope = scope.to_owned();
    }

    /// The scopes the chain's login at `issuer` asked for; empty for none.
    pub(crate) fn scope_at(&self, issuer: &str) -> String {
        let state = self.state();
        match state.issuer == issuer {
            true => state.scope.clone(),
            false => String::new(),
        }
    }

    /// Whether the chain's login covers `scope`: every scope in it was asked
    /// for at the login. A refresh token given covers any.
    pub(crate) fn covers(&self, scope: Option<&str>) -> bool {
        let state = self.state();
        if state.issuer.is_empty() {
            return true;
        }
        let granted: Vec<&str> = state.scope.split_whitespace().collect();
        scope
            .unwrap_or_default()
            .split_whitespace()
            .all(|s| granted.contains(&s))
    }

    /// Whether the chain's refresh token was issued by a login at another
    /// server than `issuer`: it is never sent there.
    pub(crate) fn issued_elsewhere(&self, issuer: Option<&str>) -> bool {
        let state = self.state();
        match issuer {
            Some(issuer) => !state.issuer.is_empty() && state.issuer != issuer,
            None => !state.issuer.is_empty(),
        }
    }

    /// The redirect URI the client kept for `issuer` was registered with.
    pub(crate) fn kept_redirect_uri(&self, issuer: &str) -> Option<String> {
        self.client_at(issuer)?.redirect_uri
    }

    /// Forgets the client a login got at `issuer` (the server no longer
    /// knows it, or its redirect URI cannot be had): the next login gets
    /// one anew. Whether there was one.
    pub(crate) fn forget_client(&self, issuer: &str) -> bool {
        self.forget_client_if(|client| client.issuer == issuer)
    }

    /// Forgets the client the chain's login got, whichever server: the
    /// server refused it (`invalid_client`). Whether there was one.
    pub(crate) fn forget_any_client(&self) -> bool {
        self.forget_client_if(|_| true)
    }

    /// Forgets the client the chain kept, if `which` says so; whether it
    /// did.
    fn forget_client_if(&self, which: impl Fn(&super::LoginClient) -> bool) -> bool {
        let mut state = self.state();
        if !state.client.as_ref().is_some_and(which) {
            return false;
        }
        state.client = None;
        state.unsaved = true;
        true
    }

    /// An API's challenge asked for `scopes` (a step-up without a list): a
    /// login asks for them only where the server lists them. At most 64
    /// are remembered (a step-up asks for at most 32 at once).
    pub(crate) fn asked_by_api(&self, scopes: &[&str]) {
        let mut asked = self
            .asked_by_apis
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for scope in scopes {
            if !asked.iter().any(|a| a == scope) {
                if asked.len() >= 64 {
                    asked.remove(0);
                }
                asked.push((*scope).to_owned());
            }
        }
    }

    /// Whether an API's challenge asked for `scope`.
    pub(crate) fn was_asked_by_api(&self, scope: &str) -> bool {
        self.asked_by_apis
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|a| a == scope)
    }

    /// The verified ID token of the chain's login (or of a refresh since):
    /// who signed in. `None` without one.
    pub(crate) fn id_token(&self) -> Option<String> {
        let state = self.state();
        (!state.id_token.is_empty()).then(|| state.id_token.clone())
    }

    /// `id_token`, verified, says who signed in from now on; it is kept
    /// with the chain, in the store too.
    pub(crate) fn set_id_token(&self, id_token: &str) {
        let mut state = self.state();
        if state.id_token != id_token {
            state.id_token = id_token.to_owned();
            state.unsaved = true;
        }
    }

    /// A refresh's answer carried `id_token`: held for the check that
    /// follows the refresh, and nothing else.
    pub(crate) fn refreshed_id_token(&self, id_token: String) {
        *self
            .refreshed_id_token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(id_token);
    }

    /// The ID token a refresh brought, taken for its check.
    pub(crate) fn take_refreshed_id_token(&self) -> Option<String> {
        self.refreshed_id_token
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Whether the chain ended with a sign-out (here, or read from the
    /// store).
    pub(crate) fn is_signed_out(&self) -> bool {
        self.state().dead == Some(Ended::SignedOut)
    }

    /// Where the chain stands now, in memory.
    pub(crate) fn standing(&self) -> Standing {
        let state = self.state();
        let stands = match &state.dead {
            Some(ended) => Stands::Ended(ended.clone()),
            None if !state.current.is_empty() => Stands::Live,
            None if state.login_at > 0 || !self.initial.is_empty() => Stands::NoRefreshToken,
            None => Stands::NeverLoggedIn,
        };
        Standing {
            stands,
            scope: state.scope.clone(),
            issuer: state.issuer.clone(),
        }
    }
}

/// The error of a person's chain with no live refresh token, whose login
/// runs only when asked (`Login::automatic(false)`), saying `why`.
pub(crate) fn person_login_required(why: NoLogin<'_>) -> TokenError {
    let why = match why {
        NoLogin::Yet => "no one has signed in yet".to_owned(),
        NoLogin::Ended(ended) => format!("the login has ended ({})", ended.text()),
        NoLogin::Needed(why) => why.to_owned(),
    };
    TokenError::new(TokenErrorKind::LoginRequired).with_message(format!(
        "{why}: sign in with OAuthLayer::login (this layer's login runs only when asked, \
         Login::automatic(false)); no token request was sent and no browser was opened"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_s_values_are_checked_before_any_login_asks_for_them() {
        let asked = Reauthentication::from_challenge(Some("urn:gold urn:silver"), Some("300"));
        assert_eq!(
            asked,
            Some(Reauthentication {
                acr_values: Some("urn:gold urn:silver".into()),
                max_age: Some(300),
            })
        );
        // One usable value is enough; the other is dropped.
        let acr_only = Reauthentication::from_challenge(Some("urn:gold"), Some("-1")).unwrap();
        assert_eq!(acr_only.max_age, None);
        for (acr, max_age) in [
            (Some("urn:gold\r\nx"), None),
            (Some(""), Some("")),
            (None, Some("1e3")),
            (None, Some("99999999999")),
            (Some(&*"a".repeat(1025)), None),
            (None, None),
        ] {
            assert_eq!(
                Reauthentication::from_challenge(acr, max_age),
                None,
                "{acr:?} {max_age:?}"
            );
        }
    }

    #[test]
    fn a_sign_in_is_asked_for_once_within_the_gap_after_its_login() {
        let chain = Chain::for_login(true, true);
        let gold = Reauthentication::from_challenge(Some("urn:gold"), None).unwrap();
        let other = Reauthentication::from_challenge(None, Some("60")).unwrap();
        let gap = Duration::from_secs(60);
        assert!(chain.ask_reauthentication(gold.clone(), gap));
        // Pending: another answer shares it, the newest challenge first.
        assert!(chain.ask_reauthentication(other.clone(), gap));
        assert_eq!(chain.take_reauthentication(), Some(other.clone()));
        // Not begun yet: asked again at once.
        assert!(chain.ask_reauthentication(gold.clone(), gap));
        assert_eq!(chain.take_reauthentication(), Some(gold.clone()));
        // Not ended yet: put back, unless a newer one came.
        chain.restore_reauthentication(gold.clone());
        assert_eq!(chain.take_reauthentication(), Some(gold.clone()));
        chain.reauthentication_ended();
        // After its login: nothing more within the gap, whatever is asked.
        assert!(!chain.ask_reauthentication(gold.clone(), gap));
        assert!(!chain.ask_reauthentication(other, gap));
        assert!(chain.ask_reauthentication(gold, Duration::ZERO));
    }
}
