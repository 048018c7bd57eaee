//! Where tokens live beyond one process: the [`TokenStore`] seam,
//! [`FileStore`] for the processes of one machine, and `RedisStore` with
//! feature `redis`, for replicas.
//!
//! Without a store, the default, each layer keeps its token in memory and
//! fetches its own. With one, given with
//! [`token_store`](crate::OAuthLayerBuilder::token_store), every fetch of the
//! layer goes through the store: the first token, a renewal ahead, and a
//! renewal after a refusal. The store may hand out a token another replica
//! fetched, or make sure only one replica fetches. What it keeps is sealed,
//! and a refresh token's chain is kept there too. The guide:
//! [`docs::replicas`](crate::docs::replicas).

// Inside: `seal` says how values are sealed, `codec` how they are kept as
// text, `chain` how a refresh-token chain goes through a store, `pending`
// where web logins wait for their callback, `links` who signed in to
// which account, for logouts from the server's side.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::Chain;
use crate::error::TokenError;
use crate::policy::Policy;
use crate::source::TokenSource;
use crate::support::boxed::BoxFuture;
use crate::token::identity::TokenIdentity;
use crate::token::AccessToken;

/// Until when the layer's token in hand may be presented, if it may be now.
pub(crate) type ServingUntil<'a> = dyn Fn() -> Option<tokio::time::Instant> + Send + Sync + 'a;

/// A token as a store hands it out: the token, and how much longer it may be
/// presented.
#[derive(Clone, Debug)]
pub struct StoredToken {
    /// The token, with the lifetime it was first announced with.
    pub token: AccessToken,
    /// How much longer it may be presented: its remaining usable time.
    pub usable_for: Duration,
}

/// What a [`TokenStore`] gets for one fetch: the layer's own way to fetch a
/// token, and its timing rules for when a shared token is fresh enough to take.
pub struct FetchContext<'a> {
    pub(crate) identity: &'a TokenIdentity,
    /// The layer's own way to a token.
    pub(crate) source: &'a dyn TokenSource,
    /// The layer's timing rules.
    pub(crate) policy: &'a Policy,
    /// Where this layer counts what the store did.
    pub(crate) fleet: &'a FleetCounters,
    pub(crate) sealing_key: Option<&'a [u8; 32]>,
    /// Until when the layer's token in hand serves, asked anew each time.
    pub(crate) serving_until: &'a ServingUntil<'a>,
    /// The chain of refresh tokens, when the layer refreshes, with what it
    /// is kept under in a store.
    pub(crate) chain: Option<KeptChain<'a>>,
    /// Whether the replica hears the store's news of accounts' chains now.
    /// (Read by `RedisStore`, behind its feature.)
    #[allow(dead_code)]
    pub(crate) hears_news: bool,
}

/// A layer's chain of refresh tokens, and what a store keeps it under: the
/// same for every token slot of the layer.
#[derive(Clone, Copy)]
pub(crate) struct KeptChain<'a> {
    pub(crate) chain: &'a Chain,
    pub(crate) identity: &'a TokenIdentity,
}

impl<'a> FetchContext<'a> {
    /// A stable name for what the token is for. It is the SHA-256, in 64 hex
    /// digits, of everything that makes two tokens interchangeable: the issuer
    /// or token URL, or the token source's name; the client id; the client
    /// authentication and its key; the client certificate; the DPoP key; the
    /// parameters. Never the secret. Layers with the same identity can share a
    /// token.
    pub fn identity(&self) -> &str {
        self.identity.key()
    }

    /// Fetches a new token from the token endpoint. The layer's fetch timeout
    /// bounds it (a refresh, its
    /// [`refresh_answer_timeout`](crate::OAuthLayerBuilder::refresh_answer_timeout)), and a panic of the token source is an error. Returns the
    /// token and how long it may be presented from now.
    ///
    /// With a [refresh token](crate::grant::RefreshToken), the chain is kept in the
    /// layer's memory only. A store of your own that processes share must make
    /// sure that one of them refreshes at a time. The layers of one process
    /// already do. Even so, they may send a refresh token another one rotated.
    /// [`FileStore`] and `RedisStore` keep the chain themselves.
    ///
    /// # Errors
    ///
    /// The token request's [`TokenError`];
    /// [`LoginRequired`](crate::TokenErrorKind::LoginRequired) when the
    /// refresh token was refused.
    pub async fn fetch(&self) -> Result<StoredToken, TokenError> {
        self.fetch_kept(None).await
    }

