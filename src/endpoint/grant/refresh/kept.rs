//! What a person's login leaves with the chain: a web login's code, for the
//! exchange its next token request makes, and the client a login got at a
//! server (registered, or a metadata document's URL).

use std::fmt;

/// A callback's code, with what its exchange must send: handed to the
/// account's chain, taken by its next token request.
pub(crate) struct Code {
    pub(crate) code: String,
    pub(crate) verifier: String,
    pub(crate) redirect_uri: String,
    pub(crate) issuer: String,
    pub(crate) scope: String,
    /// The `nonce` the authorization request sent; empty for none.
    pub(crate) nonce: String,
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Code")
            .field("code", &"[redacted]")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// The client a login got at a server: registered there (RFC 7591), or a
/// client metadata document's URL it takes.
#[derive(Clone, PartialEq)]
pub(crate) struct LoginClient {
    pub(crate) id: String,
    /// The issuer it is good at.
    pub(crate) issuer: String,
    /// A registration's secret, by the way it goes; none for a public
    /// client.
    pub(crate) secret: Option<RegisteredSecret>,
    /// The redirect URI it was registered with, for a browser login's next
    /// listener: a server that matches redirect URIs exactly knows no
    /// other.
    pub(crate) redirect_uri: Option<String>,
}

/// A registered client's secret, by the way the server takes it (its
/// `token_endpoint_auth_method`).
#[derive(Clone, PartialEq)]
pub(crate) enum RegisteredSecret {
    /// In a `Basic` header: `client_secret_basic`.
    Basic(String),
    /// In the form body: `client_secret_post`.
    Post(String),
}

impl RegisteredSecret {
    /// `secret`, for the method named `method`; `None` for any other.
    pub(crate) fn new(method: &str, secret: String) -> Option<Self> {
        match method {
            "client_secret_basic" => Some(RegisteredSecret::Basic(secret)),
            "client_secret_post" => Some(RegisteredSecret::Post(secret)),
            _ => None,
        }
    }

    /// The method's name, as registration and the metadata spell it.
    pub(crate) fn method(&self) -> &'static str {
        match self {
            RegisteredSecret::Basic(_) => "client_secret_basic",
            RegisteredSecret::Post(_) => "client_secret_post",
        }
    }

    /// The secret.
    pub(crate) fn secret(&self) -> &str {
        match self {
            RegisteredSecret::Basic(secret) | RegisteredSecret::Post(secret) => secret,
        }
    }
}

impl fmt::Debug for LoginClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginClient")
            .field("id", &self.id)
            .field("issuer", &self.issuer)
            .field("redirect_uri", &self.redirect_uri)
            .field(
                "secret",
                &self
                    .secret
                    .as_ref()
                    .map(|s| format!("[redacted], {}", s.method())),
            )
            .finish()
    }
}
