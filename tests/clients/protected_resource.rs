//! Protected-resource metadata (RFC 9728) against loopback servers: the API
//! names its authorization server, `resource` and scopes; the trust rule
//! decides which server gets the credential; hostile metadata (another
//! resource, an untrusted server, a binding the layer cannot give, huge or
//! malformed documents) is refused before anything secret is sent.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::authority::Style;
use support::*;
use tower_oauth::{ConfigErrorKind, OAuthLayer, OAuthLayerBuilder, TokenErrorKind};

const HOUR: Duration = Duration::from_secs(3600);
const PRM: &str = "/.well-known/oauth-protected-resource/api";

/// Publishes an authorization server's RFC 8414 metadata, Basic listed.
fn publish_server_metadata(authority: &Authority) {
    authority.publish(
        "/.well-known/oauth-authorization-server",
        json!({
            "issuer": authority.base_url(),
            "token_endpoint": authority.token_url(),
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        })
        .to_string(),
    );
}

/// Publishes a protected resource's RFC 9728 metadata at its well-known URL.
fn publish_resource(server: &Authority, metadata: serde_json::Value) {
    server.publish(PRM, metadata.to_string());
}

/// A builder for the resource `{authority}/api` with the test secret.
fn builder(resource: &str) -> OAuthLayerBuilder {
    with_transport(
        OAuthLayer::builder()
            .protected_resource(resource)
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .min_backoff(Duration::from_millis(20))
            .max_backoff(Duration::from_millis(20)),
    )
}

fn api(authority: &Authority) -> String {
    format!("{}/api", authority.base_url())
}

#[tokio::test]
async fn the_resource_names_its_server_resource_and_scopes() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let hostile = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    publish_server_metadata(&hostile);
    let resource = api(&authority);
    publish_resource(
        &authority,
        json!({
            "resource": resource,
            "authorization_servers": [hostile.base_url(), authority.base_url()],
            "scopes_supported": ["orders:read", "orders:write"],
            "bearer_methods_supported": ["header"],
        }),
    );
    publish_server_metadata(&authority);
    authority.expect(
        Style::Basic,
        &[
            ("resource", resource.as_str()),
            ("scope", "orders:read orders:write"),
        ],
    );
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    assert_eq!(oauth.protected_resource(), Some(resource.as_str()));
    assert_eq!(oauth.resource_metadata(), None, "read when first needed");
    assert_eq!(authority.metadata_requests(), 0);

    let response = send(&oauth, &authority.api_url("/orders")).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
    assert_eq!(authority.token_requests(), 1);
    let found = oauth.resource_metadata().unwrap();
    assert_eq!(found.resource, resource);
    assert_eq!(found.issuer, authority.base_url(), "the trusted one");
    assert_eq!(
        found.authorization_servers,
        [hostile.base_url(), authority.base_url()]
    );
    assert_eq!(found.scopes_supported, ["orders:read", "orders:write"]);
    assert!(found.metadata_url.ends_with(PRM));
    assert_eq!(
        oauth.server_metadata().unwrap().token_endpoint,
        authority.token_url()
    );
    // The untrusted server, listed first, heard nothing.
    assert_eq!(hostile.metadata_requests(), 0);
    assert_eq!(hostile.token_requests(), 0);

    // Both documents are kept: a renewal asks for a token only.
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(authority.metadata_requests(), 2, "one of each document");
}

#[tokio::test]
async fn the_layers_own_scope_wins_over_the_resources() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let resource = api(&authority);
    publish_resource(
        &authority,
        json!({
            "resource": resource,
            "authorization_servers": [authority.base_url()],
            "scopes_supported": ["orders:read", "orders:write"],
        }),
    );
    publish_server_metadata(&authority);
    authority.expect(
        Style::Basic,
        &[("scope", "orders:read"), ("resource", resource.as_str())],
    );
    let oauth = builder(&resource)
        .issuer(authority.base_url())
        .scope("orders:read")
        .build()
        .unwrap();
    oauth.token().await.unwrap();
    assert_eq!(authority.violations(), Vec::<String>::new());
    assert_eq!(oauth.issuer(), Some(authority.base_url().as_str()));
}

#[tokio::test]
async fn metadata_for_another_resource_is_refused_and_nothing_is_sent() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let resource = api(&authority);
    publish_resource(
        &authority,
        json!({
            "resource": "https://attacker.example/api",
            "authorization_servers": [authority.base_url()],
        }),
    );
    publish_server_metadata(&authority);
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
    let text = e.to_string();
    assert!(text.contains("`https://attacker.example/api`"), "{text}");
    assert!(
        text.contains(&format!("not `{resource}` as configured")),
        "{text}"
    );
    assert!(text.contains(PRM), "{text}");
    assert_eq!(authority.token_requests(), 0);
    assert_eq!(authority.metadata_requests(), 1, "the resource's only");
    assert_eq!(oauth.resource_metadata(), None);
}

