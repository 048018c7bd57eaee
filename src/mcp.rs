//! [`OAuthMcpClient`]: the layer's tokens for MCP clients built on
//! [rmcp](https://docs.rs/rmcp), the official Rust MCP SDK, with feature `mcp`.
//!
//! It is an rmcp `StreamableHttpClient` around a `reqwest::Client`. It puts the
//! layer's token, and its DPoP proof, on every call to the MCP server. When the
//! server refuses the token, it drops it and tries once more with a new one.
//!
//! It is built for
//! [`protected_resource`](crate::OAuthLayerBuilder::protected_resource). An MCP
//! server publishes its RFC 9728 protected-resource metadata, so the layer
//! needs only the server's URL and the client's credential. Each call goes
//! through the same code as a request through the Tower layer, in
//! `service::authorize`. It gets the token of the layer's cache, with its
//! single flight, renewal ahead and back-off. It gets the header as configured.
//! Its answer is read.
//!
//! ```no_run
//! use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
//! use rmcp::transport::StreamableHttpClientTransport;
//! use tower_oauth::{OAuthLayer, client_auth::{Algorithm, ClientAuth, SigningKey}};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let key = SigningKey::from_pem(std::fs::read("client-key.pem")?, Algorithm::Es256)?;
//! let server = "https://mcp.example.com/mcp";
//! let oauth = OAuthLayer::builder()
//!     .protected_resource(server)
//!     .client_id("reporting-agent")
//!     .client_auth(ClientAuth::PrivateKeyJwt(key))
//!     .build()?;
//! let transport = StreamableHttpClientTransport::with_client(
//!     oauth.mcp_client(reqwest::Client::new()),
//!     StreamableHttpClientTransportConfig::with_uri(server),
//! );
//! // rmcp::ServiceExt::serve(client_handler, transport).await?, then call tools.
//! # let _ = transport;
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures_core::stream::BoxStream;
use http::header::WWW_AUTHENTICATE;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use crate::error::TokenError;
use crate::layer::OAuthLayer;
use crate::service::other_clients::{after_waiting, at_hand, ready_to_send};
use crate::slots::routes::destination_of;

/// An rmcp `StreamableHttpClient` that carries the layer's tokens, with feature
/// `mcp`. See the [module](self).
///
/// - Every call carries the layer's token as the layer puts it on a request.
///   The calls are the `POST` of a message, the `GET` of an event stream, and
///   the `DELETE` of a session. The token goes in `Authorization: Bearer`. With
///   [DPoP](crate::OAuthLayerBuilder::dpop), it goes in `Authorization: DPoP`,
///   with a proof for that call's method and URL. The `auth_header` rmcp
///   passes, from its transport's own `auth_header` setting, is not used: the
///   layer's token replaces it.
/// - A call the server answers with a `401` and a challenge drops the refused
///   token. Rmcp reports it as `StreamableHttpError::AuthRequired`. The drop is
///   rate-limited, as the layer's own. The call is made once more with a new
///   token. A second refusal is returned.
/// - A `401` that asks for a DPoP nonce (`use_dpop_nonce`, RFC 9449 section 9)
///   is made once more with the server's nonce in a fresh proof. Rmcp passes on
///   the challenge but not the `DPoP-Nonce` header beside it, so the client
///   asks the server for it: the same method and URL with the token, a fresh
///   proof and an empty JSON body, which the server refuses before it reads.
/// - A call the server answers with `403 insufficient_scope` is made once more
///   with a token that has the scopes asked for. Rmcp reports it as
///   `StreamableHttpError::InsufficientScope`. The layer must be allowed to add
///   the scopes, with
///   [`step_up_scopes`](crate::OAuthLayerBuilder::step_up_scopes). Otherwise
///   the error is returned.
/// - A token that cannot be had fails the call with `StreamableHttpError::Io`.
///   Its inner error is the [`TokenError`]: reach it with `io::Error::get_ref`
///   and `downcast_ref` (from rmcp's `ClientInitializeError::TransportError`
///   or `ServiceError::TransportSend`, down the sources of its transport
///   error). rmcp has no error of its own for an approval still to come, so
///   it is this one. A backchannel login that does not wait
///   ([`Backchannel::wait(false)`](crate::login::Backchannel::wait)) fails the
///   call so, with [`ApprovalPending`](crate::TokenErrorKind::ApprovalPending):
///   the agent tells its user what the person was asked (the message), and
///   makes the call again after the error's `retry_after`.
/// - The `*_with_max_sse_event_size` and `*_with_response_limits` methods go to
///   the `reqwest::Client`'s own, so rmcp's limits hold.
#[derive(Clone, Debug)]
pub struct OAuthMcpClient {
    layer: OAuthLayer,
    client: reqwest::Client,
}

