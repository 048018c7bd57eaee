//! [`AccessToken`]: the token endpoint's answer, read leniently.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use serde_json::{Map, Value};

use crate::error::{TokenError, TokenErrorKind};

/// The longest lifetime taken from `expires_in`. Longer claims are cut to this,
/// so an absurd value renews daily rather than never.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The lifetime the specification gives a token whose response has no usable
/// `expires_in`: 60 minutes.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(60 * 60);

/// An access token and what the token endpoint said about it (the access
/// token response of the specification, section 2).
///
/// Only `access_token` is required of a response; every other field is
/// optional, numbers may come as strings, and unknown fields are ignored.
///
/// `Debug` never shows the token itself; reach it with
/// [`expose_token`](AccessToken::expose_token).
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::AccessToken;
///
/// let body = br#"{"access_token":"abc","token_type":"BearerToken","expires_in":"3599",
///                 "developer.email":"dev@example.com","issued_at":"1582220284531"}"#;
/// let token = AccessToken::from_json(body).unwrap();
/// assert_eq!(token.expose_token(), "abc");
/// assert_eq!(token.expires_in(), Some(Duration::from_secs(3599)));
/// assert_eq!(token.developer_email(), Some("dev@example.com"));
/// assert!(!format!("{token:?}").contains("abc"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken {
    access_token: String,
    token_type: Option<String>,
    expires_in: Option<Duration>,
    scope: Option<String>,
    application_name: Option<String>,
    developer_email: Option<String>,
    issued_at: Option<String>,
    client_id: Option<String>,
}

impl AccessToken {
    /// A token with no metadata; its lifetime is the specification's
    /// 60 minutes unless [`with_expires_in`](AccessToken::with_expires_in)
    /// says otherwise.
    pub fn new(access_token: impl Into<String>) -> Self {
        AccessToken {
            access_token: access_token.into(),
            token_type: None,
            expires_in: None,
            scope: None,
            application_name: None,
            developer_email: None,
            issued_at: None,
            client_id: None,
        }
    }

    /// Sets the lifetime the issuer announced.
    #[must_use]
    pub fn with_expires_in(mut self, expires_in: Duration) -> Self {
        self.expires_in = Some(expires_in);
        self
    }

    /// Reads a token endpoint's success body.
    ///
    /// # Errors
    ///
    /// A [`TokenError`] of kind [`InvalidResponse`](TokenErrorKind::InvalidResponse)
    /// when the body is not a JSON object, has no non-empty `access_token`
    /// string, or announces a lifetime of zero or less.
    pub fn from_json(body: &[u8]) -> Result<Self, TokenError> {
        let invalid = |m: &str| TokenError::new(TokenErrorKind::InvalidResponse).with_message(m);
        let value: Value = serde_json::from_slice(body).map_err(|e| {
            invalid(&format!(
                "body is not JSON ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        let Value::Object(map) = value else {
            return Err(invalid("body is not a JSON object"));
        };
        let access_token = match map.get("access_token") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) => return Err(invalid("`access_token` is empty")),
            Some(_) => return Err(invalid("`access_token` is not a string")),
            None => return Err(invalid("no `access_token` in the response")),
        };
        let expires_in = match map.get("expires_in") {
            None | Some(Value::Null) => None,
            Some(v) => match seconds(v) {
                Some(s) if s > 0.0 => Some(
                    Duration::try_from_secs_f64(s)
                        .unwrap_or(MAX_LIFETIME)
                        .min(MAX_LIFETIME),
                ),
                Some(_) => return Err(invalid("`expires_in` is zero or negative")),
                None => {
                    tracing::warn!(
                        "token response has an unreadable `expires_in`; assuming 60 minutes"
                    );
                    None
                }
            },
        };
        Ok(AccessToken {
            access_token,
            token_type: text(&map, "token_type"),
            expires_in,
            scope: text(&map, "scope"),
            application_name: text(&map, "application_name"),
            developer_email: text(&map, "developer.email"),
            issued_at: text(&map, "issued_at"),
            client_id: text(&map, "client_id"),
        })
    }

    /// The token itself: a bearer credential. Handle it as a secret.
    pub fn expose_token(&self) -> &str {
        &self.access_token
    }

    /// `token_type` as sent (`bearer`, `Bearer`, `BearerToken`, ...).
    pub fn token_type(&self) -> Option<&str> {
        self.token_type.as_deref()
    }

    /// The lifetime the issuer announced (`expires_in`), cut to 24 hours.
    /// `None` when the response had none or an unreadable one; the layer then
    /// uses the specification's 60 minutes.
    pub fn expires_in(&self) -> Option<Duration> {
        self.expires_in
    }

    /// The lifetime the layer uses: [`expires_in`](AccessToken::expires_in),
    /// or 60 minutes.
    pub fn lifetime(&self) -> Duration {
        self.expires_in.unwrap_or(DEFAULT_LIFETIME)
    }

    /// `scope`; may be empty.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// `application_name`: the name of the client application.
    pub fn application_name(&self) -> Option<&str> {
        self.application_name.as_deref()
    }

    /// `developer.email`: the e-mail address of the application's developer.
    pub fn developer_email(&self) -> Option<&str> {
        self.developer_email.as_deref()
    }

    /// `issued_at` as sent: milliseconds since the Unix epoch, as digits.
    ///
    /// Informational only: expiry is reckoned on the local monotonic clock
    /// from the moment the request was sent, never from this value.
    pub fn issued_at(&self) -> Option<&str> {
        self.issued_at.as_deref()
    }

    /// [`issued_at`](AccessToken::issued_at) as a time, when it is a number of
    /// milliseconds.
    pub fn issued_at_time(&self) -> Option<SystemTime> {
        let ms: u64 = self.issued_at.as_deref()?.trim().parse().ok()?;
        UNIX_EPOCH.checked_add(Duration::from_millis(ms))
    }

    /// `client_id`: the identifier of the calling client.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }
}

impl AccessToken {
    /// The token as JSON in the token endpoint's shape, for a shared store;
    /// `expires_in` is the lifetime first announced.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn to_json(&self) -> String {
        let mut map = Map::new();
        map.insert(
            "access_token".into(),
            Value::from(self.access_token.as_str()),
        );
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                map.insert(k.into(), Value::from(v.as_str()));
            }
        };
        put("token_type", &self.token_type);
        put("scope", &self.scope);
        put("application_name", &self.application_name);
        put("developer.email", &self.developer_email);
        put("issued_at", &self.issued_at);
        put("client_id", &self.client_id);
        if let Some(e) = self.expires_in {
            map.insert("expires_in".into(), Value::from(e.as_secs_f64()));
        }
        Value::Object(map).to_string()
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("access_token", &"[redacted]")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .field("application_name", &self.application_name)
            .field("developer_email", &self.developer_email)
            .field("issued_at", &self.issued_at)
            .field("client_id", &self.client_id)
            .finish()
    }
}

