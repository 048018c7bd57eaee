//! How a token request travels: reqwest, or any Tower service (it knows
//! nothing of the token request itself).
//!
//! The built-in transport is reqwest (feature `reqwest`, on by default), set
//! up so that it never follows a redirect: a redirect must not carry the
//! client secret to another host. Any `tower::Service` for HTTP can carry it
//! instead ([`TowerTransport`]).

#[cfg(feature = "reqwest")]
pub(crate) mod settings;
#[cfg(feature = "reqwest")]
pub(crate) use self::{reqwest_transport::ReqwestTransport, settings::TransportSettings};

use std::future::poll_fn;
use std::marker::PhantomData;
use std::sync::Mutex;

use bytes::{Buf, Bytes};
use http_body::Body;
use tower_service::Service;

use crate::error::{TokenError, TokenErrorKind};
use crate::support::boxed::{BoxError, BoxFuture};

/// The largest token response body read. A larger one is refused, so a broken
/// proxy cannot make the client buffer megabytes.
pub(crate) const MAX_RESPONSE_BODY: usize = 64 * 1024;

/// Sends one token request and reads its whole response, at most `max_body`
/// bytes of body.
pub(crate) trait Transport: Send + Sync + 'static {
    fn send(
        &self,
        request: http::Request<Bytes>,
        max_body: usize,
    ) -> BoxFuture<'_, Result<http::Response<Bytes>, TokenError>>;
}

/// The token request carried by any HTTP `tower::Service`: a hyper-util
/// client with the user's TLS, a stack with its own retries. The service
/// must not follow redirects (hyper-util's client does not).
pub(crate) struct TowerTransport<S, ReqB, ResB> {
    service: Mutex<S>,
    _bodies: PhantomData<fn(ReqB) -> ResB>,
}

impl<S, ReqB, ResB> TowerTransport<S, ReqB, ResB> {
    pub(crate) fn new(service: S) -> Self {
        TowerTransport {
            service: Mutex::new(service),
            _bodies: PhantomData,
        }
    }
}

impl<S, ReqB, ResB> Transport for TowerTransport<S, ReqB, ResB>
where
    S: Service<http::Request<ReqB>, Response = http::Response<ResB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    ReqB: From<Bytes> + Send + 'static,
    ResB: Body + Send + 'static,
    ResB::Data: Send,
    ResB::Error: Into<BoxError>,
{
    fn send(
        &self,
        request: http::Request<Bytes>,
        max_body: usize,
    ) -> BoxFuture<'_, Result<http::Response<Bytes>, TokenError>> {
        let mut service = self
            .service
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let failed = |e: BoxError| TokenError::custom(TokenErrorKind::Transport, e);
        Box::pin(async move {
            poll_fn(|cx| service.poll_ready(cx))
                .await
                .map_err(|e| failed(e.into()))?;
            let response = service
                .call(request.map(ReqB::from))
                .await
                .map_err(|e| failed(e.into()))?;
            let (parts, body) = response.into_parts();
            // A declared length over the cap is refused before reading.
            if body.size_hint().lower() > max_body as u64 {
                return Err(too_large(max_body));
            }
            let mut body = std::pin::pin!(body);
            let mut bytes = Vec::new();
            while let Some(frame) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                let frame = frame.map_err(|e| failed(e.into()))?;
                if let Ok(mut data) = frame.into_data() {
                    if bytes.len() + data.remaining() > max_body {
                        return Err(too_large(max_body));
                    }
                    while data.has_remaining() {
                        let chunk = data.chunk();
                        bytes.extend_from_slice(chunk);
                        let n = chunk.len();
                        data.advance(n);
                    }
                }
            }
            Ok(http::Response::from_parts(parts, Bytes::from(bytes)))
        })
    }
}

fn too_large(max: usize) -> TokenError {
    TokenError::new(TokenErrorKind::InvalidResponse)
        .with_message(format!("response body is larger than {max} bytes"))
}

#[cfg(feature = "reqwest")]
pub(crate) mod reqwest_transport {
    use std::time::Duration;

    use super::*;
    use crate::error::{ConfigError, ConfigErrorKind};

    /// The token request carried by a reqwest client that follows no
    /// redirect.
    pub(crate) struct ReqwestTransport {
        client: reqwest::Client,
    }

    impl ReqwestTransport {
        pub(crate) fn new(
            connect_timeout: Duration,
            tls: &crate::transport::TransportSettings,
        ) -> Result<Self, ConfigError> {
            let builder = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(connect_timeout);
            let client = tls.apply(builder)?.build().map_err(|e| {
                // The cause (a key that does not match its certificate,
                // say) is further down the chain; it never holds key
                // material.
                let chain = chain(&e);
                if tls.presents_certificate() {
                    ConfigError::new(
                        ConfigErrorKind::InvalidKey,
                        format!(
                            "the client certificate and key cannot be used (does the key \
                             belong to the certificate?): {chain}"
                        ),
                    )
                } else {
                    ConfigError::new(
                        ConfigErrorKind::InvalidSetting,
                        format!("the HTTP client for token requests cannot be built: {chain}"),
                    )
                }
            })?;
            Ok(ReqwestTransport { client })
        }
    }

    fn transport_error(e: reqwest::Error) -> TokenError {
        // reqwest's error text may include the URL, never the body; the URL
        // holds no credential (the builder refuses user information in it).
        let kind = if e.is_timeout() {
            TokenErrorKind::Timeout
        } else {
            TokenErrorKind::Transport
        };
        let e = e.without_url();
        // reqwest's own text is vague ("error sending request"); the cause,
        // such as "Connection refused", is further down the chain.
        TokenError::new(kind).with_message(chain(&e)).with_source(e)
    }

    /// An error's text followed by its causes', joined with `: `.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut chain = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            chain.push_str(": ");
            chain.push_str(&c.to_string());
            cause = c.source();
        }
        chain
    }

    impl Transport for ReqwestTransport {
        fn send(
            &self,
            request: http::Request<Bytes>,
            max_body: usize,
        ) -> BoxFuture<'_, Result<http::Response<Bytes>, TokenError>> {
            Box::pin(async move {
                let request = reqwest::Request::try_from(request).map_err(transport_error)?;
                let mut response = self
                    .client
                    .execute(request)
                    .await
                    .map_err(transport_error)?;
                if response
                    .content_length()
                    .is_some_and(|n| n > max_body as u64)
                {
                    return Err(too_large(max_body));
                }
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
                    if body.len() + chunk.len() > max_body {
                        return Err(too_large(max_body));
                    }
                    body.extend_from_slice(&chunk);
                }
                let mut out = http::Response::new(Bytes::from(body));
                *out.status_mut() = response.status();
                *out.headers_mut() = std::mem::take(response.headers_mut());
                Ok(out)
            })
        }
    }
}
