//! Pushed authorization requests (RFC 9126): whether a login pushes its
//! authorization request to the server first (`PushedAuthorization`, and
//! always under the FAPI 2.0 profile or where the server requires it), the
//! push itself (the client's authentication as at the token endpoint, a DPoP
//! proof where the layer has a key), its answer checked, and the short URL
//! the browser then goes to.

use std::time::Duration;

use serde_json::Value;

use super::{with_query, Request, Secrets};
use crate::endpoint::{PushedAuthorization, ServerMetadata};
use crate::error::{clip, TokenError};
use crate::login::flow::refusal;
use crate::login::{failed, ServerLogin};
use crate::transport::MAX_RESPONSE_BODY;

/// The longest `request_uri` taken from a server: RFC 9126's are short
/// (`urn:ietf:params:oauth:request_uri:` and a random part).
const MAX_REQUEST_URI: usize = 512;

impl ServerLogin<'_> {
    /// Where the browser goes for `request` at `server`: the authorization
    /// endpoint with the request's parameters, or, when the request is
    /// pushed first, with the client id and the `request_uri` the server
    /// gave. An error ends the login before any browser opens.
    pub(crate) async fn authorization_url(
        &self,
        server: &ServerMetadata,
        request: &Request<'_>,
        secrets: &Secrets,
    ) -> Result<String, TokenError> {
        let pairs = request.pairs(secrets);
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let mode = self.request.spec.par;
        let push = server.require_pushed_authorization_requests
            || match mode {
                PushedAuthorization::Never => false,
                PushedAuthorization::WhenOffered => {
                    server.pushed_authorization_request_endpoint.is_some()
                }
                PushedAuthorization::Always => true,
            };
        if !push {
            return Ok(with_query(request.endpoint, &pairs));
        }
        let Some(endpoint) = server.pushed_authorization_request_endpoint.as_deref() else {
            let why = match (
                self.request.spec.fapi2,
                server.require_pushed_authorization_requests,
            ) {
                (true, _) => "the FAPI 2.0 profile (fapi2) pushes every authorization request",
                (_, true) => "its metadata says require_pushed_authorization_requests",
                _ => "the layer pushes every authorization request (PushedAuthorization::Always)",
            };
            return Err(failed(format!(
                "the metadata of `{}` names no pushed_authorization_request_endpoint, and {why}; \
                 the login did not begin and no browser was opened",
                server.issuer
            )));
        };
        let (request_uri, expires_in) = self.push(endpoint, &pairs).await?;
        tracing::info!(
            issuer = %server.issuer,
            expires_in = expires_in.as_secs(),
            "pushed the authorization request (RFC 9126)"
        );
        Ok(with_query(
            request.endpoint,
            &[
                ("client_id", request.client_id),
                ("request_uri", &request_uri),
            ],
        ))
    }

    /// Pushes `pairs` to `endpoint`, the server's PAR endpoint, with the
    /// client's authentication and a DPoP proof (sent again once for a DPoP
    /// nonce): the `request_uri` and its lifetime, checked.
    async fn push(
        &self,
        endpoint: &str,
        pairs: &[(&str, &str)],
    ) -> Result<(String, Duration), TokenError> {
        let url = crate::endpoint::checked_url(
            "pushed_authorization_request_endpoint",
            endpoint,
            self.request.spec.allow_insecure_http,
        )
        .map_err(|e| failed(format!("the server's {e}")))?;
        let mut nonce_retried = false;
        loop {
            let prepared = self.request.prepared();
            let transport = &*self.request.spec.transport;
            // The client's authentication names the client where it goes
            // in the body: once, as RFC 9126 section 2.1 asks.
            let pairs: Vec<(&str, &str)> = pairs
                .iter()
                .copied()
                .filter(|(name, _)| *name != "client_id" || !prepared.names_client())
                .collect();
            let (body, sent) = prepared.login_body(None, &pairs, transport).await?;
            let request = self.request.post(&prepared, &url, body, true).await?;
            let response = transport.send(request, MAX_RESPONSE_BODY).await?;
            if let Some(dpop) = &self.request.spec.dpop {
                dpop.remember_from(&url, response.headers());
            }
            let status = response.status();
            if status.is_success() {
                return self.pushed(response.body());
            }
            let e = refusal(&response, &prepared.redactor.and(&sent.secrets));
            if !nonce_retried && self.request.asks_for_nonce(&e) {
                nonce_retried = true;
                continue;
            }
            let code = e.error_code().map(clip).unwrap_or_default();
            let why = match e.error_description().map(clip) {
                Some(description) => format!("{code}: {description}"),
                None => code.clone(),
            };
            return Err(failed(format!(
                "the server refused the pushed authorization request (HTTP {status} {why}); \
                 the login did not begin and no browser was opened"
            ))
            .with_error_code(&code));
        }
    }

    /// A PAR answer's `request_uri` and `expires_in`, checked: visible
    /// ASCII within [`MAX_REQUEST_URI`], never one used before, and a
    /// lifetime of a second or more.
    fn pushed(&self, body: &[u8]) -> Result<(String, Duration), TokenError> {
        let refused = |why: &str| {
            failed(format!(
                "the server's answer to the pushed authorization request {why}; the login did \
                 not begin and no browser was opened"
            ))
        };
        let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(body) else {
            return Err(refused("is not a JSON object"));
        };
        let Some(uri) = answer.get("request_uri").and_then(Value::as_str) else {
            return Err(refused("has no request_uri"));
        };
        if uri.is_empty()
            || uri.len() > MAX_REQUEST_URI
            || !uri.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(refused(&format!(
                "has a request_uri that is empty, over {MAX_REQUEST_URI} bytes, or not visible \
                 ASCII"
            )));
        }
        let expires_in = answer.get("expires_in").and_then(Value::as_f64);
        let expires_in = match expires_in {
            Some(s) if s >= 1.0 && s.is_finite() => Duration::from_secs_f64(s.min(86_400.0)),
            Some(_) => return Err(refused("has an expires_in under one second")),
            None => {
                return Err(refused(
                    "has no expires_in (RFC 9126 section 2.2 requires it)",
                ))
            }
        };
        if !self.request.spec.used_request_uris.first_use(uri) {
            return Err(refused(
                "repeats a request_uri a login used already (each is used once)",
            ));
        }
        Ok((uri.to_owned(), expires_in))
    }
}
