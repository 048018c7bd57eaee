//! Discovery against loopback servers that publish RFC 8414 metadata, only
//! OpenID Connect metadata (with an issuer path), a mismatching issuer, or
//! nothing; and a token endpoint that moves.

use crate::support;

use std::time::Duration;

use support::authority::Style;
use support::*;
use tower_oauth::{client_auth::ClientAuth, OAuthLayer, TokenErrorKind};

const HOUR: Duration = Duration::from_secs(3600);

/// A secret with the characters that trip decoders.
const SECRET: &str = "s3c+r/e=t&%:~ x";

fn metadata(issuer: &str, token_endpoint: &str, methods: &[&str]) -> String {
    let methods: Vec<String> = methods.iter().map(|m| format!("\"{m}\"")).collect();
    format!(
        r#"{{"issuer":"{issuer}","token_endpoint":"{token_endpoint}","grant_types_supported":["client_credentials"],"token_endpoint_auth_methods_supported":[{}]}}"#,
        methods.join(",")
    )
}

fn layer(issuer: &str) -> OAuthLayer {
    with_transport(
        OAuthLayer::builder()
            .issuer(issuer)
            .client_id(CLIENT_ID)
            .client_secret(SECRET)
            .scope("read write")
            .min_backoff(Duration::from_millis(50))
            .max_backoff(Duration::from_millis(50)),
    )
    .build()
    .unwrap()
}

#[tokio::test]
async fn rfc_8414_metadata_names_the_endpoint_and_the_client_authentication() {
    let authority = Authority::start(CLIENT_ID, SECRET, HOUR).await;
    let issuer = format!("{}/tenant", authority.base_url());
    let token_endpoint = authority.token_url();
    authority.publish(
        "/.well-known/oauth-authorization-server/tenant",
        metadata(
            &issuer,
            &token_endpoint,
            &["private_key_jwt", "client_secret_post"],
        ),
    );
    authority.expect(Style::Form, &[("scope", "read write")]);
    let oauth = layer(&issuer);
    assert_eq!(
        oauth.server_metadata(),
        None,
        "nothing is fetched before it is needed"
    );
    let response = send(&oauth, &authority.api_url("/orders")).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
    let found = oauth.server_metadata().unwrap();
    assert_eq!(found.issuer, issuer);
    assert_eq!(found.token_endpoint, token_endpoint);
    assert_eq!(found.client_auth, ClientAuth::FormBody);
    assert!(found
        .metadata_url
        .ends_with("/.well-known/oauth-authorization-server/tenant"));
    // The metadata is kept: a renewal asks for a token only.
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(authority.metadata_requests(), 1);
}

#[tokio::test]
async fn openid_connect_metadata_alone_is_found_under_the_issuers_path() {
    let authority = Authority::start(CLIENT_ID, SECRET, HOUR).await;
    let issuer = format!("{}/realms/main", authority.base_url());
    authority.publish(
        "/realms/main/.well-known/openid-configuration",
        metadata(
            &issuer,
            &authority.token_url(),
            &["client_secret_basic", "client_secret_post"],
        ),
    );
    authority.expect(Style::BasicPercent, &[("scope", "read write")]);
    let oauth = layer(&issuer);
    oauth.token().await.unwrap();
    assert_eq!(authority.violations(), Vec::<String>::new());
    assert_eq!(
        oauth.server_metadata().unwrap().client_auth,
        ClientAuth::Basic
    );
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_refused() {
    let authority = Authority::start(CLIENT_ID, SECRET, HOUR).await;
    let issuer = authority.base_url();
    authority.publish(
        "/.well-known/oauth-authorization-server",
        metadata("https://attacker.example", &authority.token_url(), &[]),
    );
    let e = layer(&issuer).token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
    let text = e.to_string();
    assert!(
        text.contains("/.well-known/oauth-authorization-server`"),
        "{text}"
    );
    assert!(text.contains("`https://attacker.example`"), "{text}");
    assert!(
        text.contains(&format!("not `{issuer}` as configured")),
        "{text}"
    );
    assert_eq!(authority.token_requests(), 0, "no secret went anywhere");
}

#[tokio::test]
async fn an_issuer_without_metadata_names_both_places_looked() {
    let authority = Authority::start(CLIENT_ID, SECRET, HOUR).await;
    let issuer = format!("{}/nothing", authority.base_url());
    let e = layer(&issuer).token().await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("/.well-known/oauth-authorization-server/nothing`"),
        "{text}"
    );
    assert!(
        text.contains("/nothing/.well-known/openid-configuration`"),
        "{text}"
    );
    assert!(text.contains("token_url"), "{text}");
}

#[tokio::test]
async fn a_token_endpoint_that_moved_is_discovered_again() {
    let authority = Authority::start(CLIENT_ID, SECRET, HOUR).await;
    let issuer = authority.base_url();
    let path = "/.well-known/oauth-authorization-server";
    let old = format!("{}/old/token", authority.base_url());
    authority.publish(path, metadata(&issuer, &old, &["client_secret_basic"]));
    authority.expect(Style::Basic, &[("scope", "read write")]);
    let oauth = layer(&issuer);
    let e = oauth.token().await.unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&format!("`{old}` answered that is not a token endpoint")),
        "{text}"
    );
    assert!(
        text.contains("token_endpoint` of the issuer's metadata"),
        "{text}"
    );
    // The server now names its real endpoint; after the back-off the layer
    // reads the metadata again and gets a token.
    let current = authority.token_url();
    authority.publish(path, metadata(&issuer, &current, &["client_secret_basic"]));
    tokio::time::sleep(Duration::from_millis(100)).await;
    oauth.token().await.unwrap();
    assert_eq!(authority.metadata_requests(), 2);
    assert_eq!(oauth.server_metadata().unwrap().token_endpoint, current);
}

#[test]
fn an_issuer_excludes_the_url_setters_and_a_query() {
    let err = OAuthLayer::builder()
        .issuer("https://idp.example.com")
        .token_url("https://idp.example.com/token")
        .client_id("id")
        .client_secret("secret")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), tower_oauth::ConfigErrorKind::Conflicting);
    let err = OAuthLayer::builder()
        .issuer("https://idp.example.com/?tenant=1")
        .client_id("id")
        .client_secret("secret")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), tower_oauth::ConfigErrorKind::InvalidUrl);
}
