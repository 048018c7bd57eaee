//! `OAuthLayer::from_env`: the one test that touches the process environment
//! (alone in its binary, so no other test races with it).

use tower_oauth::{ConfigErrorKind, OAuthLayer, OAuthLayerBuilder};

#[test]
fn from_env_reads_the_oauth_variables_and_names_what_is_missing() {
    for v in [
        "OAUTH_ISSUER",
        "OAUTH_CLIENT_AUTH",
        "OAUTH_RESOURCE",
        "OAUTH_TOKEN_URL",
        "OAUTH_AUTH_URL",
        "OAUTH_CLIENT_ID",
        "OAUTH_CLIENT_SECRET",
        "OAUTH_SCOPE",
    ] {
        std::env::remove_var(v);
    }
    let err = OAuthLayer::from_env().unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingUrl);
    assert!(err.to_string().contains("OAUTH_AUTH_URL"), "{err}");

    std::env::set_var("OAUTH_AUTH_URL", "https://auth.example.com/");
    let err = OAuthLayer::from_env().unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingClientId);
    assert!(err.to_string().contains("OAUTH_CLIENT_ID"), "{err}");

    std::env::set_var("OAUTH_CLIENT_ID", "env-client");
    let err = OAuthLayer::from_env().unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingClientSecret);
    assert!(err.to_string().contains("OAUTH_CLIENT_SECRET"), "{err}");

    std::env::set_var("OAUTH_CLIENT_SECRET", "env-secret");
    std::env::set_var("OAUTH_SCOPE", "read");
    let builder = OAuthLayerBuilder::from_env().unwrap();
    assert!(!format!("{builder:?}").contains("env-secret"));
    assert!(format!("{builder:?}").contains("scope"));
    if cfg!(feature = "reqwest") {
        let oauth = OAuthLayer::from_env().unwrap();
        assert_eq!(
            oauth.token_url().unwrap(),
            "https://auth.example.com/v1/oauth/accesstoken"
        );
        assert_eq!(oauth.client_id(), Some("env-client"));
    }

    std::env::set_var("OAUTH_TOKEN_URL", "https://auth.example.com/token");
    assert_eq!(
        OAuthLayer::from_env().unwrap_err().kind(),
        ConfigErrorKind::Conflicting
    );
    std::env::remove_var("OAUTH_AUTH_URL");
    if cfg!(feature = "reqwest") {
        let oauth = OAuthLayer::from_env().unwrap();
        assert_eq!(oauth.token_url().unwrap(), "https://auth.example.com/token");
    }

    // Azure workload identity, as the platform sets a pod's environment.
    for v in ["OAUTH_TOKEN_URL", "OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET"] {
        std::env::remove_var(v);
    }
    std::env::set_var(
        "AZURE_FEDERATED_TOKEN_FILE",
        "/var/run/secrets/azure/tokens/azure-identity-token",
    );
    std::env::set_var("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555");
    std::env::set_var("AZURE_TENANT_ID", "contoso");
    std::env::set_var("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.us/");
    if cfg!(feature = "reqwest") {
        let oauth = OAuthLayer::from_env().unwrap();
        assert_eq!(
            oauth.token_url().unwrap(),
            "https://login.microsoftonline.us/contoso/oauth2/v2.0/token"
        );
        assert_eq!(
            oauth.client_id(),
            Some("11111111-2222-3333-4444-555555555555")
        );
    }
    std::env::set_var("OAUTH_CLIENT_SECRET", "also");
    let err = OAuthLayer::from_env().unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    assert!(err
        .to_string()
        .contains("OAUTH_CLIENT_SECRET and AZURE_FEDERATED_TOKEN_FILE"));
}
