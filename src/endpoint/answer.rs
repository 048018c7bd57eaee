//! Reading the token endpoint's answer: the status, an error body in any of
//! its three shapes, `Retry-After`, and the token JSON. The one place that
//! turns bytes from the network into an [`AccessToken`] or a [`TokenError`].

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Map, Value};

use crate::endpoint::redact::Redactor;
use crate::error::{TokenError, TokenErrorKind};
use crate::token::details::AUTHORIZATION_DETAILS;
use crate::token::{AccessToken, MAX_LIFETIME, MAX_TOKEN_LEN};

/// The token endpoint's whole answer, read: the token on success, else the
/// error it describes. Every form of the secret `redactor` knows is
/// scrubbed from any text the server sent.
pub(crate) fn read(
    response: &http::Response<Bytes>,
    redactor: &Redactor,
) -> Result<AccessToken, TokenError> {
    let status = response.status();
    if status.is_success() {
        let mut token =
            AccessToken::from_json(response.body()).map_err(TokenError::marked_unreadable)?;
        let server_now = response
            .headers()
            .get(http::header::DATE)
            .and_then(|d| httpdate::parse_http_date(d.to_str().ok()?).ok())
            .unwrap_or_else(SystemTime::now);
        match exp_lifetime(&token.access_token, server_now) {
            Exp::Left(left) => token.exp_lifetime = Some(left),
            Exp::Past(ago) => {
                return Err(
                    TokenError::new(TokenErrorKind::InvalidResponse).with_message(format!(
                        "the access token is a JWT whose `exp` is already past ({}s ago by the \
                         server's clock): an expired token is never sent",
                        ago.as_secs()
                    )),
                )
            }
            Exp::Unknown => {}
        }
        Ok(token)
    } else {
        Err(status_error(
            status,
            response.body(),
            retry_after(response.headers()),
            redactor,
        ))
    }
}

impl AccessToken {
    /// Reads a token endpoint's success body.
    ///
    /// # Errors
    ///
    /// A [`TokenError`] of kind [`InvalidResponse`](TokenErrorKind::InvalidResponse)
    /// when the body is not a JSON object; has no non-empty `access_token`
    /// string, or one that cannot go into a header as it is (anything but
    /// visible ASCII) or is longer than 16 KiB; has a `token_type` that is
    /// not a single word of visible ASCII (of at most 128 bytes); or
    /// announces a lifetime of zero or less (or one that rounds to zero
    /// nanoseconds). A token is checked in full here, before a layer caches
    /// or a store shares it.
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
        let token_type = text(&map, "token_type");
        check_token(&access_token, token_type.as_deref())?;
        let expires_in = match map.get("expires_in") {
            None | Some(Value::Null) => None,
            Some(v) => match lifetime(v) {
                Ok(Some(lifetime)) => Some(lifetime),
                Ok(None) => {
                    tracing::warn!(
                        "token response has an unreadable `expires_in`; assuming 60 minutes"
                    );
                    None
                }
                Err(why) => return Err(invalid(&format!("`expires_in` {why}"))),
            },
        };
        let authorization_details = match map.get(AUTHORIZATION_DETAILS) {
            None | Some(Value::Null) => None,
            Some(Value::Array(none)) if none.is_empty() => None,
            Some(details) => {
                crate::token::details::canonical(details)
                    .map_err(|why| invalid(&format!("`authorization_details` {why}")))?;
                Some(Arc::new(details.clone()))
            }
        };
        // Advice only: an unusable value is ignored.
        let refresh_in = map
            .get("refresh_in")
            .and_then(|v| lifetime(v).ok().flatten());
        Ok(AccessToken {
            access_token,
            token_type,
            expires_in,
            scope: text(&map, "scope"),
            application_name: text(&map, "application_name"),
            developer_email: text(&map, "developer.email"),
            issued_at: text(&map, "issued_at"),
            client_id: text(&map, "client_id"),
            exp_lifetime: None,
            refresh_in,
            sent_at: None,
            authorization_details,
        })
    }
}

/// Checks what of a token goes into a request or a store: `access_token`
/// fits a header as it is and is at most [`MAX_TOKEN_LEN`] bytes;
/// `token_type`, if any, is one word of visible ASCII. For every token,
/// whatever its source, before it is cached or shared.
pub(crate) fn check_token(access_token: &str, token_type: Option<&str>) -> Result<(), TokenError> {
    let invalid = |m: String| TokenError::new(TokenErrorKind::InvalidResponse).with_message(m);
    if access_token.is_empty() {
        return Err(invalid("`access_token` is empty".into()));
    }
    if access_token.len() > MAX_TOKEN_LEN {
        return Err(invalid(format!(
            "`access_token` is {} bytes long, over the {MAX_TOKEN_LEN} bytes a header can be \
             relied on to carry",
            access_token.len()
        )));
    }
    if let Some(at) = access_token.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(invalid(format!(
            "`access_token` holds a character that cannot be sent in a header (byte {at} is \
             not visible ASCII)"
        )));
    }
    if let Some(kind) = token_type {
        if kind.is_empty() || kind.len() > 128 || !kind.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(
                "`token_type` is not a single word of visible ASCII (at most 128 bytes)".into(),
            ));
        }
    }
    Ok(())
}