#[tokio::test]
async fn a_server_the_client_does_not_trust_gets_nothing() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let hostile = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    publish_server_metadata(&hostile);
    let resource = api(&authority);
    publish_resource(
        &authority,
        json!({"resource": resource, "authorization_servers": [hostile.base_url()]}),
    );
    // Trusted servers, and the issuer set: neither takes the hostile one.
    let trusted = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    let named = builder(&resource)
        .issuer(authority.base_url())
        .build()
        .unwrap();
    for oauth in [trusted, named] {
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Configuration, "{e}");
        assert!(!e.is_retryable());
        let text = e.to_string();
        assert!(text.contains(&hostile.base_url()), "{text}");
        assert!(text.contains(&authority.base_url()), "{text}");
    }
    assert_eq!(hostile.metadata_requests(), 0);
    assert_eq!(hostile.token_requests(), 0);
    assert_eq!(authority.token_requests(), 0);
}

#[test]
fn a_secret_never_goes_to_a_server_the_user_did_not_name() {
    let resource = "https://api.example.com/mcp";
    let e = builder(resource).build().unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::Conflicting);
    assert!(e.to_string().contains("trusted_issuers"), "{e}");
    assert!(e.to_string().contains("client secret"), "{e}");
    // With a server named, it builds.
    let oauth = builder(resource)
        .trusted_issuers(["https://login.example.com"])
        .build()
        .unwrap();
    assert_eq!(oauth.protected_resource(), Some(resource));
    assert_eq!(oauth.issuer(), None, "chosen when the metadata is read");
}

#[test]
fn the_settings_that_cannot_go_together_are_refused() {
    let resource = "https://api.example.com/mcp";
    let cases = [
        (
            builder(resource)
                .issuer("https://a.example")
                .trusted_issuers(["https://b.example"]),
            "issuer and trusted_issuers",
        ),
        (
            builder(resource).token_url("https://a.example/token"),
            "auth_url or token_url",
        ),
        (
            builder(resource)
                .trusted_issuers(["https://a.example"])
                .resource("https://other.example"),
            "`resource` parameter",
        ),
        (
            with_transport(OAuthLayer::builder())
                .token_url("https://a.example/token")
                .client_id(CLIENT_ID)
                .client_secret(CLIENT_SECRET)
                .trusted_issuers(["https://a.example"]),
            "without protected_resource",
        ),
        (
            builder("https://api.example.com/mcp?tenant=1").trusted_issuers(["https://a.example"]),
            "has a query",
        ),
        (
            builder("http://api.example.com/mcp").trusted_issuers(["https://a.example"]),
            "plain http",
        ),
        (
            builder(resource).trusted_issuers(["ftp://a.example"]),
            "a trusted issuer",
        ),
    ];
    for (builder, expected) in cases {
        let e = builder.build().unwrap_err();
        assert!(e.to_string().contains(expected), "{expected}: {e}");
    }
}

#[tokio::test]
async fn a_binding_the_layer_cannot_give_is_a_clear_error_before_any_token_request() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    publish_server_metadata(&authority);
    let resource = api(&authority);
    for (flag, setting) in [
        (
            "dpop_bound_access_tokens_required",
            "OAuthLayerBuilder::dpop",
        ),
        (
            "tls_client_certificate_bound_access_tokens",
            "OAuthLayerBuilder::client_identity",
        ),
    ] {
        publish_resource(
            &authority,
            json!({
                "resource": resource,
                "authorization_servers": [authority.base_url()],
                flag: true,
            }),
        );
        let oauth = builder(&resource)
            .trusted_issuers([authority.base_url()])
            .build()
            .unwrap();
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Configuration, "{e}");
        assert!(e.to_string().contains(flag), "{e}");
        assert!(e.to_string().contains(setting), "{e}");
    }
    assert_eq!(authority.token_requests(), 0);
}

