//! The backchannel requests a person was asked, kept until each ends where
//! the layer keeps them (its store, sealed, when it has one; else its
//! memory): a later request, another replica or a restarted process
//! continues the same request, and the person is never asked twice for one
//! approval.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::endpoint::Reauthentication;
use crate::error::{TokenError, TokenErrorKind};
use crate::support::boxed::BoxFuture;
use crate::support::encoding::hex;

/// Where a layer keeps its person's pending backchannel requests, each by
/// what it is for (its server, scope, resources and details).
pub(crate) trait Parking: Send + Sync {
    /// Keeps `record` for `target` until `ttl` passes, over what was kept.
    fn keep<'a>(
        &'a self,
        target: &'a str,
        record: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Takes what is kept for `target`: returned, and no longer kept.
    fn take<'a>(&'a self, target: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>>;
}

/// A backchannel request the person was asked, until it ends. Its times
/// are the wall clock's: another process reads them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct AskedBefore {
    pub(super) auth_req_id: String,
    pub(super) interval: Duration,
    /// No poll sooner (a request that does not wait).
    pub(super) next_poll: SystemTime,
    /// When the server's request runs out.
    pub(super) expires_at: SystemTime,
    /// What it asked, which its ID token must show.
    pub(super) sought: Reauthentication,
    /// In ping mode: the SHA-256 of the notification token sent with it.
    pub(super) ping: Option<[u8; 32]>,
}

/// The longest a record's text may be: an `auth_req_id`, the `acr_values`
/// and a few numbers.
const MAX_RECORD: usize = 16 * 1024;

fn millis(at: SystemTime) -> u64 {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

impl AskedBefore {
    fn encode(&self) -> Vec<u8> {
        json!({
            "auth_req_id": self.auth_req_id,
            "interval_ms": u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX),
            "next_poll_ms": millis(self.next_poll),
            "expires_at_ms": millis(self.expires_at),
            "acr_values": self.sought.acr_values,
            "max_age": self.sought.max_age,
            "ping": self.ping.map(|digest| hex(&digest)),
        })
        .to_string()
        .into_bytes()
    }

    /// A record as [`encode`](Self::encode) wrote it; `None` for anything
    /// else (another version's, or not one at all).
    fn decode(bytes: &[u8]) -> Option<AskedBefore> {
        if bytes.len() > MAX_RECORD {
            return None;
        }
        let record: Value = serde_json::from_slice(bytes).ok()?;
        let time = |key: &str| Some(UNIX_EPOCH + Duration::from_millis(record[key].as_u64()?));
        let auth_req_id = record["auth_req_id"].as_str()?;
        let text = |key: &str| match &record[key] {
            Value::Null => Some(None),
            Value::String(s) => Some(Some(s.clone())),
            _ => None,
        };
        let ping = match &record["ping"] {
            Value::Null => None,
            Value::String(digest) => Some(unhex(digest)?),
            _ => return None,
        };
        let max_age = match &record["max_age"] {
            Value::Null => None,
            other => Some(other.as_u64()?),
        };
        let interval = Duration::from_millis(record["interval_ms"].as_u64()?);
        if auth_req_id.is_empty() || interval < Duration::from_secs(1) {
            return None;
        }
        Some(AskedBefore {
            auth_req_id: auth_req_id.to_owned(),
            interval,
            next_poll: time("next_poll_ms")?,
            expires_at: time("expires_at_ms")?,
            sought: Reauthentication {
                acr_values: text("acr_values")?,
                max_age,
            },
            ping,
        })
    }

    /// How much longer the server's request lives, if at all.
    pub(super) fn remaining(&self) -> Option<Duration> {
        self.expires_at
            .duration_since(SystemTime::now())
            .ok()
            .filter(|left| !left.is_zero())
    }
}

/// 32 bytes from 64 hex digits.
fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// The error of a store that could not keep or read a pending request:
/// nobody is asked meanwhile, so that nobody is asked twice.
fn unkept(what: &str, why: String) -> TokenError {
    TokenError::new(TokenErrorKind::Transport).with_message(format!(
        "the store could not {what} the backchannel request the person was asked ({why}); \
         try again"
    ))
}

/// The request kept for `target`, if any. One that lives on stays kept
/// while it is polled, so that a poll cut off halfway loses nothing; one
/// that ran out is no longer kept.
pub(super) async fn find(
    parking: &dyn Parking,
    target: &str,
) -> Result<Option<AskedBefore>, TokenError> {
    let Some(bytes) = parking
        .take(target)
        .await
        .map_err(|why| unkept("read", why))?
    else {
        return Ok(None);
    };
    let Some(pending) = AskedBefore::decode(&bytes) else {
        tracing::warn!("a kept backchannel request does not read; a new one is sent");
        return Ok(None);
    };
    // Kept back at once. A store that fails here still leaves the request
    // in hand (the chain's turn is this fetch's): it is polled, and kept
    // again after an unanswered poll.
    if let Some(left) = pending.remaining() {
        if let Err(why) = parking.keep(target, bytes, left).await {
            tracing::warn!(%why, "a backchannel request could not be kept back; it is polled");
        }
    }
    Ok(Some(pending))
}

/// Keeps `pending` for `target`, until its request runs out.
pub(super) async fn park(
    parking: &dyn Parking,
    target: &str,
    pending: &AskedBefore,
) -> Result<(), TokenError> {
    let Some(left) = pending.remaining() else {
        return Ok(());
    };
    parking
        .keep(target, pending.encode(), left)
        .await
        .map_err(|why| unkept("keep", why))
}

/// The request for `target` ended (approved, refused, run out): no longer
/// kept. A store that fails here keeps it until it runs out, and the next
/// poll finds it ended.
pub(super) async fn forget(parking: &dyn Parking, target: &str) {
    if let Err(why) = parking.take(target).await {
        tracing::warn!(%why, "a backchannel request that ended stays in the store until it runs out");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_and_nothing_else_reads() {
        let at = UNIX_EPOCH + Duration::from_millis(1_900_000_000_123);
        let pending = AskedBefore {
            auth_req_id: "r-1".into(),
            interval: Duration::from_secs(5),
            next_poll: at,
            expires_at: at + Duration::from_secs(120),
            sought: Reauthentication {
                acr_values: Some("urn:gold".into()),
                max_age: Some(300),
            },
            ping: Some([7; 32]),
        };
        assert_eq!(
            AskedBefore::decode(&pending.encode()),
            Some(pending.clone())
        );
        let plain = AskedBefore {
            sought: Reauthentication {
                acr_values: None,
                max_age: None,
            },
            ping: None,
            ..pending
        };
        assert_eq!(AskedBefore::decode(&plain.encode()), Some(plain));
        for bad in [
            &b"not json"[..],
            br#"{"auth_req_id": 7}"#,
            br#"{"auth_req_id": "r", "interval_ms": 5000}"#,
            br#"{"auth_req_id":"r","interval_ms":1,"next_poll_ms":1,"expires_at_ms":2,"acr_values":null,"max_age":null,"ping":"zz"}"#,
        ] {
            assert_eq!(AskedBefore::decode(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(unhex(&hex(&[0xab; 32])), Some([0xab; 32]));
    }
}
