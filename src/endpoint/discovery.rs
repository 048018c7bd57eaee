//! Discovery: an issuer's token endpoint and client authentication, read from
//! its metadata. It reads RFC 8414's document, else OpenID Connect Discovery's.
//! It reads them inside the token fetch, so with the fetch's single flight,
//! timeout, size cap and back-off.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::header::ACCEPT;
use http::{HeaderValue, Method, StatusCode, Uri};
use serde_json::Value;

use crate::endpoint::answer::{retry_after, status_error};
use crate::endpoint::client_auth::ClientAuth;
use crate::endpoint::redact::Redactor;
use crate::endpoint::server::ServerMetadata;
use crate::endpoint::spec::{RequestSpec, RequestTarget};
use crate::endpoint::TokenRequest;
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::support::boxed::BoxFuture;
use crate::token::AccessToken;
use crate::transport::MAX_RESPONSE_BODY;

/// The metadata last found by any discovery of one layer (its default
/// token's and its token slots'), so that it is read once, not per slot.
pub(crate) type SharedMetadata = Arc<Mutex<Option<ServerMetadata>>>;

/// The token source of a layer configured with an issuer.
pub(crate) struct Discovery {
    issuer: String,
    /// RFC 8414's well-known URL, then OpenID Connect's.
    metadata_urls: [Uri; 2],
    spec: Arc<RequestSpec>,
    /// The parameters of this cache's token requests.
    params: Vec<(String, String)>,
    found: Mutex<Option<(Arc<TokenRequest>, ServerMetadata)>>,
    shared: SharedMetadata,
}

