//! An account's chain: a web login's callback handed to it, whose pending
//! login its next token request takes under the store's lock for the chain
//! (so of two replicas handed the same callback, a double submit, the one
//! that loses the race answers only after the winner's login is stored, and
//! serves it at once), the code it brings, the sign-out, and the news of
//! other replicas that marks it to be read from the store first.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::Code;
use super::{Chain, ChainRecord, Owner};
use crate::error::{TokenError, TokenErrorKind};
use crate::support::boxed::BoxFuture;
use crate::token::params::AccountDigest;

/// What takes a callback's pending login from where it is kept, checks the
/// callback against it, and gives its code.
pub(crate) type TakeCode = Box<dyn FnOnce() -> BoxFuture<'static, Result<Code, TokenError>> + Send>;

/// One callback, handed to a chain, and what became of it.
pub(crate) struct HandedCallback {
    take: Mutex<Option<TakeCode>>,
    outcome: OnceLock<Result<(), TokenError>>,
}

impl fmt::Debug for HandedCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandedCallback")
            .field("outcome", &self.outcome.get())
            .finish_non_exhaustive()
    }
}

impl HandedCallback {
    pub(crate) fn new(take: TakeCode) -> Arc<Self> {
        Arc::new(HandedCallback {
            take: Mutex::new(Some(take)),
            outcome: OnceLock::new(),
        })
    }

    /// Whether its pending login was taken (`Ok`), or why not; `None`
    /// while no token request has run it yet.
    pub(crate) fn outcome(&self) -> Option<&Result<(), TokenError>> {
        self.outcome.get()
    }

    /// Takes its pending login, once: the code, or `None` (the outcome
    /// says why).
    pub(crate) async fn run(&self) -> Option<Code> {
        let take = self
            .take
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        match take().await {
            Ok(code) => {
                let _ = self.outcome.set(Ok(()));
                Some(code)
            }
            Err(e) => {
                let _ = self.outcome.set(Err(e));
                None
            }
        }
    }

    /// Ends it untaken, with `error`.
    pub(crate) fn drop_with(&self, error: TokenError) {
        self.take
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let _ = self.outcome.set(Err(error));
    }
}

impl Chain {
    /// An account's chain: no refresh token until the account's web login
    /// ([`OAuthLayer::finish_login`](crate::OAuthLayer::finish_login)), a
    /// backchannel login a request names its person for (`asks`), or until
    /// a store holds its chain.
    pub(crate) fn for_account(account: AccountDigest, asks: bool) -> Chain {
        Chain {
            owner: Owner::Account {
                digest: account,
                asks,
            },
            ..Chain::empty("account")
        }
    }

    /// The account whose chain this is, if any.
    pub(crate) fn account(&self) -> Option<&AccountDigest> {
        match &self.owner {
            Owner::Account { digest, .. } => Some(digest),
            Owner::Given | Owner::Person { .. } => None,
        }
    }

    /// A web login's callback brought `code`: the chain's next token
    /// request exchanges it, and the chain begins anew with its refresh
    /// token. Until then, the chain is as it was: an exchange that fails
    /// ends no login.
    pub(crate) fn begin_with_code(&self, code: Code) {
        *self.code.lock().unwrap_or_else(PoisonError::into_inner) = Some(code);
    }

