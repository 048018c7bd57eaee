//! A web app's login for one account: the authorization URL made and the
//! pending login it leaves; the callback checked against that pending login,
//! and its code exchanged by the account's next token request; the refresh
//! token revoked at sign-out (RFC 7009).

use std::time::Duration;

use serde_json::{Map, Value};

use super::authorization::{
    asks_openid, callback_query, check_endpoint, read_callback, with_query, Callback,
    CallbackParams, Came, Expect, Request, Secrets,
};
use super::flow::check_pkce;
use super::oidc::LoginAsked;
use super::{failed, ServerLogin};
use crate::endpoint::{now_ms, Chain, Code, Ended, NoLogin};
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::token::params::AccountDigest;
use crate::token::AccessToken;

/// How long a begun login waits for its callback.
pub(crate) const PENDING_LOGIN_TTL: Duration = Duration::from_secs(10 * 60);

/// A login begun and not finished, as the layer's store keeps it (sealed)
/// under its `state`: whose it is, and what its callback and exchange need.
pub(crate) struct Pending {
    account: String,
    verifier: String,
    redirect_uri: String,
    issuer: String,
    iss_required: bool,
    scope: String,
    /// The `nonce` sent, where the scope asks for `openid`; empty for none.
    nonce: String,
    /// Milliseconds since the Unix epoch.
    expires_at: u64,
}

impl Pending {
    /// As the store keeps it, before it is sealed.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut map = Map::new();
        map.insert("account".into(), self.account.clone().into());
        map.insert("verifier".into(), self.verifier.clone().into());
        map.insert("redirect_uri".into(), self.redirect_uri.clone().into());
        map.insert("issuer".into(), self.issuer.clone().into());
        map.insert("iss_required".into(), self.iss_required.into());
        map.insert("scope".into(), self.scope.clone().into());
        map.insert("nonce".into(), self.nonce.clone().into());
        map.insert("expires_at".into(), self.expires_at.into());
        Value::Object(map).to_string().into_bytes()
    }

    /// Read back from the store, opened; `None` for anything else.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(bytes) else {
            return None;
        };
        let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(Pending {
            account: text("account")?,
            verifier: text("verifier")?,
            redirect_uri: text("redirect_uri")?,
            issuer: text("issuer")?,
            iss_required: map.get("iss_required")?.as_bool()?,
            scope: text("scope")?,
            nonce: text("nonce").unwrap_or_default(),
            expires_at: map.get("expires_at")?.as_u64()?,
        })
    }

    /// How long it has left; zero once it expired.
    pub(crate) fn time_left(&self) -> Duration {
        Duration::from_millis(self.expires_at.saturating_sub(now_ms()))
    }

    /// Whether it is `account`'s.
    pub(crate) fn is_for(&self, account: &AccountDigest) -> bool {
        self.account == account.0
    }
}

/// A login begun: where to send the browser, its `state` (what the pending
/// login is kept under), and the pending login.
pub(crate) struct Begun {
    pub(crate) url: String,
    pub(crate) state: String,
    pub(crate) pending: Pending,
}

