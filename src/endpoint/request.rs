//! [`TokenRequest`]: one token request to the endpoint (for every grant),
//! and the few sent again at once when the answer asks for it (a DPoP
//! nonce, the other audience of a refused assertion, a rotated secret, a
//! renewed assertion file).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method};

use crate::endpoint::client_auth::secret::{refuses_client, ClientSecret};
use crate::endpoint::client_auth::{check_unencoded, ClientAuth};
use crate::endpoint::grant::refresh::RegisteredSecret;
use crate::endpoint::prepared::{Prepared, SentProof};
use crate::endpoint::spec::{RequestSpec, RequestTarget};
use crate::error::{ConfigErrorKind, TokenError};
use crate::support::boxed::BoxFuture;
use crate::token::details::same as same_details;
use crate::token::AccessToken;
use crate::transport::MAX_RESPONSE_BODY;

/// One token request to the token endpoint, for any grant: the layer's
/// [`RequestSpec`] sent to one [`RequestTarget`].
pub(crate) struct TokenRequest {
    pub(crate) spec: Arc<RequestSpec>,
    pub(crate) target: RequestTarget,
    /// The parts made from the secret in use.
    prepared: Mutex<Arc<Prepared>>,
    /// Where the URL came from, which says what to suggest when it turns
    /// out not to be a token endpoint.
    url_from: UrlFrom,
}

/// Where a token request's URL came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UrlFrom {
    /// Given with `token_url`.
    TokenUrl,
    /// The `token_endpoint` of an issuer's metadata.
    Discovery,
    /// Built from `auth_url`.
    AuthUrl,
}

impl UrlFrom {
    /// What to suggest when the URL is not a token endpoint.
    fn hint(self) -> &'static str {
        match self {
            UrlFrom::TokenUrl => TOKEN_URL_HINT,
            UrlFrom::Discovery => DISCOVERED_HINT,
            UrlFrom::AuthUrl => AUTH_URL_HINT,
        }
    }
}

/// What a fetch already sent again, so that each is sent again once.
#[derive(Default)]
struct Retried {
    nonce: bool,
    audience: bool,
    grant_audience: bool,
    secret: bool,
    file: bool,
    assertion: bool,
}

/// The hint for a URL given with `token_url` that is not a token endpoint.
const TOKEN_URL_HINT: &str = "check the URL given to token_url: a server names its token \
     endpoint `token_endpoint` in its metadata (/.well-known/oauth-authorization-server or \
     /.well-known/openid-configuration)";

/// The hint for a token endpoint named by an issuer's metadata.
const DISCOVERED_HINT: &str = "it is the `token_endpoint` of the issuer's metadata, which will \
     be read again at the next attempt";

/// The hint for a URL built from `auth_url` that is not a token endpoint.
const AUTH_URL_HINT: &str = "auth_url appends /v1/oauth/accesstoken, which suits the \
     product-information API's token endpoint only; for another server give its token endpoint with token_url \
     (`token_endpoint` in its metadata at /.well-known/openid-configuration)";

impl TokenRequest {
    /// `spec` sent to `target`.
    pub(crate) fn new(spec: Arc<RequestSpec>, target: RequestTarget) -> Self {
        let (version, current) = spec.secret.current();
        let client = (spec.client_id.as_str(), &*current, &target.auth);
        let prepared = Prepared::new(&spec, &target, client, version);
        TokenRequest {
            spec,
            target,
            prepared: Mutex::new(Arc::new(prepared)),
            url_from: UrlFrom::TokenUrl,
        }
    }

    /// The parts made from the secret in use, made again if it changed.
    pub(crate) fn prepared(&self) -> Arc<Prepared> {
        let got = self.client_got();
        let mut prepared = self.prepared.lock().unwrap_or_else(PoisonError::into_inner);
        let client_id = got.as_ref().map_or(&self.spec.client_id, |c| &c.id);
        if prepared.version != self.spec.secret.version() || prepared.client_id != *client_id {
            let (version, current) = self.spec.secret.current();
            let (secret, auth) = match got.as_ref().and_then(|c| c.secret.as_ref()) {
                Some(RegisteredSecret::Post(secret)) => (secret.as_str(), ClientAuth::FormBody),
                Some(RegisteredSecret::Basic(secret)) => (secret.as_str(), ClientAuth::Basic),
                None => (&*current, self.target.auth.clone()),
            };
            let client = (client_id.as_str(), secret, &auth);
            *prepared = Arc::new(Prepared::new(&self.spec, &self.target, client, version));
        }
        Arc::clone(&prepared)
    }