impl Discovery {
    /// Discovery for `issuer` (already checked: absolute, no query or
    /// fragment).
    pub(crate) fn new(
        issuer: &str,
        parsed: &Uri,
        spec: Arc<RequestSpec>,
        params: Vec<(String, String)>,
        shared: SharedMetadata,
    ) -> Arc<Self> {
        Arc::new(Discovery {
            issuer: issuer.to_owned(),
            metadata_urls: metadata_urls(parsed),
            spec,
            params,
            found: Mutex::new(None),
            shared,
        })
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Option<ServerMetadata>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The issuer as configured.
    pub(crate) fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The parameters of its token requests.
    pub(crate) fn params(&self) -> &[(String, String)] {
        &self.params
    }

    /// What the last successful discovery found.
    pub(crate) fn metadata(&self) -> Option<ServerMetadata> {
        self.lock().as_ref().map(|(_, m)| m.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Arc<TokenRequest>, ServerMetadata)>> {
        self.found.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The token request, from the metadata fetched now or before.
    pub(crate) async fn token_request(&self) -> Result<Arc<TokenRequest>, TokenError> {
        if let Some((request, _)) = self.lock().as_ref() {
            return Ok(Arc::clone(request));
        }
        // Found already by another discovery of the layer.
        let known = self.shared().clone();
        if let Some(metadata) = known {
            let request = Arc::new(self.request_for(&metadata)?);
            *self.lock() = Some((Arc::clone(&request), metadata));
            return Ok(request);
        }
        let mut not_found = Vec::new();
        for url in &self.metadata_urls {
            let read = self.read(url).await;
            let document = crate::telemetry::Document::AuthorizationServer;
            crate::telemetry::metadata_read(document, read.is_ok());
            match read {
                Ok(metadata) => {
                    let request = Arc::new(self.request_for(&metadata)?);
                    tracing::info!(
                        issuer = %self.issuer,
                        token_endpoint = %clip(&metadata.token_endpoint),
                        client_auth = ?metadata.client_auth,
                        "discovered the token endpoint"
                    );
                    *self.shared() = Some(metadata.clone());
                    *self.lock() = Some((Arc::clone(&request), metadata));
                    return Ok(request);
                }
                // Servers publish one of the two documents: try the other.
                Err(e) if e.status() == Some(StatusCode::NOT_FOUND) => not_found.push(url),
                Err(e) => return Err(e),
            }
        }
        if let Some(metadata) = self.default_endpoints() {
            let request = Arc::new(self.request_for(&metadata)?);
            *self.shared() = Some(metadata.clone());
            *self.lock() = Some((Arc::clone(&request), metadata));
            return Ok(request);
        }
        Err(
            TokenError::new(TokenErrorKind::Status).with_message(format!(
                "discovery found no metadata for issuer `{}`: both `{}` and `{}` answered 404; \
             check the issuer URL, or give the token endpoint with token_url",
                self.issuer, not_found[0], not_found[1]
            )),
        )
    }

    /// For a person's login at an issuer with no metadata and no path: the
    /// default endpoints MCP's 2025-03-26 revision named (`/authorize`,
    /// `/token`, `/register` at the issuer). `None` for anything else.
    fn default_endpoints(&self) -> Option<ServerMetadata> {
        let logs_in = self.spec.login_chain().is_some();
        let base = self.issuer.trim_end_matches('/');
        let no_path = self.metadata_urls[1].path() == "/.well-known/openid-configuration";
        if !logs_in || !no_path {
            return None;
        }
        tracing::info!(
            issuer = %self.issuer,
            "the issuer publishes no metadata; a login takes its default endpoints \
             (/authorize, /token, /register: MCP 2025-03-26)"
        );
        Some(ServerMetadata {
            issuer: self.issuer.clone(),
            metadata_url: String::new(),
            token_endpoint: format!("{base}/token"),
            auth_methods: Vec::new(),
            client_auth: self.spec.auth.clone().unwrap_or(ClientAuth::None),
            mtls_token_endpoint: None,
            dpop_algorithms: Vec::new(),
            scopes_supported: Vec::new(),
            grant_types: Vec::new(),
            authorization_endpoint: Some(format!("{base}/authorize")),
            device_authorization_endpoint: None,
            code_challenge_methods: Vec::new(),
            authorization_response_iss_parameter_supported: false,
            registration_endpoint: Some(format!("{base}/register")),
            client_id_metadata_document_supported: false,
            revocation_endpoint: None,
            jwks_uri: None,
            id_token_algorithms: Vec::new(),
            end_session_endpoint: None,
            pushed_authorization_request_endpoint: None,
            require_pushed_authorization_requests: false,
            backchannel_authentication_endpoint: None,
            backchannel_token_delivery_modes: Vec::new(),
        })
    }

    /// Reads and checks the metadata document at `url`.
    async fn read(&self, url: &Uri) -> Result<ServerMetadata, TokenError> {
        let at = |message: String| format!("discovery at `{url}`: {message}");
        let invalid =
            |m: String| TokenError::new(TokenErrorKind::InvalidResponse).with_message(at(m));
        let doc = get_json(&*self.spec.transport, url, "discovery").await?;
        let text = |key: &str| doc.get(key).and_then(Value::as_str);
        let issuer = text("issuer").unwrap_or_default();
        if !crate::endpoint::url::same_identifier(issuer, &self.issuer) {
            return Err(invalid(format!(
                "the metadata names the issuer `{}`, not `{}` as configured; they must be \
                 identical (RFC 8414 section 3.3): configure the issuer exactly as the server \
                 names it",
                clip(issuer),
                self.issuer
            )));
        }
        let Some(token_endpoint) = text("token_endpoint") else {
            return Err(invalid("the metadata has no `token_endpoint`".into()));
        };
        let texts = |key: &str| texts(&doc, key);
        let auth_methods = texts("token_endpoint_auth_methods_supported");
        let dpop_algorithms = texts("dpop_signing_alg_values_supported");
        let scopes_supported = texts("scopes_supported");
        let grant_types = texts("grant_types_supported");
        if let Some(dpop) = &self.spec.dpop {
            let ours = dpop.key.algorithm().name();
            if !dpop_algorithms.is_empty() && !dpop_algorithms.iter().any(|a| a == ours) {
                tracing::warn!(
                    algorithm = ours,
                    supported = ?dpop_algorithms,
                    "the server does not list the DPoP key's algorithm in \
                     dpop_signing_alg_values_supported; expect its proofs to be refused"
                );
            }
        }
        let client_auth = match &self.spec.auth {
            Some(chosen) => chosen.clone(),
            None => choose(&auth_methods, !self.spec.secret.is_empty()).map_err(invalid)?,
        };
        let mtls_token_endpoint = doc
            .get("mtls_endpoint_aliases")
            .and_then(|aliases| aliases.get("token_endpoint"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let endpoint = |key: &str| text(key).map(str::to_owned);
        let flag = |key: &str| doc.get(key).and_then(Value::as_bool).unwrap_or(false);
        Ok(ServerMetadata {
            authorization_endpoint: endpoint("authorization_endpoint"),
            device_authorization_endpoint: endpoint("device_authorization_endpoint"),
            code_challenge_methods: texts("code_challenge_methods_supported"),
            authorization_response_iss_parameter_supported: flag(
                "authorization_response_iss_parameter_supported",
            ),
            registration_endpoint: endpoint("registration_endpoint"),
            client_id_metadata_document_supported: flag("client_id_metadata_document_supported"),
            revocation_endpoint: endpoint("revocation_endpoint"),
            jwks_uri: endpoint("jwks_uri"),
            id_token_algorithms: texts("id_token_signing_alg_values_supported"),
            end_session_endpoint: endpoint("end_session_endpoint"),
            pushed_authorization_request_endpoint: endpoint(
                "pushed_authorization_request_endpoint",
            ),
            require_pushed_authorization_requests: flag("require_pushed_authorization_requests"),
            backchannel_authentication_endpoint: endpoint("backchannel_authentication_endpoint"),
            backchannel_token_delivery_modes: texts("backchannel_token_delivery_modes_supported"),
            issuer: issuer.to_owned(),
            metadata_url: url.to_string(),
            token_endpoint: token_endpoint.to_owned(),
            auth_methods,
            client_auth,
            mtls_token_endpoint,
            dpop_algorithms,
            scopes_supported,
            grant_types,
        })
    }

    /// The token request `metadata` calls for.
    fn request_for(&self, metadata: &ServerMetadata) -> Result<TokenRequest, TokenError> {
        let spec = &self.spec;
        // With a client certificate, the mutual TLS alias (RFC 8705 section 5).
        let (name, endpoint) = match &metadata.mtls_token_endpoint {
            Some(alias)
                if spec.presents_certificate
                    || metadata.client_auth == ClientAuth::TlsClientAuth =>
            {
                ("mtls_endpoint_aliases.token_endpoint", alias)
            }
            _ => ("token_endpoint", &metadata.token_endpoint),
        };
        let url = crate::endpoint::url::checked_url(name, endpoint, spec.allow_insecure_http)
            .map_err(|e| {
                TokenError::new(TokenErrorKind::InvalidResponse)
                    .with_message(format!("discovery at `{}`: {e}", metadata.metadata_url))
            })?;
        let target = RequestTarget {
            url,
            // The assertions' first audience: what the 2026 update of RFC
            // 7523 asks for.
            issuer: Some(metadata.issuer.clone()),
            auth: metadata.client_auth.clone(),
            params: self.params.clone(),
            server: Some(Arc::new(metadata.clone())),
        };
        Ok(TokenRequest::new(Arc::clone(spec), target).built_from_discovery())
    }
}

/// The JSON object a metadata document at `url` holds: one `GET`, no
/// redirect followed, the body capped as a token response's; `what` begins
/// every message (`discovery`, `protected-resource metadata`).
pub(crate) async fn get_json(
    transport: &dyn crate::transport::Transport,
    url: &Uri,
    what: &str,
) -> Result<serde_json::Map<String, Value>, TokenError> {
    let at = |message: String| format!("{what} at `{url}`: {message}");
    let mut request = http::Request::new(Bytes::new());
    *request.method_mut() = Method::GET;
    *request.uri_mut() = url.clone();
    request
        .headers_mut()
        .insert(ACCEPT, HeaderValue::from_static("application/json"));
    let response = transport
        .send(request, MAX_RESPONSE_BODY)
        .await
        .map_err(|e| {
            let detail = e.detail().unwrap_or_default();
            e.with_message(at(detail))
        })?;
    let status = response.status();
    if !status.is_success() {
        let e = status_error(
            status,
            response.body(),
            retry_after(response.headers()),
            &Redactor::default(),
        );
        return Err(e.with_message(at(format!("the server answered HTTP {status}"))));
    }
    match serde_json::from_slice::<Value>(response.body()) {
        Ok(Value::Object(doc)) => Ok(doc),
        _ => Err(TokenError::new(TokenErrorKind::InvalidResponse)
            .with_message(at("the metadata is not a JSON object".into()))),
    }
}

/// The strings of the array `key` in `doc`, each clipped and escaped (server
/// text), at most 32. Empty when there is none.
pub(crate) fn texts(doc: &serde_json::Map<String, Value>, key: &str) -> Vec<String> {
    doc.get(key)
        .and_then(Value::as_array)
        .map(|values| {
            values
                .iter()
                .filter_map(|m| m.as_str().map(clip))
                .take(32)
                .collect()
        })
        .unwrap_or_default()
}

/// Where an issuer publishes its metadata: RFC 8414's well-known URL (the
/// well-known part between the host and the issuer's path, section 3.1),
/// then OpenID Connect Discovery's (appended to the issuer).
fn metadata_urls(issuer: &Uri) -> [Uri; 2] {
    let scheme = issuer.scheme_str().unwrap_or("https");
    let authority = issuer.authority().map_or("", |a| a.as_str());
    let path = issuer.path().trim_end_matches('/');
    let url = |s: String| s.parse().expect("built from a valid URL");
    [
        url(format!(
            "{scheme}://{authority}/.well-known/oauth-authorization-server{path}"
        )),
        url(format!(
            "{scheme}://{authority}{path}/.well-known/openid-configuration"
        )),
    ]
}

/// The client authentication for a secret among the server's `methods`
/// (none listed means `client_secret_basic`, RFC 8414 section 2).
fn choose(methods: &[String], has_secret: bool) -> Result<ClientAuth, String> {
    let lists = |m: &str| methods.iter().any(|x| x == m);
    if !has_secret {
        // Only a client certificate: the builder allows nothing else.
        return if methods.is_empty()
            || lists("tls_client_auth")
            || lists("self_signed_tls_client_auth")
        {
            Ok(ClientAuth::TlsClientAuth)
        } else {
            Err(format!(
                "the server lists neither tls_client_auth nor self_signed_tls_client_auth among \
                 its token endpoint auth methods ({}), and no client secret was given; give \
                 the client authentication it lists with client_auth",
                methods.join(", ")
            ))
        };
    }
    if methods.is_empty() || lists("client_secret_basic") {
        Ok(ClientAuth::Basic)
    } else if lists("client_secret_post") {
        Ok(ClientAuth::FormBody)
    } else {
        if lists("client_secret_jwt") {
            return Ok(ClientAuth::ClientSecretJwt);
        }
        Err(format!(
            "the server lists no way to send a client secret (client_secret_basic or \
             client_secret_post, client_secret_jwt) among its token endpoint auth methods: {}",
            methods.join(", ")
        ))
    }
}

impl Discovery {
    /// The metadata read (again, when need be), then one token request to
    /// the endpoint it names (the [`TokenSource`](crate::TokenSource) of a
    /// layer with an issuer).
    pub(crate) fn fetch(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            let request = self.token_request().await?;
            let outcome = request.fetch().await;
            if let Err(e) = &outcome {
                // The endpoint may have moved: read the metadata again next
                // time.
                if e.status()
                    .is_some_and(crate::endpoint::answer::not_a_token_endpoint)
                {
                    *self.lock() = None;
                    *self.shared() = None;
                }
            }
            outcome
        })
    }
}

impl fmt::Debug for Discovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discovery")
            .field("issuer", &self.issuer)
            .field("client_secret", &"[redacted]")
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_well_known_urls_follow_rfc_8414_and_openid_connect() {
        let urls = |issuer: &str| metadata_urls(&issuer.parse().unwrap()).map(|u| u.to_string());
        assert_eq!(
            urls("https://idp.example.com/tenant/1"),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/tenant/1",
                "https://idp.example.com/tenant/1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            urls("https://idp.example.com"),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server",
                "https://idp.example.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn basic_is_chosen_unless_only_a_body_secret_is_listed() {
        let s = |v: &[&str]| v.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        assert_eq!(choose(&[], true), Ok(ClientAuth::Basic));
        assert_eq!(
            choose(&s(&["client_secret_post", "client_secret_basic"]), true),
            Ok(ClientAuth::Basic)
        );
        assert_eq!(
            choose(&s(&["private_key_jwt", "client_secret_post"]), true),
            Ok(ClientAuth::FormBody)
        );
        let e = choose(&s(&["private_key_jwt", "tls_client_auth"]), true).unwrap_err();
        assert!(e.contains("private_key_jwt, tls_client_auth"), "{e}");
    }

    #[test]
    fn a_certificate_without_a_secret_chooses_tls_client_auth() {
        let s = |v: &[&str]| v.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        for listed in [
            &[][..],
            &["self_signed_tls_client_auth"],
            &["client_secret_basic", "tls_client_auth"],
        ] {
            assert_eq!(
                choose(&s(listed), false),
                Ok(ClientAuth::TlsClientAuth),
                "{listed:?}"
            );
        }
        let e = choose(&s(&["client_secret_basic"]), false).unwrap_err();
        assert!(e.contains("neither tls_client_auth"), "{e}");
    }

    #[test]
    fn client_secret_jwt_is_chosen_when_it_is_the_only_secret_method() {
        let methods = vec!["private_key_jwt".to_owned(), "client_secret_jwt".to_owned()];
        assert_eq!(choose(&methods, true), Ok(ClientAuth::ClientSecretJwt));
    }
}