    /// One token request, without the chain's bookkeeping.
    pub(crate) async fn fetch_once(&self) -> Result<StoredToken, TokenError> {
        let started = tokio::time::Instant::now();
        // A refresh's answer may carry the only copy of a rotated refresh
        // token: it is awaited past the fetch timeout.
        let bound = match self.chain {
            Some(_) => self.policy.refresh_answer_bound(),
            None => self.policy.fetch_timeout,
        };
        let token =
            crate::source::ask_counted(self.source, bound, &self.fleet.token_requests).await?;
        // A login's token counts from its own request.
        let started = token.sent_at.unwrap_or(started).max(started);
        let usable_for = self.usable_for(token.lifetime(), started.elapsed());
        Ok(StoredToken { token, usable_for })
    }

    /// How long a token of `lifetime`, fetched `elapsed` ago, may be
    /// presented from now: its lifetime less the layer's expiry skew.
    pub fn usable_for(&self, lifetime: Duration, elapsed: Duration) -> Duration {
        self.policy.usable_for(lifetime, elapsed)
    }

    /// Whether the layer would take `shared` rather than renew it. It would
    /// when the token stays usable for longer than the layer's refresh margin
    /// with its largest jitter, less the skew. Then no replica is past its
    /// renewal point yet. A token shared before a new login was handed to this
    /// layer is not fresh: it may be another user's. See
    /// [`OAuthLayer::replace_refresh_token`](crate::OAuthLayer::replace_refresh_token).
    pub fn is_fresh(&self, shared: &StoredToken) -> bool {
        self.policy
            .is_fresh(shared.token.lifetime(), shared.usable_for)
            && !self.begins_login()
    }

    /// "No login", when the chain of refresh tokens (an account's, or a
    /// refused one) has nothing to send and nothing to begin here. A store
    /// that keeps the chain answers it only after reading the chain once:
    /// another replica may have logged the person in.
    pub(crate) fn login_required_now(&self) -> Option<TokenError> {
        self.chain?.chain.login_required_now()
    }

    /// Whether a new login was handed to this layer and not yet stored:
    /// neither a token nor a failure shared from before applies to it.
    pub(crate) fn begins_login(&self) -> bool {
        self.chain.is_some_and(|kept| kept.chain.replaced_here())
    }

    /// A key for sealing what the store keeps, derived with HKDF-SHA256. It
    /// comes from the client's credential: its secret, its private key, or its
    /// TLS client key. With a [refresh token](crate::grant::RefreshToken), it also
    /// comes from the refresh token the layer was configured with. So it is the
    /// same on every replica configured alike. It is `None` when the layer has
    /// neither, as with a key in a KMS or a token source. It is never derived
    /// from anything in the store.
    pub fn sealing_key(&self) -> Option<&[u8; 32]> {
        self.sealing_key
    }

    /// How much longer the layer's token in hand may be presented, now. It is
    /// `Some` while this fetch renews the token ahead of its expiry. It is
    /// `None` on a first fetch, once the token was refused, or once it ran out.
    /// While it leaves time, a store whose backend does not answer may try the
    /// backend again for a while, instead of fetching alone. So a failover
    /// passes, and the fleet still makes one token request. Asked again between
    /// tries, it says when to stop.
    pub fn serving_for(&self) -> Option<Duration> {
        (self.serving_until)()
            .map(|until| until.saturating_duration_since(tokio::time::Instant::now()))
            .filter(|left| !left.is_zero())
    }

    /// The longest a token request may take.
    pub fn fetch_timeout(&self) -> Duration {
        self.policy.fetch_timeout
    }

