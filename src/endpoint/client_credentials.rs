//! The client-credentials token request, and the [`TokenSource`] seam the
//! cache fetches through.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Uri};

use super::client_auth::{AssertionSettings, ClientAuth};
use super::redact::Redactor;
use crate::boxed::BoxFuture;
use crate::encoding::{base64, form_urlencode, percent_encode};
use crate::endpoint::transport::{Transport, MAX_RESPONSE_BODY};
use crate::error::TokenError;
use crate::token::AccessToken;

/// What proves the client, beyond what the request holds from the start.
enum ClientProof {
    /// Nothing more: the body and the `Basic` header say it all.
    Fixed,
    /// A fresh client assertion, signed with a key or under the secret.
    #[cfg(feature = "jwt")]
    Assertion(Box<super::assertion::Assertions>),
}

/// Which client assertion a request carries (none without one).
#[cfg(feature = "jwt")]
type Pick = Option<super::assertion::Pick>;
#[cfg(not(feature = "jwt"))]
type Pick = ();

/// The token request of the specification (section 4) and its variants.
pub(crate) struct ClientCredentials {
    url: Uri,
    /// Every form the secret was sent in, to scrub from the answers.
    redactor: Redactor,
    /// The whole body, or with an assertion all of it but the assertion.
    body: Bytes,
    proof: ClientProof,
    basic: Option<HeaderValue>,
    transport: Arc<dyn Transport>,
    /// What to suggest when the URL turns out not to be a token endpoint.
    hint: &'static str,
    /// The scopes requested, to notice a narrower grant.
    scope: Option<String>,
    /// Each token request carries a DPoP proof of this key.
    #[cfg(feature = "jwt")]
    dpop: Option<Arc<crate::dpop::Dpop>>,
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
     specification's endpoint only; for another server give its token endpoint with token_url \
     (`token_endpoint` in its metadata at /.well-known/openid-configuration)";

impl ClientCredentials {
    /// The values must already be checked to fit `auth` (see the builder).
    /// `issuer` when the URL was discovered from one: the assertions' first
    /// `aud` (see [`Assertions`](super::assertion::Assertions).
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(not(feature = "jwt"), allow(unused_variables))]
    pub(crate) fn new(
        url: Uri,
        client_id: &str,
        client_secret: String,
        auth: &ClientAuth,
        params: &[(String, String)],
        assertion: &AssertionSettings,
        issuer: Option<&str>,
        transport: Arc<dyn Transport>,
    ) -> Self {
        let encode = |v: &str| match auth {
            ClientAuth::UnencodedBody => v.to_owned(),
            _ => form_urlencode(v),
        };
        let mut body = String::from("grant_type=client_credentials");
        let mut basic = None;
        if auth.is_basic() {
            let credentials = match auth {
                ClientAuth::BasicUnencoded => format!("{client_id}:{client_secret}"),
                _ => format!(
                    "{}:{}",
                    percent_encode(client_id),
                    percent_encode(&client_secret)
                ),
            };
            let mut value =
                HeaderValue::try_from(format!("Basic {}", base64(credentials.as_bytes())))
                    .expect("base64 is a valid header value");
            value.set_sensitive(true);
            basic = Some(value);
        } else if matches!(auth, ClientAuth::UnencodedBody | ClientAuth::FormBody) {
            body.push_str(&format!(
                "&client_id={}&client_secret={}",
                encode(client_id),
                encode(&client_secret)
            ));
        } else {
            // Assertions and mutual TLS: the id, and no secret.
            body.push_str(&format!("&client_id={}", encode(client_id)));
        }
        for (name, value) in params {
            body.push_str(&format!("&{}={}", encode(name), encode(value)));
        }
        #[cfg(feature = "jwt")]
        let assertions = |key| {
            let url = url.to_string();
            ClientProof::Assertion(Box::new(super::assertion::Assertions::new(
                client_id, assertion, issuer, &url, key,
            )))
        };
        let proof = match auth {
            #[cfg(feature = "jwt")]
            ClientAuth::PrivateKeyJwt(key) => {
                assertions(super::assertion::AssertionKey::Key(key.clone()))
            }
            #[cfg(feature = "jwt")]
            ClientAuth::ClientSecretJwt => assertions(super::assertion::AssertionKey::Secret(
                ring::hmac::Key::new(ring::hmac::HMAC_SHA256, client_secret.as_bytes()),
            )),
            _ => ClientProof::Fixed,
        };
        ClientCredentials {
            url,
            redactor: Redactor::new(client_id, &client_secret),
            body: Bytes::from(body),
            proof,
            basic,
            transport,
            hint: TOKEN_URL_HINT,
            scope: params
                .iter()
                .find(|(name, _)| name == "scope")
                .map(|(_, scope)| scope.clone()),
            #[cfg(feature = "jwt")]
            dpop: None,
        }
    }

