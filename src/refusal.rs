//! Whether an API's answer refuses the token it was sent: HTTP 401, or gRPC
//! `UNAUTHENTICATED`.

use http::{HeaderName, Response, StatusCode};

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// Whether the API refused the credential: HTTP 401, or a gRPC
/// trailers-only response with `grpc-status: 16` (UNAUTHENTICATED), which
/// gRPC servers send with HTTP 200.
#[inline]
pub(crate) fn is_unauthorized<B>(response: &Response<B>) -> bool {
    match response.status() {
        StatusCode::UNAUTHORIZED => true,
        // A gRPC answer always has headers; an empty map needs no lookup.
        StatusCode::OK => {
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
            is_unauthorized(&r.body(()).unwrap())
        };
        assert!(with(401, None));
        assert!(with(200, Some("16")));
        assert!(!with(200, Some("0")));
        assert!(!with(200, Some("7"))); // PERMISSION_DENIED: a new token will not help
        assert!(!with(200, None));
        assert!(!with(403, None));
        assert!(!with(500, Some("16")));
    }
}