impl OAuthMcpClient {
    /// An MCP client that sends through `client` with the tokens of
    /// `layer`.
    pub fn new(layer: OAuthLayer, client: reqwest::Client) -> Self {
        OAuthMcpClient { layer, client }
    }

    /// The layer whose tokens it carries.
    pub fn layer(&self) -> &OAuthLayer {
        &self.layer
    }

    /// Makes `call` with the headers to send: the caller's, and the token's
    /// with its proof. Makes it once more with a new token if the server
    /// refused the first.
    async fn authorized<T, F, Fut>(
        &self,
        method: Method,
        uri: &str,
        custom: HashMap<HeaderName, HeaderValue>,
        call: F,
    ) -> Result<T, StreamableHttpError<reqwest::Error>>
    where
        F: Fn(HashMap<HeaderName, HeaderValue>) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<reqwest::Error>>>,
    {
        let uri: http::Uri = uri.parse().map_err(|e| {
            io_error(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the MCP server's URL `{}` cannot carry a token: {e}",
                    crate::error::clip(uri)
                ),
            ))
        })?;
        // The MCP server's own token when it is one of the layer's
        // protected resources, else the default token.
        let cache = match self.layer.cache_at(|| destination_of(&uri)) {
            Some(routed) => routed.map_err(token_error)?,
            None => Arc::clone(self.layer.default_cache()),
        };
        let mut first = true;
        loop {
            let mut req = http::Request::new(());
            *req.method_mut() = method.clone();
            *req.uri_mut() = uri.clone();
            let step = match at_hand(&cache, &mut req) {
                Some(step) => step,
                None => Box::pin(after_waiting(&cache, &mut req))
                    .await
                    .map_err(token_error)?,
            };
            let sent = ready_to_send(step, &mut req).await.map_err(token_error)?;
            let mut headers = custom.clone();
            for (name, value) in req.headers() {
                headers.insert(name.clone(), value.clone());
            }
            let (status, challenge, error) = match call(headers).await {
                Err(StreamableHttpError::AuthRequired(refused)) => (
                    StatusCode::UNAUTHORIZED,
                    refused.www_authenticate_header.clone(),
                    StreamableHttpError::AuthRequired(refused),
                ),
                Err(StreamableHttpError::InsufficientScope(asked)) => (
                    StatusCode::FORBIDDEN,
                    asked.www_authenticate_header.clone(),
                    StreamableHttpError::InsufficientScope(asked),
                ),
                other => return other,
            };
            let mut answer = http::Response::new(());
            *answer.status_mut() = status;
            if let Ok(challenge) = HeaderValue::from_str(&challenge) {
                answer.headers_mut().insert(WWW_AUTHENTICATE, challenge);
            }
            // Rmcp passes on the challenge, not the `DPoP-Nonce` beside it
            // (RFC 9449 section 9): asked once more, for the nonce alone.
            let use_nonce = crate::dpop::nonces::dpop_error(answer.headers());
            if first && use_nonce.as_deref() == Some("use_dpop_nonce") {
                if let Some(nonce) = self.nonce(&cache, &method, &uri, &custom).await {
                    answer
                        .headers_mut()
                        .insert(crate::dpop::nonces::DPOP_NONCE, nonce);
                }
            }
            let answered = sent.answered(&mut answer);
            if !(first && answered.asks_again()) {
                return Err(error);
            }
            tracing::debug!(?answered, "calling the MCP server once more");
            crate::telemetry::unauthorized_retry();
            first = false;
        }
    }
}

