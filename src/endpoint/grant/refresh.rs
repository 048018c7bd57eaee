//! [`RefreshToken`]: the refresh token grant of RFC 6749 section 6, and the
//! chain of refresh tokens a login hands out as the server rotates them.
//!
//! A chain starts with the refresh token that a login made elsewhere gave, in
//! `RefreshToken::new`. Each answer that carries a new refresh token replaces
//! the current one, which is never sent again. A chain the server refused with
//! `invalid_grant` is dead. Nothing is sent until a new login, with
//! [`Chain::replace`], or until a store holds a newer chain. What a store keeps
//! of a chain is a [`ChainRecord`], which the store seals.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::error::{ConfigError, ConfigErrorKind, TokenError, TokenErrorKind};
use crate::support::encoding::sha256_hex;
use crate::token::params::AccountDigest;

mod account;
mod kept;
mod person;
mod record;

pub(crate) use self::account::{HandedCallback, TakeCode};
pub(crate) use self::kept::{Code, LoginClient, RegisteredSecret};
pub(crate) use self::person::{person_login_required, Ended, NoLogin, Reauthentication};
pub(crate) use self::person::{Standing, Stands};
pub(crate) use self::record::Lost;

/// The `grant_type` of a refresh, from RFC 6749 section 6.
pub(crate) const REFRESH_GRANT_TYPE: &str = "refresh_token";

/// The longest refresh token taken from a server or a user. It is far above any
/// provider's, since Entra ID's run to about 2 KB, and far below what would
/// flood a store.
pub(crate) const MAX_REFRESH_TOKEN_LEN: usize = 8 * 1024;

/// How far a new login moves its chain's generation: past any number of
/// rotations (up to a million) a replica's copy may lag behind, so that its
/// record wins over every record written before it, whichever replica
/// reads the two.
const LOGIN_STEP: u64 = 1 << 20;

/// How far a sign-out moves it: past any number of logins (up to a
/// million) its replica may not have seen, so that a sign-out outranks them
/// (a person who logged in on a store that lost the sign-out logs in
/// again, rather than one who signed out being served).
pub(super) const SIGN_OUT_STEP: u64 = 1 << 40;

/// What is called with each new refresh token once it is stored.
type OnRotation = Arc<dyn Fn(&str) + Send + Sync>;

/// The refresh token grant of RFC 6749 section 6. Each token request sends
/// `grant_type=refresh_token` with the current refresh token of a login made
/// elsewhere. That login may be a CLI's authorization-code login, a device-flow
/// login, or an integration's stored credential. Give it with
/// [`OAuthLayerBuilder::refresh_token`](crate::OAuthLayerBuilder::refresh_token).
///
/// A server that rotates refresh tokens answers a refresh with a new one. The
/// new one replaces the current one, and the old one is never sent again. Not
/// by this layer, not by its token slots, and not by another process or replica
/// that shares a [`TokenStore`](crate::store::TokenStore), such as
/// [`FileStore`](crate::store::FileStore) or `RedisStore`. A new refresh token is
/// stored before the access token that came with it is handed out.
///
/// A chain is told apart by the layer's token endpoint, client and parameters,
/// and by the refresh token given here. Processes configured with the same one
/// share one chain through a store. A process that starts again with it, though
/// it was rotated long ago, goes on from the stored chain. A different refresh
/// token, from a new login, starts a new chain.
///
/// The refresh token is a secret: it never appears in `Debug`, logs,
/// metrics or errors, and stores keep it sealed.
///
/// ```
/// use tower_oauth::{OAuthLayer, grant::RefreshToken};
///
/// // The refresh token a CLI's login stored.
/// let refresh_token = "8xLOxBtZp8".to_owned();
/// let oauth = OAuthLayer::builder()
///     .token_url("https://login.example.com/oauth2/token")
///     .client_id("my-cli")
///     .refresh_token(RefreshToken::new(refresh_token).on_rotation(|new| {
///         // Keep the new one in the keychain as well.
///         # let _ = new;
///     }))
///     .build()?;
/// # Ok::<_, tower_oauth::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RefreshToken {
    pub(crate) chain: Arc<Chain>,
}

