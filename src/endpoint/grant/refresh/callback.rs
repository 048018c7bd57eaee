//! A web login's callback handed to an account's chain: its pending login
//! is taken, and its code exchanged, by the chain's next token request,
//! under the store's lock for the chain. So of two replicas handed the same
//! callback (a double submit), the one that loses the race answers only
//! after the winner's login is stored, and serves it at once.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::Chain;
use crate::endpoint::login::Code;
use crate::error::TokenError;
use crate::support::boxed::BoxFuture;

/// What takes a callback's pending login from where it is kept, checks the
/// callback against it, and gives its code.
pub(crate) type TakeCode = Box<dyn FnOnce() -> BoxFuture<'static, Result<Code, TokenError>> + Send>;

/// One callback, handed to a chain, and what became of it.
pub(crate) struct Callback {
    take: Mutex<Option<TakeCode>>,
    outcome: OnceLock<Result<(), TokenError>>,
}

impl fmt::Debug for Callback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callback")
            .field("outcome", &self.outcome.get())
            .finish_non_exhaustive()
    }
}

impl Callback {
    pub(crate) fn new(take: TakeCode) -> Arc<Self> {
        Arc::new(Callback {
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
    fn callbacks(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Callback>>> {
        self.callbacks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A web login's callback came: the chain's next token request takes
    /// its pending login (under the store's lock) and exchanges its code.
    pub(crate) fn hand_callback(&self, callback: Arc<Callback>) {
        self.callbacks().push(callback);
    }

    /// Takes `callback` back if no token request has run it yet (its
    /// finish gave up): it never logs the account in later.
    pub(crate) fn withdraw(&self, callback: &Arc<Callback>) {
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
            None => refused.map(TokenError::as_login_state),
        }
    }

    /// Ends every callback handed over and not run, with `error`.
    pub(crate) fn drop_callbacks(&self, error: &TokenError) {
        for callback in std::mem::take(&mut *self.callbacks()) {
            callback.drop_with(error.clone());
        }
    }
}
