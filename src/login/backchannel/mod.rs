//! A backchannel login (OpenID Connect CIBA Core 1.0, poll and ping modes):
//! the person a hint names is asked by the server on their own device, and
//! the layer asks the token endpoint (at the server's interval, or when the
//! server's notification comes) until they approve, refuse, or the request
//! runs out.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};
use tokio::time::Instant;

use super::authorization::check_endpoint;
use super::device::{poll, ran_out, read_poll, Polled, Polls, MAX_INTERVAL, SLOW_DOWN};
use super::{failed, Answered, ServerLogin};
use crate::endpoint::{Reauthentication, ServerMetadata};
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::support::random::random_hex;

mod kept;
mod ping;

pub(crate) use self::kept::Parking;
use self::kept::{find, forget, park, AskedBefore};
use self::ping::{wait_for_ping, Pings};

/// The CIBA grant's `grant_type` (CIBA Core 1.0 section 10.1).
pub(crate) const CIBA_GRANT_TYPE: &str = "urn:openid:params:grant-type:ciba";

/// The interval between polls when the server names none (section 7.3).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// The longest a server may let a request wait for the person.
const MAX_EXPIRES_IN: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest `auth_req_id` taken from a server, and the longest hint.
const MAX_TEXT: usize = 8 * 1024;

/// The longest binding message: a few words the person compares on two
/// screens.
const MAX_BINDING_MESSAGE: usize = 256;

/// Who is asked, and what they are shown, in a backchannel login
/// (OpenID Connect Client-Initiated Backchannel Authentication, CIBA Core
/// 1.0): give it to [`Login::backchannel`](super::Login::backchannel).
///
/// The person is named by exactly one hint: [`login_hint`](Self::login_hint)
/// (an e-mail address, a phone number, a user name, as the server
/// knows them), [`id_token_hint`](Self::id_token_hint) (an ID token the
/// server issued for them) or [`login_hint_token`](Self::login_hint_token).
/// The hint is never logged and never in `Debug`.
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::login::Backchannel;
///
/// let ask = Backchannel::login_hint("alice@example.com")
///     .binding_message("Pay 25 EUR to ACME, order 4711")
///     .requested_expiry(Duration::from_secs(120))
///     .acr_values("urn:example:mfa");
/// # let _ = ask;
/// ```
#[derive(Clone)]
pub struct Backchannel {
    /// The hint's parameter and value; none with
    /// [`per_request`](Self::per_request).
    hint: Option<(&'static str, String)>,
    binding_message: Option<String>,
    requested_expiry: Option<Duration>,
    acr_values: Option<String>,
    /// In ping mode, the requests waiting for the server's notification.
    pings: Option<Arc<Pings>>,
    /// Whether a request that needs the approval waits for it.
    waits: bool,
}

/// Checks a person's hint: not empty, at most 8 KiB, without a control
/// character. Why not, after the hint's name.
pub(crate) fn check_hint(hint: &str) -> Result<(), String> {
    if hint.is_empty() || hint.len() > MAX_TEXT || hint.chars().any(char::is_control) {
        return Err(format!(
            "is empty, over {MAX_TEXT} bytes or holds a control character"
        ));
    }
    Ok(())
}

/// Checks a binding message: plain text the person reads on their device,
/// of at most 256 characters, without a control character.
pub(crate) fn check_binding_message(message: &str) -> Result<(), String> {
    if message.is_empty()
        || message.chars().any(char::is_control)
        || message.chars().count() > MAX_BINDING_MESSAGE
    {
        return Err(format!(
            "the binding message `{}` is empty, over {MAX_BINDING_MESSAGE} characters or holds \
             a control character: the person reads it on their device",
            crate::error::escape_controls(&clip(message))
        ));
    }
    Ok(())
}

/// The login and its code, in messages.
const WHAT: (&str, &str) = ("backchannel login", "backchannel request");

impl Backchannel {
    /// The person as the server knows them, `login_hint`: an e-mail
    /// address, a phone number, a user name.
    pub fn login_hint(hint: impl Into<String>) -> Self {
        Self::hinted("login_hint", hint.into())
    }

