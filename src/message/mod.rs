//! What the layer reads and writes of a request ([`Outgoing`]) and of the
//! API's answer ([`Answer`]), whatever their types: `http`'s on the Tower
//! path, reqwest's in the middleware; and whether an answer refuses the
//! token it was sent: HTTP 401, or gRPC `UNAUTHENTICATED`; and the API's
//! `WWW-Authenticate` challenges (`challenge`).

pub(crate) mod challenge;

use std::borrow::Cow;

use http::{HeaderMap, HeaderName, Method, Request, Response, StatusCode, Uri};

/// A request the layer puts a token (and a DPoP proof) on.
pub(crate) trait Outgoing {
    /// Its headers.
    fn headers(&self) -> &HeaderMap;
    /// Its headers, to put the token and proof in.
    fn headers_mut(&mut self) -> &mut HeaderMap;
    /// Its method (a DPoP proof's `htm`).
    fn method(&self) -> &Method;
    /// Its URI (a DPoP proof's `htu`); `None` when it cannot be read as one.
    fn uri(&self) -> Option<Cow<'_, Uri>>;
}

/// An API's answer, as far as the layer reads it.
pub(crate) trait Answer {
    /// Its status.
    fn status(&self) -> StatusCode;
    /// Its headers (a challenge, a DPoP nonce, a gRPC status).
    fn headers(&self) -> &HeaderMap;

    /// Marks a refusal that sending again cannot help: the next request
    /// would carry the very token refused (its renewal is rate-limited).
    /// [`RetryUnauthorized`](crate::RetryUnauthorized) reads the mark.
    fn mark_no_new_token(&mut self) {}

    /// Marks a `403 insufficient_scope` after which a token with more scope
    /// comes: sending again can help.
    /// [`RetryUnauthorized`](crate::RetryUnauthorized) reads the mark.
    fn mark_stepped_up(&mut self) {}
}

/// The mark of [`Answer::mark_no_new_token`] on an `http` response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoNewToken;

impl<B> Outgoing for Request<B> {
    #[inline]
    fn headers(&self) -> &HeaderMap {
        Request::headers(self)
    }

    #[inline]
    fn headers_mut(&mut self) -> &mut HeaderMap {
        Request::headers_mut(self)
    }

    #[inline]
    fn method(&self) -> &Method {
        Request::method(self)
    }

    #[inline]
    fn uri(&self) -> Option<Cow<'_, Uri>> {
        Some(Cow::Borrowed(Request::uri(self)))
    }
}

impl<B> Answer for Response<B> {
    #[inline]
    fn status(&self) -> StatusCode {
        Response::status(self)
    }

    #[inline]
    fn headers(&self) -> &HeaderMap {
        Response::headers(self)
    }

    fn mark_no_new_token(&mut self) {
        self.extensions_mut().insert(NoNewToken);
    }

    fn mark_stepped_up(&mut self) {
        self.extensions_mut().insert(SteppedUp);
    }
}

/// The mark of [`Answer::mark_stepped_up`] on an `http` response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SteppedUp;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// Whether a request of `method` may be a gRPC call: every gRPC call is a
/// `POST`. Only such a request's answer is read for a gRPC refusal.
#[inline]
pub(crate) fn may_be_grpc(method: &Method) -> bool {
    method == Method::POST
}

/// Whether the API refused the credential: HTTP 401, or, for a request
/// that [may be a gRPC call](may_be_grpc), a gRPC trailers-only response
/// with `grpc-status: 16` (UNAUTHENTICATED), which gRPC servers send with
/// HTTP 200. Other requests' answers need no header lookup.
#[inline]
pub(crate) fn is_unauthorized(response: &impl Answer, grpc: bool) -> bool {
    match response.status() {
        StatusCode::UNAUTHORIZED => true,
        // A gRPC answer always has headers; an empty map needs no lookup.
        StatusCode::OK if grpc => {
            let headers = response.headers();
            !headers.is_empty()
                && headers
                    .get(GRPC_STATUS)
                    .is_some_and(|status| status == "16")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_is_401_or_grpc_unauthenticated() {
        let with = |status: u16, grpc: Option<&'static str>| {
            let mut r = Response::builder().status(status);
            if let Some(g) = grpc {
                r = r.header("grpc-status", g);
            }
            is_unauthorized(&r.body(()).unwrap(), true)
        };
        assert!(with(401, None));
        assert!(with(200, Some("16")));
        assert!(!with(200, Some("0")));
        assert!(!with(200, Some("7"))); // PERMISSION_DENIED: a new token will not help
        assert!(!with(200, None));
        assert!(!with(403, None));
        assert!(!with(500, Some("16")));
        // Only a POST may be a gRPC call: another request's 200 is not read.
        assert!(may_be_grpc(&Method::POST) && !may_be_grpc(&Method::GET));
        let get = Response::builder()
            .header("grpc-status", "16")
            .body(())
            .unwrap();
        assert!(!is_unauthorized(&get, false));
        let refused = Response::builder().status(401).body(()).unwrap();
        assert!(is_unauthorized(&refused, false));
    }
}