#[tokio::test]
async fn huge_and_malformed_metadata_are_errors_not_panics() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let resource = api(&authority);
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    let huge = format!(
        r#"{{"resource":"{resource}","authorization_servers":["{}"],"x":"{}"}}"#,
        authority.base_url(),
        "a".repeat(2 << 20)
    );
    let documents = [
        ("huge", huge),
        ("not json", "<html>hello</html>".to_owned()),
        ("an array", "[1, 2, 3]".to_owned()),
        (
            "no resource",
            json!({"authorization_servers": []}).to_string(),
        ),
        (
            "servers of the wrong type",
            json!({"resource": resource, "authorization_servers": "x"}).to_string(),
        ),
        (
            "a scope with a space",
            json!({"resource": resource, "authorization_servers": [authority.base_url()],
                "scopes_supported": ["a b"]})
            .to_string(),
        ),
        (
            "a server that is not a URL",
            json!({"resource": resource, "authorization_servers": ["javascript:alert(1)"]})
                .to_string(),
        ),
    ];
    for (what, document) in documents {
        authority.publish(PRM, document);
        tokio::time::sleep(Duration::from_millis(30)).await;
        let e = oauth.token().await.unwrap_err();
        assert!(
            matches!(
                e.kind(),
                TokenErrorKind::InvalidResponse | TokenErrorKind::Configuration
            ),
            "{what}: {e}"
        );
    }
    assert_eq!(authority.token_requests(), 0);
}

#[tokio::test]
async fn a_refused_token_request_reads_the_metadata_again() {
    let (authority, resource) = resource_with_own_server().await;
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    authority.push_faults([Fault {
        status: 400,
        body: r#"{"error":"invalid_target"}"#.into(),
        headers: Vec::new(),
    }]);
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.status(), Some(http::StatusCode::BAD_REQUEST), "{e}");
    assert_eq!(authority.metadata_requests(), 2, "one of each document");
    // The next fetch reads the resource's metadata again; the server's is
    // the same server's, and kept.
    tokio::time::sleep(Duration::from_millis(50)).await;
    oauth.token().await.unwrap();
    assert_eq!(authority.metadata_requests(), 3);
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(authority.violations(), Vec::<String>::new());
}

/// `private_key_jwt` without a server named: the one the resource names
/// gets an assertion for itself alone (its `aud`, checked by jsonwebtoken),
/// with the `resource`.
#[cfg(feature = "reqwest")]
mod signed {
    use super::support::assertion_endpoint::{AssertionEndpoint, Check};
    use super::support::keys::{Kind, TestKey};
    use super::*;
    use jsonwebtoken::Algorithm as Jose;
    use tower_oauth::client_auth::{Algorithm, ClientAuth, SigningKey};

    #[tokio::test]
    async fn a_signed_assertion_goes_to_the_server_the_resource_names() {
        let key = TestKey::new(Kind::P256);
        let endpoint = AssertionEndpoint::start(
            CLIENT_ID,
            Check::Public(key.public.clone(), Jose::ES256),
            3600,
        )
        .await;
        endpoint.publish_metadata(&["private_key_jwt"]);
        endpoint.set_audience(&endpoint.issuer());
        let resource = endpoint.api_url();
        endpoint.publish_resource_metadata(json!({
            "resource": resource,
            "authorization_servers": [endpoint.issuer()],
            "scopes_supported": ["tools:call"],
        }));
        let oauth = OAuthLayer::builder()
            .protected_resource(&resource)
            .client_id(CLIENT_ID)
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap(),
            ))
            .build()
            .unwrap();
        let response = send(&oauth, &resource).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(endpoint.issued(), 1);
        let form = &endpoint.forms()[0];
        let param = |name: &str| {
            form.iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(param("resource"), [resource.as_str()]);
        assert_eq!(param("scope"), ["tools:call"]);
        assert_eq!(endpoint.claims()[0]["aud"], endpoint.issuer());
    }

    #[test]
    fn an_assertion_with_a_fixed_audience_needs_a_named_server() {
        let key = TestKey::new(Kind::P256);
        let e = OAuthLayer::builder()
            .protected_resource("https://api.example.com/mcp")
            .client_id(CLIENT_ID)
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap(),
            ))
            .assertion_audience("https://login.example.com")
            .build()
            .unwrap_err();
        assert_eq!(e.kind(), ConfigErrorKind::Conflicting);
        assert!(e.to_string().contains("assertion_audience"), "{e}");
    }
}

#[tokio::test]
async fn an_empty_path_and_a_slash_name_the_same_resource_and_server() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    // The resource is the origin; the metadata writes it, and its server,
    // with a slash, as URL libraries do.
    let resource = authority.base_url();
    authority.publish(
        "/.well-known/oauth-protected-resource",
        json!({
            "resource": format!("{resource}/"),
            "authorization_servers": [format!("{}/", authority.base_url())],
        })
        .to_string(),
    );
    publish_server_metadata(&authority);
    authority.expect(Style::Basic, &[("resource", resource.as_str())]);
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    oauth.token().await.unwrap();
    assert_eq!(authority.violations(), Vec::<String>::new());
    assert_eq!(
        oauth.server_metadata().unwrap().issuer,
        authority.base_url(),
        "as the server names itself"
    );
}

