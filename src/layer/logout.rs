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
use crate::login::{session_digest, Checks, Identity, LogoutClaims, ServerLogin};
use crate::token::identity::SignedInBy;
use crate::token::params::{account_digest, TokenParams};

/// The longest a read of the store for an identity waits.
const READ_BOUND: Duration = Duration::from_secs(5);

/// How long after the store lost its data a logout that finds nobody
/// linked is an error (to be sent again) rather than "nobody": the time the
/// replicas take to link their accounts again.
const RELINK_WINDOW: Duration = Duration::from_secs(60);

/// How long an account stays linked to who signed in, for a back-channel
/// logout to find it: longer than the refresh tokens of the servers in the
/// field live (90 days at most, for most). Each login links it anew.
const LINK_TTL: Duration = Duration::from_secs(crate::login::MAX_LOGOUT_VALID_FOR);

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
    /// account's ID token as `id_token_hint`, the app's `client_id`, and
    /// `post_logout_redirect_uri` (registered at the server) where the
    /// browser comes back. It carries no `state` (the parameter is
    /// optional): the account is signed out here before the browser goes,
    /// so the redirect back has nothing to confirm, and the page it lands
    /// on must not act on its query. The account is then signed
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
        let identity = read_identity(&cache).await.ok().flatten();
        let hint = identity.as_ref().map(Identity::id_token);
        let url = ServerLogin::new(&request, &factory.key_sets)
            .end_session_url(hint, post_logout_redirect_uri.as_ref())?;
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
    /// [`InvalidLogoutToken`](TokenErrorKind::InvalidLogoutToken) for a logout
    /// token that fails a check (replayed included), saying which; the
    /// error of reading the server's metadata or keys; a
    /// [`Transport`](TokenErrorKind::Transport) error when the store could
    /// not be read, or when it finds nobody within a minute after the store
    /// lost its data (the replicas link their accounts again meanwhile);
    /// the error of an account's sign-out. In each case the token is not
    /// marked used, and the server may send it again.
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
        let checks = Checks {
            request: &request,
            keys: &root.key_sets,
        };
        let claims = checks
            .verified_logout_token(server, logout_token.as_ref(), &request.spec.client_id)
            .await?;
        let issuer = server.issuer.clone();
        let links = &self.shared.slots.accounts.links;
        let store = root.store.as_deref();
        let sealing_key = root.sealing_key.as_ref();
        let digest = |what: &str, value: &str| session_digest(sealing_key, &issuer, what, value);
        // The `jti` is looked up first and spent last, once every account
        // it names is signed out: a logout that failed half-way is sent
        // again by the server and does its work then. Marks are kept where
        // links are: in the store when it keeps them sealed, else here.
        let used = root.identity.replay_mark(&digest("jti", &claims.jti));
        let ttl = Duration::from_secs(claims.valid_for);
        let marks = store.filter(|_| sealing_key.is_some());
        if links.used_before(marks, &used, ttl).await.map_err(unread)? {
            return Err(crate::login::logout_refused(
                "was used before (its `jti` is known): a replay",
            ));
        }
        // By session and by person: an account whose login's ID token had
        // no `sid` is found by its `sub`.
        let mut accounts = Vec::new();
        for (by, value) in names_of_claims(&claims) {
            let key = root.identity.signed_in(by, &digest(by.claim(), value));
            for account in links
                .linked(store, &key, sealing_key)
                .await
                .map_err(unread)?
            {
                if !accounts.contains(&account) {
                    accounts.push(account);
                }
            }
        }
        // Nobody linked, while the replicas link their accounts again after
        // the store lost its data: not "nobody" yet, which a link written
        // back later would undo; the server sends it again.
        if accounts.is_empty() && self.shared.slots.accounts.lost_within(RELINK_WINDOW) {
            return Err(TokenError::new(TokenErrorKind::Transport).with_message(
                "the token store lost its data a moment ago, and the replicas are linking \
                     their accounts to who signed in again: nobody is linked yet; its token is \
                     not marked used, so the server may send it again",
            ));
        }
        let mut signed_out = 0;
        let mut failed = Vec::new();
        for account in accounts {
            match self.log_out_if_named(&account, &issuer, &claims).await {
                Ok(true) => signed_out += 1,
                Ok(false) => {}
                Err(why) => failed.push(why),
            }
        }
        if let Some(first) = failed.first() {
            tracing::warn!(
                accounts = signed_out,
                failed = failed.len(),
                error = %first,
                "a back-channel logout from the server failed for some accounts; the server \
                 may send it again"
            );
            return Err(
                TokenError::new(TokenErrorKind::Transport).with_message(format!(
                    "the back-channel logout signed out {signed_out} account(s), and {} failed \
                 (the first: {first}); its token is not marked used, so the server may send \
                 it again",
                    failed.len()
                )),
            );
        }
        if let Err(why) = links.mark_used(marks, &used, ttl).await {
            // The work is done, but a replay would not be known as one (a
            // later login of the same person would be signed out by it):
            // the server is told to send it again.
            return Err(
                TokenError::new(TokenErrorKind::Transport).with_message(format!(
                    "the back-channel logout signed out {signed_out} account(s), but its token \
                 could not be marked used ({why}); the server may send it again"
                )),
            );
        }
        tracing::info!(
            accounts = signed_out,
            "a back-channel logout from the server"
        );
        Ok(signed_out)
    }

    /// Signs `account` out if its current identity is the one `claims`
    /// names at `issuer`: the same subject where the token names one, and
    /// the same session where both name one. Whether it did.
    async fn log_out_if_named(
        &self,
        account: &str,
        issuer: &str,
        claims: &LogoutClaims,
    ) -> Result<bool, TokenError> {
        let probe = TokenParams::new().account(account);
        let cache = self.cache_for(&probe)?;
        let identity = read_identity(&cache).await.map_err(|why| {
            TokenError::new(TokenErrorKind::Transport).with_message(format!(
                "the token store could not be read for an account's identity ({why})"
            ))
        })?;
        // Still linked, and signed out: a sign-out that did not finish (a
        // replica did not confirm), which the server's retry finishes. Its
        // links go once it does.
        let unfinished = identity.is_none() && cache.chain().is_some_and(|c| c.is_signed_out());
        let names = unfinished
            || identity.is_some_and(|who| {
                who.issuer() == issuer
                    && claims
                        .subject
                        .as_deref()
                        .is_none_or(|sub| who.subject() == sub)
                    && match (claims.session_id.as_deref(), who.session_id()) {
                        (Some(sid), Some(own)) => sid == own,
                        // A login without `sid`, found by its `sub`.
                        (Some(_), None) => claims.subject.is_some(),
                        (None, _) => true,
                    }
            });
        if names {
            self.sign_out(account).await?;
        }
        if unfinished {
            let names = names_of_claims(claims);
            self.change_links(account, issuer, &names, false).await;
        }
        Ok(names)
    }

    /// After `account`'s login with `identity`: the account linked under
    /// who signed in (the subject, and the session where there is one), for
    /// a back-channel logout on any replica to find. A link that could not
    /// be kept is logged: the login stands.
    pub(super) async fn link_identity(&self, account: &str, identity: &Identity) {
        let names = names_of(identity.subject(), identity.session_id());
        self.change_links(account, identity.issuer(), &names, true)
            .await;
    }

    /// `account` signed out (or was logged out): its links under who signed
    /// in go, so that no logout finds it again. A link that could not be
    /// removed is logged; it runs out with its time to live.
    pub(super) async fn unlink_identity(&self, account: &str, identity: &Identity) {
        let names = names_of(identity.subject(), identity.session_id());
        self.change_links(account, identity.issuer(), &names, false)
            .await;
    }

    /// Links `account` under each of `names` (`sub` or `sid`, and its
    /// value) at `issuer`, or unlinks it.
    async fn change_links(
        &self,
        account: &str,
        issuer: &str,
        names: &[(SignedInBy, &str)],
        link: bool,
    ) {
        let Ok(root) = self.shared.slots.root() else {
            return;
        };
        let links = &self.shared.slots.accounts.links;
        let (store, sealing_key) = (root.store.as_deref(), root.sealing_key.as_ref());
        let digest = account_digest(account);
        for &(by, value) in names {
            let key = root
                .identity
                .signed_in(by, &session_digest(sealing_key, issuer, by.claim(), value));
            let member = (digest.0.as_str(), account);
            let changed = match link {
                true => links.link(store, &key, sealing_key, member, LINK_TTL).await,
                false => links.unlink(store, &key, member.0).await,
            };
            if let Err(why) = changed {
                tracing::warn!(
                    account = ?digest,
                    error = %why,
                    linking = link,
                    "the token store could not change the account's link to who signed in"
                );
            }
        }
    }
}