    /// Without a configured client id: the client a login got at this
    /// request's server (registered, or a metadata document's URL).
    pub(crate) fn client_got(&self) -> Option<crate::endpoint::grant::refresh::LoginClient> {
        if !self.spec.client_id.is_empty() {
            return None;
        }
        let chain = self.spec.login_chain()?;
        chain.client_at(self.target.issuer.as_deref()?)
    }

    /// The client id its requests present: configured, or the one a login
    /// got at its server.
    pub(crate) fn client_id_in_use(&self) -> String {
        match self.client_got() {
            Some(client) => client.id,
            None => self.spec.client_id.clone(),
        }
    }

    /// The secret an HMAC-signed ID token is checked with (OpenID Connect
    /// Core 10.1): the client's own where its authentication uses one,
    /// that of a client a login registered, else the configured one when
    /// it authenticates with it; none for `private_key_jwt`, mTLS or a
    /// public client, whatever the secret slot holds.
    pub(crate) fn id_token_secret(&self) -> Option<Arc<str>> {
        if let Some(client) = self.client_got() {
            return client.secret.map(|secret| Arc::from(secret.secret()));
        }
        let uses_secret = matches!(
            self.target.auth,
            ClientAuth::UnencodedBody
                | ClientAuth::FormBody
                | ClientAuth::Basic
                | ClientAuth::BasicUnencoded
                | ClientAuth::ClientSecretJwt
        );
        let (_, secret) = self.spec.secret.current();
        (uses_secret && !secret.is_empty()).then_some(secret)
    }

    /// The URL is the `token_endpoint` of an issuer's metadata: say so when
    /// it is not a token endpoint.
    pub(crate) fn built_from_discovery(mut self) -> Self {
        self.url_from = UrlFrom::Discovery;
        self
    }

    /// The URL was configured as `from` says (`token_url`, or built from
    /// `auth_url`): say so when it is not a token endpoint.
    pub(crate) fn configured_from(mut self, from: UrlFrom) -> Self {
        self.url_from = from;
        self
    }

    /// The message for an answer that shows the URL is no token endpoint.
    fn not_a_token_endpoint(&self, status: http::StatusCode) -> String {
        // The URL holds no credentials (the builder refuses them); its query
        // is left out all the same.
        let url = match (self.target.url.scheme_str(), self.target.url.authority()) {
            (Some(scheme), Some(authority)) => {
                format!("{scheme}://{authority}{}", self.target.url.path())
            }
            _ => self.target.url.path().to_owned(),
        };
        let answer = if status.is_redirection() {
            "answered with a redirect (redirects are not followed for token requests: the \
             secret must go nowhere else), so it"
        } else {
            "answered that"
        };
        format!(
            "`{url}` {answer} is not a token endpoint; {}",
            self.url_from.hint()
        )
    }

    /// Warns when the token grants fewer scopes than were requested.
    fn check_scope(&self, token: &AccessToken) {
        let (Some(requested), Some(granted)) = (self.target.scope(), token.scope()) else {
            return;
        };
        let held: Vec<&str> = granted.split_whitespace().collect();
        let missing: Vec<&str> = requested
            .split_whitespace()
            .filter(|s| !held.contains(s))
            .collect();
        if !missing.is_empty() {
            tracing::warn!(
                requested = %requested,
                granted = %crate::error::clip(granted),
                missing = %crate::error::clip(&missing.join(" ")),
                "the token endpoint granted fewer scopes than requested"
            );
        }
    }

    /// The token request, with a fresh client assertion when the client
    /// authenticates with one (with `other_audience`, for the audience the
    /// server did not take last), and what it carried.
    async fn request(
        &self,
        prepared: &Prepared,
        other_audience: bool,
        other_grant_audience: bool,
    ) -> Result<(http::Request<Bytes>, SentProof), TokenError> {
        let (body, sent) = prepared
            .body(other_audience, other_grant_audience, &*self.spec.transport)
            .await?;
        let request = self.post(prepared, &self.target.url, body, true).await?;
        Ok((request, sent))
    }

