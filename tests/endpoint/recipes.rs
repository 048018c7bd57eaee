//! The README's provider recipes, each against a loopback double that
//! enforces what that provider documents: its paths and metadata, what it
//! requires (Entra ID's `/.default` scope, Okta's scope and assertion
//! audience, Auth0's `audience`), how it decodes credentials (Keycloak), and
//! its error answers. Signed and federated assertions are verified with
//! jsonwebtoken. (Google's recipe: `tests/grants/jwt_bearer.rs`.)
#![cfg(feature = "reqwest")]

use crate::support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm as Jose, DecodingKey, EncodingKey, Validation};
use serde_json::{json, Value};
use support::keys::{Kind, TestKey};
use support::provider::{Provider, Refusal, TokenRequest};
use tower_oauth::{
    client_auth::{Algorithm, ClientAuth, SigningKey},
    OAuthLayer, TokenErrorKind,
};

const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Verifies `jwt` with `key`: ES256, the issuer, subject and audience
/// given, no leeway.
fn verify(jwt: &str, key: &DecodingKey, iss: &str, sub: &str, aud: &str) -> Result<Value, String> {
    let mut validation = Validation::new(Jose::ES256);
    validation.leeway = 0;
    validation.set_issuer(&[iss]);
    validation.sub = Some(sub.to_owned());
    validation.set_audience(&[aud]);
    jsonwebtoken::decode::<Value>(jwt, key, &validation)
        .map(|data| data.claims)
        .map_err(|e| e.to_string())
}

/// Sends one request to the provider's API through `oauth`.
async fn api_ok(oauth: &OAuthLayer, provider: &Provider) {
    let response = support::send(oauth, &provider.url("/api")).await.unwrap();
    assert_eq!(response.status(), 200);
}

// ---------------------------------------------------------------- Entra ID

const TENANT: &str = "contoso-tenant";
const ENTRA_CLIENT: &str = "11111111-2222-3333-4444-555555555555";
const ENTRA_SECRET: &str = "Q~8Q~entra.secret~value";
const K8S_ISSUER: &str = "https://oidc.prod-aks.azure.com/tenant/issuer";
const K8S_SUBJECT: &str = "system:serviceaccount:shop:orders";

/// Entra ID's v2.0 token endpoint: `client_id` always in the body; a secret
/// in the body or a federated credential's assertion; a scope of one
/// resource with `/.default`; errors with their AADSTS codes.
async fn entra(federation: DecodingKey) -> Provider {
    let path = format!("/{TENANT}/oauth2/v2.0/token");
    Provider::start(
        &path,
        json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599}),
        move |req: &TokenRequest| {
            let entra = |status: u16, error: &str, code: u32, text: &str| -> Refusal {
                (
                    status,
                    json!({"error": error, "error_description": format!("AADSTS{code}: {text}"), "error_codes": [code]}),
                )
            };
            if req.get("client_id") != Some(ENTRA_CLIENT) {
                return Err(entra(400, "invalid_request", 900144, "The request body must contain the following parameter: 'client_id'."));
            }
            if req.get("grant_type") != Some("client_credentials") {
                return Err(entra(400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type."));
            }
            let scope = req.get("scope").unwrap_or("");
            if !scope.ends_with("/.default") || scope.contains(' ') {
                return Err(entra(400, "invalid_scope", 1002012, &format!("The provided value for scope {scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).")));
            }
            match (req.get("client_secret"), req.get("client_assertion_type"), req.get("client_assertion")) {
                (Some(ENTRA_SECRET), None, None) => Ok(()),
                (None, Some(ASSERTION_TYPE), Some(jwt)) => verify(jwt, &federation, K8S_ISSUER, K8S_SUBJECT, "api://AzureADTokenExchange")
                    .map(|_| ())
                    .map_err(|why| entra(401, "invalid_client", 700211, &format!("No matching federated identity record found for presented assertion. {why}"))),
                _ => Err(entra(401, "invalid_client", 7000215, "Invalid client secret provided.")),
            }
        },
    )
    .await
}