impl ServerLogin<'_> {
    /// Begins `account`'s login: the authorization request to the server
    /// this request's metadata names, with PKCE, `state`, `resource` and the
    /// scope, and the browser sent back to `redirect_uri`.
    pub(crate) async fn begin_web_login(
        &self,
        account: &AccountDigest,
        redirect_uri: &str,
    ) -> Result<Begun, TokenError> {
        let Some(server) = self.request.target.server.as_deref() else {
            return Err(failed(
                "a web login needs the authorization server's metadata, for its \
                 authorization_endpoint: configure the layer with issuer or protected_resource",
            ));
        };
        if self.request.spec.client_id.is_empty() {
            return Err(failed(
                "a web login needs the web app's own client: configure client_id (and its \
                 client authentication)",
            ));
        }
        check_endpoint("redirect_uri", redirect_uri).map_err(|_| {
            failed(format!(
                "the redirect URI `{}` must be an absolute https URL, or http on loopback, \
                 without a fragment",
                clip(redirect_uri)
            ))
        })?;
        let Some(endpoint) = server.authorization_endpoint.as_deref() else {
            return Err(failed(format!(
                "the metadata of `{}` names no authorization_endpoint, which a web login needs",
                server.issuer
            )));
        };
        check_endpoint("authorization_endpoint", endpoint)?;
        check_pkce(server)?;
        let secrets = Secrets::new()?;
        let scope = self.login_scope(server, "");
        let request = Request {
            endpoint,
            client_id: &self.request.spec.client_id,
            redirect_uri,
            scope: scope.as_deref(),
            resources: self.resources(),
            authorization_details: self.request.target.authorization_details(),
            dpop_jkt: self.request.spec.dpop.as_ref().map(|d| d.key.thumbprint()),
            acr_values: None,
            max_age: None,
        };
        let url = self.authorization_url(server, &request, &secrets).await?;
        let ttl = u64::try_from(PENDING_LOGIN_TTL.as_millis()).unwrap_or(u64::MAX);
        Ok(Begun {
            url,
            pending: Pending {
                account: account.0.clone(),
                verifier: secrets.verifier,
                redirect_uri: redirect_uri.to_owned(),
                issuer: server.issuer.clone(),
                iss_required: server.authorization_response_iss_parameter_supported
                    || self.request.spec.fapi2,
                nonce: match asks_openid(scope.as_deref()) {
                    true => secrets.nonce,
                    false => String::new(),
                },
                scope: scope.unwrap_or_default(),
                expires_at: now_ms().saturating_add(ttl),
            },
            state: secrets.state,
        })
    }

    /// Exchanges a web login's `code` (the authorization code grant, with the
    /// client's authentication as configured); its refresh token begins
    /// `chain`. The access token.
    pub(crate) async fn exchange_code(
        &self,
        chain: &Chain,
        code: Code,
    ) -> Result<AccessToken, TokenError> {
        if self.request.target.issuer.as_deref() != Some(code.issuer.as_str()) {
            return Err(failed(
                "the login was begun at another authorization server than the one this \
                 token request goes to; begin it again",
            ));
        }
        let mut pairs = vec![
            ("code", code.code.as_str()),
            ("redirect_uri", code.redirect_uri.as_str()),
            ("code_verifier", code.verifier.as_str()),
        ];
        pairs.extend(self.resources().into_iter().map(|r| ("resource", r)));
        let answered = self
            .login_token("authorization_code", &pairs, &[&code.code, &code.verifier])
            .await?;
        let answered = match self.request.target.server.as_deref() {
            Some(server) => {
                let nonce = Some(code.nonce.as_str()).filter(|n| !n.is_empty());
                let scope = Some(code.scope.as_str());
                self.checks()
                    .with_identity(
                        server,
                        answered,
                        &self.request.spec.client_id,
                        scope,
                        LoginAsked {
                            nonce,
                            ..LoginAsked::default()
                        },
                    )
                    .await?
            }
            None => answered,
        };
        chain.logged_in(answered.refresh.as_deref(), &code.issuer, &code.scope);
        if let Some(identity) = &answered.identity {
            chain.set_id_token(identity.id_token());
        }
        tracing::info!(
            account = ?chain.account(),
            refresh_token = answered.refresh.is_some(),
            "an account's login is done"
        );
        Ok(answered.token)
    }

    /// Ends `chain` (an account's, or a person's) as signed out, and revokes the refresh
    /// token it held, if it was live. What the sign-out's token request
    /// answers: [`LoginRequired`](TokenErrorKind::LoginRequired).
    pub(crate) async fn sign_out(&self, chain: &Chain) -> TokenError {
        let account = chain
            .account()
            .cloned()
            .unwrap_or_else(|| AccountDigest(String::new()));
        if let Some(live) = chain.sign_out() {
            match self.revoke(&live).await {
                Ok(true) => tracing::info!(account = ?account, "the refresh token was revoked"),
                Ok(false) => tracing::info!(
                    account = ?account,
                    "the server names no revocation_endpoint: the refresh token is forgotten, \
                     not revoked"
                ),
                Err(e) => tracing::warn!(
                    account = ?account,
                    error = %e,
                    "revoking the refresh token failed; it is forgotten all the same"
                ),
            }
        }
        match chain.account() {
            Some(account) => {
                crate::endpoint::account_login_required(account, NoLogin::Ended(&Ended::SignedOut))
            }
            None => TokenError::new(TokenErrorKind::LoginRequired).with_message(
                "signed out (OAuthLayer::logout): sign in again with OAuthLayer::login; no \
                 token request was sent",
            ),
        }
    }

    /// Revokes `refresh_token` at the server's `revocation_endpoint` (RFC
    /// 7009), with the client's authentication. `false` when the server
    /// names none; the server's error (the token may still be valid there)
    /// when it refused.
    pub(crate) async fn revoke(&self, refresh_token: &str) -> Result<bool, TokenError> {
        let Some(endpoint) = self
            .request
            .target
            .server
            .as_deref()
            .and_then(|s| s.revocation_endpoint.as_deref())
        else {
            return Ok(false);
        };
        let url = crate::endpoint::checked_url(
            "revocation_endpoint",
            endpoint,
            self.request.spec.allow_insecure_http,
        )
        .map_err(|e| {
            TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message(format!("the server's revocation_endpoint: {e}"))
        })?;
        let pairs = [
            ("token", refresh_token),
            ("token_type_hint", "refresh_token"),
        ];
        self.client_send(&url, &pairs, &[refresh_token]).await?;
        Ok(true)
    }
}

