//! The device authorization grant (RFC 8628): the codes asked for, checked,
//! shown through the prompt, then the token endpoint asked at the server's
//! interval until the person approves, refuses, or the code runs out (polls a
//! backchannel login makes the same way).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::authorization::check_endpoint;
use super::{failed, Answered, DevicePrompt, Prompt, ServerLogin};
use crate::endpoint::ServerMetadata;
use crate::error::{clip, TokenError, TokenErrorKind};

/// The device code grant's `grant_type` (RFC 8628 section 3.4).
pub(crate) const DEVICE_CODE_GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// The interval between polls when the server names none (section 3.2).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// What `slow_down` adds to the interval (section 3.5).
pub(super) const SLOW_DOWN: Duration = Duration::from_secs(5);

/// The longest interval taken from a server.
pub(super) const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// The longest user code and URI taken from a server.
const MAX_TEXT: usize = 2048;

/// A device login at `server`: the codes, the prompt, the polls until
/// `deadline` or the code's end.
pub(super) async fn log_in(
    login: &ServerLogin<'_>,
    server: &ServerMetadata,
    prompt: &Prompt,
    scope: Option<&str>,
    deadline: Instant,
) -> Result<Answered, TokenError> {
    let Some(endpoint) = server.device_authorization_endpoint.as_deref() else {
        return Err(failed(format!(
            "the metadata of `{}` names no device_authorization_endpoint, which the device \
             grant needs",
            server.issuer
        )));
    };
    let url = crate::endpoint::checked_url(
        "device_authorization_endpoint",
        endpoint,
        login.request.spec.allow_insecure_http,
    )
    .map_err(|e| failed(e.to_string()))?;
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if let Some(scope) = scope {
        pairs.push(("scope", scope));
    }
    pairs.extend(login.resources().into_iter().map(|r| ("resource", r)));
    if let Some(details) = login.request.target.authorization_details() {
        pairs.push(("authorization_details", details));
    }
    let answer = login.client_post(&url, &pairs).await?;
    let codes = Codes::read(&answer)?;
    let expires_at = (Instant::now() + codes.prompt.expires_in).min(deadline);
    let shown = DevicePrompt {
        expires_in: expires_at.saturating_duration_since(Instant::now()),
        ..codes.prompt.clone()
    };
    let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prompt(&shown)));
    if called.is_err() {
        return Err(failed("the device login's prompt panicked"));
    }
    let polls = Polls {
        grant_type: DEVICE_CODE_GRANT_TYPE,
        parameter: ("device_code", &codes.device_code),
        what: ("device login", "device code"),
        interval: codes.interval,
        expires_at,
        pinged: None,
    };
    poll(login, polls).await
}

/// How a login the person approves elsewhere asks the token endpoint: the
/// device grant (RFC 8628 section 3.5) and a backchannel login (CIBA Core
/// 1.0 section 7.3), whose answers while the person decides are the same.
pub(super) struct Polls<'a> {
    pub(super) grant_type: &'a str,
    /// The code that names the request, and its parameter's name.
    pub(super) parameter: (&'a str, &'a str),
    /// The login and its code, in messages.
    pub(super) what: (&'a str, &'a str),
    pub(super) interval: Duration,
    pub(super) expires_at: Instant,
    /// In a backchannel login's ping mode: what the server's notification
    /// wakes. The token endpoint is asked when it comes, and once a
    /// minute meanwhile (a notification may be lost).
    pub(super) pinged: Option<Arc<Notify>>,
}

/// How often a login that waits for the server's notification asks all the
/// same.
const UNPINGED_POLL: Duration = Duration::from_secs(60);

/// The token endpoint asked every interval (5 s more at each `slow_down`),
/// until the person approves, refuses (`access_denied`), or the request
/// runs out (`expired_token`, or its end here); each end a
/// [`LoginFailed`](TokenErrorKind::LoginFailed) with that code.
pub(super) async fn poll(
    login: &ServerLogin<'_>,
    polls: Polls<'_>,
) -> Result<Answered, TokenError> {
    let (name, code) = polls.parameter;
    let (what, code_name) = polls.what;
    let mut interval = polls.interval;
    loop {
        match &polls.pinged {
            None => {
                if Instant::now() + interval >= polls.expires_at {
                    return Err(ran_out(code_name, ""));
                }
                tokio::time::sleep(interval).await;
            }
            Some(pinged) => {
                let until = (Instant::now() + interval.max(UNPINGED_POLL)).min(polls.expires_at);
                let woken = tokio::time::timeout_at(until, pinged.notified()).await;
                if woken.is_err() && Instant::now() >= polls.expires_at {
                    return Err(ran_out(code_name, ""));
                }
            }
        }
        let polled = login
            .login_token(polls.grant_type, &[(name, code)], &[code])
            .await;
        let error = match polled {
            Ok(answered) => return Ok(answered),
            Err(e) => e,
        };
        match read_poll(error, polls.what) {
            Polled::Pending => {}
            Polled::SlowDown => interval = (interval + SLOW_DOWN).min(MAX_INTERVAL),
            Polled::Failed(e) => {
                tracing::warn!(error = %e, login = what, "a poll for a login failed; polling on");
            }
            Polled::End(e) => return Err(e),
        }
    }
}