#[tokio::test]
async fn entra_id_with_a_federated_credential_and_with_a_secret() {
    let k8s = TestKey::new(Kind::P256);
    let provider = entra(DecodingKey::from_ec_pem(k8s.public.as_bytes()).unwrap()).await;
    let token_url = provider.url(&format!("/{TENANT}/oauth2/v2.0/token"));
    // The pod's projected token, as the platform writes it.
    let dir = std::env::temp_dir().join(format!("tower-oauth-entra-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("azure-identity-token");
    let claims = json!({"iss": K8S_ISSUER, "sub": K8S_SUBJECT, "aud": "api://AzureADTokenExchange", "iat": now(), "exp": now() + 3600});
    let jwt = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(Jose::ES256),
        &claims,
        &EncodingKey::from_ec_pem(k8s.pkcs8.as_bytes()).unwrap(),
    )
    .unwrap();
    std::fs::write(&file, jwt).unwrap();

    let federated = |scope: &str| {
        support::with_transport(
            OAuthLayer::builder()
                .token_url(&token_url)
                .client_id(ENTRA_CLIENT)
                .client_auth(ClientAuth::AssertionFile(file.clone()))
                .scope(scope),
        )
        .build()
        .unwrap()
    };
    let oauth = federated("api://orders/.default");
    api_ok(&oauth, &provider).await;
    let err = federated("orders.read").token().await.unwrap_err();
    assert_eq!(err.error_code(), Some("invalid_scope"));
    assert!(err.to_string().contains("AADSTS1002012"), "{err}");

    let with_secret = support::with_transport(
        OAuthLayer::builder()
            .token_url(&token_url)
            .client_id(ENTRA_CLIENT)
            .client_secret(ENTRA_SECRET)
            .client_auth(ClientAuth::FormBody)
            .scope("api://orders/.default"),
    )
    .build()
    .unwrap();
    api_ok(&with_secret, &provider).await;
    assert!(provider.requests()[..1].iter().all(Result::is_ok));
}

// ------------------------------------------------------------------- Okta

const OKTA_CLIENT: &str = "0oa1b2c3d4e5f6g7h8i9";

/// Okta's custom authorization server: a scope is required; a
/// `private_key_jwt` assertion's `aud` must be exactly the token endpoint
/// invoked, its `jti` unused, at most an hour long.
async fn okta(key: DecodingKey) -> Provider {
    let jtis = Arc::new(Mutex::new(HashSet::new()));
    let provider = Provider::start(
        "/oauth2/default/v1/token",
        json!({"token_type": "Bearer", "expires_in": 3600, "scope": "orders:read"}),
        move |req: &TokenRequest| {
            let okta = |status: u16, error: &str, text: &str| -> Refusal {
                (status, json!({"error": error, "error_description": text}))
            };
            let token_url = format!("http://{}{}", req.headers["host"].to_str().unwrap(), req.path);
            if req.get("client_assertion_type") != Some(ASSERTION_TYPE) {
                return Err(okta(401, "invalid_client", "Client authentication failed."));
            }
            let jwt = req.get("client_assertion").unwrap_or("");
            let mut validation = Validation::new(Jose::ES256);
            validation.leeway = 0;
            validation.validate_aud = false;
            validation.set_issuer(&[OKTA_CLIENT]);
            validation.sub = Some(OKTA_CLIENT.into());
            let claims = jsonwebtoken::decode::<Value>(jwt, &key, &validation)
                .map_err(|e| okta(401, "invalid_client", &format!("The client_assertion signature is invalid. {e}")))?
                .claims;
            if claims["aud"] != json!(token_url) {
                return Err(okta(401, "invalid_client", "The audience claim for client_assertion must be the endpoint invoked for the request."));
            }
            let (iat, exp) = (claims["iat"].as_u64().unwrap_or(0), claims["exp"].as_u64().unwrap_or(0));
            if exp <= iat || exp - iat > 3600 {
                return Err(okta(401, "invalid_client", "The client_assertion token has an expiration too far into the future."));
            }
            let jti = claims["jti"].as_str().unwrap_or("").to_owned();
            if !jtis.lock().unwrap().insert(jti) {
                return Err(okta(401, "invalid_client", "The client_assertion token has already been used."));
            }
            if req.get("scope").is_none() {
                return Err(okta(400, "invalid_scope", "The authorization server resource does not have any configured default scopes, 'scope' must be provided."));
            }
            Ok(())
        },
    )
    .await;
    let issuer = provider.url("/oauth2/default");
    provider.publish(
        "/oauth2/default/.well-known/openid-configuration",
        json!({
            "issuer": issuer,
            "token_endpoint": provider.url("/oauth2/default/v1/token"),
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt", "none"],
            "scopes_supported": ["orders:read", "openid"],
        }),
    );
    provider
}

#[tokio::test]
async fn okta_with_private_key_jwt_and_a_required_scope() {
    let key = TestKey::new(Kind::P256);
    let provider = okta(DecodingKey::from_ec_pem(key.public.as_bytes()).unwrap()).await;
    let layer = |scope: Option<&str>| {
        let mut builder = OAuthLayer::builder()
            .issuer(provider.url("/oauth2/default"))
            .client_id(OKTA_CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256)
                    .unwrap()
                    .key_id("okta-key-1"),
            ));
        if let Some(scope) = scope {
            builder = builder.scope(scope);
        }
        support::with_transport(builder).build().unwrap()
    };
    let oauth = layer(Some("orders:read"));
    api_ok(&oauth, &provider).await;
    // The issuer as `aud` first (the RFC 7523 update); Okta wants the token
    // endpoint: refused once, then taken, for the layer's life.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].as_ref().unwrap_err().0, 401);
    assert!(requests[1].is_ok());

    let err = layer(None).token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(err.error_code(), Some("invalid_scope"));
    assert!(
        err.to_string().contains("'scope' must be provided"),
        "{err}"
    );
}