impl TokenError {
    /// The error for a token endpoint's non-success answer, read the way the
    /// layer reads it: the error code and text from any of the three body
    /// shapes in use (`{"error", "error_description"}`, `{"ErrorCode",
    /// "Error"}`, `{"fault": {"faultstring", "detail": {"errorcode"}}}`),
    /// anything else (HTML, XML, empty) giving neither, and `Retry-After` from
    /// the headers. For [`TokenSource`](crate::TokenSource) implementations
    /// that talk to endpoints of the same family. Never panics, whatever the
    /// bytes.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use tower_oauth::{TokenError, TokenErrorKind};
    ///
    /// let body = br#"{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}"#;
    /// let e = TokenError::from_response(StatusCode::UNAUTHORIZED, &HeaderMap::new(), body);
    /// assert_eq!(e.kind(), TokenErrorKind::Status);
    /// assert_eq!(e.error_code(), Some("invalid_client"));
    /// ```
    pub fn from_response(status: StatusCode, headers: &http::HeaderMap, body: &[u8]) -> Self {
        status_error(status, body, retry_after(headers), &Redactor::default())
    }
}

/// Whether an answer with `status` shows that the URL is not a token
/// endpoint (any more): nothing there (404), a resource that takes no
/// `POST` (405), or a redirect, which token requests never follow.
pub(crate) fn not_a_token_endpoint(status: StatusCode) -> bool {
    status == StatusCode::NOT_FOUND
        || status == StatusCode::METHOD_NOT_ALLOWED
        || status.is_redirection()
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

/// A duration in seconds, as `expires_in` and `refresh_in` send it:
/// `Ok(None)` when it is unreadable, an error when it is no duration at all
/// (zero, negative, or so small it rounds to zero); capped at 24 hours.
fn lifetime(v: &Value) -> Result<Option<Duration>, &'static str> {
    match seconds(v) {
        // A positive number too small for a nanosecond is no lifetime
        // either: a token that is never usable.
        Some(s) if s > 0.0 => match Duration::try_from_secs_f64(s) {
            Ok(d) if d.is_zero() => Err("rounds to zero"),
            Ok(d) => Ok(Some(d.min(MAX_LIFETIME))),
            Err(_) => Ok(Some(MAX_LIFETIME)),
        },
        Some(_) => Err("is zero or negative"),
        None => Ok(None),
    }
}

/// What a token's own `exp` says, if it is a JWT.
#[derive(Debug, PartialEq)]
enum Exp {
    /// Not a JWT, or no readable `exp`.
    Unknown,
    /// This much of it is left.
    Left(Duration),
    /// It ran out this long ago.
    Past(Duration),
}