    /// A form `POST` of `body` to `url` with the client's `Basic` header when
    /// it has one, and with `proof` a DPoP proof of the layer's key.
    pub(crate) async fn post(
        &self,
        prepared: &Prepared,
        url: &http::Uri,
        body: Bytes,
        proof: bool,
    ) -> Result<http::Request<Bytes>, TokenError> {
        let mut request = http::Request::new(body);
        *request.method_mut() = Method::POST;
        *request.uri_mut() = url.clone();
        let headers = request.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(basic) = &prepared.basic {
            headers.insert(AUTHORIZATION, basic.clone());
        }
        if let (Some(dpop), true) = (&self.spec.dpop, proof) {
            let proof = dpop.prove_token_request(url).await?;
            request.headers_mut().insert(crate::dpop::DPOP, proof);
        }
        Ok(request)
    }
}

impl TokenRequest {
    /// One token request, and its answer read (the
    /// [`TokenSource`](crate::TokenSource) of a layer with a token URL).
    pub(crate) fn fetch(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            // A refresh token goes only to the server its login was made at.
            // (A person's login there is the login's own token source's.)
            if let Some(chain) = self.spec.grant.chain() {
                if !chain.logs_in() && chain.issued_elsewhere(self.target.issuer.as_deref()) {
                    return Err(crate::endpoint::login_required(Some(
                        "the refresh token was issued by another authorization server",
                    )));
                }
            }
            let mut retried = Retried::default();
            loop {
                let prepared = self.prepared();
                let (request, sent) = self
                    .request(&prepared, retried.audience, retried.grant_audience)
                    .await?;
                let response = self.spec.transport.send(request, MAX_RESPONSE_BODY).await?;
                let status = response.status();
                if let Some(dpop) = &self.spec.dpop {
                    dpop.remember_from(&self.target.url, response.headers());
                }
                // What the request carried beyond the secret is scrubbed too.
                let extended;
                let redactor = if sent.secrets.is_empty() {
                    &prepared.redactor
                } else {
                    extended = prepared.redactor.and(&sent.secrets);
                    &extended
                };
                if let (Some(chain), true) = (prepared.chain(), status.is_success()) {
                    // A new refresh token replaces the one sent before anything
                    // else is read: the server retired the old one, even if the
                    // access token beside it turns out unusable.
                    let new =
                        crate::endpoint::grant::refresh::answered_refresh_token(response.body())?;
                    let sent_token = sent.grant_secret.map(|i| sent.secrets[i].as_str());
                    if let (Some(new), Some(sent_token)) = (new, sent_token) {
                        chain.rotated(sent_token, new);
                    }
                    // A login's identity renewed: checked by the login's
                    // token source before the token counts.
                    if chain.id_token().is_some() {
                        if let Some(id_token) =
                            crate::endpoint::grant::refresh::answered_id_token(response.body())
                        {
                            chain.refreshed_id_token(id_token);
                        }
                    }
                }
                let error = match crate::endpoint::answer::read(&response, redactor) {
                    Ok(token) => {
                        self.check_issued(&token)?;
                        self.check_scope(&token);
                        for (assertions, choice) in [
                            (prepared.assertions(), sent.choice),
                            (prepared.grant_assertions(), sent.grant_choice),
                        ] {
                            if let (Some(assertions), Some(choice)) = (assertions, choice) {
                                assertions.taken(choice);
                            }
                        }
                        return Ok(token);
                    }
                    Err(e) => e,
                };
                if crate::endpoint::answer::not_a_token_endpoint(status) {
                    return Err(error.with_message(self.not_a_token_endpoint(status)));
                }
                // A DPoP nonce demanded (RFC 9449 section 8) is sent once.
                if !retried.nonce && self.asks_for_nonce(&error) {
                    tracing::debug!("the token endpoint asked for a DPoP nonce; asking again");
                    retried.nonce = true;
                    continue;
                }
                if !retried.grant_audience
                    && Self::tries_other_grant_audience(&prepared, &sent, &error)
                {
                    retried.grant_audience = true;
                    continue;
                }
                // An assertion made for this request (an ID-JAG) that the
                // server refused, dropped at its source: once with a new one.
                if !retried.assertion && prepared.renews_refused_assertion(&error) {
                    tracing::info!(
                        "the token endpoint refused the grant's assertion; asking again with a \
                         new one"
                    );
                    retried.assertion = true;
                    continue;
                }
                if let Some(hint) = self.grant_refused(&prepared, &sent, &error) {
                    return Err(error.with_message(hint));
                }
                if !refuses_client(&error) {
                    return Err(error);
                }
                // The FAPI 2.0 profile's assertion names the issuer alone.
                if !retried.audience
                    && !self.spec.fapi2
                    && Self::tries_other_audience(&prepared, &sent, &error)
                {
                    retried.audience = true;
                    continue;
                }
                if !retried.secret && self.secret_changed(&prepared).await {
                    retried.secret = true;
                    continue;
                }
                if !retried.file && Self::file_changed(&prepared, &sent).await {
                    retried.file = true;
                    continue;
                }
                return Err(Self::assertion_refused(
                    error,
                    &prepared,
                    &sent,
                    retried.audience,
                ));
            }
        })
    }

    /// After a refusal of the rotating secret `prepared` was made with:
    /// whether a new secret is in use now (read again here, or by another
    /// request meanwhile).
    async fn secret_changed(&self, prepared: &Prepared) -> bool {
        let ClientSecret::Rotating(rotating) = &self.spec.secret else {
            return false;
        };
        let unencoded = self.target.auth == ClientAuth::UnencodedBody;
        let check = |secret: &str| {
            if let Some(Err(e)) =
                crate::endpoint::client_auth::key_from_file(&self.spec.assertion, secret)
            {
                return Err(format!(
                    "{} holds no usable key: {}",
                    rotating.describe(),
                    e.message()
                ));
            }
            if unencoded {
                check_unencoded(
                    secret,
                    ConfigErrorKind::InvalidClientSecret,
                    "client secret",
                )
                .map_err(|e| e.message().to_owned())?;
            }
            Ok(())
        };
        match rotating.reread(prepared.version, check).await {
            Ok(true) => {
                tracing::info!(
                    source = %rotating.describe(),
                    "the token endpoint refused the client's credential (its secret or key), and a \
                     new one was read; asking again with it"
                );
                true
            }
            Ok(false) => {
                tracing::debug!(
                    source = %rotating.describe(),
                    "the token endpoint refused the client's credential, which has not changed"
                );
                false
            }
            Err(why) => {
                tracing::warn!(
                    source = %rotating.describe(),
                    "the token endpoint refused the client's credential, and reading it again \
                     failed: {why}"
                );
                false
            }
        }
    }

    /// After a refusal of the assertion read from a file: whether the file
    /// now holds another.
    async fn file_changed(prepared: &Prepared, sent: &SentProof) -> bool {
        let (Some(file), Some(refused)) = (prepared.assertion_file(), &sent.from_file) else {
            return false;
        };
        match file.read().await {
            Ok(now) if now != *refused => {
                tracing::info!(
                    file = %file.path().display(),
                    "the token endpoint refused the client assertion, and the file holds a new \
                     one; asking again with it"
                );
                true
            }
            _ => false,
        }
    }
}

