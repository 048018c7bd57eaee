//! Who signed in, and logouts from the server's side: the layer's (or an
//! account's) verified [`Identity`], the URL of the server's end-session
//! endpoint (RP-initiated logout), and a back-channel logout token taken
//! from the server, which signs out every account it names, on every
//! replica.

use std::sync::Arc;
use std::time::Duration;

use super::OAuthLayer;
use crate::cache::TokenCache;
use crate::error::{TokenError, TokenErrorKind};
use crate::login::{session_digest, Identity};
use crate::token::params::{account_digest, TokenParams};

/// The longest a read of the store for an identity waits.
const READ_BOUND: Duration = Duration::from_secs(5);

/// How long an account stays linked to who signed in, for a back-channel
/// logout to find it: longer than the refresh tokens of the servers in the
/// field live (90 days at most, for most). Each login links it anew.
const LINK_TTL: Duration = Duration::from_secs(400 * 24 * 60 * 60);

impl OAuthLayer {
    /// Who signed in: the verified [`Identity`] of the layer's person (a
    /// CLI's "signed in as"), or, on a layer from
    /// [`for_account`](Self::for_account), the account's. It reads the
    /// layer's memory, and the chain its token store keeps (one read, no
    /// lock), so a login in another process or replica shows; it sends no
    /// token request. `None` before a login, after a sign-out, and for a
    /// login whose scope had no `openid`.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) {
    /// match oauth.identity().await {
    ///     Some(who) => println!("signed in as {} at {}", who.subject(), who.issuer()),
    ///     None => println!("not signed in"),
    /// }
    /// # }
    /// ```
    pub async fn identity(&self) -> Option<Identity> {
        identity_of(self.default_cache()).await
    }

