//! The builder's checks, one setting at a time.

use super::*;
use crate::endpoint::ClientAuth;
use crate::error::ConfigErrorKind;
use crate::support::boxed::BoxError;
use bytes::Bytes;

fn valid() -> OAuthLayerBuilder {
    // A transport that is never called: these tests only build.
    let unused = tower::service_fn(|_: http::Request<Bytes>| async {
        Err::<http::Response<String>, BoxError>("not called".into())
    });
    OAuthLayerBuilder::new()
        .client_id("id-123")
        .client_secret("s3cr3t!x")
        .transport(unused)
}

fn url_of(b: OAuthLayerBuilder) -> String {
    b.build().unwrap().token_url().unwrap().to_string()
}

fn kind_of(b: OAuthLayerBuilder) -> ConfigErrorKind {
    let e = b.build().unwrap_err();
    assert!(!e.to_string().contains("s3cr3t"), "{e}");
    assert!(!format!("{e:?}").contains("s3cr3t"), "{e:?}");
    e.kind()
}

#[test]
fn auth_url_gets_the_token_path_once() {
    for base in [
        "https://auth.example.com",
        "https://auth.example.com/",
        "https://auth.example.com//",
    ] {
        assert_eq!(
            url_of(valid().auth_url(base)),
            "https://auth.example.com/v1/oauth/accesstoken"
        );
    }
    assert_eq!(
        url_of(valid().auth_url("https://example.com/gw/")),
        "https://example.com/gw/v1/oauth/accesstoken"
    );
}

#[test]
fn token_url_is_used_as_given() {
    assert_eq!(
        url_of(valid().token_url("https://example.com/oauth2/token?tenant=a")),
        "https://example.com/oauth2/token?tenant=a"
    );
}

#[test]
fn http_only_for_loopback_unless_allowed() {
    for ok in [
        "http://127.0.0.1:8080",
        "http://localhost:1",
        "http://[::1]:9",
        "http://127.9.9.9",
    ] {
        assert!(valid().auth_url(ok).build().is_ok(), "{ok}");
    }
    assert_eq!(
        kind_of(valid().auth_url("http://auth.example.com")),
        ConfigErrorKind::InsecureUrl
    );
    assert!(valid()
        .auth_url("http://auth.example.com")
        .allow_insecure_http(true)
        .build()
        .is_ok());
}

#[test]
fn bad_urls_are_named() {
    assert_eq!(kind_of(valid()), ConfigErrorKind::MissingUrl);
    assert_eq!(
        kind_of(valid().auth_url("https://a").token_url("https://b")),
        ConfigErrorKind::Conflicting
    );
    for bad in [
        "not a url",
        "/v1/oauth",
        "ftp://example.com",
        "https://example.com/?x=1",
        "https://example.com/#frag",
    ] {
        assert_eq!(
            kind_of(valid().auth_url(bad)),
            ConfigErrorKind::InvalidUrl,
            "{bad}"
        );
    }
    let e = valid()
        .auth_url("https://user:pa55word@example.com")
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ConfigErrorKind::InvalidUrl);
    assert!(!e.to_string().contains("pa55word"));
}

#[test]
fn credentials_are_required_and_checked() {
    let url = "https://auth.example.com";
    assert_eq!(
        kind_of(
            OAuthLayerBuilder::new()
                .auth_url(url)
                .client_secret("s3cr3t")
        ),
        ConfigErrorKind::MissingClientId
    );
    assert_eq!(
        kind_of(OAuthLayerBuilder::new().auth_url(url).client_id("a")),
        ConfigErrorKind::MissingClientSecret
    );
    assert_eq!(
        kind_of(valid().auth_url(url).client_id("")),
        ConfigErrorKind::MissingClientId
    );
    for secret in [
        "s3cr3t&x",
        "s3cr3t x",
        "s3cr3t\n",
        "s3cr3t\u{7f}",
        "s3cr3t\u{a0}",
    ] {
        assert_eq!(
            kind_of(valid().auth_url(url).client_secret(secret)),
            ConfigErrorKind::InvalidClientSecret,
            "{secret:?}"
        );
    }
    assert_eq!(
        kind_of(valid().auth_url(url).client_id("a&b")),
        ConfigErrorKind::InvalidClientId
    );
    // Characters a form decoder would read differently are still sent as
    // given: that is what the product-information API asks.
    assert!(valid()
        .auth_url(url)
        .client_secret("a+b/c=d%")
        .build()
        .is_ok());
}

#[test]
fn settings_are_checked() {
    let url = "https://auth.example.com";
    assert_eq!(
        kind_of(valid().auth_url(url).fetch_timeout(Duration::ZERO)),
        ConfigErrorKind::InvalidSetting
    );
    assert_eq!(
        kind_of(
            valid()
                .auth_url(url)
                .min_backoff(Duration::from_secs(5))
                .max_backoff(Duration::from_secs(1))
        ),
        ConfigErrorKind::InvalidSetting
    );
}

