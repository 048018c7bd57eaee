//! The builder's `Debug`: every setting by name, the secret, keys and
//! parameter values left out.

use std::fmt;

use super::OAuthLayerBuilder;

impl fmt::Debug for OAuthLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthLayerBuilder")
            .field("auth_url", &self.auth_url)
            .field("token_url", &self.token_url)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("client_secret_from", &self.secret_source)
            .field("client_auth", &self.client_auth)
            .field("grant", &self.grant)
            .field(
                "params",
                &self.params.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("header_name", &self.header_name)
            .field("auth_scheme", &self.auth_scheme)
            .field("keep_existing_header", &self.keep_existing_header)
            .field("transport", &self.transport.as_ref().map(|_| "custom"))
            .field("token_source", &self.source.as_ref().map(|_| "custom"))
            .field("token_source_name", &self.source_name)
            .field("token_store", &self.store.as_ref().map(|_| "custom"))
            .field("refresh_margin", &self.refresh_margin)
            .field("expiry_skew", &self.expiry_skew)
            .field("fetch_timeout", &self.fetch_timeout)
            .field("forced_renewal_interval", &self.forced_renewal_interval)
            .field("min_backoff", &self.min_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("assertion_audience", &self.assertion_audience)
            .field("assertion_lifetime", &self.assertion_lifetime)
            .field("assertion_clock_skew", &self.assertion_clock_skew)
            .field("assertion_typ", &self.assertion_typ)
            .field("client_identity", &self.presents_certificate())
            .field("dpop", &self.dpop_key())
            .field("dpop_allow_bearer", &self.dpop_allow_bearer)
            .field("params_for", &self.params_for.as_ref().map(|_| "custom"))
            .field("max_token_slots", &self.max_token_slots)
            .finish()
    }
}
