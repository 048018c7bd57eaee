//! A logout token the server posted to the app's back-channel logout route
//! (OpenID Connect Back-Channel Logout 1.0 section 2.6), checked: its
//! signature by the server's keys, `typ`, `iss`, `aud`, `iat`, `exp`, `jti`,
//! the back-channel logout event, `sub` or `sid`, and no `nonce`.

use serde_json::Value;

use super::id_token::{check_audience, check_times};
use super::jwks::ServerJwt;
use super::Checks;
use crate::endpoint::{now_ms, ServerMetadata};
use crate::error::{clip, TokenError, TokenErrorKind};

/// The member of a logout token's `events` that makes it one.
pub(crate) const BACK_CHANNEL_EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";

/// The longest a logout token's `jti` is remembered, whatever its `exp`
/// says: as long as the accounts it may name stay linked.
pub(crate) const MAX_VALID_FOR: u64 = 400 * 24 * 60 * 60;

/// The longest `jti`, `sub` or `sid` read.
const MAX_CLAIM_LEN: usize = 255;

/// What a verified logout token says: whose session ended, and what makes
/// the token used once.
pub(crate) struct LogoutClaims {
    pub(crate) subject: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) jti: String,
    /// Seconds the token stays valid from now, the skew included, within
    /// [`MAX_VALID_FOR`]: how long its `jti` is remembered.
    pub(crate) valid_for: u64,
}

impl Checks<'_> {
    /// The claims of `token`, a logout token from `server` for `client_id`,
    /// once every check passed.
    ///
    /// # Errors
    ///
    /// [`InvalidLogoutToken`](TokenErrorKind::InvalidLogoutToken) saying which check
    /// failed; a read of the server's keys that failed is its error.
    pub(crate) async fn verified_logout_token(
        &self,
        server: &ServerMetadata,
        token: &str,
        client_id: &str,
    ) -> Result<LogoutClaims, TokenError> {
        if let Some(typ) = crate::keys::verify::Jws::parse(token)
            .ok()
            .and_then(|jws| jws.text("typ").map(str::to_ascii_lowercase))
        {
            // Back-Channel Logout 1.0 section 2.4 only recommends
            // `logout+jwt`; servers in the field send `JWT` (Keycloak before
            // 25, Authentik before 2025.12). What keeps another token from
            // passing for a logout token is its `events` member and its lack
            // of a `nonce` (section 4.1), both checked below; a `typ` of
            // another kind of JWT (`at+jwt`, `dpop+jwt`, ...) is refused.
            let typ = typ.strip_prefix("application/").unwrap_or(&typ);
            if typ != "logout+jwt" && typ != "jwt" {
                return Err(refused(&format!(
                    "has the `typ` `{}`, neither logout+jwt nor JWT (another kind of token)",
                    clip(typ)
                )));
            }
        }
        let signed = ServerJwt {
            what: "the logout token",
            algorithms: &server.id_token_algorithms,
            kind: TokenErrorKind::InvalidLogoutToken,
        };
        let claims = self
            .keys
            .server_signed(self.request, server, token, signed)
            .await?;
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty() && v.len() <= MAX_CLAIM_LEN)
                .map(str::to_owned)
        };
        let iss = claims
            .get("iss")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if iss != server.issuer {
            return Err(refused(&format!(
                "names the issuer `{}`, not `{}`",
                clip(iss),
                server.issuer
            )));
        }
        check_audience(&claims, client_id).map_err(|why| refused(&why))?;
        let now = now_ms() / 1000;
        let skew = self.request.spec.id_token_skew.as_secs();
        check_times(&claims, now, skew).map_err(|why| refused(&why))?;
        let event = claims
            .get("events")
            .and_then(Value::as_object)
            .and_then(|events| events.get(BACK_CHANNEL_EVENT));
        if !event.is_some_and(Value::is_object) {
            return Err(refused(&format!(
                "has no `events` member `{BACK_CHANNEL_EVENT}` holding an object"
            )));
        }
        if claims.contains_key("nonce") {
            return Err(refused(
                "carries a `nonce`, which a logout token never does (an ID token sent as one?)",
            ));
        }
        let (subject, session_id) = (text("sub"), text("sid"));
        if subject.is_none() && session_id.is_none() {
            return Err(refused("names nobody: it has neither `sub` nor `sid`"));
        }
        let Some(jti) = text("jti") else {
            return Err(refused("has no `jti`, which makes it used once"));
        };
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(now);
        Ok(LogoutClaims {
            subject,
            session_id,
            jti,
            valid_for: exp
                .saturating_add(skew)
                .saturating_sub(now)
                .clamp(1, MAX_VALID_FOR),
        })
    }
}

/// The error of a logout token that fails a check.
pub(crate) fn refused(why: &str) -> TokenError {
    TokenError::new(TokenErrorKind::InvalidLogoutToken)
        .with_message(format!("the logout token {why}; nothing was signed out"))
}
