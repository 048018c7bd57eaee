//! A backchannel login's ping mode (CIBA Core 1.0 section 10.2): the
//! requests that wait for the server's notification, and the notification
//! the app's route hands over, checked against the token sent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::Notify;

use super::{Backchannel, MAX_TEXT};
use crate::error::{TokenError, TokenErrorKind};
use crate::login::failed;

/// The requests of a ping-mode login that wait for the server's
/// notification: each request id, the SHA-256 of the notification token
/// sent with it, and what wakes its login. Each leaves when its login ends.
#[derive(Default)]
pub(super) struct Pings(Mutex<HashMap<String, Awaited>>);

/// A request waiting for its notification: the SHA-256 of the token sent
/// with it, and what wakes its login.
type Awaited = ([u8; 32], Arc<Notify>);

/// The most requests that wait for a notification at once.
const MAX_WAITING: usize = 1024;

/// A request's place among those waiting, given up when its login ends.
pub(super) struct Waiting<'a> {
    pings: &'a Pings,
    auth_req_id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.pings.0.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.remove(&self.auth_req_id);
    }
}

impl Backchannel {
    /// Takes the server's notification of a ping-mode request (CIBA Core
    /// 1.0 section 10.2): `authorization`, the call's `Authorization`
    /// header, and `body`, its JSON body with the `auth_req_id`. It wakes
    /// that request's login, which then asks the token endpoint: the token
    /// never comes from the notification itself. Answer the server `204`
    /// when this returns `Ok`, and `401` otherwise.
    ///
    /// ```no_run
    /// use tower_oauth::login::Backchannel;
    ///
    /// # fn route(ask: &Backchannel, headers: &http::HeaderMap, body: &[u8]) -> http::StatusCode {
    /// let authorization = headers
    ///     .get(http::header::AUTHORIZATION)
    ///     .and_then(|v| v.to_str().ok());
    /// match ask.notification(authorization, body) {
    ///     Ok(()) => http::StatusCode::NO_CONTENT,
    ///     Err(_) => http::StatusCode::UNAUTHORIZED,
    /// }
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`InvalidResponse`](TokenErrorKind::InvalidResponse), changing
    /// nothing: this `Backchannel` is not in ping mode, the body names no
    /// request waiting here, or the bearer token is not the one sent with
    /// that request (compared in constant time).
    pub fn notification(&self, authorization: Option<&str>, body: &[u8]) -> Result<(), TokenError> {
        let refused = |why: &str| {
            TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message(format!("a backchannel notification was refused: {why}"))
        };
        let Some(pings) = &self.pings else {
            return Err(refused(
                "this login is not in ping mode (Backchannel::ping)",
            ));
        };
        let auth_req_id = Some(body)
            .filter(|body| body.len() <= MAX_TEXT * 2)
            .and_then(|body| serde_json::from_slice::<Value>(body).ok())
            .and_then(|v| v.get("auth_req_id")?.as_str().map(str::to_owned))
            .ok_or_else(|| refused("its body is no JSON object with an `auth_req_id`"))?;
        let token = authorization
            .and_then(|a| a.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .ok_or_else(|| refused("it carries no bearer token"))?;
        let waiting = pings.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((digest, pinged)) = waiting.get(&auth_req_id) else {
            return Err(refused(
                "no request of this login waits for that `auth_req_id`",
            ));
        };
        let sent = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let differs = digest
            .iter()
            .zip(sent.as_ref())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if differs != 0 {
            return Err(refused(
                "its bearer token is not the notification token sent with that request",
            ));
        }
        pinged.notify_one();
        Ok(())
    }
}

/// `auth_req_id` waits among `pings` for the notification that carries
/// the token whose SHA-256 is `digest`: what it wakes, and its place, given
/// up when dropped.
pub(super) fn wait_for_ping<'a>(
    pings: &'a Pings,
    auth_req_id: &str,
    digest: [u8; 32],
) -> Result<(Waiting<'a>, Arc<Notify>), TokenError> {
    let mut waiting = pings.0.lock().unwrap_or_else(PoisonError::into_inner);
    if waiting.len() >= MAX_WAITING || waiting.contains_key(auth_req_id) {
        return Err(failed(
            "too many backchannel logins wait for a notification, or the server gave an \
             `auth_req_id` that another one waits under; the login ends",
        ));
    }
    let pinged = Arc::new(Notify::new());
    waiting.insert(auth_req_id.to_owned(), (digest, Arc::clone(&pinged)));
    let place = Waiting {
        pings,
        auth_req_id: auth_req_id.to_owned(),
    };
    Ok((place, pinged))
}