/// A resource server that serves its metadata at the well-known URL (naming
/// `first`) and at `/moved` (naming `second`), and refuses every token
/// with a challenge naming the metadata at `hint`.
async fn challenging_resource(
    first: &Authority,
    second: &Authority,
) -> (String, std::sync::Arc<std::sync::Mutex<String>>) {
    use std::sync::{Arc, Mutex};
    use support::serve::{answer, serve_state};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let resource = format!("{base}/api");
    let hint = Arc::new(Mutex::new(String::new()));
    let doc = |issuer: String| json!({"resource": resource, "authorization_servers": [issuer]});
    let docs = Arc::new((
        doc(first.base_url()),
        doc(second.base_url()),
        Arc::clone(&hint),
    ));
    serve_state(listener, docs, |docs, req| async move {
        match req.uri().path() {
            PRM => answer(200, docs.0.clone()),
            "/moved" => answer(200, docs.1.clone()),
            _ => {
                let mut refusal = answer(401, json!({"error": "invalid_token"}));
                let challenge = format!(
                    r#"Bearer error="invalid_token", resource_metadata="{}""#,
                    docs.2.lock().unwrap()
                );
                refusal
                    .headers_mut()
                    .insert("www-authenticate", challenge.parse().unwrap());
                refusal
            }
        }
    });
    *hint.lock().unwrap() = format!("{base}/moved");
    (resource, hint)
}

#[tokio::test]
async fn a_refusal_naming_the_metadata_has_it_read_there_on_the_resources_origin_only() {
    let first = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let second = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    for authority in [&first, &second] {
        publish_server_metadata(authority);
    }
    let (resource, hint) = challenging_resource(&first, &second).await;
    for authority in [&first, &second] {
        authority.expect(Style::Basic, &[("resource", resource.as_str())]);
    }
    let oauth = builder(&resource)
        .trusted_issuers([first.base_url(), second.base_url()])
        .build()
        .unwrap();
    let response = send(&oauth, &resource).await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(first.token_requests(), 1);
    // The refusal dropped the token; the next comes from the server the
    // metadata at the challenge's URL names.
    oauth.token().await.unwrap();
    assert_eq!(second.token_requests(), 1);
    assert_eq!(oauth.resource_metadata().unwrap().issuer, second.base_url());
    assert!(oauth
        .resource_metadata()
        .unwrap()
        .metadata_url
        .ends_with("/moved"));

    // A challenge naming metadata on another origin is not followed.
    let hostile = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    publish_resource(
        &hostile,
        json!({"resource": resource, "authorization_servers": [hostile.base_url()]}),
    );
    *hint.lock().unwrap() = format!("{}{PRM}", hostile.base_url());
    let oauth = builder(&resource)
        .trusted_issuers([first.base_url(), second.base_url()])
        .build()
        .unwrap();
    let response = send(&oauth, &resource).await.unwrap();
    assert_eq!(response.status(), 401);
    oauth.token().await.unwrap();
    assert_eq!(hostile.metadata_requests(), 0);
    assert_eq!(hostile.token_requests(), 0);
    assert_eq!(
        first.token_requests(),
        3,
        "both tokens from the first server"
    );
}

/// An authority whose API (`/api`) is a protected resource naming itself.
async fn resource_with_own_server() -> (Authority, String) {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let resource = api(&authority);
    publish_resource(
        &authority,
        json!({"resource": resource, "authorization_servers": [authority.base_url()]}),
    );
    publish_server_metadata(&authority);
    authority.expect(Style::Basic, &[("resource", resource.as_str())]);
    (authority, resource)
}

