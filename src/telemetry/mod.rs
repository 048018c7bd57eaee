//! What the layer reports. [`Stats`](stats::Stats), in `stats`, holds its
//! counters, read by `OAuthLayer::stats`. This file sends metrics through the
//! `metrics` facade, with feature `metrics`, to whichever recorder the program
//! installed: Prometheus, OpenTelemetry or StatsD exporters. They are named in
//! the style of the OpenTelemetry semantic conventions. Every label takes a few
//! fixed values, never a token, a secret or anything from a request. Without
//! the feature, each function is empty.
//!
//! | name | kind | unit | labels |
//! |---|---|---|---|
//! | `oauth.client.token.requests` | counter | requests | `outcome` (`success`, `failure`), `error.type` (the `TokenErrorKind`, on failure): token requests this replica sent to the token endpoint (or its token source) |
//! | `oauth.client.token.request.duration` | histogram | seconds | `outcome`: how long those took |
//! | `oauth.client.token.fetches` | counter | fetches | `outcome`, `error.type`: fetches the caches started, each ended by a token from the endpoint or from a token store, or a failure |
//! | `oauth.client.token.renewals` | counter | renewals | `reason` (`ahead`: before expiry; `refused`: the API refused the token) |
//! | `oauth.client.token.waits` | counter | requests | none: requests that waited for a token request |
//! | `oauth.client.unauthorized.retries` | counter | requests | none: requests `RetryUnauthorized` sent again |
//! | `oauth.client.token.step_ups` | counter | renewals | none: tokens requested again with more scope, after the API answered `insufficient_scope` (within `step_up_scopes`) |
//! | `oauth.client.metadata.reads` | counter | reads | `document` (`authorization_server`: RFC 8414 or OpenID Connect discovery; `protected_resource`: RFC 9728), `outcome`: metadata documents read |
//!
//! For the load on the identity provider, sum `oauth.client.token.requests`
//! over the replicas. A token a store handed a replica, fetched by another
//! replica, is a fetch, not a request. Without a store, the two count alike.
//!
//! Requests served from the cache are not counted one by one. That would put a
//! shared write on every request's path, as BENCHMARKS.md shows. They are the
//! requests minus the waits.

pub(crate) mod stats;

use std::time::Duration;

use crate::error::TokenError;

pub(crate) use self::recorder::{
    describe, fetch, metadata_read, renewal, step_up, token_request, unauthorized_retry, wait,
};

/// Which metadata document was read.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Document {
    /// An authorization server's (RFC 8414, OpenID Connect Discovery).
    AuthorizationServer,
    /// A protected resource's (RFC 9728).
    ProtectedResource,
}

/// Why a renewal started.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Renewal {
    /// Ahead of expiry.
    Ahead,
    /// The API refused the token.
    Refused,
}

/// The functions that report to the `metrics` facade.
#[cfg(feature = "metrics")]
mod recorder {
    use super::{Document, Duration, Renewal, TokenError};

    /// Describes the metrics to the recorder (their kind, unit and meaning).
    pub(crate) fn describe() {
        {
            use metrics::{describe_counter, describe_histogram, Unit};
            describe_counter!(
                TOKEN_REQUESTS,
                Unit::Count,
                "Token requests this replica sent to the token endpoint, by outcome"
            );
            describe_counter!(
                TOKEN_FETCHES,
                Unit::Count,
                "Fetches the token caches started (a token from the endpoint or from a \
                 token store, or a failure), by outcome"
            );
            describe_histogram!(
                TOKEN_REQUEST_DURATION,
                Unit::Seconds,
                "How long token requests took, by outcome"
            );
            describe_counter!(
                TOKEN_RENEWALS,
                Unit::Count,
                "Token renewals: ahead of expiry, or after the API refused the token"
            );
            describe_counter!(
                TOKEN_WAITS,
                Unit::Count,
                "Requests that waited for a token request"
            );
            describe_counter!(
                UNAUTHORIZED_RETRIES,
                Unit::Count,
                "Requests sent again after the API refused their token"
            );
            describe_counter!(
                STEP_UPS,
                Unit::Count,
                "Tokens requested again with more scope after the API answered insufficient_scope"
            );
            describe_counter!(
                METADATA_READS,
                Unit::Count,
                "Metadata documents read: an authorization server's or a protected resource's"
            );
        }
    }

