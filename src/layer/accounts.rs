//! The layer's entry points for many people: a web app's login for an account
//! ([`OAuthLayer::begin_login`], [`OAuthLayer::finish_login`]) and its
//! sign-out ([`OAuthLayer::sign_out`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::OAuthLayer;
use crate::cache::TokenCache;
use crate::endpoint::{Chain, HandedCallback, TakeCode};
use crate::error::{TokenError, TokenErrorKind};
use crate::login::{
    finish_web_login as finish, foreign_callback as foreign, state_of, Identity, Pending,
    ServerLogin, PENDING_LOGIN_TTL,
};
use crate::slots::factory::SlotFactory;
use crate::token::params::{account_digest, TokenParams};

impl OAuthLayer {
    /// Begins a web login for `account`, and returns the URL to send the
    /// person's browser to. It is the authorization code grant with PKCE
    /// (S256), a `state`, the `resource` and scope of the layer's token, and
    /// `redirect_uri`, the app's own callback route, which the server must
    /// know. The pending login (its `state`, its PKCE verifier, the account)
    /// is sealed and kept in the layer's [token
    /// store](crate::OAuthLayerBuilder::token_store) for 10 minutes, so that
    /// the callback may come back to any replica. A store that does not keep
    /// pending logins, or none, keeps it in this process.
    ///
    /// The layer needs the server's metadata (configure it with
    /// [`issuer`](crate::OAuthLayerBuilder::issuer) or
    /// [`protected_resource`](crate::OAuthLayerBuilder::protected_resource)),
    /// and the app's own client
    /// ([`client_id`](crate::OAuthLayerBuilder::client_id) and its
    /// authentication), which its token requests present.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// // In the app's `/login` route, for the signed-in session's account:
    /// let url = oauth
    ///     .begin_login("alice@example.com", "https://app.example/callback")
    ///     .await?;
    /// // Redirect the browser to `url`.
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`LoginFailed`](TokenErrorKind::LoginFailed) for a redirect URI that is
    /// neither https nor http on loopback, a server without an
    /// authorization endpoint or S256, or a layer without a client id;
    /// [`Configuration`](TokenErrorKind::Configuration) for a layer without
    /// the server's metadata; the error of reading the metadata; a
    /// [`Transport`](TokenErrorKind::Transport) error when the store could
    /// not keep the pending login.
    pub async fn begin_login(
        &self,
        account: impl AsRef<str>,
        redirect_uri: impl AsRef<str>,
    ) -> Result<String, TokenError> {
        let probe = TokenParams::new().account(account.as_ref());
        let factory = self.account_factory(&probe)?;
        let request = factory.login_request().await?;
        let digest = account_digest(account.as_ref());
        let begun = ServerLogin::new(&request, &factory.key_sets)
            .begin_web_login(&digest, redirect_uri.as_ref())
            .await?;
        let key = factory.pending_login_key(&begun.state);
        self.shared
            .slots
            .accounts
            .pending
            .keep(
                factory.store.as_deref(),
                &key,
                factory.sealing_key.as_ref(),
                &begun.pending.to_bytes(),
                PENDING_LOGIN_TTL,
            )
            .await
            .map_err(|why| {
                TokenError::new(TokenErrorKind::Transport).with_message(format!(
                    "the token store could not keep the pending login ({why}); the login did \
                     not begin"
                ))
            })?;
        tracing::info!(account = ?digest, "an account's login begins");
        Ok(begun.url)
    }

    /// Finishes `account`'s web login with the URL its callback route was
    /// called at (or its query alone): the pending login its `state` names is
    /// taken from the store (on any replica), checked (the same account,
    /// not expired, the server's `iss` where it sends one), and its code
    /// exchanged, with the client's authentication. The refresh token begins
    /// the account's chain, in memory and in the store, and the account's
    /// requests get tokens from then on.
    ///
    /// A callback whose `state` is another account's, or no pending login's
    /// (unknown, expired, or used already: a replay), fails and changes
    /// nothing. Another account's pending login stays as it was. The pending
    /// login is taken by the account's token request, under the store's lock:
    /// of one callback handed to two replicas at once (a browser that submits
    /// twice), one logs the person in, and the other fails only once that
    /// login is stored, and serves it from then on.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer, uri: http::Uri) -> Result<(), tower_oauth::TokenError> {
    /// // In the app's `/callback` route:
    /// oauth.finish_login("alice@example.com", uri.to_string()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Where the login's scope holds `openid`, the server's ID token is
    /// verified before anything is kept (its signature with the server's
    /// keys, `iss`, `aud`, `azp`, `exp`, `iat`, and the `nonce` the login
    /// sent), and the person it names is returned: the app's own sign-in
    /// (see [`Identity`]). The account is linked to that person, so that a
    /// [back-channel logout](Self::back_channel_logout) from the server
    /// finds it. `None` for a login without `openid`.
    ///
    /// # Errors
    ///
    /// [`LoginFailed`](TokenErrorKind::LoginFailed) for a callback that
    /// belongs to no login of this account, one the server refused
    /// (`error=access_denied`), a wrong `iss`, or an ID token that fails a
    /// check (saying which; nothing is kept); the error of the code's
    /// exchange.
    pub async fn finish_login(
        &self,
        account: impl AsRef<str>,
        callback_url: impl AsRef<str>,
    ) -> Result<Option<Identity>, TokenError> {
        let callback = callback_url.as_ref().to_owned();
        let probe = TokenParams::new().account(account.as_ref());
        let digest = account_digest(account.as_ref());
        let digest_of_account = digest.clone();
        let state = state_of(&callback).ok_or_else(foreign)?;
        let factory = self.account_factory(&probe)?;
        // The account's cache, and the chain its fetches use: the callback
        // goes to that chain, whatever else leaves memory meanwhile.
        let cache = self.cache_for(&probe)?;
        let chain = cache.chain().ok_or_else(foreign)?;
        let key = factory.pending_login_key(&state);
        let (accounts, store) = (
            Arc::clone(&self.shared.slots.accounts),
            factory.store.clone(),
        );
        let sealing_key = factory.sealing_key;
        // Taken by the account's next token request, under the store's lock
        // for its chain: of two replicas handed one callback, the other
        // finds it taken only once this one's login is stored.
        let take: TakeCode = Box::new(move || {
            Box::pin(async move {
                let taken = accounts
                    .pending
                    .take(store.as_deref(), &key, sealing_key.as_ref())
                    .await
                    .map_err(|why| {
                        TokenError::new(TokenErrorKind::Transport).with_message(format!(
                            "the token store could not be read for the pending login ({why})"
                        ))
                    })?;
                let pending = taken
                    .as_deref()
                    .and_then(Pending::from_bytes)
                    .ok_or_else(foreign)?;
                finish(pending, &state, &digest, &callback)
            })
        });
        let handed = HandedCallback::new(take);
        chain.hand_callback(Arc::clone(&handed));
        // A fetch that begins now takes it (or one under way that has not
        // reached the chain yet). The token in hand serves meanwhile, and
        // stays if the callback logs nobody in.
        let mut fetched = None;
        for _ in 0..3 {
            fetched = cache.fetch_now().await;
            match (handed.outcome(), &fetched) {
                // Not taken yet; or taken, and the fetch cut off (its login
                // goes on to the end on its own task): asked again.
                (None, _) | (Some(Ok(())), None) => {}
                _ => break,
            }
        }
        chain.withdraw(&handed);
        match (handed.outcome(), fetched) {
            (Some(Ok(())), Some(Ok(_))) => {
                // The new login's tokens, not the earlier one's, from now on.
                for other in factory.caches() {
                    if !Arc::ptr_eq(&other, &cache) {
                        other.restart();
                    }
                }
                if let Some(store) = &factory.store {
                    store.logged_in(&digest_of_account.0).await;
                }
                let identity = chain.id_token().and_then(|t| Identity::from_id_token(&t));
                if let Some(identity) = &identity {
                    self.link_identity(account.as_ref(), identity).await;
                }
                Ok(identity)
            }
            (Some(Ok(())), Some(Err(e))) => Err(e),
            (Some(Err(e)), _) => Err(e.clone()),
            (_, Some(Err(e))) => Err(e),
            (_, _) => Err(crate::cache::cut_off()),
        }
    }

    /// Signs `account` out: its refresh token is revoked at the server (RFC
    /// 7009) where the server's metadata names a `revocation_endpoint`, with
    /// the client's authentication; its chain ends, in memory and in the
    /// store; its tokens are dropped from memory and deleted from the store;
    /// and the store tells the other replicas, which drop theirs. Whatever
    /// was under way (a refresh, a code's exchange), nothing fetched before
    /// is presented after: a fetch under way is cut off, and the sign-out
    /// waits for a refresh to end and revokes what it brought. With a
    /// `RedisStore`, `Ok` means every replica that watches the store's news
    /// has dropped the account's tokens. From then on, the account's
    /// requests fail with [`LoginRequired`](TokenErrorKind::LoginRequired),
    /// and no token request is sent, until a new login, begun and finished
    /// on any replicas. Other accounts are untouched.
    ///
    /// It is the same as `oauth.for_account(account)?.logout()`
    /// ([`logout`](Self::logout)), for an account named.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// oauth.sign_out("alice@example.com").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The error of reading the store's chain (the sign-out did not reach
    /// the store, and the account's next token request signs it out; try
    /// again); a [`Transport`](TokenErrorKind::Transport) error when the
    /// chain is ended but the store could not delete the tokens, or did not
    /// hear within 8 s from every replica that they dropped theirs (they drop
    /// them when they hear). A revocation the server refused is logged, not
    /// returned: the refresh token is forgotten all the same.
    pub async fn sign_out(&self, account: impl AsRef<str>) -> Result<(), TokenError> {
        let probe = TokenParams::new().account(account.as_ref());
        let digest = account_digest(account.as_ref());
        let factory = self.account_factory(&probe)?;
        // The account's cache, and the chain its fetches use, whatever else
        // leaves memory meanwhile.
        let cache = self.cache_for(&probe)?;
        let Some(chain) = cache.chain() else {
            return Ok(());
        };
        // Who signed in, for the links a back-channel logout finds the
        // account by: they go with the sign-out.
        let identity = super::logout::read_identity(&cache)
            .await
            .unwrap_or_else(|_| chain.id_token().and_then(|t| Identity::from_id_token(&t)));
        chain.begin_sign_out();
        // A fetch under way (a refresh, a code's exchange) is cut off: what
        // it brings is never installed. Its refresh ends on its own task,
        // and the sign-out waits for it (the chain's turn).
        cache.restart();
        for cache in factory.caches() {
            cache.restart();
        }
        // Else still to do: the account's next token request signs it out.
        run_sign_out(&cache, &chain).await?;
        // The store keys of the account's tokens this replica knows: its
        // default token's, and each slot's it held in memory.
        let mut params = vec![TokenParams::new()];
        params.extend(self.shared.slots.accounts.remove(&probe));
        let told = match &factory.store {
            Some(store) => {
                store
                    .signed_out(&digest.0, &factory.store_keys(&params))
                    .await
            }
            None => Ok(()),
        };
        // Once the store holds none of its tokens, none is taken here again.
        cache.restart();
        for cache in factory.caches() {
            cache.restart();
        }
        told.map_err(|why| {
            TokenError::new(TokenErrorKind::Transport).with_message(format!(
                "the account's chain is ended and its refresh token revoked, but the token \
                 store did not confirm that every replica dropped its tokens: {why}"
            ))
        })?;
        if let Some(identity) = identity {
            self.unlink_identity(account.as_ref(), &identity).await;
        }
        tracing::info!(account = ?digest, "an account signed out");
        Ok(())
    }

    /// A layer for `account` alone: its default token is the account's,
    /// and a request's [`TokenParams`] without an account select the
    /// account's tokens for those parameters. It serves code that holds one
    /// person's client, such as a gateway's MCP client per user
    /// ([`mcp_client`](Self::mcp_client)) or a per-session reqwest client: no
    /// request needs to name the account, and the warm path is the layer's
    /// own (no lookup among the accounts). It shares everything else with
    /// this layer: the account's chain, login, sign-out and tokens, which
    /// requests naming the account through this layer also use. While it
    /// lives, the account's chain stays in memory.
    ///
    /// ```
    /// # fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// let alice = oauth.for_account("alice@example.com")?;
    /// let client = tower::ServiceBuilder::new().layer(alice).service(tower::service_fn(
    ///     |req: http::Request<()>| async move { Ok::<_, std::convert::Infallible>(http::Response::new(())) },
    /// ));
    /// # let _ = client; Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`InvalidRequest`](TokenErrorKind::InvalidRequest) for a layer on a
    /// token source, which has no accounts.
    pub fn for_account(&self, account: impl AsRef<str>) -> Result<OAuthLayer, TokenError> {
        let probe = TokenParams::new().account(account.as_ref());
        let slots = &self.shared.slots;
        let factory = self.account_factory(&probe)?;
        let cache_ref = slots.accounts.cache_ref_for(&probe, slots.root()?)?;
        let bound = slots.bound(Arc::clone(&factory));
        Ok(OAuthLayer::bound(
            Arc::clone(&cache_ref.cache),
            bound,
            self.shared.endpoint.clone(),
            (account.as_ref().to_owned(), factory),
        ))
    }

    /// How many accounts' tokens are in memory now: one per account and set of
    /// parameters, at most
    /// [`max_accounts`](crate::OAuthLayerBuilder::max_accounts).
    pub fn accounts_in_memory(&self) -> usize {
        self.shared.slots.accounts.len()
    }

    /// The factory of the account `probe` names.
    pub(super) fn account_factory(
        &self,
        probe: &TokenParams,
    ) -> Result<Arc<SlotFactory>, TokenError> {
        let slots = &self.shared.slots;
        Ok(slots.accounts.factory(probe, slots.root()?))
    }
}