impl OAuthMcpClient {
    /// The `DPoP-Nonce` the MCP server sends with its refusal of a request
    /// to `uri`: asked with the token and a fresh proof without a nonce, and
    /// an empty JSON body, which the server refuses before it reads it.
    /// `None` when it sends none, or does not answer within 10 seconds.
    async fn nonce(
        &self,
        cache: &Arc<crate::cache::TokenCache>,
        method: &Method,
        uri: &http::Uri,
        custom: &HashMap<HeaderName, HeaderValue>,
    ) -> Option<HeaderValue> {
        let mut req = http::Request::new(());
        *req.method_mut() = method.clone();
        *req.uri_mut() = uri.clone();
        let step = at_hand(cache, &mut req)?;
        ready_to_send(step, &mut req).await.ok()?;
        let mut request = self.client.request(method.clone(), uri.to_string());
        for (name, value) in custom.iter().chain(req.headers()) {
            request = request.header(name, value);
        }
        if method == Method::POST {
            request = request
                .header(http::header::CONTENT_TYPE, "application/json")
                .body("{}");
        }
        let response = tokio::time::timeout(std::time::Duration::from_secs(10), request.send())
            .await
            .ok()?
            .ok()?;
        (response.status() == StatusCode::UNAUTHORIZED)
            .then(|| {
                response
                    .headers()
                    .get(crate::dpop::nonces::DPOP_NONCE)
                    .cloned()
            })
            .flatten()
    }
}

impl OAuthLayer {
    /// An rmcp `StreamableHttpClient` that sends through `client` with this
    /// layer's tokens, with feature `mcp`. See [`OAuthMcpClient`].
    pub fn mcp_client(&self, client: reqwest::Client) -> OAuthMcpClient {
        OAuthMcpClient::new(self.clone(), client)
    }
}

/// A token error as rmcp's transport error.
fn token_error(error: TokenError) -> StreamableHttpError<reqwest::Error> {
    io_error(std::io::Error::other(error))
}

fn io_error(error: std::io::Error) -> StreamableHttpError<reqwest::Error> {
    StreamableHttpError::Io(error)
}

type Events = BoxStream<'static, Result<Sse, SseError>>;
type Outcome<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl StreamableHttpClient for OAuthMcpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Outcome<StreamableHttpPostResponse> {
        self.authorized(Method::POST, &uri, custom_headers, |headers| {
            self.client.post_message(
                Arc::clone(&uri),
                message.clone(),
                session_id.clone(),
                None,
                headers,
            )
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Outcome<StreamableHttpPostResponse> {
        self.authorized(Method::POST, &uri, custom_headers, |headers| {
            self.client.post_message_with_max_sse_event_size(
                Arc::clone(&uri),
                message.clone(),
                session_id.clone(),
                None,
                headers,
                max_sse_event_size,
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Outcome<StreamableHttpPostResponse> {
        self.authorized(Method::POST, &uri, custom_headers, |headers| {
            self.client.post_message_with_response_limits(
                Arc::clone(&uri),
                message.clone(),
                session_id.clone(),
                None,
                headers,
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Outcome<()> {
        self.authorized(Method::DELETE, &uri, custom_headers, |headers| {
            self.client
                .delete_session(Arc::clone(&uri), Arc::clone(&session_id), None, headers)
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Outcome<Events> {
        self.authorized(Method::GET, &uri, custom_headers, |headers| {
            self.client.get_stream(
                Arc::clone(&uri),
                session_id.clone(),
                last_event_id.clone(),
                None,
                headers,
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Outcome<Events> {
        self.authorized(Method::GET, &uri, custom_headers, |headers| {
            self.client.get_stream_with_max_sse_event_size(
                Arc::clone(&uri),
                session_id.clone(),
                last_event_id.clone(),
                None,
                headers,
                max_sse_event_size,
            )
        })
        .await
    }
}
