//! How the client proves itself at the token endpoint ([`ClientAuth`]), and
//! the key material it signs with: client assertions ([`ClientAssertion`]),
//! keys ([`SigningKey`], [`Algorithm`]) and signers of your own, such as a
//! KMS ([`JwsSigner`]). The guide:
//! [`docs::credentials`](crate::docs::credentials).

pub use crate::endpoint::{ClientAssertion, ClientAuth};
pub use crate::keys::{Algorithm, JwsSigner, SigningKey};

pub use crate::endpoint::CLIENT_AUTHENTICATION_JWT_TYPE as CLIENT_ASSERTION_TYP;

pub mod assertion_type {
    //! The `client_assertion_type` URNs (RFC 7521), in the style of
    //! `http::header`.

    pub use crate::endpoint::JWT_BEARER_ASSERTION_TYPE as JWT_BEARER;
}
