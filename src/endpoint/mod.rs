//! The token endpoint, behind this facade. What the rest of the crate uses of
//! it is named here. Each concern is a folder or file of its own, and none
//! knows of caches, stores or layers.
//!
//! - The request and its answer:
//!   - `request`: one token request, and the few sent again at once;
//!   - `requests`: where a layer's requests come from (configured, or made
//!     from metadata);
//!   - `spec`: what every request of a layer is made of;
//!   - `prepared`: the parts made from the credential;
//!   - `answer`: reading the response, and the checks every token passes;
//!   - `redact`: the credential's forms, scrubbed from server text;
//!   - `url`: the rules for an endpoint URL.
//! - `client_auth/`: how the client proves itself, with [`ClientAuth`]. Also
//!   client assertions, and secrets that change.
//! - `grant/`: which grant a request asks with. These are client credentials,
//!   JWT-bearer, token exchange, and the refresh token with its chain.
//!   A person's login, which begins a chain, is `crate::login`, above this
//!   folder: it wraps the token request.
//! - `discovery`: the endpoint and client authentication, from an issuer's RFC
//!   8414 metadata; `server`: what that metadata says ([`ServerMetadata`]).
//! - `resource`: the server, `resource` and scopes, from a protected resource's
//!   RFC 9728 metadata.
//!
//! What carries the request is `crate::transport`, below this folder; a
//! server's signing keys and the JWTs it signs (ID tokens, logout tokens)
//! are OpenID Connect's, in `crate::login`.

mod answer;
mod client_auth;
mod discovery;
mod grant;
mod prepared;
mod redact;
mod request;
mod requests;
mod resource;
mod server;
mod spec;
mod url;

pub use self::client_auth::assertion::ClientAssertion;
pub(crate) use self::client_auth::secret::KUBERNETES_TOKEN_FILE;
pub use self::client_auth::{
    ClientAuth, CLIENT_AUTHENTICATION_JWT_TYPE, JWT_BEARER_ASSERTION_TYPE,
};
pub use self::grant::id_jag::IdentityAssertion;
pub use self::grant::jwt_bearer::{JwtBearer, JWT_BEARER_GRANT_TYPE};
pub use self::grant::refresh::RefreshToken;
pub use self::grant::token_exchange::{
    SubjectToken, TokenExchange, ACCESS_TOKEN_TYPE, ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE,
    JWT_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT_TYPE,
};
pub use self::resource::ResourceMetadata;
pub use self::server::ServerMetadata;

pub(crate) use self::answer::{check_token, read as read_answer, retry_after, status_error};
pub(crate) use self::client_auth::secret::{ClientSecret, RotatingSecret, SecretSource};
pub(crate) use self::client_auth::{
    check_param, check_params, check_unencoded, warn_if_read_otherwise, AssertionSettings,
};
pub(crate) use self::discovery::{get_json, Discovery, SharedMetadata};
pub(crate) use self::grant::id_jag::Idp;
pub(crate) use self::grant::refresh::{
    account_login_required, answered_id_token, answered_refresh_token,
    check_given as check_refresh_token, login_required, now_ms, person_login_required, Chain,
    ChainRecord, Code, Ended, HandedCallback, LoginClient, Lost, NoLogin, Reauthentication,
    RegisteredSecret, Standing, Stands, TakeCode,
};
pub(crate) use self::grant::token_exchange::{Asking, ForRequest};
pub(crate) use self::grant::Grant;
pub(crate) use self::redact::Redactor;
pub(crate) use self::request::{TokenRequest, UrlFrom};
pub(crate) use self::requests::Requests;
pub(crate) use self::resource::{Resource, ResourceSource, Trust};
pub use self::spec::PushedAuthorization;
pub(crate) use self::spec::{RequestSpec, RequestTarget};
pub(crate) use self::url::{checked_url, same_identifier};