/// A lookup of environment variables from `pairs`.
fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn environment_variables_are_read_and_named() {
    let err = OAuthLayerBuilder::from_lookup(env(&[])).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingUrl);
    let err = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_AUTH_URL", "https://a.example"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_SECRET", ""),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingClientSecret);
    assert!(err.to_string().contains("OAUTH_CLIENT_SECRET"));
    let b = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_TOKEN_URL", "https://a.example/token"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_SECRET", "s3cr3t"),
        ("OAUTH_SCOPE", "read"),
    ]))
    .unwrap();
    assert_eq!(b.token_url.as_deref(), Some("https://a.example/token"));
    assert_eq!(b.params, vec![("scope".to_owned(), "read".to_owned())]);

    // Any server: an issuer, a client authentication, several resources.
    let b = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_ISSUER", "https://idp.example/realms/x"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_SECRET", "s3cr3t"),
        ("OAUTH_CLIENT_AUTH", "client_secret_post"),
        ("OAUTH_SCOPE", "read write"),
        (
            "OAUTH_RESOURCE",
            "https://orders.example/ https://billing.example/",
        ),
    ]))
    .unwrap();
    assert_eq!(b.issuer.as_deref(), Some("https://idp.example/realms/x"));
    assert_eq!(b.client_auth, Some(ClientAuth::FormBody));
    let resources: Vec<&str> = b
        .params
        .iter()
        .filter(|(n, _)| n == "resource")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        resources,
        ["https://orders.example/", "https://billing.example/"]
    );
    if cfg!(feature = "reqwest") {
        assert!(b.build().unwrap().issuer().is_some());
    }

    let err = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_ISSUER", "https://idp.example"),
        ("OAUTH_TOKEN_URL", "https://idp.example/token"),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    assert!(
        err.to_string().contains("OAUTH_ISSUER and OAUTH_TOKEN_URL"),
        "{err}"
    );
    let err = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_ISSUER", "https://idp.example"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_SECRET", "s3cr3t"),
        ("OAUTH_CLIENT_AUTH", "magic"),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidSetting);
    assert!(
        err.to_string()
            .contains("OAUTH_CLIENT_AUTH: unknown client authentication `magic`"),
        "{err}"
    );
}

#[test]
fn without_a_transport_the_default_is_reqwest_or_an_error() {
    let b = OAuthLayerBuilder::new()
        .auth_url("https://a.example")
        .client_id("id")
        .client_secret("s");
    if cfg!(feature = "reqwest") {
        assert!(b.build().is_ok());
    } else {
        assert_eq!(
            b.build().unwrap_err().kind(),
            ConfigErrorKind::MissingTransport
        );
    }
}

#[test]
fn debug_redacts_the_secret() {
    let b = valid().auth_url("https://auth.example.com");
    assert!(!format!("{b:?}").contains("s3cr3t"));
    let layer = b.build().unwrap();
    let shown = format!("{layer:?}");
    assert!(!shown.contains("s3cr3t"), "{shown}");
    assert!(shown.contains("id-123"));
}

#[test]
fn workload_identity_presets_come_from_the_environment() {
    // Azure workload identity, as the platform sets it in a pod.
    let b = OAuthLayerBuilder::from_lookup(env(&[
        (
            "AZURE_FEDERATED_TOKEN_FILE",
            "/var/run/secrets/azure/tokens/azure-identity-token",
        ),
        ("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555"),
        ("AZURE_TENANT_ID", "my-tenant"),
        ("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com/"),
        ("OAUTH_SCOPE", "api://orders/.default"),
    ]))
    .unwrap();
    assert_eq!(
        b.token_url.as_deref(),
        Some("https://login.microsoftonline.com/my-tenant/oauth2/v2.0/token")
    );
    assert_eq!(
        b.client_id.as_deref(),
        Some("11111111-2222-3333-4444-555555555555")
    );
    assert_eq!(
        b.client_auth,
        Some(ClientAuth::AssertionFile(
            "/var/run/secrets/azure/tokens/azure-identity-token".into()
        ))
    );
    let err = OAuthLayerBuilder::from_lookup(env(&[
        ("AZURE_FEDERATED_TOKEN_FILE", "/t"),
        ("AZURE_CLIENT_ID", "c"),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingUrl);
    assert!(err.to_string().contains("AZURE_TENANT_ID"), "{err}");

    // Kubernetes' service account token, by its word.
    let b = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_TOKEN_URL", "https://idp.example/token"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_ASSERTION_FILE", "kubernetes"),
    ]))
    .unwrap();
    assert_eq!(
        b.client_auth,
        Some(ClientAuth::AssertionFile(
            crate::endpoint::KUBERNETES_TOKEN_FILE.into()
        ))
    );
    // A secret file; and never two credentials.
    let b = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_TOKEN_URL", "https://idp.example/token"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_SECRET_FILE", "/run/secrets/client-secret"),
    ]))
    .unwrap();
    assert!(format!("{b:?}").contains("/run/secrets/client-secret"));
    let err = OAuthLayerBuilder::from_lookup(env(&[
        ("OAUTH_TOKEN_URL", "https://idp.example/token"),
        ("OAUTH_CLIENT_ID", "id"),
        ("OAUTH_CLIENT_SECRET", "s"),
        ("OAUTH_CLIENT_ASSERTION_FILE", "/t"),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    assert_eq!(
        err.message(),
        "OAUTH_CLIENT_SECRET and OAUTH_CLIENT_ASSERTION_FILE are all set; set one"
    );
}