    /// The person as an ID token the server issued for them names them,
    /// `id_token_hint`.
    pub fn id_token_hint(id_token: impl Into<String>) -> Self {
        Self::hinted("id_token_hint", id_token.into())
    }

    /// The person as a token of the server's own format names them,
    /// `login_hint_token`.
    pub fn login_hint_token(token: impl Into<String>) -> Self {
        Self::hinted("login_hint_token", token.into())
    }

    /// Nobody of its own: each request names the person of its account,
    /// with [`TokenParams::account`](crate::TokenParams::account) and
    /// [`TokenParams::login_hint`](crate::TokenParams::login_hint), for a
    /// layer that acts for many people. The layer's own token (a request
    /// that names no account) then has no login: its requests fail with
    /// [`LoginFailed`](crate::TokenErrorKind::LoginFailed).
    ///
    /// ```
    /// use tower_oauth::login::Backchannel;
    /// use tower_oauth::TokenParams;
    ///
    /// let ask = Backchannel::per_request().binding_message("Approve the agent's access");
    /// // Once per account, kept with it:
    /// let alice = TokenParams::new().account("user-17").login_hint("alice@example.com");
    /// # let _ = (ask, alice);
    /// ```
    pub fn per_request() -> Self {
        Backchannel {
            hint: None,
            ..Self::hinted("login_hint", String::new())
        }
    }

    /// This one, asking the person `login_hint` names.
    pub(crate) fn for_person(&self, login_hint: &str) -> Self {
        Backchannel {
            hint: Some(("login_hint", login_hint.to_owned())),
            ..self.clone()
        }
    }

    fn hinted(name: &'static str, value: String) -> Self {
        Backchannel {
            hint: Some((name, value)),
            binding_message: None,
            requested_expiry: None,
            acr_values: None,
            pings: None,
            waits: true,
        }
    }

    /// Whether a request that needs the person's approval waits for it,
    /// fit for a CLI or a worker. With `false`, the request that needs it
    /// sends the backchannel request and fails at once with
    /// [`ApprovalPending`](crate::TokenErrorKind::ApprovalPending): its
    /// message says what the person was asked, its
    /// [`retry_after`](crate::TokenError::retry_after) when to ask again.
    /// Each later request asks the token endpoint once (no sooner than the
    /// server's interval), and gets the token once the person approved:
    /// an agent framework interrupts its task at the error and resumes it by
    /// sending the request again. The person is asked once per login.
    ///
    /// Default: `true`.
    pub fn wait(mut self, wait: bool) -> Self {
        self.waits = wait;
        self
    }

    /// Ping mode (CIBA Core 1.0 section 10.2), for a client registered for
    /// it: each request carries a fresh `client_notification_token`, and
    /// the server calls the app's notification endpoint (the client's
    /// `backchannel_client_notification_endpoint`) once the person decided.
    /// The app's route hands that call to
    /// [`notification`](Self::notification) on this `Backchannel` (a clone
    /// of it), and the login asks the token endpoint at once; meanwhile it
    /// asks once a minute, in case a notification is lost.
    ///
    /// Default: poll mode, the token endpoint asked at the server's
    /// interval.
    pub fn ping(mut self) -> Self {
        self.pings = Some(Arc::default());
        self
    }

    /// A short text shown both to the person on their device and by your
    /// app, `binding_message`, so that the person approves this request
    /// and no other: "Pay 25 EUR to ACME, order 4711". Plain text of at
    /// most 256 characters, without control characters: anything else is
    /// refused when the layer is built, before anything is sent.
    ///
    /// Default: none.
    pub fn binding_message(mut self, message: impl Into<String>) -> Self {
        self.binding_message = Some(message.into());
        self
    }

    /// How long the person has to approve, `requested_expiry`, in whole
    /// seconds (1 s to a day). The server may give less; the login's
    /// [`timeout`](super::Login::timeout) bounds the wait whatever it
    /// gives.
    ///
    /// Default: none (the server's own).
    pub fn requested_expiry(mut self, expiry: Duration) -> Self {
        self.requested_expiry = Some(expiry);
        self
    }

    /// The authentication contexts asked for, `acr_values`, space
    /// separated, most preferred first. The ID token's `acr` must then be
    /// one of them, or the login is refused and nothing kept.
    ///
    /// Default: none.
    pub fn acr_values(mut self, values: impl Into<String>) -> Self {
        self.acr_values = Some(values.into());
        self
    }