    /// Each token request carries a DPoP proof of `dpop`'s key, and the
    /// token must be bound to it.
    #[cfg(feature = "jwt")]
    pub(crate) fn with_dpop(mut self, dpop: Option<Arc<crate::dpop::Dpop>>) -> Self {
        self.dpop = dpop;
        self
    }

    /// The URL is the `token_endpoint` of an issuer's metadata: say so when
    /// it is not a token endpoint.
    pub(crate) fn built_from_discovery(mut self) -> Self {
        self.hint = DISCOVERED_HINT;
        self
    }

    /// The URL was built from `auth_url`: say so when it is not a token
    /// endpoint.
    pub(crate) fn built_from_auth_url(mut self) -> Self {
        self.hint = AUTH_URL_HINT;
        self
    }

    /// The message for an answer that shows the URL is no token endpoint.
    fn not_a_token_endpoint(&self, status: http::StatusCode) -> String {
        // The URL holds no credentials (the builder refuses them); its query
        // is left out all the same.
        let url = match (self.url.scheme_str(), self.url.authority()) {
            (Some(scheme), Some(authority)) => {
                format!("{scheme}://{authority}{}", self.url.path())
            }
            _ => self.url.path().to_owned(),
        };
        let answer = if status.is_redirection() {
            "answered with a redirect (redirects are not followed for token requests: the \
             secret must go nowhere else), so it"
        } else {
            "answered that"
        };
        format!("`{url}` {answer} is not a token endpoint; {}", self.hint)
    }

    /// Warns when the token grants fewer scopes than were requested.
    fn check_scope(&self, token: &AccessToken) {
        let (Some(requested), Some(granted)) = (&self.scope, token.scope()) else {
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
    /// server did not take last), and which assertion it carries.
    #[cfg_attr(not(feature = "jwt"), allow(unused_variables))]
    async fn request(
        &self,
        other_audience: bool,
    ) -> Result<(http::Request<Bytes>, Pick), TokenError> {
        #[cfg_attr(not(feature = "jwt"), allow(clippy::let_unit_value))]
        let (body, pick) = match &self.proof {
            #[cfg(feature = "jwt")]
            ClientProof::Fixed => (self.body.clone(), None),
            #[cfg(not(feature = "jwt"))]
            ClientProof::Fixed => (self.body.clone(), ()),
            #[cfg(feature = "jwt")]
            ClientProof::Assertion(assertions) => {
                let pick = assertions.pick(other_audience);
                (
                    self.with_assertion(&assertions.sign(pick).await?),
                    Some(pick),
                )
            }
        };
        let mut request = http::Request::new(body);
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.url.clone();
        let headers = request.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(basic) = &self.basic {
            headers.insert(AUTHORIZATION, basic.clone());
        }
        #[cfg(feature = "jwt")]
        if let Some(dpop) = &self.dpop {
            let proof = dpop.prove_token_request(&self.url).await?;
            request.headers_mut().insert(crate::dpop::DPOP, proof);
        }
        Ok((request, pick))
    }

    /// The body with `assertion` appended (RFC 7523 section 2.2).
    #[cfg(feature = "jwt")]
    fn with_assertion(&self, assertion: &str) -> Bytes {
        let mut body = Vec::with_capacity(self.body.len() + assertion.len() + 128);
        body.extend_from_slice(&self.body);
        body.extend_from_slice(b"&client_assertion_type=");
        body.extend(form_urlencode(super::assertion::JWT_BEARER_ASSERTION_TYPE).bytes());
        body.extend_from_slice(b"&client_assertion=");
        // base64url and dots: nothing to encode.
        body.extend_from_slice(assertion.as_bytes());
        Bytes::from(body)
    }
}

impl ClientCredentials {
    /// One token request, and its answer read (the
    /// [`TokenSource`](crate::TokenSource) of a layer with a token URL).
    pub(crate) fn fetch(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            // A DPoP nonce demanded (RFC 9449 section 8) is sent once; a
            // refused assertion is tried once for the other audience.
            let (mut nonce_asked, mut other_audience) = (false, false);
            loop {
                let (request, pick) = self.request(other_audience).await?;
                let response = self.transport.send(request, MAX_RESPONSE_BODY).await?;
                let status = response.status();
                #[cfg(feature = "jwt")]
                if let Some(dpop) = &self.dpop {
                    dpop.remember_from(&self.url, response.headers());
                }
                return match crate::endpoint::answer::read(&response, &self.redactor) {
                    Ok(token) => {
                        #[cfg(feature = "jwt")]
                        if let Some(dpop) = &self.dpop {
                            dpop.check_issued(token.token_type())?;
                        }
                        self.check_scope(&token);
                        self.assertion_taken(pick);
                        Ok(token)
                    }
                    Err(e) if self.asks_for_nonce(&e) && !nonce_asked => {
                        tracing::debug!("the token endpoint asked for a DPoP nonce; asking again");
                        nonce_asked = true;
                        continue;
                    }
                    Err(e) if crate::endpoint::answer::not_a_token_endpoint(status) => {
                        Err(e.with_message(self.not_a_token_endpoint(status)))
                    }
                    Err(e) if !other_audience && self.tries_other_audience(&e, pick) => {
                        other_audience = true;
                        continue;
                    }
                    Err(e) => Err(self.assertion_refused(e, pick, other_audience)),
                };
            }
        })
    }
}

