//! The layer's person: a login run when asked ([`OAuthLayer::login`]),
//! signed out everywhere ([`OAuthLayer::logout`]), and where the login
//! stands ([`OAuthLayer::login_status`]), for a CLI or an agent host with a
//! layer per server.

use std::time::Duration;

use super::OAuthLayer;
use crate::error::{TokenError, TokenErrorKind};
use crate::login::{LoginState, LoginStatus};
use crate::token::params::TokenParams;
use crate::token::AccessToken;

/// The longest a status waits for the token store's read.
const STATUS_READ_BOUND: Duration = Duration::from_secs(5);

impl OAuthLayer {
    /// Runs a person's [`Login`](crate::login::Login) now, and returns its
    /// access token. It serves a CLI's `login` command, an agent host's
    /// `login` for one server, or an app that signs a person in at start; it
    /// is the only way in for a [`Login::automatic(false)`] layer. A login
    /// runs even when the layer or its token store holds one from before:
    /// once it succeeds, the new one replaces it, here and, through the
    /// store, in the other processes at their next refresh. A login that
    /// fails changes nothing: the earlier one (its refresh token, who
    /// signed in) stays, here and in the store. Requests that need a token
    /// meanwhile wait for this login, and a request that gives up does not
    /// cancel it. The browser logins of one process take turns: layers
    /// that log in together open one tab after the other, each within its
    /// own [`timeout`](crate::login::Login::timeout), the wait for its turn
    /// included.
    ///
    /// [`Login::automatic(false)`]: crate::login::Login::automatic
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// oauth.login().await?;
    /// eprintln!("Signed in.");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`LoginFailed`](TokenErrorKind::LoginFailed) when the login did not
    /// end with a token, and any error of its token request.
    /// [`Configuration`](TokenErrorKind::Configuration) when the layer was
    /// built without [`login`](crate::OAuthLayerBuilder::login).
    pub async fn login(&self) -> Result<AccessToken, TokenError> {
        let Some(chain) = self.person_chain() else {
            return Err(TokenError::new(TokenErrorKind::Configuration).with_message(
                "OAuthLayer::login: this layer was built without a login \
                 (OAuthLayerBuilder::login)",
            ));
        };
        // The next token request logs in, automatic or not. The chain it
        // would replace (its refresh token, who signed in) stays, here and
        // in the store, until the new login succeeds: a login that fails
        // (a timeout, a closed browser) leaves the person signed in.
        chain.ask_login();
        self.restart_all();
        let token = self.token().await;
        if token.is_err() {
            // A login asked for and not begun (the metadata did not read)
            // is not left for the next request to run; and its failure is
            // not held against the requests that follow, which the
            // earlier login still serves.
            chain.take_login_asked();
            self.restart_all();
        }
        token
    }

    /// Signs the layer's person out: the refresh token is revoked at the
    /// server (RFC 7009) where its metadata names a `revocation_endpoint`,
    /// with the client's authentication; the chain ends, in memory and in
    /// the token store, for every process and replica that shares it; the
    /// layer's tokens are dropped from memory and deleted from the store.
    /// Whatever was under way (a refresh, a login), nothing fetched before
    /// is presented after. Other layers, on other servers or other chains
    /// of the same store, stay signed in.
    ///
    /// On a layer from [`for_account`](Self::for_account), it signs that
    /// account out: [`sign_out`](Self::sign_out) is the same for an account
    /// named. After it, a layer whose login is
    /// [`automatic`](crate::login::Login::automatic) logs in again at the
    /// next request that needs a token; one that is not fails with
    /// [`LoginRequired`](TokenErrorKind::LoginRequired) until
    /// [`login`](Self::login).
    ///
    /// Another process that shares the chain through a store learns of it
    /// at its next token request for it (a `FileStore` tells no news), and
    /// presents the access token it holds until then; its
    /// [`login_status`](Self::login_status) shows it at once.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// oauth.logout().await?;
    /// assert!(!oauth.login_status().await.is_signed_in());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Configuration`](TokenErrorKind::Configuration) for a layer that
    /// acts for no person (built without a login, not bound to an account).
    /// The error of reading the store's chain (the sign-out did not reach
    /// the store; try again); a [`Transport`](TokenErrorKind::Transport)
    /// error when the chain is ended but the store could not delete the
    /// tokens. A revocation the server refused is logged, not returned: the
    /// refresh token is forgotten all the same.
    pub async fn logout(&self) -> Result<(), TokenError> {
        if let Some(bound) = &self.shared.account {
            return self.sign_out(&bound.id).await;
        }
        let Some(chain) = self.person_chain() else {
            return Err(TokenError::new(TokenErrorKind::Configuration).with_message(
                "OAuthLayer::logout: this layer acts for no person (it was built without \
                 OAuthLayerBuilder::login); for an account, use sign_out or for_account",
            ));
        };
        chain.begin_sign_out();
        // A fetch under way is cut off: what it brings is never installed.
        self.restart_all();
        // The sign-out runs as the chain's token request.
        super::accounts::run_sign_out(self.default_cache(), chain).await?;
        let root = self.shared.slots.root()?;
        let told = match &root.store {
            Some(store) => {
                let mut params = vec![TokenParams::new()];
                params.extend(self.shared.slots.stats().into_iter().map(|(p, _)| p));
                let person = root.identity.chain();
                store
                    .signed_out(person.key(), &root.store_keys(&params))
                    .await
            }
            None => Ok(()),
        };
        self.restart_all();
        told.map_err(|why| {
            TokenError::new(TokenErrorKind::Transport).with_message(format!(
                "the login is ended and its refresh token revoked, but the token store could \
                 not delete its tokens: {why}"
            ))
        })?;
        tracing::info!("the layer's person signed out");
        Ok(())
    }

    /// Whether the layer's person is signed in (with which scopes, and for
    /// how long the current access token serves), or needs a login and
    /// why: never signed in, the login ended, or signed out. It reads the
    /// layer's memory and the chain its token store keeps (one read, no
    /// lock), so a sign-in or a sign-out in another process shows; it sends
    /// no token request and opens no browser. A sign-out it finds in the
    /// store drops the tokens this process held of that login.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) {
    /// let status = oauth.login_status().await;
    /// if status.is_signed_in() {
    ///     let scopes: Vec<&str> = status.scopes().collect();
    ///     println!("signed in, scopes {scopes:?}");
    /// } else {
    ///     println!("not signed in: {:?}", status.state());
    /// }
    /// # }
    /// ```
    pub async fn login_status(&self) -> LoginStatus {
        let cache = self.default_cache();
        let Some(chain) = cache.chain() else {
            return LoginStatus::no_person();
        };
        let (read, usable) = cache.read_for_status(STATUS_READ_BOUND).await;
        let mut status = LoginStatus::of(&chain.standing(), usable);
        if let Err(why) = read {
            tracing::warn!(
                error = %why,
                "the token store could not be read for the login's status; it is this \
                 process's own"
            );
            status.store_unread = Some(why);
        }
        if usable.is_some() && matches!(status.state(), LoginState::SignedOut) {
            self.restart_all();
        }
        status
    }

    /// The chain a person's login begins, if the layer has a login.
    fn person_chain(&self) -> Option<&std::sync::Arc<crate::endpoint::Chain>> {
        self.shared.slots.chain().filter(|c| c.logs_in())
    }
}