impl OAuthLayer {
    /// Once the store lost its data (restarted empty, flushed) while this
    /// replica heard its news: on a task of its own (one at a time, run
    /// again if the store loses its data meanwhile), see `restore_accounts`.
    pub(super) fn restore_after_a_loss(&self) {
        let shared = Arc::downgrade(&self.shared);
        let running = Arc::new(AtomicBool::new(false));
        let again = Arc::new(AtomicBool::new(false));
        let restore = move || {
            again.store(true, Ordering::SeqCst);
            if running.swap(true, Ordering::SeqCst) {
                return;
            }
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                running.store(false, Ordering::SeqCst);
                return;
            };
            let (shared, running, again) = (Weak::clone(&shared), running.clone(), again.clone());
            runtime.spawn(async move {
                loop {
                    while again.swap(false, Ordering::SeqCst) {
                        restore_accounts(&shared).await;
                    }
                    running.store(false, Ordering::SeqCst);
                    // A loss told between the last round and now.
                    if !again.load(Ordering::SeqCst) || running.swap(true, Ordering::SeqCst) {
                        return;
                    }
                }
            });
        };
        self.shared.slots.accounts.on_store_lost(Box::new(restore));
    }
}

/// How many accounts' token requests a restore has out at once.
const RESTORING_AT_ONCE: usize = 8;

