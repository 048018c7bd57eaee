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
    /// A registration's secret, and the method it goes by
    /// (`client_secret_basic` or `client_secret_post`); none for a public
    /// client.
    pub(crate) secret: Option<(String, String)>,
    /// The redirect URI it was registered with, for a browser login's next
    /// listener: a server that matches redirect URIs exactly knows no
    /// other.
    pub(crate) redirect_uri: Option<String>,
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
                    .map(|(_, m)| format!("[redacted], {m}")),
            )
            .finish()
    }
}