impl TokenRequest {
    /// Whether the refused client assertion `sent` can be tried for another
    /// audience (and says so in the log).
    fn tries_other_audience(prepared: &Prepared, sent: &SentProof, error: &TokenError) -> bool {
        if let (Some(assertions), Some(choice)) = (prepared.assertions(), sent.choice) {
            return assertions.tries_other(choice, error, "client assertion", "assertion_audience");
        }
        false
    }

    /// Whether `error` refuses the grant's signed assertion (`invalid_grant`,
    /// or a refusal of the client), which can be tried for another audience
    /// (and says so in the log).
    fn tries_other_grant_audience(
        prepared: &Prepared,
        sent: &SentProof,
        error: &TokenError,
    ) -> bool {
        if let (Some(assertions), Some(choice)) = (prepared.grant_assertions(), sent.grant_choice) {
            let refused = refuses_client(error)
                || error.status().map(|s| s.as_u16()) == Some(400)
                    && error.error_code() == Some("invalid_grant");
            return refused
                && assertions.tries_other(
                    choice,
                    error,
                    "grant's assertion",
                    "JwtBearer::audience",
                );
        }
        false
    }

    /// What to check, when `error` refuses the grant `sent` carried: an
    /// `invalid_grant` or `invalid_target` (RFC 8693 section 2.2.2), a token
    /// exchange's `invalid_request` (a subject token the server does not
    /// take), or a refusal of a client that proves itself by the grant alone
    /// (no client authentication of its own).
    fn grant_refused(
        &self,
        prepared: &Prepared,
        sent: &SentProof,
        error: &TokenError,
    ) -> Option<String> {
        let code = error.error_code();
        let refused = matches!(code, Some("invalid_grant" | "invalid_target"))
            || code == Some("invalid_request") && prepared.exchanges()
            || refuses_client(error) && self.target.auth == ClientAuth::None;
        if !refused {
            return None;
        }
        prepared.grant_refused(sent, &self.target.params)
    }

