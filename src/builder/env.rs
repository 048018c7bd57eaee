//! [`OAuthLayerBuilder::from_env`]: a builder from `OAUTH_*` variables.

use super::OAuthLayerBuilder;
use crate::endpoint::ClientAuth;
use crate::error::{ConfigError, ConfigErrorKind};

impl OAuthLayerBuilder {
    /// A builder with the endpoint and credentials from the environment:
    ///
    /// - The endpoint: one of `OAUTH_ISSUER`, `OAUTH_TOKEN_URL` and
    ///   `OAUTH_AUTH_URL`.
    /// - The client: `OAUTH_CLIENT_ID`, and one credential. The credential is
    ///   `OAUTH_CLIENT_SECRET`, or `OAUTH_CLIENT_SECRET_FILE` as
    ///   [`client_secret_file`](Self::client_secret_file) reads it, or
    ///   `OAUTH_CLIENT_ASSERTION_FILE` as [`ClientAuth::AssertionFile`] reads
    ///   it. For the last, the word `kubernetes` stands for the pod's
    ///   service account token, `/var/run/secrets/kubernetes.io/serviceaccount/token`.
    /// - Optionally `OAUTH_CLIENT_AUTH`: `basic`, `form`, `basic-unencoded` or
    ///   `unencoded`, as [`ClientAuth`] says.
    /// - Optionally `OAUTH_SCOPE`, and `OAUTH_RESOURCE`: one or more resource
    ///   URIs, separated by white space.
    ///
    /// Azure workload identity has a preset. It applies without an `OAUTH_*`
    /// endpoint, when `AZURE_FEDERATED_TOKEN_FILE` is set, as the platform sets
    /// it in a pod. The endpoint is then Microsoft Entra ID's v2.0 token
    /// endpoint of `AZURE_TENANT_ID`, at `AZURE_AUTHORITY_HOST`. That is
    /// `https://login.microsoftonline.com` by default. The client is
    /// `AZURE_CLIENT_ID`, unless `OAUTH_CLIENT_ID` is set, proven by the
    /// federated token file. Give the scope with `OAUTH_SCOPE` or
    /// [`scope`](Self::scope), for example `api://orders/.default`.
    ///
    /// Set anything else on it before [`build`](Self::build).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the variable that is missing or empty, or
    /// the variables that conflict.
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
        at_most_one(&urls)?;
        let missing = |kind, name: &str| {
            ConfigError::new(kind, format!("environment variable {name} is not set"))
        };
        let no_url = urls.iter().all(|(_, v)| v.is_none());
        let azure = var("AZURE_FEDERATED_TOKEN_FILE").filter(|_| no_url);
        let mut builder = match (urls, &azure) {
            ([(_, Some(issuer)), ..], _) => Self::new().issuer(issuer),
            ([_, (_, Some(url)), _], _) => Self::new().token_url(url),
            ([_, _, (_, Some(url))], _) => Self::new().auth_url(url),
            (_, Some(_)) => {
                let tenant = var("AZURE_TENANT_ID")
                    .ok_or_else(|| missing(ConfigErrorKind::MissingUrl, "AZURE_TENANT_ID"))?;
                let host = var("AZURE_AUTHORITY_HOST")
                    .unwrap_or_else(|| "https://login.microsoftonline.com".into());
                Self::new().token_url(format!(
                    "{}/{}/oauth2/v2.0/token",
                    host.trim_end_matches('/'),
                    tenant.trim()
                ))
            }
            _ => {
                return Err(ConfigError::new(
                    ConfigErrorKind::MissingUrl,
                    "none of OAUTH_ISSUER, OAUTH_TOKEN_URL and OAUTH_AUTH_URL is set (nor \
                     AZURE_FEDERATED_TOKEN_FILE, for Azure workload identity)",
                ))
            }
        };
        let id = match (var("OAUTH_CLIENT_ID"), &azure) {
            (Some(id), _) => id,
            (None, Some(_)) => var("AZURE_CLIENT_ID")
                .ok_or_else(|| missing(ConfigErrorKind::MissingClientId, "AZURE_CLIENT_ID"))?,
            (None, None) => {
                return Err(missing(ConfigErrorKind::MissingClientId, "OAUTH_CLIENT_ID"))
            }
        };
        builder = builder.client_id(id);
        let assertion_file = var("OAUTH_CLIENT_ASSERTION_FILE").map(|file| {
            if file.trim() == "kubernetes" {
                crate::endpoint::KUBERNETES_TOKEN_FILE.into()
            } else {
                file
            }
        });
        let credentials = [
            ("OAUTH_CLIENT_SECRET", var("OAUTH_CLIENT_SECRET")),
            ("OAUTH_CLIENT_SECRET_FILE", var("OAUTH_CLIENT_SECRET_FILE")),
            match (assertion_file, azure) {
                (None, Some(azure)) => ("AZURE_FEDERATED_TOKEN_FILE", Some(azure)),
                (file, _) => ("OAUTH_CLIENT_ASSERTION_FILE", file),
            },
        ];
        at_most_one(&credentials)?;
        builder = match credentials {
            [(_, Some(secret)), ..] => builder.client_secret(secret),
            [_, (_, Some(file)), _] => builder.client_secret_file(file),
            [_, _, (_, Some(file))] => builder.client_auth(ClientAuth::AssertionFile(file.into())),
            _ => {
                return Err(missing(
                    ConfigErrorKind::MissingClientSecret,
                    "OAUTH_CLIENT_SECRET (nor OAUTH_CLIENT_SECRET_FILE or \
                     OAUTH_CLIENT_ASSERTION_FILE)",
                ))
            }
        };
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

/// A `ConfigError` naming them when more than one of `vars` is set.
fn at_most_one(vars: &[(&str, Option<String>)]) -> Result<(), ConfigError> {
    let set: Vec<&str> = vars
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
    Ok(())
}