/// After the store lost its data: each account in memory whose chain is
/// still live here is linked again to who signed in (for back-channel
/// logouts; a link to an account signed out meanwhile finds nothing to
/// sign out), all of them first; then each asks for its token, whatever
/// the back-off the outage left, a few at a time. Where this replica's
/// copy of the account's chain is the newest the news told of, that token
/// request writes the chain back (see `store::chain`). It holds no layer
/// while it waits.
async fn restore_accounts(shared: &Weak<super::Shared>) {
    let held = match shared.upgrade() {
        Some(shared) => shared.slots.accounts.held(),
        None => return,
    };
    tracing::info!(
        accounts = held.len(),
        "the token store lost its data: the accounts in memory link again, and write back \
         their chains where this replica holds the newest"
    );
    for (account, factory) in &held {
        let live = factory.chain().filter(|c| c.to_send().is_ok());
        let identity = live
            .and_then(|chain| chain.id_token())
            .and_then(|token| Identity::from_id_token(&token));
        if let (Some(identity), Some(shared)) = (identity, shared.upgrade()) {
            OAuthLayer { shared }
                .link_identity(account, &identity)
                .await;
        }
    }
    let mut asking = tokio::task::JoinSet::new();
    for (account, _) in held {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let cache = OAuthLayer { shared }.cache_for(&TokenParams::new().account(&account));
        let Ok(cache) = cache else {
            continue;
        };
        if asking.len() >= RESTORING_AT_ONCE {
            asking.join_next().await;
        }
        asking.spawn(async move {
            let _ = cache.fetch_now().await;
        });
    }
    while asking.join_next().await.is_some() {}
}

/// Runs the sign-out `chain` began as the chain's token request, through
/// `cache`: under the store's lock, on the chain the store holds; asked up
/// to three times (a fetch under way may answer first). The error of the
/// last try when it did not run.
pub(super) async fn run_sign_out(cache: &Arc<TokenCache>, chain: &Chain) -> Result<(), TokenError> {
    let mut failed = None;
    for _ in 0..3 {
        match cache.token().await {
            Err(e) if e.kind() != TokenErrorKind::LoginRequired => failed = Some(e),
            _ => {}
        }
        if !chain.is_signing_out() {
            return Ok(());
        }
    }
    Err(failed.unwrap_or_else(|| {
        TokenError::new(TokenErrorKind::Transport)
            .with_message("the sign-out's token request did not run; try again")
    }))
}
