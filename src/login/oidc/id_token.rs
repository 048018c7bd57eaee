//! The ID token a login's code (or a refresh) brought, checked before
//! anything is kept (OpenID Connect Core 1.0 sections 3.1.3.7 and 12.2): its
//! signature by the server's keys, then `iss`, `aud`, `azp`, `exp`, `iat`,
//! `nonce`, the `acr` a login asked for, and on a refresh the same `iss` and
//! `sub` as the login's.

use serde_json::{Map, Value};

use super::jwks::ServerJwt;
use super::Checks;
use super::Identity;
use crate::endpoint::{now_ms, ServerMetadata};
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::login::authorization::asks_openid;
use crate::login::Answered;

/// The most audiences an ID token may name.
const MAX_AUDIENCES: usize = 16;

/// What an ID token must say.
pub(crate) struct Expected<'a> {
    /// The client the login was made with: its `aud` (and `azp`).
    pub(crate) client_id: &'a str,
    /// Which answer brought it: a login's, or a refresh's.
    pub(crate) occasion: Occasion<'a>,
}

/// The answer an ID token came in, which says what it must match.
#[derive(Clone, Copy)]
pub(crate) enum Occasion<'a> {
    /// A login's token answer.
    Login {
        /// What the login's request sent that the ID token answers.
        sent: LoginAsked<'a>,
        /// Whether the login asked for `openid`: an ID token is then due.
        asked: bool,
    },
    /// A refresh that renewed the login's ID token: the same issuer and
    /// subject as `earlier`, the login's, and its nonce where it had one.
    Refresh { earlier: &'a Identity },
}

/// What a login's request sent that its ID token must answer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoginAsked<'a> {
    /// The `nonce`; `None` for a grant that sends none (the device grant,
    /// a backchannel login).
    pub(crate) nonce: Option<&'a str>,
    /// The `acr_values`: the ID token's `acr` is one of them.
    pub(crate) acr_values: Option<&'a str>,
    /// The `max_age`, in seconds: the ID token's `auth_time` is no older.
    pub(crate) max_age: Option<u64>,
}

impl Checks<'_> {
    /// The identity of `id_token`, from a token answer of `server`, once
    /// every check passed. `None` where none came and none was due: a
    /// scope without `openid`, a refresh, or a server that is no OpenID
    /// provider (no `jwks_uri`).
    ///
    /// # Errors
    ///
    /// [`LoginFailed`](TokenErrorKind::LoginFailed) saying which check
    /// failed; nothing of the answer is kept then.
    pub(crate) async fn verified_id_token(
        &self,
        server: &ServerMetadata,
        id_token: Option<&str>,
        expected: Expected<'_>,
    ) -> Result<Option<Identity>, TokenError> {
        let (asked, login) = match expected.occasion {
            Occasion::Login { asked, .. } => (asked, true),
            Occasion::Refresh { .. } => (true, false),
        };
        if !asked {
            return Ok(None);
        }
        let raw = match id_token {
            Some(raw) => raw,
            None if login && server.jwks_uri.is_some() => {
                return Err(refused(
                    "is missing: the login asked for `openid`, and the server's token answer \
                     carries no id_token",
                ))
            }
            None => return Ok(None),
        };
        let signed = ServerJwt {
            what: "the ID token",
            algorithms: &server.id_token_algorithms,
            kind: TokenErrorKind::LoginFailed,
        };
        let claims = self
            .keys
            .server_signed(self.request, server, raw, signed)
            .await?;
        check_claims(
            &claims,
            &server.issuer,
            &expected,
            self.request.spec.id_token_skew,
        )?;
        let identity =
            Identity::from_claims(claims, raw).ok_or_else(|| refused("has no `iss` or `sub`"))?;
        tracing::info!(
            issuer = %identity.issuer(),
            refresh = !login,
            "the ID token was verified"
        );
        Ok(Some(identity))
    }
}

