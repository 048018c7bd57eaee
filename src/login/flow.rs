//! A login from the server's metadata to its token: the checks of the
//! server, the authorization request in a browser or a user agent, the
//! code's exchange, and the login's token requests with the client's own
//! authentication.

use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use tokio::time::Instant;

use super::authorization::{
    asks_openid, callback_query, check_endpoint, read_callback, refused_login, Callback, Came,
    Expect, Request, Secrets,
};
use super::client::Registration;
use super::listener::Listener;
use super::oidc::LoginAsked;
use super::DEFAULT_USER_AGENT_REDIRECT;
use super::{backchannel, device, failed, Answered, Login, ServerLogin, Way};
use crate::endpoint::{answered_id_token, answered_refresh_token, Chain};
use crate::endpoint::{read_answer as read, retry_after, status_error};
use crate::endpoint::{Reauthentication, ServerMetadata};
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::token::AccessToken;
use crate::transport::MAX_RESPONSE_BODY;

impl ServerLogin<'_> {
    /// A person's login, `login`, at the server this request's metadata
    /// names; its refresh token (if any) begins `chain` anew. The access
    /// token. A backchannel login's pending requests are kept in
    /// `parking`.
    pub(crate) async fn log_in(
        &self,
        chain: &Chain,
        (login, parking): (&Login, &dyn backchannel::Parking),
    ) -> Result<AccessToken, TokenError> {
        let Some(server) = self.request.target.server.as_deref() else {
            return Err(failed(
                "a login needs the authorization server's metadata, for its \
                 authorization_endpoint: configure the layer with issuer or protected_resource",
            ));
        };
        let deadline = Instant::now() + login.timeout;
        // One person, one browser and one terminal: the logins of a process
        // that need them take turns, each within its own timeout.
        let _turn = match login.way {
            // Asked of a person elsewhere, on their own device.
            Way::UserAgent(_) | Way::Backchannel(_) => None,
            _ => Some(take_turn(login, deadline).await?),
        };
        tracing::info!(login = login.name(), issuer = %server.issuer, "a person's login begins");
        // An API asked for a stronger or more recent sign-in (RFC 9470).
        let reauth = chain.take_reauthentication();
        if let Some(asked) = &reauth {
            tracing::info!(
                acr_values = asked.acr_values.as_deref().unwrap_or_default(),
                max_age = ?asked.max_age,
                "the login asks for the sign-in the API asked for"
            );
        }
        let reauth = reauth.as_ref();
        // However this login ends (approved, refused, failed, cut off), the
        // next re-authentication waits out the gap: a person who refused is
        // not asked again at the next request.
        let _ends = reauth.map(|_| ReauthenticationEnds(chain));
        let scope = self.login_scope(server, &chain.scope_at(&server.issuer));
        let answered = match &login.way {
            Way::Device(prompt) => {
                let registration = Registration {
                    redirect_uris: Vec::new(),
                    grant_types: &[device::DEVICE_CODE_GRANT_TYPE, "refresh_token"],
                };
                if reauth.is_some() {
                    return Err(failed(
                        "the API asks for a stronger or more recent sign-in \
                         (insufficient_user_authentication), which the device grant cannot ask \
                         for; the token in hand stays",
                    ));
                }
                let metadata_url = login.client_metadata_url.as_deref();
                let client_id = self
                    .login_client(chain, server, metadata_url, registration)
                    .await?;
                let scope = scope.as_deref();
                let answered = device::log_in(self, server, prompt, scope, deadline).await?;
                // The device grant sends no nonce.
                self.checks()
                    .with_identity(server, answered, &client_id, scope, LoginAsked::default())
                    .await?
            }
            Way::Backchannel(ask) => {
                let client_id = &self.request.spec.client_id;
                if client_id.is_empty() {
                    return Err(failed(
                        "a backchannel login needs a client registered for it at the server: \
                         set client_id (and its authentication)",
                    ));
                }
                // CIBA requires `openid`.
                let scope = match scope.as_deref() {
                    Some(scope) if asks_openid(Some(scope)) => scope.to_owned(),
                    Some(scope) => format!("openid {scope}"),
                    None => "openid".to_owned(),
                };
                // (CIBA has no `max_age`: the ID token's `auth_time` is
                // checked against it all the same.)
                let sought = Reauthentication {
                    acr_values: reauth
                        .and_then(|r| r.acr_values.clone())
                        .or(ask.acr().map(str::to_owned)),
                    max_age: reauth.and_then(|r| r.max_age),
                };
                let asked = (ask, sought);
                let (answered, sought) =
                    match backchannel::log_in(self, server, asked, (&scope, parking), deadline)
                        .await
                    {
                        // Not approved yet, or a failure of a moment (the
                        // store, the network): the challenge stays for the
                        // request that asks again.
                        Err(e)
                            if e.kind() == TokenErrorKind::ApprovalPending || e.is_retryable() =>
                        {
                            if let Some(asked) = reauth {
                                chain.restore_reauthentication(asked.clone());
                            }
                            return Err(e);
                        }
                        answered => answered?,
                    };
                let sent = LoginAsked {
                    nonce: None,
                    acr_values: sought.acr_values.as_deref(),
                    max_age: sought.max_age,
                };
                self.checks()
                    .with_identity(server, answered, client_id, Some(&scope), sent)
                    .await?
            }
            way => {
                let scope = scope.as_deref();
                match self
                    .code_login(chain, server, (login, way, reauth), scope, deadline)
                    .await
                {
                    // The client this login kept is gone at the server
                    // (some delete idle ones): registered anew, once.
                    Err(e) if e.refuses_client() && self.kept_client_forgotten(chain, server) => {
                        tracing::warn!(
                            issuer = %server.issuer,
                            error = %e,
                            "the server no longer takes the client a login registered before; \
                             registering a new one for this login, once"
                        );
                        self.code_login(chain, server, (login, way, reauth), scope, deadline)
                            .await?
                    }
                    answered => answered?,
                }
            }
        };
        chain.logged_in(
            answered.refresh.as_deref(),
            &server.issuer,
            scope.as_deref().unwrap_or_default(),
        );
        if let Some(identity) = &answered.identity {
            chain.set_id_token(identity.id_token());
        }
        tracing::info!(
            login = login.name(),
            refresh_token = answered.refresh.is_some(),
            "the login is done"
        );
        Ok(answered.token)
    }

    /// The authorization code grant with PKCE, through the browser or a
    /// user agent.
    async fn code_login(
        &self,
        chain: &Chain,
        server: &ServerMetadata,
        (login, way, reauth): (&Login, &Way, Option<&Reauthentication>),
        scope: Option<&str>,
        deadline: Instant,
    ) -> Result<Answered, TokenError> {
        let Some(endpoint) = server.authorization_endpoint.as_deref() else {
            return Err(failed(format!(
                "the metadata of `{}` names no authorization_endpoint, which a browser login \
                 needs; the device grant (Login::device) may serve instead",
                server.issuer
            )));
        };
        check_endpoint("authorization_endpoint", endpoint)?;
        check_pkce(server)?;
        let secrets = Secrets::new()?;
        let expect = Expect {
            state: &secrets.state,
            issuer: &server.issuer,
            // The FAPI 2.0 profile requires it of every response.
            iss_required: server.authorization_response_iss_parameter_supported
                || self.request.spec.fapi2,
        };
        // The browser's listener first: its port is in the redirect URI a
        // registration names.
        let (listener, redirect_uri) = match way {
            Way::UserAgent(_) => {
                let uri = login.redirect_uri.as_deref();
                (None, uri.unwrap_or(DEFAULT_USER_AGENT_REDIRECT).to_owned())
            }
            _ => {
                let listener = self.listener(chain, server, login).await?;
                let uri = listener.redirect_uri.clone();
                (Some(listener), uri)
            }
        };
        let registration = Registration {
            redirect_uris: vec![&redirect_uri],
            grant_types: &["authorization_code", "refresh_token"],
        };
        let metadata_url = login.client_metadata_url.as_deref();
        let client_id = self
            .login_client(chain, server, metadata_url, registration)
            .await?;
        let request = Request {
            endpoint,
            client_id: &client_id,
            redirect_uri: &redirect_uri,
            scope,
            resources: self.resources(),
            authorization_details: self.request.target.authorization_details(),
            dpop_jkt: self.request.spec.dpop.as_ref().map(|d| d.key.thumbprint()),
            acr_values: reauth.and_then(|r| r.acr_values.as_deref()),
            max_age: reauth.and_then(|r| r.max_age),
        };
        let url = self.authorization_url(server, &request, &secrets).await?;
        let code = match (way, listener) {
            (Way::UserAgent(agent), _) => {
                let back = tokio::time::timeout_at(deadline, agent(url))
                    .await
                    .map_err(|_| {
                        failed("the user agent did not return before the login's timeout")
                    })?
                    .map_err(|e| failed(format!("the user agent failed: {e}")))?;
                let query = callback_query(&back, Came::Returned).unwrap_or_default();
                match read_callback(query, &expect)? {
                    Callback::Code(code) => code,
                    Callback::Refused(why) => return Err(refused_login(&why)),
                    Callback::Foreign => {
                        return Err(failed(
                            "the URL the user agent returned does not carry the login's \
                             state; the login is refused",
                        ))
                    }
                }
            }
            (_, None) => return Err(failed("the login's listener is missing")),
            (_, Some(listener)) => {
                open_browser(&url).await;
                if login.paste.is_some() {
                    eprintln!(
                        "If the browser runs on another machine, it cannot come back here: \
                         paste the address it ended on (it begins with {redirect_uri}) and \
                         press Enter."
                    );
                }
                eprintln!(
                    "Waiting for the browser to come back (at most {}) ...",
                    minutes(login.timeout)
                );
                listener
                    .code(&expect, deadline, login.paste.as_ref())
                    .await?
            }
        };
        let mut pairs = vec![
            ("code", code.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_verifier", secrets.verifier.as_str()),
        ];
        pairs.extend(self.resources().into_iter().map(|r| ("resource", r)));
        let answered = self
            .login_token("authorization_code", &pairs, &[&code, &secrets.verifier])
            .await?;
        let sent = LoginAsked {
            nonce: Some(secrets.nonce.as_str()),
            acr_values: request.acr_values,
            max_age: request.max_age,
        };
        self.checks()
            .with_identity(server, answered, &client_id, scope, sent)
            .await
    }

    /// The browser's listener: at the redirect URI configured; else at the
    /// one the client a login registered was registered with (a server may
    /// match it exactly), where its port is free; else at a port the system
    /// picks, with a client registered anew for it if one was kept.
    async fn listener(
        &self,
        chain: &Chain,
        server: &ServerMetadata,
        login: &Login,
    ) -> Result<Listener, TokenError> {
        let kept = match (&login.redirect_uri, self.request.spec.client_id.is_empty()) {
            (None, true) => chain.kept_redirect_uri(&server.issuer),
            _ => None,
        };
        let Some(kept) = kept else {
            return Listener::bind(login.redirect_uri.as_deref()).await;
        };
        match Listener::bind(Some(&kept)).await {
            Ok(listener) => Ok(listener),
            Err(e) => {
                tracing::warn!(
                    issuer = %server.issuer,
                    error = %e,
                    "the redirect URI the kept client was registered with cannot be listened \
                     on (its port is taken); registering a new client for this login"
                );
                chain.forget_client(&server.issuer);
                Listener::bind(None).await
            }
        }
    }

    /// Whether the chain kept a client of its own for `server` (not one
    /// configured), now forgotten so that the login registers anew.
    fn kept_client_forgotten(&self, chain: &Chain, server: &ServerMetadata) -> bool {
        self.request.spec.client_id.is_empty() && chain.forget_client(&server.issuer)
    }

    /// The scope a login asks for: the request's, with what the chain's
    /// login at that server asked for (so that token slots of different
    /// scopes never take turns logging in), and `offline_access` where the
    /// server lists it, for a refresh token.
    pub(super) fn login_scope(&self, server: &ServerMetadata, before: &str) -> Option<String> {
        // A scope an API's challenge added (a step-up without a list) is
        // asked for only where the server lists it, when it lists any (see
        // `unlisted_scopes`); the configured ones always go.
        let unlisted = self.unlisted_scopes(server);
        let mut scopes: Vec<&str> = self
            .request
            .target
            .scope()
            .unwrap_or_default()
            .split_whitespace()
            .filter(|scope| !unlisted.contains(scope))
            .collect();
        for scope in before.split_whitespace() {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        if server
            .scopes_supported
            .iter()
            .any(|s| s == "offline_access")
            && !scopes.contains(&"offline_access")
        {
            scopes.push("offline_access");
        }
        (!scopes.is_empty()).then(|| scopes.join(" "))
    }

    /// The scopes of this request that an API's challenge added (a
    /// step-up without a list) and `server` does not list in
    /// `scopes_supported`, when it lists any: a login never asks for them,
    /// so that an API cannot steer a person's login toward a scope of the
    /// server's that is not its own. The app's own scopes always go.
    pub(crate) fn unlisted_scopes(&self, server: &ServerMetadata) -> Vec<&str> {
        let Some(chain) = self.request.spec.login_chain() else {
            return Vec::new();
        };
        if server.scopes_supported.is_empty() {
            return Vec::new();
        }
        self.request
            .target
            .scope()
            .unwrap_or_default()
            .split_whitespace()
            .filter(|scope| {
                chain.was_asked_by_api(scope) && !server.scopes_supported.iter().any(|s| s == scope)
            })
            .collect()
    }

    /// The `resource` parameters of this request (RFC 8707).
    pub(super) fn resources(&self) -> Vec<&str> {
        self.request
            .target
            .params
            .iter()
            .filter(|(name, _)| name == "resource")
            .map(|(_, value)| value.as_str())
            .collect()
    }

    /// One of a login's token requests: `grant_type` with `pairs`, the
    /// client's authentication as configured, a DPoP proof with the layer's
    /// key; sent again once for a DPoP nonce. `secrets` are scrubbed from
    /// the answer. The token counts from the moment this request was sent,
    /// not from the login's start.
    pub(super) async fn login_token(
        &self,
        grant_type: &str,
        pairs: &[(&str, &str)],
        secrets: &[&str],
    ) -> Result<Answered, TokenError> {
        let prepared = self.request.prepared();
        let mut nonce_retried = false;
        loop {
            let transport = &*self.request.spec.transport;
            let (body, mut sent) = prepared
                .login_body(Some(grant_type), pairs, transport)
                .await?;
            sent.secrets.extend(secrets.iter().map(|s| (*s).to_owned()));
            let sent_at = Instant::now();
            let request = self
                .request
                .post(&prepared, &self.request.target.url, body, true)
                .await?;
            let response = transport.send(request, MAX_RESPONSE_BODY).await?;
            if let Some(dpop) = &self.request.spec.dpop {
                dpop.remember_from(&self.request.target.url, response.headers());
            }
            let redactor = prepared.redactor.and(&sent.secrets);
            let (refresh, id_token) = if response.status().is_success() {
                let body = response.body();
                (answered_refresh_token(body)?, answered_id_token(body))
            } else {
                (None, None)
            };
            match read(&response, &redactor) {
                Ok(mut token) => {
                    self.request.check_issued(&token)?;
                    token.sent_at = Some(sent_at);
                    return Ok(Answered {
                        token,
                        refresh,
                        id_token,
                        identity: None,
                    });
                }
                Err(e) if !nonce_retried && self.request.asks_for_nonce(&e) => nonce_retried = true,
                Err(e) => return Err(e),
            }
        }
    }

    /// A form `POST` of `pairs` to another endpoint of the server (the
    /// device authorization endpoint), with the client's authentication; the
    /// answer's JSON object.
    pub(super) async fn client_post(
        &self,
        url: &Uri,
        pairs: &[(&str, &str)],
    ) -> Result<serde_json::Map<String, serde_json::Value>, TokenError> {
        let response = self.client_send(url, pairs, &[]).await?;
        match serde_json::from_slice(response.body()) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            _ => Err(TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message(format!("`{url}` answered with no JSON object"))),
        }
    }

    /// A form `POST` of `pairs` to another endpoint of the server, with the
    /// client's authentication: its answer when it is a success, else its
    /// error, with `secrets` (and the client's) scrubbed from it.
    pub(super) async fn client_send(
        &self,
        url: &Uri,
        pairs: &[(&str, &str)],
        secrets: &[&str],
    ) -> Result<http::Response<Bytes>, TokenError> {
        let prepared = self.request.prepared();
        let transport = &*self.request.spec.transport;
        let (body, mut sent) = prepared.login_body(None, pairs, transport).await?;
        sent.secrets.extend(secrets.iter().map(|s| (*s).to_owned()));
        let request = self.request.post(&prepared, url, body, false).await?;
        let response = transport.send(request, MAX_RESPONSE_BODY).await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let e = refusal(&response, &prepared.redactor.and(&sent.secrets));
        let code = e.error_code().map(clip).unwrap_or_default();
        Err(e.with_message(format!("`{url}` answered HTTP {status} {code}")))
    }
}