impl ServerLogin<'_> {
    /// The URL of the server's `end_session_endpoint` (OpenID Connect
    /// RP-Initiated Logout 1.0) that ends the session `id_token` names
    /// (`id_token_hint`, where there is one), with the client's id, and the
    /// browser sent back to `post_logout_redirect_uri`; no `state`.
    pub(crate) fn end_session_url(
        &self,
        id_token: Option<&str>,
        post_logout_redirect_uri: &str,
    ) -> Result<String, TokenError> {
        let Some(server) = self.request.target.server.as_deref() else {
            return Err(failed(
                "a logout at the server needs its metadata: configure the layer with issuer or \
                 protected_resource",
            ));
        };
        let Some(endpoint) = server.end_session_endpoint.as_deref() else {
            return Err(failed(format!(
                "the metadata of `{}` names no end_session_endpoint (OpenID Connect \
                 RP-Initiated Logout); sign the account out here with sign_out",
                server.issuer
            )));
        };
        check_endpoint("end_session_endpoint", endpoint)?;
        check_endpoint("post_logout_redirect_uri", post_logout_redirect_uri).map_err(|_| {
            failed(format!(
                "the post-logout redirect URI `{}` must be an absolute https URL, or http on \
                 loopback, without a fragment",
                clip(post_logout_redirect_uri)
            ))
        })?;
        // No `state` (it is optional): the account is signed out before the
        // browser goes, and nothing waits for the redirect back to check
        // one. A `state` made and thrown away would only look like a check.
        let mut pairs = Vec::new();
        if let Some(hint) = id_token {
            pairs.push(("id_token_hint", hint));
        }
        pairs.extend([
            ("client_id", self.request.spec.client_id.as_str()),
            ("post_logout_redirect_uri", post_logout_redirect_uri),
        ]);
        Ok(with_query(endpoint, &pairs))
    }
}

/// The `state` of a callback URL (or its query alone), if it carries one.
pub(crate) fn state_of(callback: &str) -> Option<String> {
    let query = callback_query(callback, Came::Returned).ok()?;
    CallbackParams::read(query).state
}

/// A callback checked against the pending login its `state` found, for
/// `account`: its code, with what the exchange needs. An error for another
/// account's login, an expired one, a wrong `iss`, or the server's refusal.
pub(crate) fn finish(
    pending: Pending,
    state: &str,
    account: &AccountDigest,
    callback: &str,
) -> Result<Code, TokenError> {
    if !pending.is_for(account) {
        return Err(foreign());
    }
    if pending.time_left().is_zero() {
        return Err(failed(
            "the login expired before its callback came; begin it again",
        ));
    }
    let expect = Expect {
        state,
        issuer: &pending.issuer,
        iss_required: pending.iss_required,
    };
    match read_callback(
        callback_query(callback, Came::Returned).unwrap_or_default(),
        &expect,
    )? {
        Callback::Code(code) => Ok(Code {
            code,
            verifier: pending.verifier,
            redirect_uri: pending.redirect_uri,
            issuer: pending.issuer,
            scope: pending.scope,
            nonce: pending.nonce,
        }),
        Callback::Refused(why) => Err(super::authorization::refused_login(&why)),
        Callback::Foreign => Err(foreign()),
    }
}

/// The error of a callback that belongs to no login this account began.
pub(crate) fn foreign() -> TokenError {
    failed(
        "the callback belongs to no login this account began (its state is unknown, used, \
         expired or another account's); nothing changed",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_login_reads_back_and_refuses_another_account() {
        let alice = crate::token::params::account_digest("alice");
        let bob = crate::token::params::account_digest("bob");
        let pending = Pending {
            account: alice.0.clone(),
            verifier: "v".repeat(43),
            redirect_uri: "https://app.example/callback".into(),
            issuer: "https://idp.example".into(),
            iss_required: true,
            scope: "openid".into(),
            nonce: "n".into(),
            expires_at: now_ms() + 60_000,
        };
        let back = Pending::from_bytes(&pending.to_bytes()).unwrap();
        assert!(back.is_for(&alice) && !back.is_for(&bob));
        assert!(back.time_left() > Duration::from_secs(50));
        assert!(Pending::from_bytes(b"{\"account\":1}").is_none());
        let callback = "https://app.example/callback?code=c&state=s&iss=https%3A%2F%2Fidp.example";
        assert_eq!(state_of(callback).as_deref(), Some("s"));
        let e = finish(back, "s", &bob, callback).unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
        let back = Pending::from_bytes(&pending.to_bytes()).unwrap();
        let code = finish(back, "s", &alice, callback).unwrap();
        assert_eq!(code.code, "c");
        assert!(!format!("{code:?}").contains("\"c\""));
    }
}
