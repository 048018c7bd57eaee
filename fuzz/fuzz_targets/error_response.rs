//! Any status, `Retry-After` and body as a token endpoint's error answer: a
//! status `TokenError` with bounded text, never a panic.
#![no_main]

use http::{HeaderMap, HeaderValue, StatusCode};
use libfuzzer_sys::fuzz_target;
use tower_oauth::{TokenError, TokenErrorKind};

fuzz_target!(|input: (u16, &[u8], &[u8])| {
    let (status, retry_after, body) = input;
    let Ok(status) = StatusCode::from_u16(300 + status % 300) else {
        return;
    };
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_bytes(retry_after) {
        headers.insert(http::header::RETRY_AFTER, v);
    }
    let e = TokenError::from_response(status, &headers, body);
    assert_eq!(e.kind(), TokenErrorKind::Status);
    assert!(e.error_code().map_or(0, str::len) <= 203);
    assert!(e.error_description().map_or(0, str::len) <= 203);
    let _ = (e.to_string(), format!("{e:?}"), e.is_retryable());
});
