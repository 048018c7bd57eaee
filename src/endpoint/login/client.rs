//! Which client a login is: the client id given; else a client metadata
//! document's URL where the server takes one (MCP's SEP-991); else a public
//! client registered at the server's `registration_endpoint` (RFC 7591),
//! kept with the chain so that no other process registers again.

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method};
use serde_json::{json, Value};

use super::failed;
use crate::endpoint::discovery::ServerMetadata;
use crate::endpoint::grant::refresh::Chain;
use crate::endpoint::transport::MAX_RESPONSE_BODY;
use crate::endpoint::TokenRequest;
use crate::error::{clip, TokenError};

/// The longest client id taken from a registration.
const MAX_CLIENT_ID: usize = 1024;

/// The name a registered client gets, for the consent page.
const CLIENT_NAME: &str = "tower-oauth client";

/// What a registration asks for: the redirect URIs, the grants.
pub(super) struct Registration<'a> {
    pub(super) redirect_uris: Vec<&'a str>,
    pub(super) grant_types: &'a [&'a str],
}

impl TokenRequest {
    /// The client id of a login at `server`: configured, kept from an
    /// earlier registration, a metadata document's URL, or registered now.
    pub(super) async fn login_client(
        &self,
        chain: &Chain,
        server: &ServerMetadata,
        metadata_url: Option<&str>,
        registration: Registration<'_>,
    ) -> Result<String, TokenError> {
        if !self.spec.client_id.is_empty() {
            return Ok(self.spec.client_id.clone());
        }
        if let Some(id) = chain.client_at(&server.issuer) {
            return Ok(id);
        }
        if let (Some(url), true) = (metadata_url, server.client_id_metadata_document_supported) {
            chain.set_client(url, &server.issuer);
            return Ok(url.to_owned());
        }
        let Some(endpoint) = server.registration_endpoint.as_deref() else {
            return Err(failed(format!(
                "`{}` takes no client metadata document and names no registration_endpoint, \
                 and the layer has no client id: give the one registered for this program \
                 with client_id",
                server.issuer
            )));
        };
        let id = self.register(endpoint, registration).await?;
        tracing::info!(issuer = %server.issuer, "registered this client (RFC 7591)");
        chain.set_client(&id, &server.issuer);
        Ok(id)
    }

    /// Registers a public client at `endpoint`: its client id.
    async fn register(
        &self,
        endpoint: &str,
        registration: Registration<'_>,
    ) -> Result<String, TokenError> {
        let url = crate::endpoint::checked_url(
            "registration_endpoint",
            endpoint,
            self.spec.allow_insecure_http,
        )
        .map_err(|e| failed(e.to_string()))?;
        let mut response_types = Vec::new();
        if registration.grant_types.contains(&"authorization_code") {
            response_types.push("code");
        }
        let body = json!({
            "client_name": CLIENT_NAME,
            // A program on the person's machine (OpenID Connect Dynamic
            // Client Registration, MCP's SEP-837).
            "application_type": "native",
            "redirect_uris": registration.redirect_uris,
            "grant_types": registration.grant_types,
            "response_types": response_types,
            "token_endpoint_auth_method": "none",
        });
        let mut request = http::Request::new(Bytes::from(body.to_string()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = url.clone();
        request
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
        let refused = |why: String| failed(format!("the registration at `{url}` {why}"));
        let response = self
            .spec
            .transport
            .send(request, MAX_RESPONSE_BODY)
            .await
            .map_err(|e| refused(format!("failed: {e}")))?;
        let status = response.status();
        let answer = serde_json::from_slice::<Value>(response.body()).ok();
        if !status.is_success() {
            let error = answer
                .as_ref()
                .and_then(|a| a.get("error"))
                .and_then(Value::as_str)
                .map(|e| format!(" ({})", clip(e)))
                .unwrap_or_default();
            return Err(refused(format!("was refused: HTTP {status}{error}")));
        }
        let Some(Value::Object(answer)) = answer else {
            return Err(refused("answered with no JSON object".into()));
        };
        match answer.get("client_id").and_then(Value::as_str) {
            Some(id)
                if !id.is_empty()
                    && id.len() <= MAX_CLIENT_ID
                    && id.bytes().all(|b| (0x20..=0x7e).contains(&b)) =>
            {
                Ok(id.to_owned())
            }
            Some(_) => Err(refused(
                "answered with a client_id that is empty, too long or not visible ASCII".into(),
            )),
            None => Err(refused("answered with no client_id".into())),
        }
    }
}
