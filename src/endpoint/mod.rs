//! The token endpoint: how the client authenticates ([`ClientAuth`]), the
//! client-credentials request and its answer, discovery of the endpoint from
//! an issuer, client assertions, and the transport (with TLS) the request
//! travels on. Each module here is one step of one token request; none
//! knows of caches, stores or layers.

pub(crate) mod answer;
pub(crate) mod assertion;
pub(crate) mod client_auth;
pub(crate) mod client_credentials;
pub(crate) mod credential;
pub(crate) mod discovery;
pub(crate) mod grant;
pub(crate) mod jwt_bearer;
pub(crate) mod prepared;
pub(crate) mod redact;
#[cfg(feature = "reqwest")]
pub(crate) mod tls;
pub(crate) mod token_exchange;
pub(crate) mod transport;
pub(crate) mod url;

pub use self::assertion::ClientAssertion;
pub use self::client_auth::{ClientAuth, JWT_BEARER_ASSERTION_TYPE};
pub use self::client_auth::{
    CLIENT_AUTHENTICATION_JWT_TYPE, DEFAULT_ASSERTION_CLOCK_SKEW, DEFAULT_ASSERTION_LIFETIME,
};
pub use self::credential::KUBERNETES_TOKEN_FILE;
pub use self::discovery::ServerMetadata;
pub use self::jwt_bearer::{JwtBearer, JWT_BEARER_GRANT_TYPE};
pub use self::token_exchange::{
    SubjectToken, TokenExchange, ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT_TYPE,
};