    /// `error`, a refusal of the client: when it refused an assertion, which
    /// one (its audience, and with `both` the other audience tried before
    /// it; or its file) and what to check.
    fn assertion_refused(
        error: TokenError,
        prepared: &Prepared,
        sent: &SentProof,
        both: bool,
    ) -> TokenError {
        if let (Some(assertions), Some(choice)) = (prepared.assertions(), sent.choice) {
            let tried = if both {
                format!(
                    "the client assertion made for aud `{}`, and again for aud `{}`",
                    assertions.audience(assertions.other(choice)),
                    assertions.audience(choice)
                )
            } else {
                format!(
                    "the client assertion made for aud `{}`",
                    assertions.audience(choice)
                )
            };
            return error.with_message(format!(
                "the token endpoint refused {tried}: check the key (or secret) registered \
                 for the client and its algorithm; if the server expects another audience \
                 in client assertions, set it with assertion_audience"
            ));
        }
        if let Some(file) = prepared.assertion_file() {
            return error.with_message(format!(
                "the token endpoint refused the client assertion read from `{}`: check that \
                 the server trusts its issuer and subject for this client (a federated \
                 credential), and that its audience is the one the server expects",
                file.path().display()
            ));
        }
        error
    }

    /// The issued token is what was asked for: its `token_type` the one
    /// its binding asks for (`DPoP` with a DPoP key, a bearer token only
    /// where allowed; under the FAPI 2.0 profile without one, mutual TLS,
    /// `Bearer`), and the authorization details it was granted for, where
    /// the answer names them, those the request asked for (RFC 9396).
    pub(crate) fn check_issued(&self, token: &AccessToken) -> Result<(), TokenError> {
        self.check_details(token)?;
        if let Some(dpop) = &self.spec.dpop {
            return dpop.check_issued(token.token_type());
        }
        let token_type = token.token_type().unwrap_or("Bearer");
        if self.spec.fapi2 && !token_type.eq_ignore_ascii_case("bearer") {
            return Err(
                TokenError::new(crate::error::TokenErrorKind::InvalidResponse).with_message(
                    format!(
                "the token endpoint issued a token of type `{}`, not the certificate-bound \
                 Bearer token the FAPI 2.0 profile (fapi2) asked for",
                crate::error::clip(token_type)
            ),
                ),
            );
        }
        Ok(())
    }

    /// The authorization details the answer says `token` was granted for
    /// are those this request asked for, if it asked for any: a token for
    /// other details is refused before it is cached or shared.
    fn check_details(&self, token: &AccessToken) -> Result<(), TokenError> {
        let asked = self
            .target
            .authorization_details()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok());
        let refused = |why: &str| {
            Err(
                TokenError::new(crate::error::TokenErrorKind::InvalidResponse).with_message(
                    format!("the token endpoint {why} (RFC 9396); the token is not used"),
                ),
            )
        };
        match (asked, token.authorization_details()) {
            (Some(asked), Some(granted)) if !same_details(&asked, granted) => {
                refused("granted the token for other authorization_details than those asked for")
            }
            (Some(_), None) => refused(
                "answered without the authorization_details the token was granted for, which \
                 section 7 requires when they were asked for",
            ),
            (None, Some(_)) => refused(
                "granted the token for authorization_details this request did not ask for (a \
                 grant's, from another request); a token for them is kept for requests that \
                 ask for them",
            ),
            _ => Ok(()),
        }
    }

    /// Whether `error` asks for the DPoP nonce the endpoint just sent.
    pub(crate) fn asks_for_nonce(&self, error: &TokenError) -> bool {
        self.spec.dpop.is_some() && crate::dpop::asks_for_nonce(error)
    }
}

impl fmt::Debug for TokenRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenRequest")
            .field("url", &self.target.url)
            .field("client_secret", &"[redacted]")
            .finish_non_exhaustive()
    }
}
