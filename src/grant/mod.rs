//! The grants beyond client credentials, and the URNs that name them: the
//! JWT-bearer grant ([`JwtBearer`], RFC 7523), token exchange
//! ([`TokenExchange`], RFC 8693) with the tokens it trades
//! ([`SubjectToken`]), refresh tokens that rotate ([`RefreshToken`]), and
//! enterprise-managed authorization ([`IdentityAssertion`]).
//!
//! Give one with [`OAuthLayerBuilder::jwt_bearer`](crate::OAuthLayerBuilder::jwt_bearer),
//! [`token_exchange`](crate::OAuthLayerBuilder::token_exchange),
//! [`refresh_token`](crate::OAuthLayerBuilder::refresh_token) or
//! [`identity_assertion`](crate::OAuthLayerBuilder::identity_assertion). The guides:
//! [`docs::credentials`](crate::docs::credentials) and
//! [`docs::refresh_tokens`](crate::docs::refresh_tokens).

pub use crate::endpoint::{
    IdentityAssertion, JwtBearer, RefreshToken, SubjectToken, TokenExchange,
};

pub mod grant_type {
    //! The `grant_type` URNs of the grants beyond client credentials, in
    //! the style of `http::header`.

    pub use crate::endpoint::{
        JWT_BEARER_GRANT_TYPE as JWT_BEARER, TOKEN_EXCHANGE_GRANT_TYPE as TOKEN_EXCHANGE,
    };
}

pub mod token_type {
    //! The token type URNs of token exchange (RFC 8693 section 3), for a
    //! [`SubjectToken`](super::SubjectToken)'s type and the token asked for.

    pub use crate::endpoint::{
        ACCESS_TOKEN_TYPE as ACCESS_TOKEN, ID_JAG_TOKEN_TYPE as ID_JAG, ID_TOKEN_TYPE as ID_TOKEN,
        JWT_TOKEN_TYPE as JWT,
    };
}