#[tokio::test]
async fn each_protected_resource_gets_its_own_token_from_its_own_server() {
    let (a, resource_a) = resource_with_own_server().await;
    let (b, resource_b) = resource_with_own_server().await;
    let oauth = with_transport(
        OAuthLayer::builder()
            .protected_resources([&resource_a, &resource_b])
            .trusted_issuers([a.base_url(), b.base_url()])
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    for _ in 0..2 {
        let response = send(&oauth, &a.api_url("/orders")).await.unwrap();
        assert_eq!(response.status(), 200);
        let response = send(&oauth, &b.api_url("/stock/1")).await.unwrap();
        assert_eq!(response.status(), 200);
    }
    assert_eq!((a.token_requests(), b.token_requests()), (1, 1));
    assert_eq!(a.violations(), Vec::<String>::new());
    assert_eq!(b.violations(), Vec::<String>::new());
    // A request under neither: no token of the layer's own, and not sent.
    let api_calls = a.api_requests();
    let e = send(&oauth, &format!("{}/elsewhere", a.base_url()))
        .await
        .unwrap_err();
    let e = e.downcast_ref::<tower_oauth::TokenError>().unwrap();
    assert_eq!(e.kind(), TokenErrorKind::Configuration, "{e}");
    assert!(e.to_string().contains(&resource_a), "{e}");
    // Dot segments, plain or encoded, lead out of the resource: no token
    // either, and nothing sent.
    for escape in [
        "/../elsewhere",
        "/%2e%2e/elsewhere",
        "/.%2E/elsewhere",
        "%2F..%2Fx",
    ] {
        let e = send(&oauth, &format!("{resource_a}{escape}"))
            .await
            .unwrap_err();
        let e = e.downcast_ref::<tower_oauth::TokenError>().unwrap();
        assert_eq!(e.kind(), TokenErrorKind::Configuration, "{escape}: {e}");
    }
    assert_eq!(a.api_requests(), api_calls);
    assert_eq!(a.token_requests(), 1);
}

#[tokio::test]
async fn other_requests_get_the_layers_default_token() {
    let (a, resource_a) = resource_with_own_server().await;
    let default = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    default.expect(Style::Basic, &[]);
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(default.token_url())
            .protected_resources([&resource_a])
            .trusted_issuers([a.base_url()])
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    assert_eq!(
        send(&oauth, &default.api_url("/x")).await.unwrap().status(),
        200
    );
    assert_eq!(send(&oauth, &a.api_url("/y")).await.unwrap().status(), 200);
    assert_eq!((default.token_requests(), a.token_requests()), (1, 1));
    assert_eq!(default.violations(), Vec::<String>::new());
    assert_eq!(a.violations(), Vec::<String>::new());
    // The resource's token never went to the other API, nor the reverse.
    assert!(default.presented().iter().all(|t| default.accepts(t)));
}

#[test]
fn protected_resources_are_checked() {
    let base = || {
        with_transport(OAuthLayer::builder())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
    };
    let e = base()
        .protected_resources(["https://a.example/mcp"])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("client secret"), "{e}");
    let e = base()
        .protected_resources(["https://a.example/mcp", "https://a.example/mcp"])
        .trusted_issuers(["https://login.example"])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
}

/// The reqwest middleware routes by URL too.
#[cfg(feature = "reqwest-middleware")]
#[tokio::test]
async fn the_middleware_gives_each_protected_resource_its_token() {
    let (a, resource_a) = resource_with_own_server().await;
    let (b, resource_b) = resource_with_own_server().await;
    let oauth = OAuthLayer::builder()
        .protected_resources([&resource_a, &resource_b])
        .trusted_issuers([a.base_url(), b.base_url()])
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        .build()
        .unwrap();
    let client = reqwest_middleware::ClientBuilder::new(support::reqwest_client())
        .with(oauth.middleware())
        .build();
    for url in [a.api_url("/1"), b.api_url("/2"), a.api_url("/3")] {
        assert_eq!(client.get(url).send().await.unwrap().status(), 200);
    }
    assert_eq!((a.token_requests(), b.token_requests()), (1, 1));
}

#[tokio::test]
async fn metadata_at_the_origin_s_root_may_name_a_resource_that_holds_the_api() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let resource = api(&authority);
    let root = "/.well-known/oauth-protected-resource";
    publish_server_metadata(&authority);
    // At the root, naming another path: not this API's; nothing is sent.
    authority.publish(
        root,
        json!({"resource": format!("{}/other", authority.base_url()),
               "authorization_servers": [authority.base_url()]})
        .to_string(),
    );
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert!(e.to_string().contains("must be identical"), "{e}");
    assert_eq!(authority.token_requests(), 0);
    // At the root, naming the origin, which holds the API: its token asks
    // for the origin as `resource`.
    authority.publish(
        root,
        json!({"resource": authority.base_url(), "authorization_servers": [authority.base_url()]})
            .to_string(),
    );
    authority.expect(Style::Basic, &[("resource", authority.base_url().as_str())]);
    let oauth = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap();
    assert_eq!(
        send(&oauth, &authority.api_url("/x"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(authority.violations(), Vec::<String>::new());
    // At the API's own well-known URL, only the API itself counts.
    publish_resource(
        &authority,
        json!({"resource": authority.base_url(), "authorization_servers": [authority.base_url()]}),
    );
    let e = builder(&resource)
        .trusted_issuers([authority.base_url()])
        .build()
        .unwrap()
        .token()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("must be identical"), "{e}");
}
