//! Property tests of the parsers: whatever the token endpoint sends, the
//! result is a valid token or a `TokenError`, never a panic. The fuzz
//! targets in `fuzz/` explore the same functions without a case limit.

use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode};
use proptest::prelude::*;
use serde_json::{Map, Value};
use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenErrorKind, TokenSource};

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,40}".prop_map(Value::String),
        "[0-9]{1,25}".prop_map(Value::String),
        "-?[0-9]{1,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const FIELDS: &[&str] = &[
    "access_token",
    "token_type",
    "expires_in",
    "scope",
    "application_name",
    "developer.email",
    "issued_at",
    "client_id",
    "error",
    "error_description",
    "ErrorCode",
    "Error",
    "fault",
];

/// A JSON object made of the fields that matter, with any values.
fn token_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..8)
        .prop_map(|pairs| pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

fn check_token(result: Result<AccessToken, TokenError>) {
    match result {
        Ok(token) => {
            assert!(!token.expose_token().is_empty());
            assert!(token.expose_token().bytes().all(|b| b.is_ascii_graphic()));
            assert!(token.lifetime() > Duration::ZERO);
            assert!(token.lifetime() <= Duration::from_secs(86_400));
        }
        Err(e) => {
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
            let _ = (e.to_string(), format!("{e:?}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_make_a_token_or_an_error(body in prop::collection::vec(any::<u8>(), 0..256)) {
        check_token(AccessToken::from_json(&body));
    }

    #[test]
    fn any_object_makes_a_token_or_an_error(object in token_object()) {
        let body = serde_json::to_vec(&Value::Object(object.clone())).unwrap();
        let result = AccessToken::from_json(&body);
        // A token that can go into a header as it is (visible ASCII, at most
        // 16 KiB), with a `token_type` (if a string or number) of one such
        // word and no bad lifetime, is always accepted; nothing else.
        let sendable = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
        let has_token = matches!(object.get("access_token"),
            Some(Value::String(s)) if sendable(s) && s.len() <= 16 * 1024);
        let good_type = match object.get("token_type") {
            Some(Value::String(s)) => sendable(s) && s.len() <= 128,
            Some(Value::Number(n)) => n.to_string().len() <= 128,
            _ => true,
        };
        let has_token = has_token && good_type;
        let bad_lifetime = match object.get("expires_in") {
            Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f <= 0.0),
            Some(Value::String(s)) => s.trim().parse::<f64>().is_ok_and(|f| f <= 0.0),
            _ => false,
        };
        prop_assert_eq!(result.is_ok(), has_token && !bad_lifetime);
        check_token(result);
    }

    #[test]
    fn any_error_answer_makes_a_status_error(
        status in 300u16..600,
        object in token_object(),
        raw in prop::collection::vec(any::<u8>(), 0..128),
        use_raw in any::<bool>(),
        retry_after in ".{0,30}",
    ) {
        let body = if use_raw { raw } else { serde_json::to_vec(&Value::Object(object)).unwrap() };
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&retry_after) {
            headers.insert(http::header::RETRY_AFTER, v);
        }
        let e = TokenError::from_response(StatusCode::from_u16(status).unwrap(), &headers, &body);
        prop_assert_eq!(e.kind(), TokenErrorKind::Status);
        prop_assert_eq!(e.status().map(|s| s.as_u16()), Some(status));
        // Server text is bounded, whatever was sent.
        prop_assert!(e.error_code().map_or(0, str::len) <= 203);
        prop_assert!(e.error_description().map_or(0, str::len) <= 203);
        let _ = (e.to_string(), format!("{e:?}"), e.is_retryable());
    }
}

struct Fixed(String);

impl TokenSource for Fixed {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        let token = AccessToken::new(self.0.clone());
        Box::pin(async move { Ok(token) })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Through the whole layer: any token string is presented only if it
    /// makes a valid header, and otherwise refused as an invalid response.
    #[test]
    fn any_token_string_is_a_valid_header_or_refused(token in ".{1,40}") {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let oauth = OAuthLayer::builder().token_source(Fixed(token.clone())).build().unwrap();
        match rt.block_on(oauth.token()) {
            Ok(t) => {
                let header = format!("Bearer {}", t.expose_token());
                prop_assert!(HeaderValue::from_str(&header).is_ok());
                prop_assert!(token.bytes().all(|b| b.is_ascii_graphic()));
            }
            Err(e) => {
                prop_assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
                prop_assert!(!token.bytes().all(|b| b.is_ascii_graphic()));
                // The refused token is not echoed (long enough not to match by chance).
                if token.trim().len() >= 8 {
                    prop_assert!(!e.to_string().contains(&token));
                }
            }
        }
    }
}
