//! Identity tokens from the platform a workload runs on, over HTTP: GitHub
//! Actions' OIDC endpoint, GCP's metadata server, Azure's managed identity
//! endpoint. Each answer is bounded in time (the token request's fetch
//! timeout) and size (as a token response), checked before it is used, and
//! kept until shortly before its own `exp`.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION};

use crate::error::{TokenError, TokenErrorKind};
use crate::support::encoding::form_urlencode;
use crate::transport::{Transport, MAX_RESPONSE_BODY};

/// How long before its `exp` a platform token is asked for again.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// GCP's metadata server, unless `GCE_METADATA_HOST` names another.
const GCE_METADATA_HOST: &str = "metadata.google.internal";

/// Azure's instance metadata service (IMDS), unless
/// `AZURE_POD_IDENTITY_AUTHORITY_HOST` names another (as Azure's SDKs
/// honour it).
const AZURE_IMDS: &str = "http://169.254.169.254";

/// Which platform, and what its token is asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Platform {
    /// GitHub Actions: `ACTIONS_ID_TOKEN_REQUEST_URL` and
    /// `ACTIONS_ID_TOKEN_REQUEST_TOKEN`, for an `audience`.
    GithubActions { audience: String },
    /// GCP's metadata server, an identity token for an `audience`.
    Gcp { audience: String },
    /// Azure's managed identity, a token for a `resource` (of a
    /// user-assigned identity's `client_id`, if given).
    Azure {
        resource: String,
        client_id: Option<String>,
    },
}

/// A platform's token, kept until shortly before its `exp`.
#[derive(Debug)]
pub(crate) struct PlatformToken {
    pub(crate) platform: Platform,
    kept: Mutex<Option<(String, SystemTime)>>,
}

impl PlatformToken {
    pub(crate) fn new(platform: Platform) -> Self {
        PlatformToken {
            platform,
            kept: Mutex::new(None),
        }
    }

    /// How the source is known in identities and messages.
    pub(crate) fn name(&self) -> String {
        match &self.platform {
            Platform::GithubActions { audience } => format!("github-actions:{audience}"),
            Platform::Gcp { audience } => format!("gcp-metadata:{audience}"),
            Platform::Azure {
                resource,
                client_id,
            } => format!(
                "azure-managed-identity:{resource}{}",
                client_id
                    .as_deref()
                    .map(|id| format!(":{id}"))
                    .unwrap_or_default()
            ),
        }
    }

