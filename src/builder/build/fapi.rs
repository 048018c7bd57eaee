//! The FAPI 2.0 Security Profile's client rules, checked at build
//! ([`OAuthLayerBuilder::fapi2`]): each broken rule a [`ConfigError`] that
//! names it.

use crate::builder::OAuthLayerBuilder;
use crate::endpoint::ClientAuth;
use crate::error::{ConfigError, ConfigErrorKind};
use crate::keys::verify::FAPI2_ALGORITHMS;
use crate::keys::Algorithm;
use crate::login::PushedAuthorization;

impl OAuthLayerBuilder {
    /// With [`fapi2`](OAuthLayerBuilder::fapi2), the first rule of the
    /// profile the settings break, for `auth`, the client authentication
    /// chosen (`None`: by discovery).
    pub(super) fn check_fapi2(&self, auth: Option<&ClientAuth>) -> Result<(), ConfigError> {
        if !self.fapi2 {
            return Ok(());
        }
        let broken = |rule: &str| {
            Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                format!("fapi2 (the FAPI 2.0 Security Profile): {rule}"),
            ))
        };
        let has_secret = self.client_secret.is_some()
            || (self.secret_source.is_some() && self.key_file.is_none());
        let mtls = self.presents_certificate() || auth == Some(&ClientAuth::TlsClientAuth);
        let algorithm = match (auth, &self.key_file) {
            (Some(ClientAuth::PrivateKeyJwt(key)), _) => Some(key.algorithm()),
            (_, Some((algorithm, _))) => Some(*algorithm),
            _ => None,
        };
        let authenticates = algorithm.is_some() || auth == Some(&ClientAuth::TlsClientAuth);
        if has_secret || !authenticates {
            return broken(
                "the client authenticates with private_key_jwt (ClientAuth::PrivateKeyJwt, \
                 private_key_file) or mutual TLS (ClientAuth::TlsClientAuth), never a secret",
            );
        }
        if let Some(algorithm) = algorithm.filter(|a| !allowed(*a)) {
            return broken(&format!(
                "the client's key signs {algorithm}; the profile allows PS256, ES256 and EdDSA \
                 only"
            ));
        }
        match &self.dpop {
            Some(key) if !allowed(key.algorithm()) => {
                return broken(&format!(
                    "the DPoP key signs {}; the profile allows PS256, ES256 and EdDSA only",
                    key.algorithm()
                ))
            }
            Some(_) if self.dpop_allow_bearer => {
                return broken(
                    "tokens are sender-constrained: dpop_allow_bearer would take a bearer token",
                )
            }
            None if !mtls => {
                return broken(
                    "tokens are sender-constrained: give a DPoP key (dpop) or a client \
                     certificate (client_identity)",
                )
            }
            _ => {}
        }
        if self.par == Some(PushedAuthorization::Never) {
            return broken("every authorization request is pushed (RFC 9126): not Never");
        }
        if self.token_url.is_some() || self.auth_url.is_some() {
            return broken(
                "the server is known by its metadata (issuer or protected_resource), which \
                 names its issuer (the client assertion's audience) and its endpoints; not \
                 token_url",
            );
        }
        if self.assertion_audience.is_some() {
            return broken(
                "the client assertion's audience is the issuer: assertion_audience is refused",
            );
        }
        if self.allow_insecure_http {
            return broken(
                "https everywhere: allow_insecure_http is refused (loopback http stays)",
            );
        }
        Ok(())
    }
}

/// Whether the profile allows `algorithm`.
fn allowed(algorithm: Algorithm) -> bool {
    FAPI2_ALGORITHMS.contains(&algorithm.name())
}