    const TOKEN_REQUESTS: &str = "oauth.client.token.requests";
    const TOKEN_FETCHES: &str = "oauth.client.token.fetches";
    const TOKEN_REQUEST_DURATION: &str = "oauth.client.token.request.duration";
    const TOKEN_RENEWALS: &str = "oauth.client.token.renewals";
    const TOKEN_WAITS: &str = "oauth.client.token.waits";
    const UNAUTHORIZED_RETRIES: &str = "oauth.client.unauthorized.retries";
    const METADATA_READS: &str = "oauth.client.metadata.reads";
    const STEP_UPS: &str = "oauth.client.token.step_ups";

    /// A token request ended, after `took`, with `outcome`.
    pub(crate) fn token_request<T>(outcome: &Result<T, TokenError>, took: Duration) {
        match outcome {
            Ok(_) => {
                metrics::counter!(TOKEN_REQUESTS, "outcome" => "success").increment(1);
                metrics::histogram!(TOKEN_REQUEST_DURATION, "outcome" => "success").record(took);
            }
            Err(error) => {
                let kind = error.kind().code();
                metrics::counter!(TOKEN_REQUESTS, "outcome" => "failure", "error.type" => kind)
                    .increment(1);
                metrics::histogram!(TOKEN_REQUEST_DURATION, "outcome" => "failure").record(took);
            }
        }
    }

    /// A fetch ended with `outcome`.
    pub(crate) fn fetch<T>(outcome: &Result<T, TokenError>) {
        match outcome {
            Ok(_) => metrics::counter!(TOKEN_FETCHES, "outcome" => "success").increment(1),
            Err(error) => {
                let kind = error.kind().code();
                metrics::counter!(TOKEN_FETCHES, "outcome" => "failure", "error.type" => kind)
                    .increment(1);
            }
        }
    }

    /// A renewal started.
    pub(crate) fn renewal(why: Renewal) {
        {
            let reason = match why {
                Renewal::Ahead => "ahead",
                Renewal::Refused => "refused",
            };
            metrics::counter!(TOKEN_RENEWALS, "reason" => reason).increment(1);
        }
    }

    /// A request waits for a token request.
    pub(crate) fn wait() {
        metrics::counter!(TOKEN_WAITS).increment(1);
    }

    /// `RetryUnauthorized` sends a request again.
    pub(crate) fn unauthorized_retry() {
        metrics::counter!(UNAUTHORIZED_RETRIES).increment(1);
    }

    /// A token is requested again with more scope.
    pub(crate) fn step_up() {
        metrics::counter!(STEP_UPS).increment(1);
    }

    /// A metadata document was read, or could not be.
    pub(crate) fn metadata_read(document: Document, ok: bool) {
        let document = match document {
            Document::AuthorizationServer => "authorization_server",
            Document::ProtectedResource => "protected_resource",
        };
        let outcome = if ok { "success" } else { "failure" };
        metrics::counter!(METADATA_READS, "document" => document, "outcome" => outcome)
            .increment(1);
    }
}

/// Without the feature: the same functions, empty.
#[cfg(not(feature = "metrics"))]
mod recorder {
    use super::{Document, Duration, Renewal, TokenError};

    /// Describes the metrics (nothing to describe to).
    pub(crate) fn describe() {}
    /// A token request ended (not recorded).
    pub(crate) fn token_request<T>(_outcome: &Result<T, TokenError>, _took: Duration) {}
    /// A fetch ended (not recorded).
    pub(crate) fn fetch<T>(_outcome: &Result<T, TokenError>) {}
    /// A renewal started (not recorded).
    pub(crate) fn renewal(_why: Renewal) {}
    /// A request waits for a token request (not recorded).
    pub(crate) fn wait() {}
    /// `RetryUnauthorized` sends a request again (not recorded).
    pub(crate) fn unauthorized_retry() {}
    /// A token is requested again with more scope (not recorded).
    pub(crate) fn step_up() {}
    /// A metadata document was read (not recorded).
    pub(crate) fn metadata_read(_document: Document, _ok: bool) {}
}