    /// The token: the one kept while it has more than a minute left, else
    /// a new one asked through `transport`.
    pub(crate) async fn get(&self, transport: &dyn Transport) -> Result<String, TokenError> {
        let now = SystemTime::now();
        if let Some((token, until)) = self.kept().as_ref() {
            if now + RENEW_BEFORE < *until {
                return Ok(token.clone());
            }
        }
        let (token, until) = self.ask(transport).await?;
        if let Some(until) = until {
            *self.kept() = Some((token.clone(), until));
        }
        Ok(token)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<(String, SystemTime)>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One request to the platform: the token and when it runs out (its
    /// `exp`, or Azure's `expires_on`), checked.
    async fn ask(
        &self,
        transport: &dyn Transport,
    ) -> Result<(String, Option<SystemTime>), TokenError> {
        let fail = |why: String| {
            TokenError::new(TokenErrorKind::Credential)
                .with_message(format!("the identity token from {}: {why}", self.name()))
        };
        let env = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| fail(format!("{name} is not set")))
        };
        // The platform's own secret, scrubbed from whatever it says back.
        let mut secret = None;
        let (url, header) = match &self.platform {
            Platform::GithubActions { audience } => {
                let url = env("ACTIONS_ID_TOKEN_REQUEST_URL").map_err(|e| {
                    e.with_message(format!(
                        "the identity token from {}: ACTIONS_ID_TOKEN_REQUEST_URL is not set \
                         (a GitHub Actions job needs `permissions: id-token: write`)",
                        self.name()
                    ))
                })?;
                let bearer = env("ACTIONS_ID_TOKEN_REQUEST_TOKEN")?;
                secret = Some(bearer.clone());
                let join = if url.contains('?') { '&' } else { '?' };
                let value = header_value(&format!("Bearer {bearer}")).map_err(fail)?;
                (
                    format!("{url}{join}audience={}", form_urlencode(audience)),
                    (AUTHORIZATION, value),
                )
            }
            Platform::Gcp { audience } => {
                let host = std::env::var("GCE_METADATA_HOST")
                    .ok()
                    .filter(|h| !h.trim().is_empty())
                    .unwrap_or_else(|| GCE_METADATA_HOST.to_owned());
                (
                    format!(
                        "http://{host}/computeMetadata/v1/instance/service-accounts/default/\
                         identity?audience={}&format=full",
                        form_urlencode(audience)
                    ),
                    (
                        HeaderName::from_static("metadata-flavor"),
                        HeaderValue::from_static("Google"),
                    ),
                )
            }
            Platform::Azure {
                resource,
                client_id,
            } => {
                let client = client_id
                    .as_deref()
                    .map(|id| format!("&client_id={}", form_urlencode(id)))
                    .unwrap_or_default();
                let query = format!("resource={}{client}", form_urlencode(resource));
                match (env("IDENTITY_ENDPOINT"), env("IDENTITY_HEADER")) {
                    (Ok(endpoint), Ok(header)) => {
                        secret = Some(header.clone());
                        (
                            format!("{endpoint}?api-version=2019-08-01&{query}"),
                            (
                                HeaderName::from_static("x-identity-header"),
                                header_value(&header).map_err(fail)?,
                            ),
                        )
                    }
                    _ => {
                        let host = std::env::var("AZURE_POD_IDENTITY_AUTHORITY_HOST")
                            .ok()
                            .filter(|h| !h.trim().is_empty())
                            .unwrap_or_else(|| AZURE_IMDS.to_owned());
                        (
                            format!(
                                "{}/metadata/identity/oauth2/token?api-version=2018-02-01&{query}",
                                host.trim_end_matches('/')
                            ),
                            (
                                HeaderName::from_static("metadata"),
                                HeaderValue::from_static("true"),
                            ),
                        )
                    }
                }
            }
        };
        let uri: http::Uri = url
            .parse()
            .map_err(|_| fail("the platform's URL does not parse".into()))?;
        let mut request = http::Request::new(Bytes::new());
        *request.uri_mut() = uri;
        request.headers_mut().insert(header.0, header.1);
        request.headers_mut().insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        let response = transport
            .send(request, MAX_RESPONSE_BODY)
            .await
            .map_err(|e| fail(format!("the request failed: {e}")))?;
        if !response.status().is_success() {
            let (code, text) = crate::endpoint::answer::parse_error_body(response.body());
            let scrub = crate::endpoint::redact::Redactor::default().and(secret.as_slice());
            let clip = |t: String| crate::error::clip(&scrub.scrub(t));
            let said = match (code, text) {
                (Some(code), Some(text)) => format!(" ({}: {})", clip(code), clip(text)),
                (Some(one), None) | (None, Some(one)) => format!(" ({})", clip(one)),
                _ => String::new(),
            };
            return Err(fail(format!(
                "the platform answered {}{said}",
                response.status()
            )));
        }
        let (token, expires_on) = match &self.platform {
            Platform::Gcp { .. } => (
                String::from_utf8_lossy(response.body()).trim().to_owned(),
                None,
            ),
            _ => {
                let json: serde_json::Value = serde_json::from_slice(response.body())
                    .map_err(|_| fail("the answer is not JSON".into()))?;
                let member = match self.platform {
                    Platform::GithubActions { .. } => "value",
                    _ => "access_token",
                };
                let token = json
                    .get(member)
                    .and_then(serde_json::Value::as_str)
                    .ok_or_else(|| fail(format!("the answer has no `{member}` string")))?
                    .to_owned();
                let expires_on = json
                    .get("expires_on")
                    .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
                    .map(|s| UNIX_EPOCH + Duration::from_secs(s));
                (token, expires_on)
            }
        };
        crate::endpoint::check_token(&token, None)
            .map_err(|_| fail("the answer is not a token that can be sent".into()))?;
        let until = crate::support::encoding::jwt_claims(&token)
            .ok()
            .and_then(|c| c.get("exp")?.as_u64())
            .map(|s| UNIX_EPOCH + Duration::from_secs(s))
            .or(expires_on);
        if until.is_some_and(|until| until <= SystemTime::now()) {
            return Err(fail("the token the platform gave has expired".into()));
        }
        Ok((token, until))
    }
}

/// A header value from configuration text.
fn header_value(text: &str) -> Result<HeaderValue, String> {
    let mut value = HeaderValue::from_str(text)
        .map_err(|_| "a value the platform set cannot be sent in a header".to_owned())?;
    value.set_sensitive(true);
    Ok(value)
}