impl RefreshToken {
    /// The refresh token of a login made elsewhere: the start of the chain.
    /// [`build`](crate::OAuthLayerBuilder::build) fails when it is empty,
    /// longer than 8 KiB, or holds a character outside RFC 6749's `VSCHAR`,
    /// which is visible ASCII and space.
    pub fn new(initial: impl Into<String>) -> Self {
        let initial = initial.into();
        RefreshToken {
            chain: Arc::new(Chain {
                configured: sha256_hex(initial.as_bytes()),
                initial: initial.clone(),
                state: Mutex::new(State::begin(&initial, 0)),
                ..Chain::empty("")
            }),
        }
    }

    /// Calls `f` with each new refresh token once it is stored, in memory or in
    /// the layer's token store (with a store, once the store has it: one the
    /// store could not take, or fenced off, is not announced). It serves users
    /// who keep the token elsewhere as well, such as in a keychain or a database. It is called on the fetch's
    /// task: keep it short, and keep what it gets secret.
    ///
    /// Default: nothing is called.
    pub fn on_rotation(self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        let chain = Arc::try_unwrap(self.chain).unwrap_or_else(|shared| shared.copy());
        RefreshToken {
            chain: Arc::new(Chain {
                on_rotation: Some(Arc::new(f)),
                ..chain
            }),
        }
    }
}

impl fmt::Debug for RefreshToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.chain.state();
        f.debug_struct("RefreshToken")
            .field("refresh_token", &"[redacted]")
            .field("rotations", &state.seq)
            .field("dead", &state.dead.is_some())
            .finish()
    }
}

/// One chain of refresh tokens, shared by a layer's caches.
pub(crate) struct Chain {
    /// SHA-256, in hex, of the refresh token given to `RefreshToken::new`. It
    /// sets this chain's tokens apart.
    configured: String,
    /// That refresh token: what the key sealing the chain in a store is
    /// derived from.
    initial: String,
    state: Mutex<State>,
    /// Held for a whole refresh: the caches of one layer refresh one at a
    /// time.
    turn: Arc<tokio::sync::Mutex<()>>,
    on_rotation: Option<OnRotation>,
    /// Whose chain it is, which says what happens when it has no refresh
    /// token.
    owner: Owner,
    /// `OAuthLayer::login` asked for a login: the next token request runs
    /// it, automatic or not.
    login_asked: AtomicBool,
    /// A web login's code, from its callback, for the next token request
    /// to exchange. Never stored: the fetch that exchanges it runs here.
    code: Mutex<Option<Code>>,
    /// Web logins' callbacks, for the next token request to take under the
    /// store's lock (see `callback`).
    callbacks: Mutex<Vec<Arc<HandedCallback>>>,
    /// The ID token a refresh's answer carried, until the login's token
    /// source checks it (never kept unchecked).
    refreshed_id_token: Mutex<Option<String>>,
    /// The account signs out at the next token request, which revokes the
    /// refresh token the store holds by then.
    signing_out: AtomicBool,
    /// The login the last sign-out here ended, until its record is stored.
    signed_out_of: Mutex<String>,
    /// Another replica's news may have changed the chain (a sign-out, or a
    /// break in the news): the next token request reads the stored chain
    /// before anything else.
    unverified: AtomicBool,
    /// The scopes an API's challenge added (a step-up without a list),
    /// which a login asks for only where the server lists them.
    asked_by_apis: Mutex<Vec<String>>,
    /// A stronger or more recent sign-in an API asked for, until the login
    /// that runs it begins.
    reauthentication: Mutex<person::Reauthenticating>,
    /// What the store's news told of the chain's writes (see
    /// `record::News`).
    news: Mutex<record::News>,
}