/// The error a refusing `response` of another endpoint of the server
/// carries (its `error`, description and `Retry-After`), its text scrubbed
/// by `redactor`.
pub(super) fn refusal(
    response: &http::Response<Bytes>,
    redactor: &crate::endpoint::Redactor,
) -> TokenError {
    status_error(
        response.status(),
        response.body(),
        retry_after(response.headers()),
        redactor,
    )
}

/// Marks the end of a login that asked for a re-authentication, when
/// dropped.
struct ReauthenticationEnds<'a>(&'a Chain);

impl Drop for ReauthenticationEnds<'_> {
    fn drop(&mut self) {
        self.0.reauthentication_ended();
    }
}

/// The turn of the logins that need the person (a browser, a device code
/// on the terminal): one at a time in a process, so that layers that need
/// a login together (an agent host with many servers) open one tab after
/// the other. It is the process's, as the browser and the terminal are:
/// a lock, held by the login under way and by nothing else.
static LOGIN_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for the turn of `login`, until `deadline`.
async fn take_turn(
    login: &Login,
    deadline: Instant,
) -> Result<tokio::sync::MutexGuard<'static, ()>, TokenError> {
    if let Ok(turn) = LOGIN_TURN.try_lock() {
        return Ok(turn);
    }
    tracing::info!(
        login = login.name(),
        "another login of this process is under way; this one begins when it ends"
    );
    tokio::time::timeout_at(deadline, LOGIN_TURN.lock())
        .await
        .map_err(|_| {
            failed(
                "another login of this process was under way until this login's timeout \
                 (Login::timeout); this one did not begin",
            )
        })
}