impl Checks<'_> {
    /// `answered`, a login's token answer from `server` for `client_id`,
    /// with the identity of its ID token, checked, where `scope` asked for
    /// `openid`; `sent`, what the login's request sent.
    pub(crate) async fn with_identity(
        &self,
        server: &ServerMetadata,
        mut answered: Answered,
        client_id: &str,
        scope: Option<&str>,
        sent: LoginAsked<'_>,
    ) -> Result<Answered, TokenError> {
        let expected = Expected {
            client_id,
            occasion: Occasion::Login {
                sent,
                asked: asks_openid(scope),
            },
        };
        answered.identity = self
            .verified_id_token(server, answered.id_token.as_deref(), expected)
            .await?;
        // Only an ID token shows how and when the person signed in.
        if answered.identity.is_none() && (sent.acr_values.is_some() || sent.max_age.is_some()) {
            return Err(refused(
                "is missing, though the login asked for a sign-in (acr_values, max_age) that \
                 only an ID token shows: the login needs the scope `openid` at an OpenID \
                 provider",
            ));
        }
        Ok(answered)
    }
}

/// The claims' checks, the signature verified.
fn check_claims(
    claims: &Map<String, Value>,
    issuer: &str,
    expected: &Expected<'_>,
    skew: std::time::Duration,
) -> Result<(), TokenError> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str);
    let iss = text("iss").unwrap_or_default();
    if iss != issuer {
        return Err(refused(&format!(
            "names the issuer `{}`, not `{issuer}`",
            clip(iss)
        )));
    }
    let sub = text("sub").unwrap_or_default();
    if sub.is_empty() || sub.len() > 255 {
        return Err(refused("has no `sub` of 1 to 255 characters"));
    }
    check_audience(claims, expected.client_id).map_err(|why| refused(&why))?;
    let now = now_ms() / 1000;
    let skew = skew.as_secs();
    check_times(claims, now, skew).map_err(|why| refused(&why))?;
    let nonce = text("nonce");
    let want = match expected.occasion {
        Occasion::Login { sent, .. } => sent.nonce,
        // A refresh's ID token carries the login's nonce, if any.
        Occasion::Refresh { earlier } => {
            nonce.and(earlier.claims().get("nonce").and_then(Value::as_str))
        }
    };
    if want.is_some() && nonce != want {
        return Err(refused(match nonce {
            Some(_) => "carries another `nonce` than the login sent (a token from another login)",
            None => "carries no `nonce`, though the login sent one",
        }));
    }
    if let Occasion::Login { sent, .. } = expected.occasion {
        if let Some(asked) = sent.acr_values {
            check_acr(text("acr"), asked).map_err(|why| refused(&why))?;
        }
        if let Some(max_age) = sent.max_age {
            let auth_time = claims.get("auth_time").and_then(Value::as_u64);
            check_auth_time(auth_time, max_age, now, skew).map_err(|why| refused(&why))?;
        }
    }
    if let Occasion::Refresh { earlier } = expected.occasion {
        if sub != earlier.subject() || iss != earlier.issuer() {
            return Err(refused(
                "of the refresh names another person than the login's (its `sub` or `iss` \
                 differs)",
            ));
        }
    }
    Ok(())
}

/// `aud` holds `client_id` (a string, or an array of at most
/// [`MAX_AUDIENCES`]); `azp`, present or required with more than one, is it.
pub(super) fn check_audience(claims: &Map<String, Value>, client_id: &str) -> Result<(), String> {
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(aud)) => vec![aud.as_str()],
        Some(Value::Array(auds)) if auds.len() <= MAX_AUDIENCES => {
            auds.iter().filter_map(Value::as_str).collect()
        }
        _ => return Err("has no `aud` this client reads".into()),
    };
    if !audiences.contains(&client_id) {
        return Err(format!(
            "is for another client: its `aud` does not hold `{}`",
            clip(client_id)
        ));
    }
    let azp = claims.get("azp").and_then(Value::as_str);
    if azp.is_some_and(|azp| azp != client_id) || (audiences.len() > 1 && azp.is_none()) {
        return Err(format!(
            "has an `azp` other than `{}` (or none, with more than one audience)",
            clip(client_id)
        ));
    }
    Ok(())
}

/// `acr`, the ID token's, is one of the `acr_values` the login asked for
/// (OpenID Connect Core 1.0 section 5.5.1.1): a login that asked for a
/// stronger sign-in takes no weaker one.
pub(super) fn check_acr(acr: Option<&str>, asked: &str) -> Result<(), String> {
    match acr {
        Some(acr) if asked.split_whitespace().any(|value| value == acr) => Ok(()),
        Some(acr) => Err(format!(
            "names the authentication context `{}`, not one the login asked for (`{}`)",
            clip(acr),
            clip(asked)
        )),
        None => Err(format!(
            "carries no `acr`, though the login asked for one of `{}`",
            clip(asked)
        )),
    }
}