    /// How long a refresh, once sent, is awaited (see
    /// [`refresh_answer_timeout`](crate::OAuthLayerBuilder::refresh_answer_timeout)).
    /// (Read by `RedisStore`, behind its feature.)
    #[allow(dead_code)]
    pub(crate) fn refresh_answer_bound(&self) -> Duration {
        self.policy.refresh_answer_bound()
    }

    /// The layer's shortest back-off after a failed token request.
    pub fn min_backoff(&self) -> Duration {
        self.policy.min_backoff
    }

    /// How long the replicas that share a token should hold back after `error`.
    /// It is the endpoint's `Retry-After`, at least the minimum back-off and at
    /// most an hour. Without one, it is the layer's minimum back-off. Meanwhile
    /// a store hands `error` to the replicas that ask, instead of fetching.
    pub fn hold_after(&self, error: &TokenError) -> Duration {
        self.policy.hold_after(error.retry_after())
    }
}

impl FetchContext<'_> {
    /// Notes what the store did for this fetch, for the `store_*` fields of the
    /// layer's [`Stats`](crate::Stats), and for its logs.
    pub fn record(&self, event: StoreEvent) {
        let counters = self.fleet;
        let counter = match event {
            StoreEvent::TookShared => &counters.took_shared,
            StoreEvent::FetchedForFleet => &counters.fetched_for_fleet,
            StoreEvent::WaitedForAnother => &counters.waited,
            StoreEvent::FellBackToLocal => &counters.fell_back,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(identity = self.identity.key(), ?event, "token store");
    }
}

/// What a [`TokenStore`] did for one fetch: see [`FetchContext::record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreEvent {
    /// It handed out a token another replica had fetched.
    TookShared,
    /// It held the fetch lock, and fetched the token for every replica.
    FetchedForFleet,
    /// It waited while another replica fetched.
    WaitedForAnother,
    /// Its backend did not answer, so the layer fetched on its own.
    FellBackToLocal,
}

/// The counters behind [`StoreEvent`]s, and the token requests this replica
/// sent itself, with a store or without. A layer's fetcher keeps them.
#[derive(Debug, Default)]
pub(crate) struct FleetCounters {
    pub(crate) token_requests: AtomicU64,
    pub(crate) took_shared: AtomicU64,
    pub(crate) fetched_for_fleet: AtomicU64,
    pub(crate) waited: AtomicU64,
    pub(crate) fell_back: AtomicU64,
}

impl fmt::Debug for FetchContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchContext")
            .field("identity", &self.identity.key())
            .field("fetch_timeout", &self.fetch_timeout())
            .finish_non_exhaustive()
    }
}