    /// Checks the settings, for the builder.
    pub(crate) fn check(&self) -> Result<(), String> {
        let plain = |text: &str| !text.is_empty() && !text.chars().any(char::is_control);
        if let Some((name, hint)) = &self.hint {
            check_hint(hint).map_err(|e| format!("the backchannel login's {name} {e}"))?;
        }
        if let Some(message) = &self.binding_message {
            check_binding_message(message)
                .map_err(|e| format!("Backchannel::binding_message: {e}"))?;
        }
        if let Some(expiry) = self.requested_expiry {
            if expiry < Duration::from_secs(1) || expiry > MAX_EXPIRES_IN {
                return Err(format!(
                    "Backchannel::requested_expiry {expiry:?} is not between 1 s and a day"
                ));
            }
        }
        if !self.waits && self.pings.is_some() {
            return Err(
                "Backchannel::wait(false) asks the token endpoint at each request; ping \
                        mode (Backchannel::ping) serves a login that waits"
                    .into(),
            );
        }
        if let Some(acr) = &self.acr_values {
            if !plain(acr) || acr.len() > 1024 {
                return Err(
                    "Backchannel::acr_values is empty, over 1 KiB or holds a control character"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// The `acr_values` asked for, which the ID token's `acr` must match.
    pub(super) fn acr(&self) -> Option<&str> {
        self.acr_values.as_deref()
    }

    /// The error of a request that does not wait for the approval still to
    /// come: what the person was asked, and when to ask again.
    fn approval_pending(&self, after: Duration) -> TokenError {
        let asked = match &self.binding_message {
            Some(message) => format!(" \"{message}\""),
            None => String::new(),
        };
        TokenError::new(TokenErrorKind::ApprovalPending)
            .with_message(format!(
                "the person was asked to approve{asked} on their device; send the request \
                 again in {} s",
                after.as_secs().max(1)
            ))
            .with_retry_after(after)
            .marked_login_state()
    }
}

impl fmt::Debug for Backchannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backchannel")
            .field("hint", &self.hint.as_ref().map(|(name, _)| name))
            .field("binding_message", &self.binding_message)
            .field("requested_expiry", &self.requested_expiry)
            .field("acr_values", &self.acr_values)
            .field("ping", &self.pings.is_some())
            .field("wait", &self.waits)
            .finish()
    }
}

/// A backchannel login at `server`, asked with `ask` for `sought` (its
/// own `acr_values`, or what an API asked for): the request the person was
/// asked before for the same target, kept in `parking`, continued; else
/// the authentication request; then the polls until `deadline` or the
/// request's end (without waiting, one poll at most). The answer, and what
/// its ID token must show (the caller checks it).
pub(super) async fn log_in(
    login: &ServerLogin<'_>,
    server: &ServerMetadata,
    (ask, sought): (&Backchannel, Reauthentication),
    (scope, parking): (&str, &dyn Parking),
    deadline: Instant,
) -> Result<(Answered, Reauthentication), TokenError> {
    let Some((hint_name, hint)) = ask.hint.as_ref().map(|(name, hint)| (*name, hint.as_str()))
    else {
        return Err(failed(
            "the backchannel login names nobody (Backchannel::per_request): a request names \
             the person of its account with TokenParams::account and TokenParams::login_hint",
        ));
    };
    // What the request is for: its answer serves only the same.
    let target = {
        let details = login.request.target.authorization_details();
        let resources = login.resources().join(" ");
        // What it asks (an API's challenge may ask more): a request asked
        // for less serves no request that needs more.
        let (acr, max_age) = (sought.acr_values.as_deref(), sought.max_age);
        // Who is asked: a request for another person is another's.
        let who = crate::support::encoding::sha256_hex(format!("{hint_name}\0{hint}").as_bytes());
        format!(
            "{}\n{scope}\n{resources}\n{}\n{}\n{}\n{max_age:?}\n{who}",
            server.issuer,
            details.unwrap_or_default(),
            ask.binding_message.as_deref().unwrap_or_default(),
            acr.unwrap_or_default(),
        )
    };
    // The person is never asked twice for one approval: a request asked
    // before (by this process, another replica, or one that ended) is
    // continued while it lives.
    if let Some(pending) = find(parking, &target).await? {
        match (pending.remaining(), ask.waits) {
            (Some(_), true) => {
                return wait_for(login, ask, (parking, &target), pending, deadline).await
            }
            (Some(_), false) => return resume(login, ask, (parking, &target), pending).await,
            // It ran out unanswered: said once, then a new request.
            (None, false) => return Err(ran_out(WHAT.1, "")),
            (None, true) => {}
        }
    }
    let acr_values = sought.acr_values.as_deref();
    let Some(endpoint) = server.backchannel_authentication_endpoint.as_deref() else {
        return Err(failed(format!(
            "the metadata of `{}` names no backchannel_authentication_endpoint, which a \
             backchannel login (CIBA) needs",
            server.issuer
        )));
    };
    let modes = &server.backchannel_token_delivery_modes;
    let mode = match ask.pings {
        Some(_) => "ping",
        None => "poll",
    };
    if !modes.is_empty() && !modes.iter().any(|m| m == mode) {
        return Err(failed(format!(
            "`{}` delivers backchannel logins' tokens only by {}, not {mode}",
            server.issuer,
            clip(&modes.join(", "))
        )));
    }
    check_endpoint("backchannel_authentication_endpoint", endpoint)?;
    let url = crate::endpoint::checked_url(
        "backchannel_authentication_endpoint",
        endpoint,
        login.request.spec.allow_insecure_http,
    )
    .map_err(|e| failed(e.to_string()))?;
    let expiry = ask.requested_expiry.map(|e| e.as_secs().to_string());
    let mut pairs: Vec<(&str, &str)> = vec![("scope", scope), (hint_name, hint)];
    if let Some(message) = &ask.binding_message {
        pairs.push(("binding_message", message));
    }
    if let Some(expiry) = &expiry {
        pairs.push(("requested_expiry", expiry));
    }
    if let Some(acr) = acr_values {
        pairs.push(("acr_values", acr));
    }
    pairs.extend(login.resources().into_iter().map(|r| ("resource", r)));
    if let Some(details) = login.request.target.authorization_details() {
        pairs.push(("authorization_details", details));
    }
    let notification_token = ask.pings.as_ref().map(|_| random_hex() + &random_hex());
    if let Some(token) = &notification_token {
        pairs.push(("client_notification_token", token));
    }
    let secrets: Vec<&str> = [Some(hint), notification_token.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    let answer = match login.client_send(&url, &pairs, &secrets).await {
        Ok(response) => serde_json::from_slice::<Value>(response.body()).ok(),
        Err(e) => return Err(refused(e)),
    };
    let Some(Value::Object(answer)) = answer else {
        return Err(invalid("is no JSON object".into()));
    };
    let request = Request::read(&answer)?;
    let now = SystemTime::now();
    let pending = AskedBefore {
        auth_req_id: request.auth_req_id,
        interval: request.interval,
        next_poll: now + request.interval,
        expires_at: now + request.expires_in,
        sought,
        ping: notification_token.map(|token| {
            let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
            let mut sealed = [0u8; 32];
            sealed.copy_from_slice(digest.as_ref());
            sealed
        }),
    };
    tracing::info!(
        issuer = %server.issuer,
        binding_message = ask.binding_message.as_deref().unwrap_or_default(),
        expires_in = ?request.expires_in,
        interval = ?request.interval,
        waits = ask.waits,
        "the server asks the person to approve the login on their device"
    );
    // Kept before any wait, so that a cut-off wait, another replica or a
    // later request continues it.
    let parked = park(parking, &target, &pending).await;
    if !ask.waits {
        parked?;
        return Err(ask.approval_pending(request.interval));
    }
    if let Err(e) = parked {
        tracing::warn!(error = %e, "the backchannel request is waited for here alone");
    }
    wait_for(login, ask, (parking, &target), pending, deadline).await
}

/// Waits for `pending`'s answer, polled at its interval (or when the
/// server's notification comes), until it or `deadline` runs out. It stays
/// kept until it ends, so that a wait cut off, or whose `deadline` came
/// first, loses nothing.
async fn wait_for(
    login: &ServerLogin<'_>,
    ask: &Backchannel,
    (parking, target): (&dyn Parking, &str),
    pending: AskedBefore,
    deadline: Instant,
) -> Result<(Answered, Reauthentication), TokenError> {
    // In ping mode: waiting for the notification until the login ends.
    let waiting = match (&ask.pings, &pending.ping) {
        (Some(pings), Some(digest)) => Some(wait_for_ping(pings, &pending.auth_req_id, *digest)?),
        _ => None,
    };
    let pinged = waiting.as_ref().map(|(_, pinged)| Arc::clone(pinged));
    let left = pending.remaining().unwrap_or_default();
    // This login's time ends before the request does.
    let deadline_first = deadline < Instant::now() + left;
    let polls = Polls {
        grant_type: CIBA_GRANT_TYPE,
        parameter: ("auth_req_id", &pending.auth_req_id),
        what: WHAT,
        interval: pending.interval,
        expires_at: (Instant::now() + left).min(deadline),
        pinged,
    };
    let polled = poll(login, polls).await;
    // Only this login's time ran out (within a poll's interval of its
    // deadline): the request lives on, for the next.
    let cut_short = deadline_first
        && matches!(&polled, Err(e) if e.error_code() == Some("expired_token"))
        && Instant::now() + MAX_INTERVAL >= deadline;
    if !cut_short {
        forget(parking, target).await;
    }
    Ok((polled?, pending.sought))
}

/// Without waiting: `pending` asked about once, no sooner than its
/// interval; while the person has not answered, it stays kept with its
/// next poll's time.
async fn resume(
    login: &ServerLogin<'_>,
    ask: &Backchannel,
    (parking, target): (&dyn Parking, &str),
    mut pending: AskedBefore,
) -> Result<(Answered, Reauthentication), TokenError> {
    // (At most an interval early: another replica's clock may run ahead.)
    if let Ok(early) = pending.next_poll.duration_since(SystemTime::now()) {
        return Err(ask.approval_pending(early.min(pending.interval)));
    }
    let id = pending.auth_req_id.clone();
    let polled = login
        .login_token(CIBA_GRANT_TYPE, &[("auth_req_id", &id)], &[&id])
        .await;
    let error = match polled {
        Ok(answered) => {
            forget(parking, target).await;
            return Ok((answered, pending.sought));
        }
        Err(e) => e,
    };
    let error = match read_poll(error, WHAT) {
        Polled::Pending => None,
        Polled::SlowDown => {
            pending.interval = (pending.interval + SLOW_DOWN).min(MAX_INTERVAL);
            None
        }
        Polled::Failed(e) => Some(e),
        Polled::End(e) => {
            forget(parking, target).await;
            return Err(e);
        }
    };
    pending.next_poll = SystemTime::now() + pending.interval;
    park(parking, target, &pending).await?;
    Err(error.unwrap_or_else(|| ask.approval_pending(pending.interval)))
}

/// The authentication request refused: a person the server does not know
/// is said so, with its code; the rest as the server said it.
fn refused(e: TokenError) -> TokenError {
    let why = match e.error_code() {
        Some("unknown_user_id") => "the server knows no person by the hint given",
        Some("access_denied") => "the server refused to ask the person",
        Some("expired_login_hint_token") => "the login_hint_token has expired",
        Some("invalid_binding_message") => "the server refused the binding message",
        Some("unauthorized_client") => "the client may not use backchannel logins there",
        _ => return e,
    };
    let code = e.error_code().map(str::to_owned).unwrap_or_default();
    failed(format!("{why} ({code}); nothing was asked of anyone")).with_error_code(&code)
}

/// The error of an authentication answer that cannot be used.
fn invalid(why: String) -> TokenError {
    TokenError::new(TokenErrorKind::InvalidResponse).with_message(format!(
        "the backchannel authentication endpoint's answer {why}; the login ends, and nothing \
         is kept"
    ))
}

/// What the backchannel authentication endpoint answered (section 7.3).
struct Request {
    auth_req_id: String,
    expires_in: Duration,
    interval: Duration,
}

impl Request {
    /// The answer, checked: an `auth_req_id` of visible ASCII, an
    /// `expires_in` of a day at most, an `interval` of 1 s to a minute.
    fn read(answer: &Map<String, Value>) -> Result<Request, TokenError> {
        let auth_req_id = answer
            .get("auth_req_id")
            .and_then(Value::as_str)
            .filter(|id| {
                !id.is_empty() && id.len() <= MAX_TEXT && id.bytes().all(|b| b.is_ascii_graphic())
            })
            .ok_or_else(|| invalid("has no usable `auth_req_id`".into()))?;
        let seconds = |key: &str| answer.get(key).map(|v| v.as_u64().ok_or(v));
        let expires_in = match seconds("expires_in") {
            Some(Ok(s)) if s > 0 && s <= MAX_EXPIRES_IN.as_secs() => Duration::from_secs(s),
            Some(Ok(s)) => {
                return Err(invalid(format!(
                    "has an `expires_in` of {s} s: not between 1 s and a day"
                )))
            }
            _ => return Err(invalid("has no `expires_in` in whole seconds".into())),
        };
        let interval = match seconds("interval") {
            None => DEFAULT_INTERVAL,
            Some(Ok(s)) if s > 0 && s <= MAX_INTERVAL.as_secs() => Duration::from_secs(s),
            Some(_) => {
                return Err(invalid(format!(
                    "has an `interval` of {}: not whole seconds between 1 s and {} s",
                    clip(&answer["interval"].to_string()),
                    MAX_INTERVAL.as_secs()
                )))
            }
        };
        Ok(Request {
            auth_req_id: auth_req_id.to_owned(),
            expires_in,
            interval,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: serde_json::Value) -> Result<Request, TokenError> {
        Request::read(json.as_object().unwrap())
    }

    #[test]
    fn the_answer_is_checked_before_any_poll() {
        let ok = read(serde_json::json!({"auth_req_id": "r1", "expires_in": 120})).unwrap();
        assert_eq!(
            (ok.interval, ok.expires_in),
            (DEFAULT_INTERVAL, Duration::from_secs(120))
        );
        for (hostile, says) in [
            (serde_json::json!({"expires_in": 120}), "auth_req_id"),
            (
                serde_json::json!({"auth_req_id": "", "expires_in": 120}),
                "auth_req_id",
            ),
            (
                serde_json::json!({"auth_req_id": "a b", "expires_in": 120}),
                "auth_req_id",
            ),
            (serde_json::json!({"auth_req_id": "r1"}), "expires_in"),
            (
                serde_json::json!({"auth_req_id": "r1", "expires_in": 86_401}),
                "a day",
            ),
            (
                serde_json::json!({"auth_req_id": "r1", "expires_in": "120"}),
                "expires_in",
            ),
            (
                serde_json::json!({"auth_req_id": "r1", "expires_in": 120, "interval": 0}),
                "interval",
            ),
            (
                serde_json::json!({"auth_req_id": "r1", "expires_in": 120, "interval": 3600}),
                "interval",
            ),
            (
                serde_json::json!({"auth_req_id": "r1", "expires_in": 120, "interval": 1.5}),
                "interval",
            ),
        ] {
            let e = read(hostile.clone()).err().expect("refused");
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{hostile}");
            assert!(e.to_string().contains(says), "{hostile}: {e}");
        }
    }

    #[test]
    fn a_binding_message_is_plain_short_text() {
        let ask = |m: &str| Backchannel::login_hint("alice").binding_message(m).check();
        assert!(ask("Pay 25 EUR to ACME, order 4711").is_ok());
        for hostile in ["", "pay\n25 EUR", "pay \u{1b}[2J", &"x".repeat(257)] {
            let e = ask(hostile).unwrap_err();
            assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e}");
        }
        assert!(Backchannel::login_hint("").check().is_err());
        let both = Backchannel::login_hint("alice").ping().wait(false).check();
        assert!(both.unwrap_err().contains("ping mode"));
        assert!(Backchannel::login_hint("alice")
            .requested_expiry(Duration::from_millis(500))
            .check()
            .is_err());
        let debug = format!("{:?}", Backchannel::id_token_hint("eyJsecret"));
        assert!(!debug.contains("eyJsecret"), "{debug}");
    }
}