/// Whose a chain is, which says what happens when it has no refresh token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The layer's, from a refresh token given to it: "no login" until a
    /// new one is given.
    Given,
    /// A person's, whose login (the layer's `Login`, which the login's
    /// token source holds) begins it: when a token request needs it
    /// (`automatic`), or only when asked (`OAuthLayer::login`); and
    /// again, asking for it, when an API asks for a stronger or more
    /// recent sign-in, where the login can ask for one (`reauthenticates`).
    Person {
        automatic: bool,
        reauthenticates: bool,
    },
    /// An account's, whose web login the app's routes run; or, where the
    /// layer's login is a backchannel one that runs when a token request
    /// needs it (`asks`), that login for a request naming the person.
    Account { digest: AccountDigest, asks: bool },
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chain")
            .field("refresh_token", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// Where the chain stands.
#[derive(Clone, Debug, PartialEq)]
struct State {
    current: String,
    /// SHA-256, in hex, of the refresh token the chain began with.
    login: String,
    /// When that login was handed over, in ms since the Unix epoch. 0 is the
    /// one configured. It orders only records written before generations.
    login_at: u64,
    /// The generation of the stored record this state is, or was built on:
    /// each write of the chain to a store is one more than the record it
    /// replaces. 0: never stored. Which of two chains wins is decided by it,
    /// never by replicas' clocks.
    gen: u64,
    /// Rotations since the login.
    seq: u64,
    /// The issuer a person's login was made at, where its refresh tokens go
    /// and nowhere else; empty for a refresh token given.
    issuer: String,
    /// The client a login registered (or its metadata document's URL);
    /// kept across logins.
    client: Option<LoginClient>,
    /// The scopes a person's login asked for, space-separated; empty for a
    /// refresh token given. A token request for more needs a new login.
    scope: String,
    /// What ended the chain: a sign-out, or the server's refusal of the
    /// current refresh token.
    dead: Option<Ended>,
    /// The verified ID token of the login (or of a refresh since): who
    /// signed in. Empty without one.
    id_token: String,
    /// Changed since a store last had it.
    unsaved: bool,
    /// The login and rotation last announced to `on_rotation`.
    announced: (String, u64),
}

impl State {
    fn begin(token: &str, login_at: u64) -> Self {
        // A login without a refresh token (a sign-out's end, or a server
        // that gives none) is told apart from every other by an id of its
        // own; the chain every replica starts with (at 0) is the same.
        let login = match token.is_empty() && login_at > 0 {
            true => crate::support::random::random_hex(),
            false => sha256_hex(token.as_bytes()),
        };
        State {
            current: token.to_owned(),
            announced: (login.clone(), 0),
            login,
            login_at,
            gen: 0,
            seq: 0,
            issuer: String::new(),
            client: None,
            scope: String::new(),
            dead: None,
            id_token: String::new(),
            unsaved: login_at > 0,
        }
    }
}

/// A chain as a store keeps it, sealed: the current refresh token, its login
/// and rotation, and whether it is dead.
pub(crate) struct ChainRecord(Vec<u8>);

impl ChainRecord {
    /// A record read back from a store, already opened.
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Self {
        ChainRecord(bytes)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The record's generation (0 for one that does not say). (Read by
    /// `RedisStore`, behind its feature, and tests.)
    #[allow(dead_code)]
    pub(crate) fn generation(&self) -> u64 {
        serde_json::from_slice::<Value>(&self.0)
            .ok()
            .and_then(|record| record.get("gen").and_then(Value::as_u64))
            .unwrap_or(0)
    }
}

impl Chain {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy with the same configuration and state, for a builder step on
    /// a chain already shared.
    fn copy(&self) -> Chain {
        Chain {
            configured: self.configured.clone(),
            initial: self.initial.clone(),
            state: Mutex::new(self.state().clone()),
            turn: Arc::new(tokio::sync::Mutex::new(())),
            on_rotation: self.on_rotation.clone(),
            owner: self.owner.clone(),
            login_asked: AtomicBool::new(false),
            code: Mutex::new(None),
            callbacks: Mutex::new(Vec::new()),
            refreshed_id_token: Mutex::new(None),
            signing_out: AtomicBool::new(false),
            signed_out_of: Mutex::default(),
            unverified: AtomicBool::new(false),
            asked_by_apis: Mutex::new(Vec::new()),
            reauthentication: Mutex::default(),
            news: Mutex::default(),
        }
    }

    /// A chain with no refresh token, told apart by `configured`.
    fn empty(configured: &str) -> Chain {
        Chain {
            configured: configured.to_owned(),
            initial: String::new(),
            state: Mutex::new(State::begin("", 0)),
            turn: Arc::new(tokio::sync::Mutex::new(())),
            on_rotation: None,
            owner: Owner::Given,
            login_asked: AtomicBool::new(false),
            code: Mutex::new(None),
            callbacks: Mutex::new(Vec::new()),
            refreshed_id_token: Mutex::new(None),
            signing_out: AtomicBool::new(false),
            signed_out_of: Mutex::default(),
            unverified: AtomicBool::new(false),
            asked_by_apis: Mutex::new(Vec::new()),
            reauthentication: Mutex::default(),
            news: Mutex::default(),
        }
    }

    /// What sets the chain's tokens apart in a token identity.
    pub(crate) fn identity(&self) -> String {
        format!("refresh_token {}", self.configured)
    }

    /// The refresh token the chain was configured with.
    pub(crate) fn initial(&self) -> &str {
        &self.initial
    }

    /// Checks the configured refresh token (none for a login's chain).
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.logs_in() && self.initial.is_empty() {
            return Ok(());
        }
        check_given(&self.initial, "given to RefreshToken::new")
    }

    /// Waits for the chain's turn: one refresh at a time. The turn may be
    /// handed to a task of its own.
    pub(crate) async fn turn(&self) -> tokio::sync::OwnedMutexGuard<()> {
        Arc::clone(&self.turn).lock_owned().await
    }

    /// Where the chain stands: its login and rotation. A token fetched at
    /// one position is the chain's own while it stands there.
    pub(crate) fn position(&self) -> (String, u64) {
        let state = self.state();
        (state.login.clone(), state.seq)
    }

    /// The refresh token to send now, or the error of a dead chain (or of
    /// one a login has not begun yet).
    pub(crate) fn to_send(&self) -> Result<String, TokenError> {
        let state = self.state();
        match &state.dead {
            Some(ended) => Err(self.required(NoLogin::Ended(ended))),
            None if state.current.is_empty() => Err(self.required(NoLogin::Yet)),
            None => Ok(state.current.clone()),
        }
    }

    /// The "no login" error of this chain's kind, saying `why`.
    fn required(&self, why: NoLogin<'_>) -> TokenError {
        match (&self.owner, why) {
            (Owner::Account { digest, .. }, why) => account_login_required(digest, why),
            (Owner::Person { .. }, why) => person_login_required(why),
            (Owner::Given, NoLogin::Yet) => login_required(None),
            (Owner::Given, NoLogin::Ended(ended)) => login_required(Some(ended.text())),
            (Owner::Given, NoLogin::Needed(why)) => login_required(Some(why)),
        }
    }

    /// Whether the chain in memory came from a store, or went to one (or
    /// the store's news told of a write of it): then a store that holds no
    /// record of it lost it, and this copy may be older than another
    /// replica's. A new login made here and not stored
    /// yet is the newest there is.
    pub(crate) fn was_stored(&self) -> bool {
        let heard = self.heard_of_any();
        let state = self.state();
        (state.gen > 0 || heard) && !(state.unsaved && state.seq == 0 && state.login_at > 0)
    }

    /// The store lost the chain: this copy's refresh token is not sent. A
    /// person's login that runs by itself begins again; otherwise "no
    /// login", which every request reads again from the store.
    pub(crate) fn store_lost(&self) -> Option<TokenError> {
        const WHY: &str = "the token store no longer holds the login's refresh-token chain (a \
                           store restarted empty, flushed, evicted, or failed over with writes \
                           lost), and this replica's copy may be older than another's: it is \
                           not sent, since the server may take it for a replay and revoke the \
                           login";
        tracing::error!("{WHY}");
        if self.person_logs_in_by_itself() {
            let current = self.current();
            self.end(&current, Ended::StoreLost);
            return None;
        }
        Some(self.required(NoLogin::Needed(WHY)))
    }

    /// The current refresh token, dead or not.
    pub(crate) fn current(&self) -> String {
        self.state().current.clone()
    }

    /// The server answered the refresh that sent `sent` with `new`. It replaces
    /// the current one, if that is still `sent`.
    pub(crate) fn rotated(&self, sent: &str, new: String) {
        let mut state = self.state();
        if state.current == sent && new != sent {
            state.current = new;
            state.seq += 1;
            state.unsaved = true;
        }
    }

    /// The server refused `sent`, and `why` is what it said. The chain is dead,
    /// unless it moved on meanwhile.
    pub(crate) fn refused(&self, sent: &str, why: &str) {
        self.end(sent, Ended::Refused(crate::error::clip(why)));
    }

    /// The chain ends as `ended`, if `sent` is still its refresh token.
    fn end(&self, sent: &str, ended: Ended) {
        let mut state = self.state();
        if state.current == sent && state.dead.is_none() {
            state.dead = Some(ended);
            state.unsaved = true;
        }
    }

    /// A new login's refresh token: a new chain, which wins over any a
    /// store holds from before.
    pub(crate) fn replace(&self, token: &str) {
        let at = now_ms();
        let mut state = self.state();
        // Later than any login this chain knows, even with a clock that
        // stepped back.
        let at = at.max(state.login_at + 1);
        let announced = state.announced.clone();
        let client = state.client.take();
        // Above every write this replica knows of, and past the rotations
        // another replica's copy may hold that this one never saw (a store
        // that lost its data): a new login outranks what came before it,
        // wherever it was made.
        let gen = (state.gen.max(self.heard_gen())).saturating_add(LOGIN_STEP);
        *state = State {
            announced,
            client,
            gen,
            ..State::begin(token, at)
        };
    }

    /// The client a login got at `issuer` (registered, or a metadata
    /// document's URL), if any.
    pub(crate) fn client_at(&self, issuer: &str) -> Option<LoginClient> {
        match &self.state().client {
            Some(client) if client.issuer == issuer => Some(client.clone()),
            _ => None,
        }
    }

    /// A login got `client`: kept with the chain, in memory and sealed in
    /// the store, so that no other process registers again.
    pub(crate) fn set_client(&self, client: LoginClient) {
        let mut state = self.state();
        state.client = Some(client);
        state.unsaved = true;
    }

    /// Whether the chain has changed since a store last had it: a token a
    /// store shares is not taken meanwhile when a new login began here.
    pub(crate) fn replaced_here(&self) -> bool {
        if self.begins_here() {
            return true;
        }
        let state = self.state();
        state.unsaved && state.seq == 0 && state.login_at > 0
    }

    /// Whether the chain changed since a store last had it.
    pub(crate) fn unsaved(&self) -> bool {
        self.state().unsaved
    }

    /// Calls `on_rotation` with the current refresh token if it is new since
    /// the last call. It must be stored too, as the caller makes sure.
    pub(crate) fn announce(&self) {
        let (token, f) = {
            let mut state = self.state();
            let now = (state.login.clone(), state.seq);
            if state.announced == now
                || state.dead.is_some()
                || state.current.is_empty()
                || state.seq == 0 && state.login_at == 0
            {
                return;
            }
            state.announced = now;
            let Some(f) = &self.on_rotation else {
                return;
            };
            (state.current.clone(), Arc::clone(f))
        };
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&token)));
        if called.is_err() {
            tracing::error!(
                "RefreshToken::on_rotation panicked; the new refresh token is kept all the same"
            );
        }
    }
}