/// Where tokens live, shared by the replicas of a service.
///
/// The layer calls [`get_or_fetch`](TokenStore::get_or_fetch) whenever it needs
/// a token, at most once at a time per layer. It calls
/// [`refused`](TokenStore::refused) when the API refused a token, before it
/// renews. A store must never fail a request because of itself. When it cannot
/// reach its backend, it fetches with [`FetchContext::fetch`].
///
/// Here is a store shared by several layers in one process, say one per tenant
/// connection pool. It keeps the token with the instant it stops being usable:
///
/// ```
/// use std::sync::Mutex;
/// use std::time::Instant;
/// use tower_oauth::{AccessToken, BoxFuture, TokenError, store::{FetchContext, StoredToken, TokenStore}};
///
/// #[derive(Default)]
/// struct InProcess(Mutex<Option<(AccessToken, Instant)>>);
///
/// impl TokenStore for InProcess {
///     fn get_or_fetch<'a>(
///         &'a self,
///         ctx: &'a FetchContext<'a>,
///     ) -> BoxFuture<'a, Result<StoredToken, TokenError>> {
///         Box::pin(async move {
///             let held = self.0.lock().unwrap().clone();
///             if let Some((token, until)) = held {
///                 let shared = StoredToken {
///                     token,
///                     usable_for: until.saturating_duration_since(Instant::now()),
///                 };
///                 if ctx.is_fresh(&shared) {
///                     return Ok(shared);
///                 }
///             }
///             let fetched = ctx.fetch().await?;
///             let until = Instant::now() + fetched.usable_for;
///             *self.0.lock().unwrap() = Some((fetched.token.clone(), until));
///             Ok(fetched)
///         })
///     }
///
///     fn refused<'a>(&'a self, _identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()> {
///         let mut held = self.0.lock().unwrap();
///         if held.as_ref().is_some_and(|(t, _)| t == token) {
///             *held = None;
///         }
///         Box::pin(async {})
///     }
/// }
/// ```
///
/// A real store shared by processes also needs what `RedisStore`, with feature
/// `redis`, does. It needs a lock, keyed by [`FetchContext::identity`], so that
/// one replica fetches while the others wait.
pub trait TokenStore: Send + Sync + 'static {
    /// A token for `ctx`: a shared one that
    /// [`is_fresh`](FetchContext::is_fresh), or one fetched and shared, by this
    /// replica or another.
    ///
    /// # Errors
    ///
    /// The token request's [`TokenError`] when a fetch failed.
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<StoredToken, TokenError>>;

    /// The API refused `token`. Forget it if the store still holds that same
    /// token, and not a newer one.
    fn refused<'a>(&'a self, identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()>;

    /// Keeps `value` under `key` until `ttl` passes: a web login one replica
    /// began ([`OAuthLayer::begin_login`](crate::OAuthLayer::begin_login)),
    /// which its callback may finish on another. The layer sealed `value`.
    /// Returns whether it was kept.
    ///
    /// Default: nothing is kept (`Ok(false)`). The layer then keeps the login
    /// in its own memory, and its callback must come back to this replica.
    ///
    /// # Errors
    ///
    /// Why the store could not keep it; the login does not begin.
    fn keep_pending_login<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        let _ = (key, value, ttl);
        Box::pin(async { Ok(false) })
    }

    /// Takes what [`keep_pending_login`](Self::keep_pending_login) kept under
    /// `key`: returns it and deletes it in one step, so that a replayed
    /// callback finds nothing.
    ///
    /// Default: `Ok(None)`.
    ///
    /// # Errors
    ///
    /// Why the store could not be read; the login does not finish.
    fn take_pending_login<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        let _ = key;
        Box::pin(async { Ok(None) })
    }

    /// An account signed out
    /// ([`OAuthLayer::sign_out`](crate::OAuthLayer::sign_out)): delete the
    /// tokens kept under `identities`, then tell every replica that
    /// `account` (the account's digest, never its id) signed out
    /// ([`AccountEvent::SignedOut`], through
    /// [`watch_accounts`](Self::watch_accounts)), and return once each one
    /// that watches has dropped the account's tokens. The account's chain of
    /// refresh tokens is ended by the layer itself, through `get_or_fetch`,
    /// before this is called.
    ///
    /// Default: nothing is deleted or told; the other replicas see the
    /// sign-out when their token is renewed.
    ///
    /// # Errors
    ///
    /// Why the store could not delete the tokens, tell the others, or hear
    /// from each of them in time: the sign-out may not have reached every
    /// replica yet.
    fn signed_out<'a>(
        &'a self,
        account: &'a str,
        identities: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        let _ = (account, identities);
        Box::pin(async { Ok(()) })
    }

    /// An account's web login finished here
    /// ([`OAuthLayer::finish_login`](crate::OAuthLayer::finish_login)), and
    /// its tokens are stored: tell every other replica
    /// ([`AccountEvent::LoggedIn`]), which drops the tokens it held of an
    /// earlier login. A replica that holds none reads the new login from the
    /// store anyway before it answers that the account has no login.
    ///
    /// Default: nothing.
    fn logged_in<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        let _ = account;
        Box::pin(async {})
    }

    /// Reads the chain of refresh tokens `ctx` refreshes, as the store
    /// keeps it, into the layer's memory: without the store's lock and
    /// without a token request. It is what
    /// [`OAuthLayer::login_status`](crate::OAuthLayer::login_status) reads,
    /// so that a sign-in or a sign-out in another process shows.
    ///
    /// Default: nothing is read, for a store that keeps no chain (the
    /// layer's memory holds it: see [`FetchContext::fetch`]).
    ///
    /// # Errors
    ///
    /// Why the store could not be read; the status is then the layer's own.
    fn read_chain<'a>(&'a self, ctx: &'a FetchContext<'a>) -> BoxFuture<'a, Result<(), String>> {
        let _ = ctx;
        Box::pin(async { Ok(()) })
    }

    /// Keeps `value` as member `member` of the set under `key`, for `ttl`
    /// (an existing member is replaced, and the set lives at least `ttl`
    /// from now): an account (`value`, its id sealed; `member`, its
    /// digest) linked to who signed in (`key`, a digest of the issuer and
    /// the person's subject, or their session id), so that
    /// [`OAuthLayer::back_channel_logout`](crate::OAuthLayer::back_channel_logout)
    /// on any replica finds the accounts to sign out. Returns whether it
    /// was kept.
    ///
    /// Default: nothing is kept (`Ok(false)`); the layer keeps the link in
    /// its own memory, and only this replica finds it.
    ///
    /// # Errors
    ///
    /// Why the store could not keep it; the login is not refused for it.
    fn link_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        let _ = (key, member, value, ttl);
        Box::pin(async { Ok(false) })
    }

    /// The values of the set [`link_account`](Self::link_account) keeps
    /// under `key`; `None` from a store that keeps none.
    ///
    /// Default: `Ok(None)`.
    ///
    /// # Errors
    ///
    /// Why the store could not be read; the logout fails and can be sent
    /// again.
    fn linked_accounts<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<String>>, String>> {
        let _ = key;
        Box::pin(async { Ok(None) })
    }

    /// Marks `key` used for `ttl`, in one step: `Some(true)` the first
    /// time, `Some(false)` when it was used already (by any replica), so
    /// that a logout token replayed changes nothing. `None` from a store
    /// that keeps no such marks.
    ///
    /// Default: `Ok(None)`; the layer remembers in its own memory.
    ///
    /// # Errors
    ///
    /// Why the store could not be asked; the logout fails.
    fn use_once<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<bool>, String>> {
        let _ = (key, ttl);
        Box::pin(async { Ok(None) })
    }

    /// Whether [`use_once`](Self::use_once) marked `key` and the mark has
    /// not run out, without marking it: a back-channel logout looks first,
    /// does its work, and marks its token used only once the work is done,
    /// so that a logout that failed half-way can be sent again. `None` from
    /// a store that keeps no such marks.
    ///
    /// Default: `Ok(None)`.
    ///
    /// # Errors
    ///
    /// Why the store could not be asked; the logout fails.
    fn used_before<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        let _ = key;
        Box::pin(async { Ok(None) })
    }

    /// Removes member `member` from the set [`link_account`](Self::link_account)
    /// keeps under `key` (the set goes with its last member): the account
    /// signed out, or was logged out, and no logout should find it again.
    /// Returns whether the store keeps such sets.
    ///
    /// Default: `Ok(false)`.
    ///
    /// # Errors
    ///
    /// Why the store could not remove it; the link then runs out with its
    /// time to live, and a logout that finds it signs out an account with
    /// no login, which changes nothing.
    fn unlink_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        let _ = (key, member);
        Box::pin(async { Ok(false) })
    }

    /// Calls `watcher` with each [`AccountEvent`] of another replica's
    /// ([`signed_out`](Self::signed_out), [`logged_in`](Self::logged_in)),
    /// until it returns `false` (its layer is gone).
    ///
    /// Default: never called.
    fn watch_accounts(&self, watcher: AccountWatcher) {
        let _ = watcher;
    }
}

