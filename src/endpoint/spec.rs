//! [`RequestSpec`]: what every token request of one layer is made of,
//! checked once by the builder and shared (`Arc`) by the layer's caches,
//! its discovery and its prepared requests, with its logins' settings
//! ([`PushedAuthorization`]); and [`RequestTarget`], what one request adds
//! to it: where it goes, how the client authenticates there, and its
//! parameters.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use http::Uri;

use crate::endpoint::client_auth::secret::ClientSecret;
use crate::endpoint::client_auth::{AssertionSettings, ClientAuth};
use crate::endpoint::grant::Grant;
use crate::transport::Transport;

/// What a layer's token requests are made of. A new setting of the token
/// request is a field here, read where it is used.
#[derive(Clone)]
pub(crate) struct RequestSpec {
    pub(crate) client_id: String,
    /// The secret in use (fixed, or read again when it rotates).
    pub(crate) secret: ClientSecret,
    /// The user's choice; `None`: chosen by discovery from the server's
    /// metadata (with a URL the builder always chooses).
    pub(crate) auth: Option<ClientAuth>,
    /// The layer's own parameters. A token slot's replace or extend them.
    pub(crate) params: Vec<(String, String)>,
    /// How client assertions and grant assertions are signed.
    pub(crate) assertion: AssertionSettings,
    pub(crate) grant: Grant,
    /// Whether the transport presents a client certificate (mutual TLS).
    pub(crate) presents_certificate: bool,
    /// The layer's DPoP state, when tokens are bound to a key: each token
    /// request carries a proof of it.
    pub(crate) dpop: Option<Arc<crate::dpop::Dpop>>,
    pub(crate) transport: Arc<dyn Transport>,
    /// Plain `http` to a non-loopback host is allowed (for a discovered
    /// endpoint too).
    pub(crate) allow_insecure_http: bool,
    /// How far an ID token's or logout token's `iat` and `exp` may be off.
    pub(crate) id_token_skew: std::time::Duration,
    /// When a login pushes its authorization request (RFC 9126).
    pub(crate) par: PushedAuthorization,
    /// The FAPI 2.0 profile's rules hold (`OAuthLayerBuilder::fapi2`).
    pub(crate) fapi2: bool,
    /// The `request_uri`s the layer's logins used.
    pub(crate) used_request_uris: Arc<UsedRequestUris>,
}

/// How many `request_uri`s a layer remembers, to use each once.
const REMEMBERED: usize = 256;

/// When a login pushes its authorization request to the server before the
/// browser goes there (RFC 9126), so that the browser's URL carries only the
/// client id and a `request_uri`: the request's parameters never pass
/// through the browser, and the server authenticates the client before the
/// person sees a page.
///
/// A server whose metadata says `require_pushed_authorization_requests` gets
/// pushed requests whatever this says; under
/// [`fapi2`](crate::OAuthLayerBuilder::fapi2) every login pushes. A push the
/// server refuses ends the login with its error: the layer never falls back
/// to a plain authorization request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PushedAuthorization {
    /// Never, unless the server requires it.
    Never,
    /// When the server's metadata names a
    /// `pushed_authorization_request_endpoint` (the default).
    #[default]
    WhenOffered,
    /// Always: a server without the endpoint fails the login before any
    /// browser opens.
    Always,
}

/// The `request_uri`s a layer's logins used, each once.
#[derive(Default)]
pub(crate) struct UsedRequestUris(Mutex<VecDeque<String>>);

impl UsedRequestUris {
    /// Whether `uri` is new; it is remembered from now on (the last
    /// [`REMEMBERED`]).
    pub(crate) fn first_use(&self, uri: &str) -> bool {
        let digest = crate::support::encoding::sha256_hex(uri.as_bytes());
        let mut used = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if used.contains(&digest) {
            return false;
        }
        if used.len() >= REMEMBERED {
            used.pop_front();
        }
        used.push_back(digest);
        true
    }
}

impl RequestSpec {
    /// The same requests with `chain` as their grant: an account's.
    pub(crate) fn with_chain(&self, chain: Arc<crate::endpoint::Chain>) -> RequestSpec {
        RequestSpec {
            grant: Grant::Refresh(chain),
            ..self.clone()
        }
    }

    /// The chain of refresh tokens, when a person's login begins it.
    pub(crate) fn login_chain(&self) -> Option<&crate::endpoint::Chain> {
        self.grant
            .chain()
            .map(|chain| &**chain)
            .filter(|chain| chain.logs_in())
    }
}

/// One token request's own part: its URL (configured or discovered), the
/// client authentication used there, and its parameters.
pub(crate) struct RequestTarget {
    pub(crate) url: Uri,
    /// With discovery: the issuer, the assertions' first `aud`.
    pub(crate) issuer: Option<String>,
    /// Already checked to fit the values it sends (see the builder).
    pub(crate) auth: ClientAuth,
    /// The layer's parameters, with a token slot's.
    pub(crate) params: Vec<(String, String)>,
    /// With discovery: the server's metadata, for a login's endpoints.
    pub(crate) server: Option<Arc<crate::endpoint::ServerMetadata>>,
}

impl RequestTarget {
    /// The scopes requested, if any.
    pub(crate) fn scope(&self) -> Option<&str> {
        self.param("scope")
    }

    /// The authorization details requested (RFC 9396), as sent, if any.
    pub(crate) fn authorization_details(&self) -> Option<&str> {
        self.param(crate::token::details::AUTHORIZATION_DETAILS)
    }

    /// The first value of the parameter `name`, if any.
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }
}