    /// Whether a web login's code waits for the next token request.
    fn has_code(&self) -> bool {
        self.code
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The code a web login's callback brought, taken: it is exchanged once.
    pub(crate) fn take_code(&self) -> Option<Code> {
        self.code
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The account signs out at the next token request (which reads the
    /// store's chain first, and takes no token a store shares).
    pub(crate) fn begin_sign_out(&self) {
        self.take_code();
        self.drop_callbacks(&TokenError::new(TokenErrorKind::LoginFailed).with_message(
            "the account signed out before the login's callback was taken; begin it again",
        ));
        self.signing_out.store(true, Ordering::SeqCst);
    }

    /// Whether a sign-out waits for the next token request.
    pub(crate) fn is_signing_out(&self) -> bool {
        self.signing_out.load(Ordering::SeqCst)
    }

    /// Whether the account signs out now; it does once.
    pub(crate) fn take_sign_out(&self) -> bool {
        self.signing_out.swap(false, Ordering::SeqCst)
    }

    /// The account signed out: the chain ends, newer than any stored, so
    /// that every replica that reads it ends it too. The refresh token it
    /// held, if it was live, for revoking.
    pub(crate) fn sign_out(&self) -> Option<String> {
        let live = self.to_send().ok();
        let login = self.state().login.clone();
        *self
            .signed_out_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = login;
        self.replace("");
        let mut state = self.state();
        state.dead = Some(super::Ended::SignedOut);
        // Above every login this replica may not have seen, too.
        state.gen = state.gen.saturating_add(super::SIGN_OUT_STEP);
        live
    }

    /// The sign-out's write was fenced off (another replica wrote the
    /// chain after this one read it, while this one stalled): it begins
    /// again, on the chain the store holds now (`stored`), whose refresh
    /// token is the one to revoke, when that is still the login it ended
    /// (rotated since) or none. A newer login there stands, and the
    /// sign-out is over. A chain that is not an unsaved sign-out is left.
    pub(crate) fn sign_out_again(&self, stored: Option<&ChainRecord>) {
        let ended = self
            .signed_out_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let newer_login = stored
            .and_then(Self::read)
            .is_some_and(|stored| stored.login != ended && stored.dead.is_none());
        let mut state = self.state();
        if state.dead != Some(super::Ended::SignedOut) || !state.unsaved || newer_login {
            return;
        }
        // Blank, so that it takes whatever the store holds.
        let announced = state.announced.clone();
        *state = super::State {
            announced,
            ..super::State::begin("", 0)
        };
        drop(state);
        self.signing_out.store(true, Ordering::SeqCst);
    }

    /// Whether the next token request begins something here: a sign-out,
    /// a code's exchange, or a callback's.
    pub(super) fn begins_here(&self) -> bool {
        self.signing_out.load(Ordering::SeqCst)
            || self.has_code()
            || self.has_callbacks()
            || self.login_asked()
    }

    /// The error of a chain with nothing to send and nothing to begin (no
    /// refresh token, no login of the layer's own, no callback, no
    /// sign-out): what a token request answers without sending anything.
    pub(crate) fn login_required_now(&self) -> Option<TokenError> {
        if self.needs_login() {
            return None;
        }
        self.to_send().err()
    }

    /// Another replica signed the account out, or its news may have been
    /// missed: the chain's next token request reads the stored chain first.
    pub(crate) fn mark_unverified(&self) {
        self.unverified.store(true, Ordering::SeqCst);
    }

    /// Whether the chain must be read from the store first; it is once.
    /// Only a store that tells replicas' news (`RedisStore`) marks it.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn take_unverified(&self) -> bool {
        self.unverified.swap(false, Ordering::SeqCst)
    }

    fn callbacks(&self) -> std::sync::MutexGuard<'_, Vec<Arc<HandedCallback>>> {
        self.callbacks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A web login's callback came: the chain's next token request takes
    /// its pending login (under the store's lock) and exchanges its code.
    pub(crate) fn hand_callback(&self, callback: Arc<HandedCallback>) {
        self.callbacks().push(callback);
    }

    /// Takes `callback` back if no token request has run it yet (its
    /// finish gave up): it never logs the account in later.
    pub(crate) fn withdraw(&self, callback: &Arc<HandedCallback>) {
        self.callbacks().retain(|c| !Arc::ptr_eq(c, callback));
    }

    /// Whether a callback waits for the next token request.
    pub(crate) fn has_callbacks(&self) -> bool {
        !self.callbacks().is_empty()
    }

    /// Runs the callbacks handed over, in order: each takes its pending
    /// login. The last code taken is the one the chain's token request
    /// exchanges (any other is the same person's earlier login). When
    /// callbacks ran and none gave a code, the last one's error, as the
    /// state of the login (not a server's failure): the token request
    /// answers with it, or with a token another replica stored meanwhile.
    pub(crate) async fn take_callbacks(&self) -> Option<TokenError> {
        let callbacks = std::mem::take(&mut *self.callbacks());
        let mut code = None;
        let mut refused = None;
        for callback in callbacks {
            match callback.run().await {
                Some(taken) => code = Some(taken),
                None => refused = callback.outcome().and_then(|o| o.clone().err()),
            }
        }
        match code {
            Some(code) => {
                self.begin_with_code(code);
                None
            }
            None => refused.map(TokenError::marked_login_state),
        }
    }

    /// Ends every callback handed over and not run, with `error`.
    pub(crate) fn drop_callbacks(&self, error: &TokenError) {
        for callback in std::mem::take(&mut *self.callbacks()) {
            callback.drop_with(error.clone());
        }
    }
}
