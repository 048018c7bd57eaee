//! [`OAuthLayerBuilder::from_env`]: a builder from `OAUTH_*` variables.

use super::OAuthLayerBuilder;
use crate::endpoint::client_auth::ClientAuth;
use crate::error::{ConfigError, ConfigErrorKind};

impl OAuthLayerBuilder {
    /// A builder with the endpoint and credentials from the environment:
    /// one of `OAUTH_ISSUER`, `OAUTH_TOKEN_URL` and `OAUTH_AUTH_URL`;
    /// `OAUTH_CLIENT_ID` and `OAUTH_CLIENT_SECRET`; and optionally
    /// `OAUTH_CLIENT_AUTH` (`basic`, `form`, `basic-unencoded`, `unencoded`;
    /// see [`ClientAuth`]), `OAUTH_SCOPE`, and `OAUTH_RESOURCE` (one or more
    /// resource URIs, separated by white space). Set anything else on it
    /// before [`build`](Self::build).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or empty.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let urls = [
            ("OAUTH_ISSUER", var("OAUTH_ISSUER")),
            ("OAUTH_TOKEN_URL", var("OAUTH_TOKEN_URL")),
            ("OAUTH_AUTH_URL", var("OAUTH_AUTH_URL")),
        ];
        let set: Vec<&str> = urls
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(name, _)| *name)
            .collect();
        if set.len() > 1 {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                format!("{} are all set; set one", set.join(" and ")),
            ));
        }
        let mut builder = match urls {
            [(_, Some(issuer)), ..] => Self::new().issuer(issuer),
            [_, (_, Some(url)), _] => Self::new().token_url(url),
            [_, _, (_, Some(url))] => Self::new().auth_url(url),
            _ => {
                return Err(ConfigError::new(
                    ConfigErrorKind::MissingUrl,
                    "none of OAUTH_ISSUER, OAUTH_TOKEN_URL and OAUTH_AUTH_URL is set",
                ))
            }
        };
        let missing = |kind, name: &str| {
            ConfigError::new(kind, format!("environment variable {name} is not set"))
        };
        let id = var("OAUTH_CLIENT_ID")
            .ok_or_else(|| missing(ConfigErrorKind::MissingClientId, "OAUTH_CLIENT_ID"))?;
        let secret = var("OAUTH_CLIENT_SECRET")
            .ok_or_else(|| missing(ConfigErrorKind::MissingClientSecret, "OAUTH_CLIENT_SECRET"))?;
        builder = builder.client_id(id).client_secret(secret);
        if let Some(auth) = var("OAUTH_CLIENT_AUTH") {
            let auth: ClientAuth = auth.parse().map_err(|e: ConfigError| {
                ConfigError::new(e.kind(), format!("OAUTH_CLIENT_AUTH: {}", e.message()))
            })?;
            builder = builder.client_auth(auth);
        }
        if let Some(scope) = var("OAUTH_SCOPE") {
            builder = builder.scope(scope);
        }
        // Several resources, separated by white space.
        for resource in var("OAUTH_RESOURCE")
            .iter()
            .flat_map(|r| r.split_whitespace())
        {
            builder = builder.resource(resource);
        }
        Ok(builder)
    }
}