/// The error of a chain that is dead: `why` is what the server said, when
/// the error does not carry it already.
pub(crate) fn login_required(why: Option<&str>) -> TokenError {
    let why = why.map(|why| format!(" ({why})")).unwrap_or_default();
    TokenError::new(TokenErrorKind::LoginRequired).with_message(format!(
        "the refresh token was refused{why}: log in again and give the new login's refresh \
         token to OAuthLayer::replace_refresh_token (the refused one is never sent again)"
    ))
}

/// The error of an account without a live chain, saying `why`.
pub(crate) fn account_login_required(account: &AccountDigest, why: NoLogin<'_>) -> TokenError {
    let why = match why {
        NoLogin::Yet => String::new(),
        NoLogin::Ended(ended) => format!(" ({})", ended.text()),
        NoLogin::Needed(why) => format!(" ({why})"),
    };
    TokenError::new(TokenErrorKind::LoginRequired).with_message(format!(
        "account {account:?} has no login{why}: sign the person in with \
         OAuthLayer::begin_login and finish_login; no token request was sent"
    ))
}

/// The `id_token` of a token response, if it carries one as a string (too
/// long counts as one that does not read). Unchecked: see `crate::login`.
pub(crate) fn answered_id_token(body: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut map)) => match map.remove("id_token") {
            Some(Value::String(raw)) => Some(raw),
            _ => None,
        },
        _ => None,
    }
}

