//! What a store keeps, as text: a token as JSON (every field the endpoint
//! sent), and a failure as JSON for the other replicas, each with the wall
//! clock instant it stops counting (`until_ms`, inside the seal: someone who
//! can write to the store can stretch its time-to-live, not the value's own
//! end); sealing is `seal`'s.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{TokenError, TokenErrorKind};
use crate::token::AccessToken;

/// The member holding the instant, in milliseconds since the Unix epoch,
/// from which a stored value no longer counts.
const UNTIL: &str = "until_ms";

/// Milliseconds since the Unix epoch, `after` from now.
pub(crate) fn until_ms(after: Duration) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.saturating_add(after).as_millis()).unwrap_or(u64::MAX)
}

/// How much of `ttl` (what the store says is left) the stored value's own
/// `until_ms` allows: the shorter of the two; `None` when the value has no
/// `until_ms` or it has passed.
pub(crate) fn time_left(json: &[u8], ttl: Duration) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    let until = value.get(UNTIL)?.as_u64()?;
    let now = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_millis(),
    )
    .ok()?;
    let own = Duration::from_millis(until.checked_sub(now).filter(|left| *left > 0)?);
    Some(own.min(ttl))
}

/// A failed fetch as JSON, for the other replicas for `hold`: its kind,
/// status, the endpoint's code and text (already scrubbed of the secret),
/// message, and when the hold ends.
pub(crate) fn encode_failure(e: &TokenError, hold: Duration) -> String {
    let mut map = serde_json::Map::new();
    map.insert(UNTIL.into(), until_ms(hold).into());
    map.insert("kind".into(), e.kind().code().into());
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
    let kind = TokenErrorKind::from_code(&text("kind")?).unwrap_or(TokenErrorKind::Runtime);
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

/// The token as JSON in the token endpoint's shape (read back with
/// [`AccessToken::from_json`]), usable for `usable_for` more; `expires_in` is
/// the lifetime first announced.
pub(crate) fn token_json(token: &AccessToken, usable_for: Duration) -> String {
    let mut map = serde_json::Map::new();
    map.insert(UNTIL.into(), until_ms(usable_for).into());
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
    if let Some(details) = token.authorization_details() {
        map.insert("authorization_details".into(), details.clone());
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
                 "issued_at":"1416157639014","client_id":"cid","unknown":"x",
                 "authorization_details":[{"type":"payment_initiation","amount":"25"}]}"#,
        )
        .unwrap();
        let json = token_json(&t, Duration::from_secs(60));
        assert_eq!(AccessToken::from_json(json.as_bytes()).unwrap(), t);
        // Its own end bounds whatever time-to-live the store reports.
        let left = time_left(json.as_bytes(), Duration::from_secs(3600)).unwrap();
        assert!(left <= Duration::from_secs(60) && left > Duration::from_secs(50));
        assert_eq!(
            time_left(json.as_bytes(), Duration::from_secs(5)),
            Some(Duration::from_secs(5))
        );
        let past = token_json(&t, Duration::ZERO);
        assert_eq!(time_left(past.as_bytes(), Duration::from_secs(5)), None);
        assert_eq!(
            time_left(br#"{"access_token":"a"}"#, Duration::from_secs(5)),
            None
        );
    }
}
