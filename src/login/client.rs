//! Which client a login is: the client id given; else a client metadata
//! document's URL where the server takes one (MCP's SEP-991); else a public
//! client registered at the server's `registration_endpoint` (RFC 7591),
//! kept with the chain so that no other process registers again.

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method};
use serde_json::{json, Value};

use super::{failed, ServerLogin};
use crate::endpoint::Chain;
use crate::endpoint::ServerMetadata;
use crate::endpoint::{LoginClient, RegisteredSecret};
use crate::error::{clip, TokenError};
use crate::transport::MAX_RESPONSE_BODY;

/// The longest client id taken from a registration.
const MAX_CLIENT_ID: usize = 1024;

/// The name a registered client gets, for the consent page.
const CLIENT_NAME: &str = "tower-oauth client";

/// What a registration asks for: the redirect URIs, the grants.
pub(super) struct Registration<'a> {
    pub(super) redirect_uris: Vec<&'a str>,
    pub(super) grant_types: &'a [&'a str],
}

impl ServerLogin<'_> {
    /// The client id of a login at `server`: configured, kept from an
    /// earlier registration, a metadata document's URL, or registered now.
    pub(super) async fn login_client(
        &self,
        chain: &Chain,
        server: &ServerMetadata,
        metadata_url: Option<&str>,
        registration: Registration<'_>,
    ) -> Result<String, TokenError> {
        if !self.request.spec.client_id.is_empty() {
            return Ok(self.request.spec.client_id.clone());
        }
        if let Some(client) = chain.client_at(&server.issuer) {
            return Ok(client.id);
        }
        if let (Some(url), true) = (metadata_url, server.client_id_metadata_document_supported) {
            chain.set_client(LoginClient {
                id: url.to_owned(),
                issuer: server.issuer.clone(),
                secret: None,
                redirect_uri: None,
            });
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
        let method = AuthMethod::at(&server.auth_methods);
        let redirect_uri = registration.redirect_uris.first().map(|u| (*u).to_owned());
        let (id, secret) = self.register(endpoint, registration, method).await?;
        tracing::info!(
            issuer = %server.issuer,
            method = method.name(),
            "registered this client (RFC 7591)"
        );
        chain.set_client(LoginClient {
            id: id.clone(),
            issuer: server.issuer.clone(),
            secret: secret.and_then(|s| method.secret(s)),
            redirect_uri,
        });
        Ok(id)
    }

    /// Registers a client at `endpoint` that authenticates by `method`: its
    /// client id, and the secret the server gave it if any.
    async fn register(
        &self,
        endpoint: &str,
        registration: Registration<'_>,
        method: AuthMethod,
    ) -> Result<(String, Option<String>), TokenError> {
        let url = crate::endpoint::checked_url(
            "registration_endpoint",
            endpoint,
            self.request.spec.allow_insecure_http,
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
            "token_endpoint_auth_method": method.name(),
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
            .request
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
        let fits = |v: &str| {
            !v.is_empty()
                && v.len() <= MAX_CLIENT_ID
                && v.bytes().all(|b| (0x20..=0x7e).contains(&b))
        };
        let secret =
            match answer.get("client_secret").and_then(Value::as_str) {
                Some(secret) if method.has_secret() && fits(secret) => Some(secret.to_owned()),
                Some(_) if method.has_secret() => return Err(refused(
                    "answered with a client_secret that is empty, too long or not visible ASCII"
                        .into(),
                )),
                None if method.has_secret() => {
                    return Err(refused(format!(
                        "answered with no client_secret, which {} needs",
                        method.name()
                    )))
                }
                _ => None,
            };
        match answer.get("client_id").and_then(Value::as_str) {
            Some(id) if fits(id) => Ok((id.to_owned(), secret)),
            Some(_) => Err(refused(
                "answered with a client_id that is empty, too long or not visible ASCII".into(),
            )),
            None => Err(refused("answered with no client_id".into())),
        }
    }
}

/// How a registered client authenticates: as a public client, or with
/// the secret the registration gives, in Basic or in the body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AuthMethod {
    Public,
    SecretBasic,
    SecretPost,
}

impl AuthMethod {
    /// How a registered client authenticates at a server that lists
    /// `methods`: as a public client where it may (`none`, or nothing
    /// listed), else with a secret, in Basic or in the body.
    fn at(methods: &[String]) -> Self {
        let lists = |m: &str| methods.iter().any(|x| x == m);
        if methods.is_empty() || lists("none") {
            AuthMethod::Public
        } else if lists("client_secret_basic") {
            AuthMethod::SecretBasic
        } else if lists("client_secret_post") {
            AuthMethod::SecretPost
        } else {
            AuthMethod::Public
        }
    }

    /// Its `token_endpoint_auth_method`.
    fn name(self) -> &'static str {
        match self {
            AuthMethod::Public => "none",
            AuthMethod::SecretBasic => "client_secret_basic",
            AuthMethod::SecretPost => "client_secret_post",
        }
    }

    fn has_secret(self) -> bool {
        self != AuthMethod::Public
    }

    /// The registration's `secret`, sent this way.
    fn secret(self, secret: String) -> Option<RegisteredSecret> {
        match self {
            AuthMethod::Public => None,
            AuthMethod::SecretBasic => Some(RegisteredSecret::Basic(secret)),
            AuthMethod::SecretPost => Some(RegisteredSecret::Post(secret)),
        }
    }
}