/// What a poll's refusal says (RFC 8628 section 3.5, CIBA Core 1.0 section
/// 11): ask again, slower, or not at all.
pub(super) enum Polled {
    /// `authorization_pending`: the person has not decided yet.
    Pending,
    /// `slow_down`: 5 s more between polls.
    SlowDown,
    /// The network or the server failing for a moment: ask again.
    Failed(TokenError),
    /// The login's end: refused, run out, or an error polls cannot mend.
    End(TokenError),
}

/// Reads a poll's `error`, for the login and its code named `what`.
pub(super) fn read_poll(error: TokenError, (what, code_name): (&str, &str)) -> Polled {
    match error.error_code() {
        Some("authorization_pending") => Polled::Pending,
        Some("slow_down") => Polled::SlowDown,
        Some("access_denied") => Polled::End(
            failed(format!("the person refused the {what} (access_denied)"))
                .with_error_code("access_denied"),
        ),
        Some("expired_token") => Polled::End(ran_out(code_name, " (expired_token)")),
        _ if error.is_retryable() => Polled::Failed(error),
        _ => Polled::End(error),
    }
}

/// The error of a login whose code (`code_name`) ran out, `how` said.
pub(super) fn ran_out(code_name: &str, how: &str) -> TokenError {
    failed(format!(
        "the {code_name} ran out before the person approved the login{how}; run the login again"
    ))
    .with_error_code("expired_token")
}

/// What the device authorization endpoint answered (section 3.2).
struct Codes {
    device_code: String,
    prompt: DevicePrompt,
    interval: Duration,
}

impl Codes {
    /// The answer, checked: a device code, a user code and URIs without a
    /// control character, URIs a browser may open.
    fn read(answer: &Map<String, Value>) -> Result<Codes, TokenError> {
        let invalid = |m: String| {
            TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message(format!("the device authorization endpoint's answer {m}"))
        };
        let text = |key: &str| answer.get(key).and_then(Value::as_str);
        let device_code = text("device_code")
            .filter(|c| {
                !c.is_empty()
                    && c.len() <= MAX_TEXT
                    && c.bytes().all(|b| (0x20..=0x7e).contains(&b))
            })
            .ok_or_else(|| invalid("has no usable `device_code`".into()))?;
        let user_code = text("user_code").unwrap_or_default();
        if user_code.is_empty() || user_code.len() > 128 || user_code.chars().any(char::is_control)
        {
            return Err(invalid(format!(
                "has no usable `user_code` (`{}`): empty, too long or with a control character, \
                 which is never shown to a person",
                clip(user_code)
            )));
        }
        // Google names it `verification_url`.
        let uri = text("verification_uri")
            .or_else(|| text("verification_url"))
            .ok_or_else(|| invalid("has no `verification_uri`".into()))?;
        let checked_uri = |name: &str, uri: &str| {
            if uri.len() > MAX_TEXT || uri.chars().any(|c| c.is_control() || c == ' ') {
                return Err(invalid(format!(
                    "has a `{name}` (`{}`) with a control character or a space, which is never \
                     shown to a person",
                    clip(uri)
                )));
            }
            check_endpoint(name, uri).map(|()| uri.to_owned())
        };
        let verification_uri = checked_uri("verification_uri", uri)?;
        let verification_uri_complete = match text("verification_uri_complete") {
            Some(complete) => Some(checked_uri("verification_uri_complete", complete)?),
            None => None,
        };
        let seconds = |key: &str| answer.get(key).and_then(Value::as_u64);
        let expires_in = seconds("expires_in")
            .map(Duration::from_secs)
            .ok_or_else(|| invalid("has no `expires_in`".into()))?;
        let interval = seconds("interval")
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_INTERVAL)
            .clamp(Duration::from_secs(1), MAX_INTERVAL);
        Ok(Codes {
            device_code: device_code.to_owned(),
            prompt: DevicePrompt {
                user_code: user_code.to_owned(),
                verification_uri,
                verification_uri_complete,
                expires_in,
            },
            interval,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: serde_json::Value) -> Map<String, Value> {
        json.as_object().unwrap().clone()
    }

    #[test]
    fn control_characters_never_reach_the_prompt() {
        let ok = serde_json::json!({
            "device_code": "dc", "user_code": "WDJB-MJHT",
            "verification_uri": "https://as.example.com/device", "expires_in": 600
        });
        let codes = Codes::read(&answer(ok.clone())).unwrap();
        assert_eq!(codes.prompt.user_code(), "WDJB-MJHT");
        assert_eq!(codes.interval, DEFAULT_INTERVAL);
        for (key, value) in [
            ("user_code", "AB\u{1b}[2JCD"),
            ("user_code", "AB\nCD"),
            ("verification_uri", "https://as.example.com/\u{1b}]8;;evil"),
            ("verification_uri", "javascript:alert(1)"),
            ("verification_uri", "http://as.example.com/device"),
            (
                "verification_uri_complete",
                "https://as.example.com/d?c=\u{7}",
            ),
        ] {
            let mut bad = ok.clone();
            bad[key] = value.into();
            let e = Codes::read(&answer(bad)).err().expect(key);
            assert!(!e.to_string().contains('\u{1b}'), "{e}");
        }
        let mut no_code = ok;
        no_code.as_object_mut().unwrap().remove("device_code");
        assert!(Codes::read(&answer(no_code)).is_err());
    }
}
