//! [`Grant`]: which authorization grant a token request asks with, its
//! `grant_type`, and what it adds to each request's body (the JWT-bearer
//! grant's fresh `assertion`, the current refresh token).

pub(crate) mod id_jag;
pub(crate) mod jwt_bearer;
pub(crate) mod platform;
pub(crate) mod refresh;
pub(crate) mod token_exchange;

use std::sync::Arc;

use self::refresh::{Chain, REFRESH_GRANT_TYPE};
use self::token_exchange::{Asking, TokenExchange, TOKEN_EXCHANGE_GRANT_TYPE};
use crate::endpoint::client_auth::secret::AssertionFile;
use crate::endpoint::client_auth::AssertionSettings;
use crate::endpoint::grant::jwt_bearer::{JwtBearer, Source, JWT_BEARER_GRANT_TYPE};
use crate::error::{TokenError, TokenErrorKind};
use crate::support::encoding::form_urlencode;
use crate::transport::Transport;

/// The grant of a layer's token requests.
#[derive(Clone, Debug, Default)]
pub(crate) enum Grant {
    /// RFC 6749 section 4.4.
    #[default]
    ClientCredentials,
    /// RFC 7523 section 2.1.
    JwtBearer(Arc<JwtBearer>),
    /// RFC 8693.
    TokenExchange(Arc<TokenExchange>),
    /// RFC 6749 section 6, with the chain of refresh tokens.
    Refresh(Arc<Chain>),
}

impl Grant {
    /// The `grant_type`.
    pub(crate) fn grant_type(&self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client_credentials",
            Grant::JwtBearer(_) => JWT_BEARER_GRANT_TYPE,
            Grant::TokenExchange(_) => TOKEN_EXCHANGE_GRANT_TYPE,
            Grant::Refresh(_) => REFRESH_GRANT_TYPE,
        }
    }

    /// What sets the grant's tokens apart in a token identity (none for
    /// client credentials, whose identity predates grants).
    pub(crate) fn identity(&self) -> Option<String> {
        match self {
            Grant::ClientCredentials => None,
            Grant::JwtBearer(grant) => Some(grant.identity()),
            Grant::TokenExchange(grant) => Some(grant.identity()),
            Grant::Refresh(chain) => Some(chain.identity()),
        }
    }

    /// The chain of refresh tokens, for the refresh grant.
    pub(crate) fn chain(&self) -> Option<&Arc<Chain>> {
        match self {
            Grant::Refresh(chain) => Some(chain),
            _ => None,
        }
    }

    /// Whether the `scope` parameter goes into the grant's assertion rather
    /// than the body.
    pub(crate) fn takes_scope(&self) -> bool {
        matches!(self, Grant::JwtBearer(grant) if grant.scope_in_assertion)
    }

    /// What each request of this grant adds to its body, for the token
    /// endpoint at `url` (discovered from `issuer`) and the request's
    /// `scope`. A signed assertion's `aud` follows the rule of client
    /// assertions ([`Assertions`](crate::endpoint::client_auth::assertion::Assertions)): the issuer
    /// first, the token endpoint's URL after a refusal.
    pub(crate) fn proof(
        &self,
        url: &str,
        issuer: Option<&str>,
        (scope, params): (Option<&str>, &[(String, String)]),
        settings: &AssertionSettings,
    ) -> GrantProof {
        match self {
            Grant::ClientCredentials => GrantProof::Nothing,
            Grant::JwtBearer(grant) => match &grant.source {
                Source::Signed(signed) => {
                    use crate::endpoint::client_auth::assertion::{
                        AssertionKey, Assertions, Audiences, ClientAssertion,
                    };
                    let claims = |audience: &str| {
                        ClientAssertion::grant(&signed.issuer, &signed.subject, audience)
                            .lifetime(signed.lifetime)
                            .clock_skew(settings.clock_skew)
                            .scope_claim(scope.filter(|_| grant.scope_in_assertion))
                    };
                    let audiences = Audiences {
                        set: signed.audience.as_deref(),
                        issuer,
                        url,
                    };
                    GrantProof::Signed(Box::new(Assertions::for_audiences(
                        claims,
                        audiences,
                        AssertionKey::Key(signed.key.clone()),
                        &settings.grant_endpoint_audience,
                    )))
                }
                Source::File(path) => GrantProof::File(AssertionFile::new(path)),
                Source::Subject(source) => {
                    GrantProof::Asked(source.clone(), Asking::of(issuer, params))
                }
            },
            Grant::TokenExchange(grant) => {
                GrantProof::Subject(Arc::clone(grant), Asking::of(issuer, params))
            }
            Grant::Refresh(chain) => GrantProof::Refresh(Arc::clone(chain)),
        }
    }
}