/// What a store tells the layers that watch its accounts
/// ([`TokenStore::watch_accounts`]). Each names an account by its digest,
/// never by its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccountEvent<'a> {
    /// The account signed out on another replica: drop its tokens, and end
    /// its chain in memory.
    SignedOut(&'a str),
    /// The account's web login finished on another replica: drop the tokens
    /// of its earlier login, so that the new one's come from the store.
    LoggedIn(&'a str),
    /// The store's news may have been missed (its subscription began, or
    /// began again after a break longer than this replica's listing):
    /// forget every account's tokens and chain, so that they come back from
    /// the store.
    Resync,
    /// The store's news broke off for less than this replica's listing, so
    /// that no sign-out answered `Ok` missed it: keep the accounts' chains,
    /// but drop their tokens and read each chain from the store before its
    /// next refresh. A chain the store no longer holds is not written back
    /// from here until it is read again: a rotation made meanwhile may have
    /// been missed.
    Reread,
    /// The store lost what it held (it restarted empty, or was flushed),
    /// and this replica heard its news until its subscription ended, when
    /// the store was gone: keep the accounts' chains and drop their tokens.
    /// A chain whose copy here is the newest the news told of is written
    /// back by its next token request, and the account's links to who
    /// signed in with it.
    StoreLost,
    /// The account's chain was written to the store (on any replica) with
    /// this generation, or a refresh went out whose answer will have it: a
    /// copy here that is older is not the one to write back, should the
    /// store lose it.
    ChainSaved(&'a str, u64),
    /// The store hears the news at least until this instant: a sign-out
    /// on another replica waits for this one's word until then, and no
    /// longer. Past it, with no newer word, the layer presents no
    /// account's token from memory; each request reads it from the store.
    /// A store that never says so leaves the tokens as they are.
    HeardUntil(tokio::time::Instant),
}

/// What [`TokenStore::watch_accounts`] calls with each [`AccountEvent`]; it
/// returns `false` once its layer is gone.
pub type AccountWatcher = Arc<dyn Fn(AccountEvent<'_>) -> bool + Send + Sync>;

/// Whether a store shares `error` with the other replicas, which then hold
/// back for it. "No login" ([`LoginRequired`](crate::TokenErrorKind::LoginRequired))
/// is not shared: it is the state of the chain of refresh tokens, which
/// every replica reads from the chain itself, so that it never stands over
/// a login finished later. Nor is a failure of this replica's own copy of
/// the store's state (its chain older than another's): the replica holding
/// the newest copy must not hold back for it, being the one to write it
/// back.
pub(crate) fn shared_as_failure(error: &TokenError) -> bool {
    !error.is_login_state() && !error.is_this_replicas()
}

/// A store shared with other replicas, as a layer or token slot uses it. It
/// holds the store, the identity of the token in it, and the key derived from
/// the client's credential for sealing what the store keeps.
pub(crate) struct StoreUse {
    pub(crate) store: Arc<dyn TokenStore>,
    pub(crate) identity: TokenIdentity,
    pub(crate) sealing_key: Option<[u8; 32]>,
    /// With a refresh token: what its chain is kept under, the same for
    /// every token slot of the layer.
    pub(crate) chain_identity: Option<TokenIdentity>,
}

pub(crate) use self::chain::refresh;
pub use self::file::FileStore;
pub(crate) use self::handed_out::HandedOut;
pub(crate) use self::links::Links;
pub(crate) use self::pending::PendingLogins;
#[cfg(feature = "redis")]
pub use self::redis::RedisStore;

mod arc;
mod chain;
mod codec;
mod file;
mod handed_out;
mod links;
mod pending;
#[cfg(feature = "redis")]
mod redis;
mod seal;

/// The key a layer derives from `credential`, a client secret or the private
/// key's bytes. It is the same on every replica that holds the credential, and
/// useless without it.
pub(crate) fn derive_sealing_key(credential: &[u8]) -> [u8; 32] {
    struct Len32;
    impl ring::hkdf::KeyType for Len32 {
        fn len(&self) -> usize {
            32
        }
    }
    let mut key = [0u8; 32];
    ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"tower-oauth token store")
        .extract(credential)
        .expand(&[b"sealing key v1"], Len32)
        .and_then(|okm| okm.fill(&mut key))
        .expect("32 bytes are within HKDF-SHA256's output");
    key
}
