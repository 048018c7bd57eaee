//! [`ServerMetadata`]: what an authorization server's metadata says, as
//! discovery read it (RFC 8414, OpenID Connect Discovery 1.0), for the token
//! request and for a person's login.

use crate::endpoint::client_auth::ClientAuth;

/// What discovery found at an issuer, as
/// [`OAuthLayer::server_metadata`](crate::OAuthLayer::server_metadata) gives
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerMetadata {
    /// The issuer, as the metadata names it. It is identical to the one
    /// configured, since discovery refuses anything else.
    pub issuer: String,
    /// Where the metadata was read. Empty when a login took the default
    /// endpoints of an issuer that publishes no metadata (MCP 2025-03-26).
    pub metadata_url: String,
    /// The token endpoint, from `token_endpoint`.
    pub token_endpoint: String,
    /// The client authentication methods the server lists, in
    /// `token_endpoint_auth_methods_supported`. Empty when it lists none, which
    /// means `client_secret_basic`.
    pub auth_methods: Vec<String>,
    /// The client authentication the layer uses. It is the one chosen with
    /// [`client_auth`](crate::OAuthLayerBuilder::client_auth). Otherwise it is
    /// the first of `client_secret_basic`, `client_secret_post` and
    /// `client_secret_jwt` the server lists. Without a secret but with a client
    /// certificate, it is `tls_client_auth`.
    pub client_auth: ClientAuth,
    /// The token endpoint for clients that present a certificate, in
    /// `mtls_endpoint_aliases.token_endpoint` by RFC 8705 section 5. It is used
    /// when the layer has a [client
    /// identity](crate::OAuthLayerBuilder::client_identity) or uses
    /// [`ClientAuth::TlsClientAuth`].
    pub mtls_token_endpoint: Option<String>,
    /// The JWS algorithms the server takes for DPoP proofs, in
    /// `dpop_signing_alg_values_supported` by RFC 9449 section 5.1. Empty when
    /// it lists none. A layer whose [DPoP key](crate::OAuthLayerBuilder::dpop)
    /// signs with another logs a warning.
    pub dpop_algorithms: Vec<String>,
    /// The scopes the server lists in `scopes_supported`. Empty when it lists
    /// none. Some servers refuse a token request without a scope.
    pub scopes_supported: Vec<String>,
    /// The grants the server lists in `grant_types_supported`. Empty when it
    /// lists none.
    pub grant_types: Vec<String>,
    /// Where a person's browser goes to log in, `authorization_endpoint`.
    /// `None` when the metadata names none.
    pub authorization_endpoint: Option<String>,
    /// Where the device grant asks for its codes,
    /// `device_authorization_endpoint` by RFC 8628 section 4. `None` when the
    /// metadata names none.
    pub device_authorization_endpoint: Option<String>,
    /// The PKCE methods the server lists, `code_challenge_methods_supported`.
    /// A [`Login`](crate::login::Login) refuses a server that lists some without
    /// `S256`.
    pub code_challenge_methods: Vec<String>,
    /// Whether the server puts its issuer in every authorization response,
    /// `authorization_response_iss_parameter_supported` by RFC 9207. A login's
    /// callback must then carry it.
    pub authorization_response_iss_parameter_supported: bool,
    /// Where a client registers itself, `registration_endpoint` by RFC 7591.
    /// `None` when the metadata names none.
    pub registration_endpoint: Option<String>,
    /// Whether the server takes a client metadata document's URL as a client
    /// id, `client_id_metadata_document_supported` (MCP's SEP-991).
    pub client_id_metadata_document_supported: bool,
    /// Where a token is revoked, `revocation_endpoint` by RFC 7009 and RFC
    /// 8414. [`OAuthLayer::sign_out`](crate::OAuthLayer::sign_out) sends an
    /// account's refresh token there. `None` when the metadata names none.
    pub revocation_endpoint: Option<String>,
    /// Where the server publishes its signing keys, `jwks_uri`: an ID token's
    /// and a logout token's signatures are checked with them. `None` when
    /// the metadata names none.
    pub jwks_uri: Option<String>,
    /// The algorithms the server signs ID tokens with,
    /// `id_token_signing_alg_values_supported` (OpenID Connect Discovery
    /// 1.0). An ID token or logout token signed otherwise is refused. Empty
    /// when it lists none, which means `RS256`.
    pub id_token_algorithms: Vec<String>,
    /// Where a person's session at the server ends, `end_session_endpoint`
    /// (OpenID Connect RP-Initiated Logout 1.0):
    /// [`OAuthLayer::end_session_url`](crate::OAuthLayer::end_session_url)
    /// sends the browser there. `None` when the metadata names none.
    pub end_session_endpoint: Option<String>,
    /// Where a login pushes its authorization request,
    /// `pushed_authorization_request_endpoint` (RFC 9126). `None` when the
    /// metadata names none.
    pub pushed_authorization_request_endpoint: Option<String>,
    /// Whether the server takes only pushed authorization requests,
    /// `require_pushed_authorization_requests` (RFC 9126 section 5): every
    /// login then pushes, whatever
    /// [`PushedAuthorization`](crate::login::PushedAuthorization) says.
    pub require_pushed_authorization_requests: bool,
    /// Where a backchannel login asks for a person's approval,
    /// `backchannel_authentication_endpoint` (OpenID Connect CIBA Core 1.0).
    /// `None` when the metadata names none.
    pub backchannel_authentication_endpoint: Option<String>,
    /// How the server delivers a backchannel login's token,
    /// `backchannel_token_delivery_modes_supported`: `poll`, `ping`, `push`.
    /// Empty when it lists none.
    pub backchannel_token_delivery_modes: Vec<String>,
}
