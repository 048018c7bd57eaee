//! How the token request travels.
//!
//! The built-in transport is reqwest (feature `reqwest`, on by default), set
//! up so that it never follows a redirect: a redirect must not carry the
//! client secret to another host.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

use crate::error::TokenError;

/// A boxed, sendable future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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

/// Parses `Retry-After`: delay-seconds or an HTTP date.
pub(crate) fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(feature = "reqwest")]
pub(crate) use self::reqwest_transport::ReqwestTransport;

#[cfg(feature = "reqwest")]
mod reqwest_transport {
    use super::*;
    use crate::error::{ConfigError, ConfigErrorKind, TokenErrorKind};

    /// The token request carried by a reqwest client that follows no
    /// redirect.
    pub(crate) struct ReqwestTransport {
        client: reqwest::Client,
    }

    impl ReqwestTransport {
        pub(crate) fn new(connect_timeout: Duration) -> Result<Self, ConfigError> {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(connect_timeout)
                .build()
                .map_err(|e| {
                    ConfigError::new(
                        ConfigErrorKind::InvalidSetting,
                        format!("the HTTP client for token requests cannot be built: {e}"),
                    )
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
        TokenError::new(kind).with_source(e.without_url())
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

    fn too_large(max: usize) -> TokenError {
        TokenError::new(TokenErrorKind::InvalidResponse)
            .with_message(format!("response body is larger than {max} bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_date() {
        let mut h = http::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        let later = std::time::SystemTime::now() + Duration::from_secs(120);
        h.insert(
            http::header::RETRY_AFTER,
            httpdate::fmt_http_date(later).parse().unwrap(),
        );
        let d = retry_after(&h).unwrap();
        assert!(d > Duration::from_secs(110) && d <= Duration::from_secs(120));
        h.insert(
            http::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert(http::header::RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
