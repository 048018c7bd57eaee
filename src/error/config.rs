//! [`ConfigError`]: what the builder was given and cannot use.

use std::error::Error as StdError;
use std::fmt;

/// What is wrong with a configuration. See [`ConfigError::kind`].
///
/// More kinds may be added. Match with a wildcard arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// No client id was given, or it is empty.
    MissingClientId,
    /// No client secret was given, or it is empty.
    MissingClientSecret,
    /// Neither `auth_url` nor `token_url` was given.
    MissingUrl,
    /// Settings that exclude each other were given: both `auth_url` and
    /// `token_url`, or a token source together with endpoint settings.
    Conflicting,
    /// The URL cannot be parsed, lacks a scheme or host, or carries user
    /// information. Or it is an `auth_url` with a query string.
    InvalidUrl,
    /// The URL is plain `http` to a host that is not loopback, and
    /// `allow_insecure_http` was not set.
    InsecureUrl,
    /// The client id holds a character the unencoded request body cannot carry:
    /// `&`, whitespace, or a control character. See
    /// [`ClientAuth`](crate::client_auth::ClientAuth).
    InvalidClientId,
    /// The client secret holds a character the unencoded request body cannot
    /// carry: `&`, whitespace, or a control character. See
    /// [`ClientAuth`](crate::client_auth::ClientAuth).
    InvalidClientSecret,
    /// An extra token request parameter has an empty or reserved name, or a
    /// name or value the chosen [`ClientAuth`](crate::client_auth::ClientAuth) cannot carry.
    /// The reserved names are `grant_type`, `client_id`, `client_secret`,
    /// `client_assertion` and `client_assertion_type`.
    InvalidParameter,
    /// No transport for the token request: the `reqwest` feature is off and
    /// no [`transport`](crate::OAuthLayerBuilder::transport) was given.
    MissingTransport,
    /// A duration or other setting is out of range.
    InvalidSetting,
    /// A signing key, client certificate or root certificate cannot be
    /// used: no key in the PEM, a key of another type than its algorithm
    /// needs, a certificate without its key, a key that does not match its
    /// certificate. The message never shows key material.
    InvalidKey,
}

/// The configuration given to [`OAuthLayerBuilder`](crate::OAuthLayerBuilder)
/// cannot be used. The message names the problem. It never contains the
/// client secret.
#[derive(Clone)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(kind: ConfigErrorKind, message: impl Into<String>) -> Self {
        ConfigError {
            kind,
            message: message.into(),
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// What is wrong, in a sentence: the `Display` text without its "invalid
    /// OAuth configuration" prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid OAuth configuration: {}", self.message)
    }
}

impl fmt::Debug for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish()
    }
}

impl StdError for ConfigError {}