/// Reads the `refresh_token` of a successful token response. `Ok(None)` when
/// there is none, and the current one stays. An error when it is not a usable
/// refresh token. Its value is never part of the error.
pub(crate) fn answered_refresh_token(body: &[u8]) -> Result<Option<String>, TokenError> {
    let invalid = |why: String| {
        TokenError::new(TokenErrorKind::InvalidResponse).with_message(format!(
            "the token response's `refresh_token` {why}; the current refresh token stays, and \
             the new one is neither kept nor sent"
        ))
    };
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return Ok(None);
    };
    match map.get("refresh_token") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(token)) => check_value(token)
            .map(|()| Some(token.clone()))
            .map_err(|why| invalid(why.to_owned())),
        Some(_) => Err(invalid("is not a string".to_owned())),
    }
}

/// Whether `value` may be a refresh token: one or more `VSCHAR`, by RFC 6749
/// appendix A.17, within [`MAX_REFRESH_TOKEN_LEN`]. Otherwise, why not.
fn check_value(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("is empty");
    }
    if value.len() > MAX_REFRESH_TOKEN_LEN {
        return Err("is longer than 8 KiB");
    }
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err("holds a character outside RFC 6749's VSCHAR (visible ASCII and space)");
    }
    Ok(())
}

/// Checks a refresh token the user gave, a new login's. `how` names it in the
/// message.
pub(crate) fn check_given(token: &str, how: &str) -> Result<(), ConfigError> {
    check_value(token).map_err(|why| {
        ConfigError::new(
            ConfigErrorKind::InvalidSetting,
            format!("the refresh token {how} {why}"),
        )
    })
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotation_replaces_the_token_and_a_newer_record_wins() {
        let a = RefreshToken::new("first-token").chain;
        a.rotated("first-token", "second-token".into());
        assert_eq!(a.current(), "second-token");
        assert!(a.unsaved());
        let record = a.record();
        a.saved(&record);
        assert!(!a.unsaved());
        // Another process, configured with the first token, goes on from
        // the stored one.
        let b = RefreshToken::new("first-token").chain;
        b.adopt(&record);
        assert_eq!(b.to_send().unwrap(), "second-token");
        // An older record does not take it back.
        let old = RefreshToken::new("first-token").chain.record();
        b.adopt(&old);
        assert_eq!(b.current(), "second-token");
        // A dead record of the same rotation kills it.
        a.refused("second-token", "invalid_grant");
        let dead = a.record();
        a.saved(&dead);
        b.adopt(&dead);
        assert_eq!(
            b.to_send().unwrap_err().kind(),
            TokenErrorKind::LoginRequired
        );
        // A new login wins over the dead chain, and a record of it over
        // the old login.
        a.replace("new-login-token");
        assert!(a.replaced_here());
        b.adopt(&a.record());
        assert_eq!(b.to_send().unwrap(), "new-login-token");
    }

    /// Which of two logins' records wins is decided by generation, never
    /// by the replicas' clocks; a login made here and not stored yet stands.
    #[test]
    fn a_later_generation_wins_whatever_the_clocks_say() {
        let a = RefreshToken::new("rt-a").chain;
        a.replace("login-on-a-fast-clock");
        a.state().login_at = u64::MAX / 2;
        let first = a.record();
        a.saved(&first);
        let b = RefreshToken::new("rt-a").chain;
        assert!(b.adopt(&first));
        // B logs in under the lock after reading A's record, on a clock
        // far behind: its record is of the next generation.
        b.replace("login-on-a-slow-clock");
        b.state().login_at = 1;
        let second = b.record();
        b.saved(&second);
        assert!(a.adopt(&second));
        assert_eq!(a.current(), "login-on-a-slow-clock");
        // A's older record does not take it back.
        let c = RefreshToken::new("rt-a").chain;
        c.adopt(&second);
        c.adopt(&first);
        assert_eq!(c.current(), "login-on-a-slow-clock");
        // A login made here, not stored yet, stands over the store's.
        let d = RefreshToken::new("rt-a").chain;
        d.replace("login-here");
        d.adopt(&second);
        assert_eq!(d.current(), "login-here");
        assert!(d.unsaved());
        // A record that does not read is said so.
        assert!(!d.adopt(&ChainRecord::from_bytes(b"{}".to_vec())));
    }

    /// A sign-out outranks every record written before it, even from a
    /// replica whose copy lagged behind (a store that lost writes): over
    /// later rotations, and over a login made here whose write failed. Two
    /// logins of one generation settle on the same one everywhere.
    #[test]
    fn a_sign_out_wins_over_what_came_before_it_and_ties_settle_alike() {
        let a = RefreshToken::new("rt-1").chain;
        let first = a.record();
        a.saved(&first);
        let b = RefreshToken::new("rt-1").chain;
        b.adopt(&first);
        // A rotates twice; B's copy stays at the first generation.
        for (sent, new) in [("rt-1", "rt-2"), ("rt-2", "rt-3")] {
            a.rotated(sent, new.into());
            let record = a.record();
            a.saved(&record);
        }
        // B signs out on its old copy: A takes it.
        b.sign_out();
        let signed_out = b.record();
        assert!(a.adopt(&signed_out));
        assert!(a.is_signed_out());
        assert!(a.to_send().is_err());
        // A login made here after reading the store stands over what it
        // read, but not over a sign-out written after it.
        let c = RefreshToken::new("rt-1").chain;
        c.adopt(&first);
        c.replace("login-here");
        c.adopt(&first);
        assert_eq!(c.current(), "login-here");
        c.adopt(&signed_out);
        assert!(
            c.is_signed_out(),
            "a later sign-out ends a login not stored"
        );
        let d = RefreshToken::new("rt-1").chain;
        d.adopt(&signed_out);
        d.replace("login-after-the-sign-out");
        d.adopt(&signed_out);
        assert_eq!(d.current(), "login-after-the-sign-out");
        let after = d.record();
        assert!(a.adopt(&after));
        assert_eq!(a.current(), "login-after-the-sign-out");
        // A sign-out from a replica that never heard of a login made
        // elsewhere outranks it too.
        let e = RefreshToken::new("rt-1").chain;
        e.replace("login-on-e");
        let login = e.record();
        e.saved(&login);
        let f = RefreshToken::new("rt-1").chain;
        f.sign_out();
        assert!(e.adopt(&f.record()));
        assert!(e.is_signed_out());
        // Two logins on one generation: both replicas keep the same one.
        let (p, q) = (
            RefreshToken::new("rt-1").chain,
            RefreshToken::new("rt-1").chain,
        );
        p.adopt(&first);
        q.adopt(&first);
        p.replace("login-p");
        q.replace("login-q");
        let (p_record, q_record) = (p.record(), q.record());
        p.saved(&p_record);
        q.saved(&q_record);
        p.adopt(&q_record);
        q.adopt(&p_record);
        assert_eq!(p.current(), q.current());
    }

    /// A copy of a chain the store lost is written back only when it was
    /// read or written while the replica heard the news, the news told of
    /// nothing newer, and the replica hears it now. An older copy waits for
    /// the newer one's holder, for a while; a copy read again after a break
    /// in the news may be written back again.
    #[test]
    fn only_the_newest_copy_the_news_told_of_is_written_back() {
        let a = RefreshToken::new("rt-1").chain;
        let record = a.record();
        a.saved(&record);
        assert_eq!(a.lost_by_store(true), Lost::Unknown, "never heard");
        a.synced(true);
        assert_eq!(a.lost_by_store(true), Lost::WriteBack);
        assert_eq!(a.lost_by_store(false), Lost::Wait, "until it hears again");
        a.heard_of(record.generation());
        assert_eq!(a.lost_by_store(true), Lost::WriteBack, "its own write");
        a.unvouch();
        assert_eq!(
            a.lost_by_store(true),
            Lost::Unknown,
            "a write may be missed"
        );
        a.synced(true);
        a.heard_of(record.generation() + 1);
        assert_eq!(
            a.lost_by_store(true),
            Lost::Wait,
            "another holds a newer one"
        );
        assert!(a.was_stored());
        // A replica that never held the chain, but heard of it, waits too.
        let b = RefreshToken::new("rt-1").chain;
        assert!(!b.was_stored());
        b.heard_of(3);
        assert!(b.was_stored());
        assert_eq!(b.lost_by_store(true), Lost::Wait);
    }

    #[test]
    fn hostile_refresh_tokens_are_refused_without_their_value() {
        let long = "a".repeat(100 * 1024);
        for body in [
            r#"{"refresh_token":42}"#.to_owned(),
            r#"{"refresh_token":""}"#.to_owned(),
            format!(r#"{{"refresh_token":"{long}"}}"#),
            r#"{"refresh_token":"abc\u0000def-secret"}"#.to_owned(),
            r#"{"refresh_token":"abcé-secret"}"#.to_owned(),
        ] {
            let e = answered_refresh_token(body.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
            assert!(!e.to_string().contains("secret") && !e.to_string().contains("aaaa"));
        }
        assert_eq!(
            answered_refresh_token(br#"{"access_token":"x"}"#).unwrap(),
            None
        );
        assert_eq!(
            answered_refresh_token(br#"{"refresh_token":"a b~"}"#).unwrap(),
            Some("a b~".into())
        );
    }

    /// A server whose refusal reads "signed out" does not pass for a
    /// sign-out, here or read back from a store; a sign-out does.
    #[test]
    fn a_refusal_that_says_signed_out_is_no_sign_out() {
        use crate::login::{LoginState, LoginStatus};
        let state_of = |chain: &Chain| LoginStatus::of(&chain.standing(), None).state();
        let a = RefreshToken::new("rt-1").chain;
        a.refused("rt-1", "signed out");
        assert_eq!(
            a.standing().stands,
            Stands::Ended(Ended::Refused("signed out".into()))
        );
        assert_eq!(state_of(&a), LoginState::Ended);
        let b = RefreshToken::new("rt-1").chain;
        b.adopt(&a.record());
        assert_eq!(state_of(&b), LoginState::Ended);
        assert!(!b.is_signed_out());
        let c = RefreshToken::new("rt-2").chain;
        c.sign_out();
        assert_eq!(state_of(&c), LoginState::SignedOut);
        let d = RefreshToken::new("rt-2").chain;
        d.adopt(&c.record());
        assert!(d.is_signed_out());
        assert_eq!(state_of(&d), LoginState::SignedOut);
    }

    /// A chain a store lost ends as that, not as a server's refusal: the
    /// status has no server's words to show, a store reads it back, and the
    /// login that runs by itself begins again.
    #[test]
    fn a_chain_the_store_lost_ends_as_that_and_logs_in_again() {
        use crate::login::{LoginState, LoginStatus};
        let a = Chain::for_login(true, true);
        a.logged_in(Some("rt-1"), "https://as.example", "read");
        assert!(a.store_lost().is_none());
        assert_eq!(a.standing().stands, Stands::Ended(Ended::StoreLost));
        assert!(a.needs_login());
        let status = LoginStatus::of(&a.standing(), None);
        assert_eq!(status.state(), LoginState::Ended);
        assert_eq!(status.ended_because(), None);
        let b = Chain::for_login(true, true);
        b.adopt(&a.record());
        assert_eq!(b.standing().stands, Stands::Ended(Ended::StoreLost));
        // A chain that does not log in by itself answers "no login",
        // worded for its kind, and keeps its token unsent.
        let given = RefreshToken::new("rt-2").chain;
        let e = given.store_lost().unwrap();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
        assert!(e.to_string().contains("no longer holds"), "{e}");
        let person = Chain::for_login(false, true);
        let e = person.to_send().unwrap_err();
        assert!(e.to_string().contains("no one has signed in yet"), "{e}");
    }

    /// A registered client's secret reads back from a record by the method
    /// it goes by, and by no other name.
    #[test]
    fn a_registered_client_s_secret_reads_back_by_its_method() {
        for method in ["client_secret_basic", "client_secret_post"] {
            let a = Chain::for_login(true, true);
            a.logged_in(Some("rt-1"), "https://as.example", "read");
            a.set_client(LoginClient {
                id: "client".into(),
                issuer: "https://as.example".into(),
                secret: RegisteredSecret::new(method, "s3cret".into()),
                redirect_uri: None,
            });
            let b = Chain::for_login(true, true);
            b.adopt(&a.record());
            let got = b.client_at("https://as.example").unwrap();
            let secret = got.secret.unwrap();
            assert_eq!((secret.method(), secret.secret()), (method, "s3cret"));
            assert!(!format!("{:?}", a.client_at("https://as.example")).contains("s3cret"));
        }
        assert!(RegisteredSecret::new("private_key_jwt", "s".into()).is_none());
    }

    #[test]
    fn debug_shows_no_token() {
        let t = RefreshToken::new("very-secret-refresh-token");
        assert!(!format!("{t:?}").contains("very-secret"));
    }
}