    /// Ends `account`'s session at the server as well as here (OpenID
    /// Connect RP-Initiated Logout 1.0): the URL of the server's
    /// `end_session_endpoint` to send the person's browser to, with the
    /// account's ID token as `id_token_hint`, the app's `client_id`, a
    /// fresh `state`, and `post_logout_redirect_uri` (registered at the
    /// server) where the browser comes back. The account is then signed
    /// out here, as [`sign_out`](Self::sign_out) does, before the browser
    /// goes: its refresh token revoked, its tokens gone on every replica.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer) -> Result<(), tower_oauth::TokenError> {
    /// // In the app's `/logout` route:
    /// let url = oauth
    ///     .end_session_url("alice@example.com", "https://app.example/signed-out")
    ///     .await?;
    /// // Redirect the browser to `url`.
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`LoginFailed`](TokenErrorKind::LoginFailed) for a server that names
    /// no `end_session_endpoint`, or a redirect URI that is neither https
    /// nor http on loopback; the error of reading the metadata; the error
    /// of [`sign_out`](Self::sign_out).
    pub async fn end_session_url(
        &self,
        account: impl AsRef<str>,
        post_logout_redirect_uri: impl AsRef<str>,
    ) -> Result<String, TokenError> {
        let probe = TokenParams::new().account(account.as_ref());
        let factory = self.account_factory(&probe)?;
        let request = factory.login_request().await?;
        let cache = self.cache_for(&probe)?;
        let identity = identity_of(&cache).await;
        let hint = identity.as_ref().map(Identity::id_token);
        let url = request.end_session_url(hint, post_logout_redirect_uri.as_ref())?;
        self.sign_out(account.as_ref()).await?;
        Ok(url)
    }

    /// Takes a logout token the server posted to the app's
    /// `backchannel_logout_uri` (OpenID Connect Back-Channel Logout 1.0),
    /// and signs out every account whose identity it names: by session
    /// (`sid`) where it names one, else by person (`sub`). Each is signed
    /// out as [`sign_out`](Self::sign_out) does: on every replica, whichever
    /// took the login. It returns how many accounts were signed out.
    ///
    /// The token is checked first, and changes nothing when any check
    /// fails: its signature with the server's keys, by an algorithm the
    /// server lists; `typ` `logout+jwt` where present; `iss`; `aud` (the
    /// client id); `iat` and `exp` within
    /// [`id_token_clock_skew`](crate::OAuthLayerBuilder::id_token_clock_skew);
    /// the back-channel logout event; `sub` or `sid`; no `nonce`; and its
    /// `jti` used once, across the replicas that share the token store.
    ///
    /// The accounts are found by what the layer linked at each login with
    /// an ID token: digests of the issuer with the subject and with the
    /// session, in the token store (sealed), or in this process's memory
    /// for a store that keeps none.
    ///
    /// ```no_run
    /// # async fn example(oauth: tower_oauth::OAuthLayer, form: std::collections::HashMap<String, String>) {
    /// // In the app's `/backchannel-logout` route (a form POST):
    /// let token = form.get("logout_token").map(String::as_str).unwrap_or_default();
    /// match oauth.back_channel_logout(token).await {
    ///     Ok(signed_out) => { /* 200 OK */ let _ = signed_out; }
    ///     Err(e) => { /* 400 Bad Request */ eprintln!("{e}"); }
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`InvalidRequest`](TokenErrorKind::InvalidRequest) for a logout
    /// token that fails a check (replayed included), saying which; the
    /// error of reading the server's metadata or keys; a
    /// [`Transport`](TokenErrorKind::Transport) error when the store could
    /// not be read; the error of an account's sign-out.
    pub async fn back_channel_logout(
        &self,
        logout_token: impl AsRef<str>,
    ) -> Result<usize, TokenError> {
        let root = Arc::clone(self.shared.slots.root()?);
        let request = root.login_request().await?;
        let Some(server) = request.target.server.as_deref() else {
            return Err(TokenError::new(TokenErrorKind::Configuration)
                .with_message("a back-channel logout needs the server's metadata"));
        };
        let claims = request
            .verified_logout_token(server, logout_token.as_ref(), &request.spec.client_id)
            .await?;
        let issuer = server.issuer.clone();
        let sessions = &self.shared.slots.accounts.sessions;
        let store = root.store.as_deref();
        let used = root
            .identity
            .session("jti", &session_digest(&issuer, "jti", &claims.jti));
        let ttl = Duration::from_secs(claims.valid_for);
        if !sessions
            .first_use(store, &used, ttl)
            .await
            .map_err(unread)?
        {
            return Err(crate::login::logout_refused(
                "was used before (its `jti` is known): a replay",
            ));
        }
        let (what, value) = match (&claims.session_id, &claims.subject) {
            (Some(sid), _) => ("sid", sid),
            (None, Some(sub)) => ("sub", sub),
            (None, None) => return Ok(0),
        };
        let key = root
            .identity
            .session(what, &session_digest(&issuer, what, value));
        let accounts = sessions
            .linked(store, &key, root.sealing_key.as_ref())
            .await
            .map_err(unread)?;
        let mut signed_out = 0;
        for account in accounts {
            let probe = TokenParams::new().account(&account);
            let identity = identity_of(&self.cache_for(&probe)?).await;
            let names = identity.is_some_and(|who| {
                who.issuer() == issuer
                    && claims
                        .subject
                        .as_deref()
                        .is_none_or(|sub| who.subject() == sub)
                    && claims
                        .session_id
                        .as_deref()
                        .is_none_or(|sid| who.session_id() == Some(sid))
            });
            if names {
                self.sign_out(&account).await?;
                signed_out += 1;
            }
        }
        tracing::info!(
            by = what,
            accounts = signed_out,
            "a back-channel logout from the server"
        );
        Ok(signed_out)
    }

    /// After `account`'s login with `identity`: the account linked under
    /// who signed in (the subject, and the session where there is one), for
    /// a back-channel logout on any replica to find. A link that could not
    /// be kept is logged: the login stands.
    pub(super) async fn link_identity(&self, account: &str, identity: &Identity) {
        let Ok(root) = self.shared.slots.root() else {
            return;
        };
        let sessions = &self.shared.slots.accounts.sessions;
        let digest = account_digest(account);
        let mut links = vec![("sub", identity.subject())];
        links.extend(identity.session_id().map(|sid| ("sid", sid)));
        for (what, value) in links {
            let key = root
                .identity
                .session(what, &session_digest(identity.issuer(), what, value));
            let member = (digest.0.as_str(), account);
            let linked = sessions
                .link(
                    root.store.as_deref(),
                    &key,
                    root.sealing_key.as_ref(),
                    member,
                    LINK_TTL,
                )
                .await;
            if let Err(why) = linked {
                tracing::warn!(
                    account = ?digest,
                    error = %why,
                    "the token store could not link the account to who signed in; a \
                     back-channel logout from the server will not find it"
                );
            }
        }
    }
}

/// The identity `cache`'s chain holds, once the chain is read from the
/// store.
async fn identity_of(cache: &Arc<TokenCache>) -> Option<Identity> {
    let chain = cache.chain()?;
    if let (Err(why), _) = cache.read_for_status(READ_BOUND).await {
        tracing::warn!(error = %why, "the token store could not be read for the identity");
    }
    Identity::from_id_token(&chain.id_token()?)
}

/// The error of a store that could not be read or written for a logout.
fn unread(why: String) -> TokenError {
    TokenError::new(TokenErrorKind::Transport).with_message(format!(
        "the token store could not be asked for the back-channel logout ({why}); nothing was \
         signed out"
    ))
}