/// What a grant adds to each request's body.
pub(crate) enum GrantProof {
    Nothing,
    /// A JWT-bearer assertion, signed fresh.
    Signed(Box<crate::endpoint::client_auth::assertion::Assertions>),
    /// A JWT-bearer assertion read from a file.
    File(AssertionFile),
    /// A JWT-bearer assertion asked of a subject token source, with what
    /// the request asks for.
    Asked(token_exchange::SubjectToken, Asking),
    /// A token exchange's subject token, asked for each request.
    Subject(Arc<TokenExchange>, Asking),
    /// The chain's current refresh token.
    Refresh(Arc<Chain>),
}

impl GrantProof {
    /// What to check when the endpoint refused this grant: for a JWT-bearer
    /// assertion (`carried`), its `iss`, `sub`, `aud` and key id, read back
    /// from it (never the key or the signature); for a token exchange, where
    /// the subject token came from and the `audience` or `resource` asked
    /// for (among the request's `params`).
    pub(crate) fn refusal_hint(
        &self,
        carried: Option<&str>,
        params: &[(String, String)],
    ) -> Option<String> {
        let claim = |value: Option<&serde_json::Value>| match value {
            Some(serde_json::Value::String(s)) => format!("`{}`", crate::error::clip(s)),
            Some(serde_json::Value::Array(items)) => format!(
                "`{}`",
                crate::error::clip(
                    &items
                        .iter()
                        .filter_map(serde_json::Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            ),
            _ => "none".to_owned(),
        };
        match self {
            GrantProof::Nothing => None,
            GrantProof::Refresh(_) => Some(
                "the token endpoint refused the refresh: `invalid_grant` means the refresh \
                 token expired, was revoked or was used before (a new login is needed); \
                 `invalid_client` that the client must authenticate (give its secret) or is not \
                 the one the login was made for"
                    .to_owned(),
            ),
            GrantProof::Signed(_) | GrantProof::File(_) | GrantProof::Asked(..) => {
                let jwt = carried?;
                let from = match self {
                    GrantProof::File(file) => format!(" read from `{}`", file.path().display()),
                    GrantProof::Asked(source, _) => format!(" from `{}`", source.source()),
                    _ => String::new(),
                };
                let read = crate::support::encoding::jwt_claims(jwt)
                    .and_then(|c| Ok((c, crate::support::encoding::jwt_header(jwt)?)));
                let Ok((claims, header)) = read else {
                    return Some(format!(
                        "the token endpoint refused the JWT-bearer grant's assertion{from}, \
                         which is not a JWT whose claims read: check what the source hands out"
                    ));
                };
                Some(format!(
                    "the token endpoint refused the JWT-bearer grant's assertion{from} (iss {}, \
                     sub {}, aud {}, key id {}): check that the server trusts this issuer and \
                     its key (by that key id) for the subject, that the subject is one it knows \
                     and may act for, and that it expects this audience (set another with \
                     JwtBearer::audience; Google wants its token_uri, others their token \
                     endpoint's URL or their issuer)",
                    claim(claims.get("iss")),
                    claim(claims.get("sub")),
                    claim(claims.get("aud")),
                    claim(header.get("kid")),
                ))
            }
            GrantProof::Subject(exchange, _) => {
                let asked: Vec<String> = params
                    .iter()
                    .filter(|(name, _)| name == "audience" || name == "resource")
                    .map(|(name, value)| format!("{name} `{}`", crate::error::clip(value)))
                    .collect();
                let asked = if asked.is_empty() {
                    "no audience or resource".to_owned()
                } else {
                    asked.join(", ")
                };
                Some(format!(
                    "the token endpoint refused the token exchange of the subject token from \
                     `{}` (type `{}`) for {asked}: check that the server trusts the subject \
                     token's issuer and type, that this client may exchange it, and that it may \
                     ask for that audience or resource",
                    exchange.subject.source(),
                    exchange.subject_token_type,
                ))
            }
        }
    }

    /// Appends the grant's part to `body` (a signed assertion: with
    /// `other_audience`, for the audience the server did not take last);
    /// what it carries of a credential (the assertion, the subject token),
    /// to scrub from the answer, and which signed assertion.
    pub(crate) async fn append(
        &self,
        body: &mut Vec<u8>,
        other_audience: bool,
        choice: &mut Option<crate::endpoint::client_auth::assertion::AudienceChoice>,
        transport: &dyn Transport,
    ) -> Result<Option<String>, TokenError> {
        let assertion = match self {
            GrantProof::Nothing => return Ok(None),
            GrantProof::Signed(assertions) => {
                let chosen = assertions.choice(other_audience);
                *choice = Some(chosen);
                assertions.sign(chosen).await?
            }
            GrantProof::File(file) => file.read().await?,
            GrantProof::Asked(source, asking) => {
                read_subject(source, "assertion", asking, transport).await?
            }
            GrantProof::Subject(exchange, asking) => {
                return append_subject(exchange, asking, body, transport)
                    .await
                    .map(Some)
            }
            GrantProof::Refresh(chain) => {
                let token = chain.to_send()?;
                body.extend_from_slice(b"&refresh_token=");
                body.extend(form_urlencode(&token).bytes());
                return Ok(Some(token));
            }
        };
        body.extend_from_slice(b"&assertion=");
        body.extend(form_urlencode(&assertion).bytes());
        Ok(Some(assertion))
    }
}

/// Appends the subject token of `exchange`, asked now, and the token types
/// (RFC 8693 section 2.1). The subject token.
async fn append_subject(
    exchange: &TokenExchange,
    asking: &Asking,
    body: &mut Vec<u8>,
    transport: &dyn Transport,
) -> Result<String, TokenError> {
    let subject = read_subject(&exchange.subject, "subject token", asking, transport).await?;
    let mut pair = |name: &str, value: &str| {
        body.push(b'&');
        body.extend_from_slice(name.as_bytes());
        body.push(b'=');
        body.extend(form_urlencode(value).bytes());
    };
    pair("subject_token", &subject);
    pair("subject_token_type", &exchange.subject_token_type);
    if let Some(requested) = &exchange.requested_token_type {
        pair("requested_token_type", requested);
    }
    Ok(subject)
}

/// The token `source` holds now for a request `asking` (`what` it is for,
/// in errors), trimmed.
pub(crate) async fn read_subject(
    source: &token_exchange::SubjectToken,
    what: &str,
    asking: &Asking,
    transport: &dyn Transport,
) -> Result<String, TokenError> {
    let token = match &source.0 {
        token_exchange::SubjectFrom::Platform(platform) => platform.get(transport).await?,
        token_exchange::SubjectFrom::ForRequest { source, .. } => {
            (source.ask)(asking.clone()).await?
        }
        token_exchange::SubjectFrom::File(path) => {
            AssertionFile::subject_token(path).read().await?
        }
        token_exchange::SubjectFrom::Fn { name, ask } => {
            let token = ask().await.map_err(|e| {
                TokenError::new(TokenErrorKind::Credential)
                    .with_message(format!("the {what} `{name}` could not be had: {e}"))
            })?;
            if token.trim().is_empty() {
                return Err(TokenError::new(TokenErrorKind::Credential)
                    .with_message(format!("the {what} `{name}` is empty")));
            }
            token
        }
    };
    let token = token.trim().to_owned();
    // A JWT whose `exp` has passed is refused by any server: never sent,
    // whichever source it came from.
    if let Ok(claims) = crate::support::encoding::jwt_claims(&token) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        if let Some(exp) = claims.get("exp").and_then(serde_json::Value::as_u64) {
            if exp <= now {
                return Err(
                    TokenError::new(TokenErrorKind::Credential).with_message(format!(
                        "the {what} `{}` has expired, {} s ago (exp {exp}); it is not sent: its \
                     source must hand out a fresh one",
                        source.source(),
                        now - exp
                    )),
                );
            }
        }
    }
    Ok(token)
}

impl GrantProof {
    /// The chain, for the refresh grant.
    pub(crate) fn chain(&self) -> Option<&Chain> {
        match self {
            GrantProof::Refresh(chain) => Some(chain),
            _ => None,
        }
    }

    /// The signed assertions, when the grant signs its own.
    pub(crate) fn assertions(
        &self,
    ) -> Option<&crate::endpoint::client_auth::assertion::Assertions> {
        match self {
            GrantProof::Signed(assertions) => Some(assertions),
            _ => None,
        }
    }
}