impl ClientCredentials {
    /// Whether `error` refuses the assertion `pick`, which can be tried for
    /// another audience (and says so in the log).
    #[cfg_attr(not(feature = "jwt"), allow(unused_variables))]
    fn tries_other_audience(&self, error: &TokenError, pick: Pick) -> bool {
        #[cfg(feature = "jwt")]
        if let (ClientProof::Assertion(assertions), Some(pick)) = (&self.proof, pick) {
            if assertions.has_other() && super::assertion::refuses_client(error) {
                tracing::warn!(
                    refused = %assertions.audience(pick),
                    next = %assertions.audience(assertions.other(pick)),
                    error = %error,
                    "the token endpoint refused the client assertion made for one audience; \
                     trying once with the other (set assertion_audience to choose)"
                );
                return true;
            }
        }
        false
    }

    /// The server took the assertion `pick`.
    #[cfg_attr(not(feature = "jwt"), allow(unused_variables))]
    fn assertion_taken(&self, pick: Pick) {
        #[cfg(feature = "jwt")]
        if let (ClientProof::Assertion(assertions), Some(pick)) = (&self.proof, pick) {
            assertions.taken(pick);
        }
    }

    /// `error`, and when it refuses the client assertion `pick`, which
    /// audience it carried (and with `both`, the other audience tried
    /// before it) and the setting that changes it.
    #[cfg_attr(not(feature = "jwt"), allow(unused_variables))]
    fn assertion_refused(&self, error: TokenError, pick: Pick, both: bool) -> TokenError {
        #[cfg(feature = "jwt")]
        if let (ClientProof::Assertion(assertions), Some(pick)) = (&self.proof, pick) {
            if super::assertion::refuses_client(&error) {
                let tried = if both {
                    format!(
                        "the client assertion made for aud `{}`, and again for aud `{}`",
                        assertions.audience(assertions.other(pick)),
                        assertions.audience(pick)
                    )
                } else {
                    format!(
                        "the client assertion made for aud `{}`",
                        assertions.audience(pick)
                    )
                };
                return error.with_message(format!(
                    "the token endpoint refused {tried}: check the key (or secret) registered \
                     for the client and its algorithm; if the server expects another audience \
                     in client assertions, set it with assertion_audience"
                ));
            }
        }
        error
    }

    /// Whether `error` asks for the DPoP nonce the endpoint just sent.
    fn asks_for_nonce(&self, error: &TokenError) -> bool {
        #[cfg(feature = "jwt")]
        return self.dpop.is_some() && crate::dpop::asks_for_nonce(error);
        #[cfg(not(feature = "jwt"))]
        {
            let _ = error;
            false
        }
    }
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("url", &self.url)
            .field("client_secret", &"[redacted]")
            .finish_non_exhaustive()
    }
}