/// The lifetime left to a JWT access token by its `exp` claim, reckoned
/// from `now` on the server's clock (its `Date` header, else ours).
fn exp_lifetime(token: &str, now: SystemTime) -> Exp {
    let Some(exp) = crate::support::encoding::jwt_claims(token)
        .ok()
        .and_then(|claims| claims.get("exp")?.as_f64())
        .filter(|e| e.is_finite() && *e > 0.0)
    else {
        return Exp::Unknown;
    };
    let Ok(now) = now.duration_since(UNIX_EPOCH) else {
        return Exp::Unknown;
    };
    // `Date` has whole seconds: the server's clock may be up to one ahead.
    let left = exp - now.as_secs_f64() - 1.0;
    if left > 0.0 {
        Exp::Left(Duration::from_secs_f64(
            left.min(MAX_LIFETIME.as_secs_f64()),
        ))
    } else {
        Exp::Past(Duration::try_from_secs_f64(-left).unwrap_or(Duration::MAX))
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
/// Every form of the secret `redactor` knows is replaced in the server's
/// text before the text is cut to length, so not even part of it survives.
pub(crate) fn status_error(
    status: StatusCode,
    body: &[u8],
    retry_after: Option<Duration>,
    redactor: &Redactor,
) -> TokenError {
    let scrub = |t: String| redactor.scrub(t);
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
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::policy::DEFAULT_LIFETIME;

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
            r#"{"access_token":"a","expires_in":1e-300}"#,
            r#"{"access_token":"a","expires_in":"0.0000000001"}"#,
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
            &Redactor::new("id", "s3cr3t-value"),
        );
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("s3c"), "{shown}");
        assert_eq!(e.error_code(), Some("invalid_client"));
    }

    #[test]
    fn redirects_are_named() {
        let e = status_error(StatusCode::FOUND, b"", None, &Redactor::default());
        assert_eq!(e.kind(), TokenErrorKind::Status);
        assert!(e.to_string().contains("redirects are not followed"), "{e}");
    }

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

    #[test]
    fn an_answer_is_a_token_or_an_error() {
        let ok = http::Response::new(Bytes::from_static(br#"{"access_token":"abc"}"#));
        assert_eq!(
            read(&ok, &Redactor::default()).unwrap().expose_token(),
            "abc"
        );
        let mut refused = http::Response::new(Bytes::from_static(
            br#"{"error":"slow_down","error_description":"not with s3cr3t"}"#,
        ));
        *refused.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        refused
            .headers_mut()
            .insert(http::header::RETRY_AFTER, "3".parse().unwrap());
        let e = read(&refused, &Redactor::new("id", "s3cr3t")).unwrap_err();
        assert_eq!(e.status(), Some(StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(e.error_description(), Some("not with [redacted]"));
    }

    /// A JWT with these claims (unsigned: the client never verifies).
    fn jwt(claims: &str) -> String {
        use base64::Engine;
        let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!(
            "{}.{}.c2ln",
            enc(r#"{"alg":"RS256","typ":"at+jwt"}"#),
            enc(claims)
        )
    }

    fn answer(body: &str, date: Option<SystemTime>) -> http::Response<Bytes> {
        let mut r = http::Response::new(Bytes::from(body.to_owned()));
        if let Some(date) = date {
            r.headers_mut().insert(
                http::header::DATE,
                httpdate::fmt_http_date(date).parse().unwrap(),
            );
        }
        r
    }

    #[test]
    fn a_jwt_without_expires_in_lives_until_its_exp_on_the_servers_clock() {
        // The server's clock is an hour behind ours; its token lives 10 min.
        let server_now = SystemTime::now() - Duration::from_secs(3600);
        let exp = server_now.duration_since(UNIX_EPOCH).unwrap().as_secs() + 600;
        let token = jwt(&format!(r#"{{"sub":"svc","exp":{exp}}}"#));
        let body = format!(r#"{{"access_token":"{token}","token_type":"Bearer"}}"#);
        let t = read(&answer(&body, Some(server_now)), &Redactor::default()).unwrap();
        assert_eq!(t.expires_in(), None);
        let lifetime = t.lifetime().as_secs_f64();
        assert!((598.0..=600.0).contains(&lifetime), "{lifetime}");
        // With `expires_in` too, the earlier of the two wins.
        let body = format!(r#"{{"access_token":"{token}","expires_in":300}}"#);
        let t = read(&answer(&body, Some(server_now)), &Redactor::default()).unwrap();
        assert_eq!(t.lifetime(), Duration::from_secs(300));
        let body = format!(r#"{{"access_token":"{token}","expires_in":3600}}"#);
        let t = read(&answer(&body, Some(server_now)), &Redactor::default()).unwrap();
        let lifetime = t.lifetime().as_secs_f64();
        assert!((598.0..=600.0).contains(&lifetime), "{lifetime}");
    }

    #[test]
    fn a_jwt_already_past_its_exp_is_an_error_not_a_token() {
        let now = SystemTime::now();
        let an_hour_ago = now.duration_since(UNIX_EPOCH).unwrap().as_secs() - 3600;
        let token = jwt(&format!(r#"{{"sub":"svc","exp":{an_hour_ago}}}"#));
        for body in [
            format!(r#"{{"access_token":"{token}"}}"#),
            format!(r#"{{"access_token":"{token}","expires_in":3600}}"#),
        ] {
            let e = read(&answer(&body, Some(now)), &Redactor::default()).unwrap_err();
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
            assert!(e.to_string().contains("already past"), "{e}");
            assert!(!e.to_string().contains(&token));
        }
    }

    #[test]
    fn tokens_that_are_not_jwts_or_lack_exp_keep_sixty_minutes() {
        for token in [
            "opaque".to_owned(),
            "a.b.c".to_owned(),
            jwt(r#"{"sub":"svc"}"#),
            jwt(r#"{"exp":"tomorrow"}"#),
            jwt(r#"{"exp":-5}"#),
        ] {
            let body = format!(r#"{{"access_token":"{token}"}}"#);
            let t = read(&answer(&body, None), &Redactor::default()).unwrap();
            assert_eq!(t.lifetime(), DEFAULT_LIFETIME, "{token}");
        }
        // An `exp` years away is cut to a day.
        let body = format!(r#"{{"access_token":"{}"}}"#, jwt(r#"{"exp":99999999999}"#));
        let t = read(&answer(&body, None), &Redactor::default()).unwrap();
        assert_eq!(t.lifetime(), MAX_LIFETIME);
    }

    #[test]
    fn refresh_in_is_read_and_an_unusable_one_ignored() {
        let t = AccessToken::from_json(
            br#"{"access_token":"a","expires_in":3600,"refresh_in":"1800"}"#,
        )
        .unwrap();
        assert_eq!(t.refresh_in(), Some(Duration::from_secs(1800)));
        for body in [
            r#"{"access_token":"a","refresh_in":-1}"#,
            r#"{"access_token":"a","refresh_in":"soon"}"#,
        ] {
            assert_eq!(
                AccessToken::from_json(body.as_bytes())
                    .unwrap()
                    .refresh_in(),
                None
            );
        }
    }
}
