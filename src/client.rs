//! The client-credentials token request of the specification, and the
//! [`TokenSource`] seam the cache fetches through.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method, Uri};

use crate::error::TokenError;
use crate::token::{status_error, AccessToken};
use crate::transport::{retry_after, BoxFuture, Transport, MAX_RESPONSE_BODY};

/// Anything that can produce an access token. The cache calls it once per
/// fetch, never concurrently with itself for one cache.
pub(crate) trait TokenSource: Send + Sync + 'static {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>>;

    /// The secret to scrub from any error text, if the source has one.
    fn secret(&self) -> Option<&str> {
        None
    }
}

/// The specification's token request (section 4):
/// `POST {url}` with `Content-Type: application/x-www-form-urlencoded` and the
/// body `grant_type=client_credentials&client_id=<id>&client_secret=<secret>`,
/// values as they are, no query parameters added.
pub(crate) struct ClientCredentials {
    url: Uri,
    client_id: String,
    client_secret: String,
    body: Bytes,
    transport: Arc<dyn Transport>,
}

impl ClientCredentials {
    /// `client_id` and `client_secret` must already be checked to be carried
    /// unencoded (no `&`, whitespace or control characters).
    pub(crate) fn new(
        url: Uri,
        client_id: String,
        client_secret: String,
        transport: Arc<dyn Transport>,
    ) -> Self {
        let body = Bytes::from(format!(
            "grant_type=client_credentials&client_id={client_id}&client_secret={client_secret}"
        ));
        ClientCredentials {
            url,
            client_id,
            client_secret,
            body,
            transport,
        }
    }

    fn request(&self) -> http::Request<Bytes> {
        let mut request = http::Request::new(self.body.clone());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.url.clone();
        let headers = request.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        request
    }
}

impl TokenSource for ClientCredentials {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            let response = self
                .transport
                .send(self.request(), MAX_RESPONSE_BODY)
                .await?;
            let status = response.status();
            if status.is_success() {
                AccessToken::from_json(response.body())
            } else {
                Err(status_error(
                    status,
                    response.body(),
                    retry_after(response.headers()),
                    &self.client_secret,
                ))
            }
        })
    }

    fn secret(&self) -> Option<&str> {
        Some(&self.client_secret)
    }
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .finish()
    }
}