/// `auth_time`, seconds since the epoch, no more than `max_age` seconds
/// before `now`, with `skew` seconds of grace (OpenID Connect Core 1.0
/// section 3.1.2.1: with `max_age`, the ID token carries it).
pub(super) fn check_auth_time(
    auth_time: Option<u64>,
    max_age: u64,
    now: u64,
    skew: u64,
) -> Result<(), String> {
    let Some(auth_time) = auth_time else {
        return Err(format!(
            "carries no `auth_time`, though the login asked for a sign-in at most {max_age} s old"
        ));
    };
    let age = now.saturating_sub(auth_time);
    if age > max_age.saturating_add(skew) || auth_time > now.saturating_add(skew) {
        return Err(format!(
            "says the person signed in {age} s ago (`auth_time`), not within the {max_age} s \
             the login asked for"
        ));
    }
    Ok(())
}

/// `exp` not passed and `iat` not ahead, both seconds since the epoch, with
/// `skew` seconds either way.
pub(super) fn check_times(claims: &Map<String, Value>, now: u64, skew: u64) -> Result<(), String> {
    let (Some(exp), Some(iat)) = (
        claims.get("exp").and_then(Value::as_u64),
        claims.get("iat").and_then(Value::as_u64),
    ) else {
        return Err("has no `exp` or no `iat` as seconds".into());
    };
    if exp.saturating_add(skew) < now {
        return Err(format!("expired {} s ago", now - exp));
    }
    if iat > now.saturating_add(skew) {
        return Err(format!("was issued {} s in the future (`iat`)", iat - now));
    }
    Ok(())
}

fn refused(why: &str) -> TokenError {
    TokenError::new(TokenErrorKind::LoginFailed).with_message(format!(
        "the ID token {why}; the login is refused and nothing kept"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_audience_and_the_authorized_party() {
        assert!(check_audience(&claims(r#"{"aud":"app"}"#), "app").is_ok());
        assert!(check_audience(&claims(r#"{"aud":["app"]}"#), "app").is_ok());
        assert!(check_audience(&claims(r#"{"aud":"other"}"#), "app").is_err());
        assert!(check_audience(&claims(r#"{"aud":["app","api"]}"#), "app").is_err());
        assert!(check_audience(&claims(r#"{"aud":["app","api"],"azp":"app"}"#), "app").is_ok());
        assert!(check_audience(&claims(r#"{"aud":"app","azp":"api"}"#), "app").is_err());
        assert!(check_audience(&claims(r#"{"aud":1}"#), "app").is_err());
    }

    #[test]
    fn the_authentication_context_is_one_asked_for() {
        assert!(check_acr(Some("urn:gold"), "urn:silver urn:gold").is_ok());
        assert!(check_acr(Some("urn:bronze"), "urn:silver urn:gold")
            .unwrap_err()
            .contains("not one the login asked for"));
        assert!(check_acr(None, "urn:gold")
            .unwrap_err()
            .contains("no `acr`"));
        // Whole values only.
        assert!(check_acr(Some("urn:gol"), "urn:gold").is_err());
    }

    #[test]
    fn the_sign_in_is_no_older_than_asked() {
        assert!(check_auth_time(Some(900), 120, 1000, 0).is_ok());
        assert!(check_auth_time(Some(850), 120, 1000, 60).is_ok());
        assert!(check_auth_time(Some(800), 120, 1000, 0)
            .unwrap_err()
            .contains("200 s ago"));
        assert!(check_auth_time(None, 120, 1000, 60)
            .unwrap_err()
            .contains("no `auth_time`"));
        // A sign-in in the future is no sign-in.
        assert!(check_auth_time(Some(2000), 120, 1000, 60).is_err());
    }

    #[test]
    fn the_times_with_the_skew() {
        let c = claims(r#"{"exp":1000,"iat":900}"#);
        assert!(check_times(&c, 950, 0).is_ok());
        assert!(check_times(&c, 1059, 60).is_ok());
        assert!(check_times(&c, 1061, 60).unwrap_err().contains("expired"));
        assert!(check_times(&c, 800, 60).unwrap_err().contains("future"));
        assert!(check_times(&claims(r#"{"exp":1000}"#), 950, 0).is_err());
    }
}