// --------------------------------------------------------------- Keycloak

const KEYCLOAK_CLIENT: &str = "orders-service";
const KEYCLOAK_SECRET: &str = "kc+secret/with%odd=chars&more";

/// Keycloak: a realm's issuer (`/realms/{realm}`), OpenID Connect metadata
/// only, the token endpoint under `protocol/openid-connect`; Basic
/// credentials form-decoded; a signed JWT's `aud` the issuer or the token
/// endpoint; its own response fields.
async fn keycloak(key: DecodingKey) -> Provider {
    let provider = Provider::start(
        "/realms/shop/protocol/openid-connect/token",
        json!({"expires_in": 300, "refresh_expires_in": 0, "token_type": "Bearer", "not-before-policy": 0, "scope": "profile email"}),
        move |req: &TokenRequest| {
            let refused = || -> Refusal {
                (401, json!({"error": "unauthorized_client", "error_description": "Invalid client or Invalid client credentials"}))
            };
            let host = req.headers["host"].to_str().unwrap().to_owned();
            let issuer = format!("http://{host}/realms/shop");
            let token_url = format!("http://{host}{}", req.path);
            if let Some((id, secret)) = req.basic() {
                return if id == KEYCLOAK_CLIENT && secret == KEYCLOAK_SECRET { Ok(()) } else { Err(refused()) };
            }
            let jwt = req.get("client_assertion").ok_or_else(refused)?;
            let by_issuer = verify(jwt, &key, KEYCLOAK_CLIENT, KEYCLOAK_CLIENT, &issuer);
            let by_url = verify(jwt, &key, KEYCLOAK_CLIENT, KEYCLOAK_CLIENT, &token_url);
            by_issuer.or(by_url).map(|_| ()).map_err(|_| refused())
        },
    )
    .await;
    let issuer = provider.url("/realms/shop");
    provider.publish(
        "/realms/shop/.well-known/openid-configuration",
        json!({
            "issuer": issuer,
            "token_endpoint": provider.url("/realms/shop/protocol/openid-connect/token"),
            "token_endpoint_auth_methods_supported": ["private_key_jwt", "client_secret_basic", "client_secret_post", "tls_client_auth", "client_secret_jwt"],
        }),
    );
    provider
}

