//! The `aud` of client assertions with an issuer and the defaults: servers
//! that take only the issuer (the 2026 update of RFC 7523) and servers that
//! take only the token endpoint's URL (RFC 7523, OpenID Connect Core, and
//! servers such as Glewlwyd, which refuse any other with an empty 403) both
//! serve, the choice learnt once per layer; a refused assertion's error
//! names the audiences it carried and the setting. Every assertion is
//! checked by jsonwebtoken.
#![cfg(feature = "reqwest")]

use crate::support;

use jsonwebtoken::Algorithm as Jose;
use support::assertion_endpoint::{AssertionEndpoint, Check};
use support::keys::{Kind, TestKey};
use tower_oauth::{
    client_auth::{Algorithm, ClientAuth, SigningKey},
    OAuthLayer, TokenErrorKind, TokenParams,
};

const CLIENT: &str = "audience-client";
const SECRET: &str = "an HMAC secret of at least thirty-two bytes";

/// An endpoint that publishes its metadata and takes the `aud` given.
async fn endpoint(check: Check, audience: Audience) -> AssertionEndpoint {
    let endpoint = AssertionEndpoint::start(CLIENT, check, 3600).await;
    endpoint.publish_metadata(&["private_key_jwt", "client_secret_jwt"]);
    match audience {
        Audience::Issuer => endpoint.set_audience(&endpoint.issuer()),
        Audience::TokenUrl => endpoint.refuse_with_empty_403(),
    }
    endpoint
}

#[derive(Clone, Copy, Debug)]
enum Audience {
    /// Only the issuer, refusals `401 invalid_client`.
    Issuer,
    /// Only the token endpoint's URL, refusals an empty 403.
    TokenUrl,
}

fn with_issuer(endpoint: &AssertionEndpoint, auth: ClientAuth) -> OAuthLayer {
    let mut builder = OAuthLayer::builder()
        .issuer(endpoint.issuer())
        .client_id(CLIENT);
    if auth == ClientAuth::ClientSecretJwt {
        builder = builder.client_secret(SECRET);
    }
    support::with_transport(builder.client_auth(auth))
        .build()
        .unwrap()
}

fn key_auth(key: &TestKey) -> ClientAuth {
    ClientAuth::PrivateKeyJwt(SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap())
}

/// The audiences of the assertions the endpoint took, in order.
fn taken(endpoint: &AssertionEndpoint) -> Vec<String> {
    endpoint
        .claims()
        .iter()
        .map(|c| c["aud"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_defaults_serve_both_audience_rules_and_learn_once_per_layer() {
    let key = TestKey::new(Kind::P256);
    for audience in [Audience::Issuer, Audience::TokenUrl] {
        for secret in [false, true] {
            let check = if secret {
                Check::Secret(SECRET.into())
            } else {
                Check::Public(key.public.clone(), Jose::ES256)
            };
            let endpoint = endpoint(check, audience).await;
            let auth = if secret {
                ClientAuth::ClientSecretJwt
            } else {
                key_auth(&key)
            };
            let case = format!("{audience:?}, client_secret_jwt: {secret}");
            let oauth = with_issuer(&endpoint, auth);
            let token = oauth
                .token()
                .await
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert!(token.expose_token().starts_with("at-"), "{case}");
            // A slot of the layer, and a clone's slot: the audience the
            // server took goes first, with no refusal.
            oauth
                .token_for(&TokenParams::new().scope("a"))
                .await
                .unwrap();
            oauth
                .clone()
                .token_for(&TokenParams::new().scope("b"))
                .await
                .unwrap();
            let expected = match audience {
                Audience::Issuer => endpoint.issuer(),
                Audience::TokenUrl => endpoint.token_url(),
            };
            assert_eq!(taken(&endpoint), vec![expected; 3], "{case}");
            match audience {
                Audience::Issuer => {
                    assert_eq!(endpoint.token_requests(), 3, "{case}");
                    assert_eq!(endpoint.refusals(), Vec::<String>::new(), "{case}");
                }
                Audience::TokenUrl => {
                    // One refusal of the issuer, once for the layer.
                    assert_eq!(endpoint.token_requests(), 4, "{case}");
                    let refusals = endpoint.refusals();
                    assert_eq!(refusals.len(), 1, "{case}: {refusals:?}");
                    assert!(refusals[0].contains("InvalidAudience"), "{refusals:?}");
                }
            }
        }
    }
}

#[tokio::test]
async fn a_refused_assertion_names_the_audiences_it_carried_and_the_setting() {
    let key = TestKey::new(Kind::P256);
    let other = TestKey::new(Kind::P256);

    // With an issuer: both audiences tried, both named.
    let endpoint = endpoint(
        Check::Public(key.public.clone(), Jose::ES256),
        Audience::TokenUrl,
    )
    .await;
    let err = with_issuer(&endpoint, key_auth(&other))
        .token()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(err.status().map(|s| s.as_u16()), Some(403));
    assert_eq!(endpoint.token_requests(), 2);
    let text = err.to_string();
    assert_eq!(
        text,
        format!(
            "token endpoint refused the request with HTTP 403 Forbidden: the token endpoint \
             refused the client assertion made for aud `{}`, and again for aud `{}`: check the \
             key (or secret) registered for the client and its algorithm; if the server \
             expects another audience in client assertions, set it with assertion_audience",
            endpoint.issuer(),
            endpoint.token_url()
        )
    );

    // With a token URL: its one audience, named.
    let endpoint = endpoint_for_url(&key).await;
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(endpoint.token_url())
            .client_id(CLIENT)
            .client_auth(key_auth(&other)),
    )
    .build()
    .unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.error_code(), Some("invalid_client"));
    assert_eq!(endpoint.token_requests(), 1);
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "refused the client assertion made for aud `{}`: ",
            endpoint.token_url()
        )),
        "{text}"
    );
    assert!(text.contains("set it with assertion_audience"), "{text}");

    // An audience set: that one alone, never another.
    let endpoint = endpoint_for_url(&key).await;
    endpoint.publish_metadata(&["private_key_jwt"]);
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(endpoint.issuer())
            .client_id(CLIENT)
            .client_auth(key_auth(&key))
            .assertion_audience("https://elsewhere.example"),
    )
    .build()
    .unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(endpoint.token_requests(), 1);
    assert!(
        err.to_string()
            .contains("made for aud `https://elsewhere.example`: "),
        "{err}"
    );
}

/// An endpoint that takes only its token URL, refusing with `401
/// invalid_client`.
async fn endpoint_for_url(key: &TestKey) -> AssertionEndpoint {
    AssertionEndpoint::start(CLIENT, Check::Public(key.public.clone(), Jose::ES256), 3600).await
}