/// A JSON value as a number of seconds: a number, or a string holding one.
fn seconds(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

/// A field as text, whether the endpoint sent a string or a number.
fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Reads an error body in any of the shapes in use, returning (code, text):
/// `{"error", "error_description"}` (RFC 6749), `{"ErrorCode", "Error"}`, and
/// `{"fault": {"faultstring", "detail": {"errorcode"}}}`. Anything else
/// (HTML, XML, empty) gives neither.
pub(crate) fn parse_error_body(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else {
        return (None, None);
    };
    if let Some(Value::Object(fault)) = map.get("fault") {
        let code = fault
            .get("detail")
            .and_then(Value::as_object)
            .and_then(|d| text(d, "errorcode"));
        return (code, text(fault, "faultstring"));
    }
    if map.contains_key("ErrorCode") || map.contains_key("Error") {
        return (text(&map, "ErrorCode"), text(&map, "Error"));
    }
    (text(&map, "error"), text(&map, "error_description"))
}

/// Builds the error for a non-success answer from the token endpoint.
///
/// Any occurrence of `secret` in the server's text is replaced before the
/// text is cut to length, so not even part of it survives.
pub(crate) fn status_error(
    status: StatusCode,
    body: &[u8],
    retry_after: Option<Duration>,
    secret: &str,
) -> TokenError {
    let scrub = |t: String| {
        if secret.is_empty() {
            t
        } else {
            t.replace(secret, "[redacted]")
        }
    };
    let (code, description) = parse_error_body(body);
    let (code, description) = (code.map(scrub), description.map(scrub));
    let err =
        TokenError::new(TokenErrorKind::Status).with_status(status, code, description, retry_after);
    if status.is_redirection() {
        err.with_message("redirects are not followed for token requests")
    } else {
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_specification_shape() {
        let t = AccessToken::from_json(
            br#"{"access_token":"MTQ0NjJkZmQ5OTM2NDE1ZTZjNGZmZjI3","token_type":"bearer","expires_in":3599,
 "scope":"","application_name":"app_name","developer.email":"dev@example.com",
 "issued_at":"1582220284531","client_id":"IwOGYzYTlmM2YxOTQ5MGE3YmNmMDFkNTVk"}"#,
        )
        .unwrap();
        assert_eq!(t.expose_token(), "MTQ0NjJkZmQ5OTM2NDE1ZTZjNGZmZjI3");
        assert_eq!(t.token_type(), Some("bearer"));
        assert_eq!(t.expires_in(), Some(Duration::from_secs(3599)));
        assert_eq!(t.scope(), Some(""));
        assert_eq!(t.application_name(), Some("app_name"));
        assert_eq!(t.developer_email(), Some("dev@example.com"));
        assert_eq!(t.client_id(), Some("IwOGYzYTlmM2YxOTQ5MGE3YmNmMDFkNTVk"));
        assert_eq!(
            t.issued_at_time(),
            Some(UNIX_EPOCH + Duration::from_millis(1_582_220_284_531))
        );
    }

    #[test]
    fn reads_the_gateway_default_shape() {
        let t = AccessToken::from_json(
            br#"{"issued_at":"1416157639014","application_name":"e49ef95f-6d32","scope":"","status":"approved",
 "api_product_list":"[Test App product]","expires_in":"3599","developer.email":"testdev@example.com",
 "organization_id":"0","token_type":"BearerToken","client_id":"kWocGgKENrdWRT0jq4l0F0ACnPAQsD3",
 "access_token":"WNSnwquKualbgnGeAK0EXGqzO3A","organization_name":"example",
 "refresh_token_expires_in":"0","refresh_count":"0"}"#,
        )
        .unwrap();
        assert_eq!(t.expose_token(), "WNSnwquKualbgnGeAK0EXGqzO3A");
        assert_eq!(t.token_type(), Some("BearerToken"));
        assert_eq!(t.lifetime(), Duration::from_secs(3599));
    }

    #[test]
    fn expires_in_missing_null_or_unreadable_means_sixty_minutes() {
        for body in [
            r#"{"access_token":"a"}"#,
            r#"{"access_token":"a","expires_in":null}"#,
            r#"{"access_token":"a","expires_in":"soon"}"#,
            r#"{"access_token":"a","expires_in":[1]}"#,
        ] {
            let t = AccessToken::from_json(body.as_bytes()).unwrap();
            assert_eq!(t.expires_in(), None, "{body}");
            assert_eq!(t.lifetime(), DEFAULT_LIFETIME);
        }
    }

    #[test]
    fn expires_in_large_is_capped_and_nonpositive_refused() {
        let t = AccessToken::from_json(br#"{"access_token":"a","expires_in":1e300}"#).unwrap();
        assert_eq!(t.lifetime(), MAX_LIFETIME);
        let t = AccessToken::from_json(br#"{"access_token":"a","expires_in":"86400"}"#).unwrap();
        assert_eq!(t.lifetime(), MAX_LIFETIME);
        for body in [
            r#"{"access_token":"a","expires_in":0}"#,
            r#"{"access_token":"a","expires_in":"-5"}"#,
        ] {
            let e = AccessToken::from_json(body.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
        }
    }

    #[test]
    fn only_a_nonempty_access_token_is_required() {
        for body in [
            "",
            "<html>bad gateway</html>",
            "[]",
            r#"{"token_type":"bearer"}"#,
            r#"{"access_token":""}"#,
            r#"{"access_token":42}"#,
            r#"{"access_token":"abc""#,
        ] {
            let e = AccessToken::from_json(body.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{body}");
        }
    }

    #[test]
    fn error_bodies_in_three_shapes() {
        assert_eq!(
            parse_error_body(br#"{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}"#),
            (
                Some("invalid_client".into()),
                Some("ClientId is Invalid".into())
            )
        );
        assert_eq!(
            parse_error_body(
                br#"{"fault":{"faultstring":"Invalid client identifier","detail":{"errorcode":"oauth.v2.InvalidClientIdentifier"}}}"#
            ),
            (
                Some("oauth.v2.InvalidClientIdentifier".into()),
                Some("Invalid client identifier".into())
            )
        );
        assert_eq!(
            parse_error_body(
                br#"{"error":"invalid_client","error_description":"Client authentication failed"}"#
            ),
            (
                Some("invalid_client".into()),
                Some("Client authentication failed".into())
            )
        );
        assert_eq!(parse_error_body(b"<html></html>"), (None, None));
    }

    #[test]
    fn status_error_scrubs_before_cutting() {
        let max = crate::error::MAX_SERVER_TEXT;
        let body = format!(
            r#"{{"error":"invalid_client","error_description":"{}s3cr3t-value"}}"#,
            "y".repeat(max - 3)
        );
        let e = status_error(
            StatusCode::UNAUTHORIZED,
            body.as_bytes(),
            None,
            "s3cr3t-value",
        );
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("s3c"), "{shown}");
        assert_eq!(e.error_code(), Some("invalid_client"));
    }

    #[test]
    fn redirects_are_named() {
        let e = status_error(StatusCode::FOUND, b"", None, "");
        assert_eq!(e.kind(), TokenErrorKind::Status);
        assert!(e.to_string().contains("redirects are not followed"), "{e}");
    }

    #[test]
    fn to_json_round_trips() {
        let t = AccessToken::from_json(
            br#"{"access_token":"abc","token_type":"BearerToken","expires_in":"1799",
                 "scope":"","application_name":"app","developer.email":"d@example.com",
                 "issued_at":"1416157639014","client_id":"cid","unknown":"x"}"#,
        )
        .unwrap();
        assert_eq!(AccessToken::from_json(t.to_json().as_bytes()).unwrap(), t);
    }

    #[test]
    fn debug_redacts_the_token() {
        let t = AccessToken::new("very-secret-token");
        assert!(!format!("{t:?}").contains("very-secret-token"));
    }
}