#[tokio::test]
async fn keycloak_with_a_secret_or_a_signed_jwt() {
    let key = TestKey::new(Kind::P256);
    let provider = keycloak(DecodingKey::from_ec_pem(key.public.as_bytes()).unwrap()).await;
    let with_secret = support::with_transport(
        OAuthLayer::builder()
            .issuer(provider.url("/realms/shop"))
            .client_id(KEYCLOAK_CLIENT)
            .client_secret(KEYCLOAK_SECRET),
    )
    .build()
    .unwrap();
    api_ok(&with_secret, &provider).await;
    assert_eq!(
        with_secret.server_metadata().unwrap().client_auth,
        ClientAuth::Basic
    );
    let signed = support::with_transport(
        OAuthLayer::builder()
            .issuer(provider.url("/realms/shop"))
            .client_id(KEYCLOAK_CLIENT)
            .client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(&key.pkcs8, Algorithm::Es256).unwrap(),
            )),
    )
    .build()
    .unwrap();
    api_ok(&signed, &provider).await;
    // Keycloak takes the issuer as `aud`: no refusal at all.
    assert!(provider.requests().iter().all(Result::is_ok));
}

// ------------------------------------------------------------------ Auth0

const AUTH0_CLIENT: &str = "aB3dE5fG7hI9jK1lM3nO5pQ7";
const AUTH0_SECRET: &str = "auth0-client-secret-value";

/// Auth0: the issuer ends with `/`; an `audience` (the API's identifier) is
/// required unless the tenant has a default, refused with 403
/// `access_denied`.
async fn auth0() -> Provider {
    let provider = Provider::start(
        "/oauth/token",
        json!({"scope": "read:orders", "expires_in": 86400, "token_type": "Bearer"}),
        |req: &TokenRequest| {
            let secret_ok = req.get("client_id") == Some(AUTH0_CLIENT)
                && req.get("client_secret") == Some(AUTH0_SECRET)
                || req.basic() == Some((AUTH0_CLIENT.into(), AUTH0_SECRET.into()));
            if !secret_ok {
                return Err((401, json!({"error": "access_denied", "error_description": "Unauthorized"})));
            }
            if req.get("audience").is_none() {
                return Err((403, json!({"error": "access_denied", "error_description": "No audience parameter was provided, and no default audience has been configured"})));
            }
            Ok(())
        },
    )
    .await;
    provider.publish(
        "/.well-known/openid-configuration",
        json!({
            "issuer": provider.url("/"),
            "token_endpoint": provider.url("/oauth/token"),
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
        }),
    );
    provider
}

#[tokio::test]
async fn auth0_with_its_audience_parameter() {
    let provider = auth0().await;
    let layer = |audience: Option<&str>| {
        let mut builder = OAuthLayer::builder()
            .issuer(provider.url("/"))
            .client_id(AUTH0_CLIENT)
            .client_secret(AUTH0_SECRET);
        if let Some(audience) = audience {
            builder = builder.audience(audience);
        }
        support::with_transport(builder).build().unwrap()
    };
    api_ok(&layer(Some("https://orders.example.com/api")), &provider).await;
    let err = layer(None).token().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "token endpoint refused the request with HTTP 403 Forbidden (access_denied: No audience \
         parameter was provided, and no default audience has been configured)"
    );
}
