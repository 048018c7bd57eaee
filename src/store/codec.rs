//! What a store keeps, as text: a token as JSON (every field the endpoint
//! sent), and a failure as JSON for the other replicas; sealing is
//! `seal`'s.

use std::time::Duration;

use crate::error::{TokenError, TokenErrorKind};
use crate::token::AccessToken;

/// A failed fetch as JSON, for the other replicas: its kind, status, the
/// endpoint's code and text (already scrubbed of the secret) and message.
pub(crate) fn encode_failure(e: &TokenError) -> String {
    let mut map = serde_json::Map::new();
    map.insert("kind".into(), kind_name(e.kind()).into());
    if let Some(status) = e.status() {
        map.insert("status".into(), status.as_u16().into());
    }
    if let Some(code) = e.error_code() {
        map.insert("error".into(), code.into());
    }
    if let Some(text) = e.error_description() {
        map.insert("error_description".into(), text.into());
    }
    if let Some(detail) = e.detail() {
        map.insert("message".into(), detail.into());
    }
    serde_json::Value::Object(map).to_string()
}

/// The failure another replica reported; `left` is how long the fleet still
/// holds back. Anything unreadable counts as no failure.
pub(crate) fn decode_failure(json: &str, left: Duration) -> Option<TokenError> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    let text = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let kind = match text("kind")?.as_str() {
        "transport" => TokenErrorKind::Transport,
        "timeout" => TokenErrorKind::Timeout,
        "status" => TokenErrorKind::Status,
        "invalid_response" => TokenErrorKind::InvalidResponse,
        "panic" => TokenErrorKind::Panic,
        "signing" => TokenErrorKind::Signing,
        "invalid_request" => TokenErrorKind::InvalidRequest,
        _ => TokenErrorKind::Runtime,
    };
    let status = value
        .get("status")
        .and_then(|s| s.as_u64())
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| http::StatusCode::from_u16(s).ok());
    let by_another = "reported by another replica sharing this token";
    let error = TokenError::new(kind).with_message(match text("message") {
        Some(detail) => format!("{detail} ({by_another})"),
        None => by_another.to_owned(),
    });
    let error = match (kind, status) {
        (TokenErrorKind::Status, Some(status)) => {
            error.with_status(status, text("error"), text("error_description"), Some(left))
        }
        _ => error.with_retry_after(left),
    };
    Some(error.reported_by_another())
}

fn kind_name(kind: TokenErrorKind) -> &'static str {
    match kind {
        TokenErrorKind::Transport => "transport",
        TokenErrorKind::Timeout => "timeout",
        TokenErrorKind::Status => "status",
        TokenErrorKind::InvalidResponse => "invalid_response",
        TokenErrorKind::Runtime => "runtime",
        TokenErrorKind::Panic => "panic",
        TokenErrorKind::Signing => "signing",
        TokenErrorKind::InvalidRequest => "invalid_request",
    }
}

/// The token as JSON in the token endpoint's shape (read back with
/// [`AccessToken::from_json`]); `expires_in` is the lifetime first announced.
pub(crate) fn token_json(token: &AccessToken) -> String {
    let mut map = serde_json::Map::new();
    map.insert("access_token".into(), token.expose_token().into());
    let fields = [
        ("token_type", token.token_type()),
        ("scope", token.scope()),
        ("application_name", token.application_name()),
        ("developer.email", token.developer_email()),
        ("issued_at", token.issued_at()),
        ("client_id", token.client_id()),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            map.insert(name.into(), value.into());
        }
    }
    // The lifetime the layer uses, whatever its source (`expires_in`, a
    // JWT's `exp`, or the default), so that every replica reckons the same.
    map.insert("expires_in".into(), token.lifetime().as_secs_f64().into());
    if let Some(r) = token.refresh_in() {
        map.insert("refresh_in".into(), r.as_secs_f64().into());
    }
    serde_json::Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_token_reads_back_the_same() {
        let t = AccessToken::from_json(
            br#"{"access_token":"abc","token_type":"BearerToken","expires_in":"1799",
                 "scope":"","application_name":"app","developer.email":"d@example.com",
                 "issued_at":"1416157639014","client_id":"cid","unknown":"x"}"#,
        )
        .unwrap();
        assert_eq!(
            AccessToken::from_json(token_json(&t).as_bytes()).unwrap(),
            t
        );
    }
}