/// What an identity is linked under: its subject, and its session where
/// it has one.
fn names_of<'a>(subject: &'a str, session_id: Option<&'a str>) -> Vec<(SignedInBy, &'a str)> {
    let mut names = vec![(SignedInBy::Subject, subject)];
    names.extend(session_id.map(|sid| (SignedInBy::Session, sid)));
    names
}

/// What a logout token names: its session, and its subject, as it has them.
fn names_of_claims(claims: &LogoutClaims) -> Vec<(SignedInBy, &str)> {
    let sid = claims
        .session_id
        .as_deref()
        .map(|sid| (SignedInBy::Session, sid));
    let sub = claims
        .subject
        .as_deref()
        .map(|sub| (SignedInBy::Subject, sub));
    sid.into_iter().chain(sub).collect()
}

/// Who is signed in to `cache`'s chain, once the chain is read from the
/// store (a read that failed is logged, and memory answers): nobody once
/// the login ended (signed out, or its refresh token refused).
async fn identity_of(cache: &Arc<TokenCache>) -> Option<Identity> {
    let chain = cache.chain()?;
    if let Err(why) = cache.read_for_status(READ_BOUND).await.0 {
        tracing::warn!(error = %why, "the token store could not be read for the identity");
    }
    if matches!(chain.standing().stands, crate::endpoint::Stands::Ended(_)) {
        return None;
    }
    Identity::from_id_token(&chain.id_token()?)
}

/// Who signed in to `cache`'s chain, read from the store first, whether or
/// not the server refused its refresh token since (its tokens may still
/// serve): what a back-channel logout matches. An error when the store
/// could not be read.
pub(super) async fn read_identity(cache: &Arc<TokenCache>) -> Result<Option<Identity>, String> {
    let Some(chain) = cache.chain() else {
        return Ok(None);
    };
    cache.read_for_status(READ_BOUND).await.0?;
    Ok(chain
        .id_token()
        .and_then(|raw| Identity::from_id_token(&raw)))
}

/// The error of a store that could not be read or written for a logout.
fn unread(why: String) -> TokenError {
    TokenError::new(TokenErrorKind::Transport).with_message(format!(
        "the token store could not be asked for the back-channel logout ({why}); nothing was \
         signed out"
    ))
}
