//! The builder's settings: pushed authorization requests, and the FAPI 2.0
//! Security Profile, which holds the client to every rule of its own.

use super::OAuthLayerBuilder;
use crate::login::PushedAuthorization;

/// Pushed authorization requests and the FAPI 2.0 profile.
impl OAuthLayerBuilder {
    /// When a person's login ([`login`](Self::login)) or a web login
    /// ([`OAuthLayer::begin_login`](crate::OAuthLayer::begin_login)) pushes
    /// its authorization request to the server first (RFC 9126): the
    /// browser's URL then carries only the client id and the `request_uri`
    /// the server gave. A server that requires it
    /// (`require_pushed_authorization_requests`) gets it whatever this
    /// says; a push it refuses ends the login, never falling back to a
    /// plain authorization request.
    ///
    /// Default: [`PushedAuthorization::WhenOffered`], when the server's
    /// metadata names a `pushed_authorization_request_endpoint`.
    pub fn pushed_authorization(mut self, when: PushedAuthorization) -> Self {
        self.par = Some(when);
        self
    }

    /// Holds the client to the FAPI 2.0 Security Profile (final, 2025), as
    /// open banking, health and government APIs ask. The build fails with a
    /// [`ConfigError`](crate::ConfigError) naming the rule a setting breaks:
    ///
    /// - client authentication by `private_key_jwt` or mutual TLS, never a
    ///   secret;
    /// - tokens bound to the client, by [DPoP](Self::dpop) or mutual TLS
    ///   ([`client_identity`](Self::client_identity)); a DPoP layer takes no
    ///   bearer token ([`dpop_allow_bearer`](Self::dpop_allow_bearer) is
    ///   refused), and a token answer whose `token_type` is not the one the
    ///   binding asks for is refused;
    /// - the signature algorithms the profile allows, PS256, ES256 and
    ///   EdDSA, for the client's key, the DPoP key, and the ID tokens it
    ///   takes (never RS256);
    /// - https everywhere ([`allow_insecure_http`](Self::allow_insecure_http)
    ///   is refused; `http` on loopback stays, for tests);
    /// - the server known by its metadata ([`issuer`](Self::issuer) or
    ///   [`protected_resource`](Self::protected_resource)), and the client
    ///   assertion's `aud` its issuer alone.
    ///
    /// A login then pushes every authorization request
    /// ([`PushedAuthorization::Always`]; `Never` is refused), sends PKCE with
    /// S256 and `response_type=code` (as every login does), and requires the
    /// server's `iss` in every authorization response (RFC 9207). It serves
    /// machine tokens too: client credentials with `private_key_jwt` and
    /// DPoP.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, client_auth::{Algorithm, ClientAuth, SigningKey}, dpop::DpopKey};
    ///
    /// # let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIL4vcREMaCdcc23IpMLEj8G1E4riNufMcCy2f9FRUTr8\n-----END PRIVATE KEY-----\n";
    /// let key = SigningKey::from_pem(pem, Algorithm::EdDsa)?.key_id("client-key-1");
    /// let layer = OAuthLayer::builder()
    ///     .issuer("https://bank.example")
    ///     .client_id("my-fintech-app")
    ///     .client_auth(ClientAuth::PrivateKeyJwt(key))
    ///     .dpop(DpopKey::generate(Algorithm::Es256)?)
    ///     .fapi2()
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Default: off.
    pub fn fapi2(mut self) -> Self {
        self.fapi2 = true;
        self
    }
}