/// Refuses a server that lists PKCE methods without S256; one that lists
/// none is warned about (many servers do not list them).
pub(super) fn check_pkce(server: &ServerMetadata) -> Result<(), TokenError> {
    let methods = &server.code_challenge_methods;
    if methods.is_empty() {
        tracing::warn!(
            issuer = %server.issuer,
            "the server's metadata lists no code_challenge_methods_supported; the login sends \
             PKCE with S256 all the same"
        );
        return Ok(());
    }
    if methods.iter().any(|m| m == "S256") {
        return Ok(());
    }
    Err(failed(format!(
        "`{}` lists the PKCE methods ({}) without S256, the only one this client uses (plain \
         gives the code away to whoever sees the request); the login is refused",
        server.issuer,
        methods.join(", ")
    )))
}

/// Opens the system browser at `url`, and prints it for a person on
/// another machine (a session over SSH).
async fn open_browser(url: &str) {
    eprintln!("To sign in, open this URL in a browser:\n\n    {url}\n");
    let owned = url.to_owned();
    match tokio::task::spawn_blocking(move || webbrowser::open(&owned)).await {
        Ok(Ok(())) => tracing::info!("opened the system browser for the login"),
        Ok(Err(e)) => tracing::warn!(
            error = %e,
            "no browser could be opened; the URL is printed to stderr"
        ),
        Err(_) => tracing::warn!("opening the browser failed; the URL is printed to stderr"),
    }
}

/// A duration as a person reads it: `5 minutes`, `90 seconds`.
fn minutes(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 120 && s % 60 == 0 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    }
}
