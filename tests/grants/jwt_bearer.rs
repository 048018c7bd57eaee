//! The JWT-bearer grant (RFC 7523 section 2.1) against a loopback double of
//! Google's token endpoint, which enforces what Google documents for
//! service accounts: the body holds `grant_type` and `assertion` only; the
//! JWT is RS256 with the key's `kid`, issued by the service account's email
//! for exactly the `token_uri`, with a non-empty `scope` claim and at most an
//! hour between `iat` and `exp`. Every assertion is verified with
//! jsonwebtoken against the public half of an openssl key. And a generic
//! server: scope in the body, the client authenticating with Basic too.
#![cfg(feature = "reqwest")]

use crate::support;

use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};
use support::keys::{Kind, TestKey};
use support::serve::{answer, serve_state, Response};
use tokio::net::TcpListener;
use tower_oauth::{grant::JwtBearer, ConfigErrorKind, OAuthLayer, TokenErrorKind};

const EMAIL: &str = "reports@my-project.iam.gserviceaccount.com";
const KID: &str = "0123456789abcdef0123456789abcdef01234567";
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

struct Google {
    url: String,
    key: DecodingKey,
    /// What each token request was refused for, or the claims it carried.
    seen: Mutex<Vec<Result<Value, String>>>,
}

impl Google {
    async fn start(public_pem: &str) -> Arc<Google> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let google = Arc::new(Google {
            url: format!("http://{}", listener.local_addr().unwrap()),
            key: DecodingKey::from_rsa_pem(public_pem.as_bytes()).unwrap(),
            seen: Mutex::new(Vec::new()),
        });
        serve_state(listener, Arc::clone(&google), |google, req| async move {
            google.token(req).await
        });
        google
    }

    fn token_uri(&self) -> String {
        format!("{}/token", self.url)
    }

    async fn token(&self, req: http::Request<hyper::body::Incoming>) -> Response {
        let has_authorization = req.headers().contains_key("authorization");
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let checked = self.check(&body, has_authorization);
        self.seen.lock().unwrap().push(checked.clone());
        match checked {
            Ok(_) => answer(
                200,
                json!({"access_token": "ya29.a0-test-token", "expires_in": 3599, "token_type": "Bearer"}),
            ),
            Err(why) if why.starts_with("scope") => answer(
                400,
                json!({"error": "invalid_scope", "error_description": "Empty or missing scope not allowed."}),
            ),
            Err(why) => answer(
                400,
                json!({"error": "invalid_grant", "error_description": why}),
            ),
        }
    }

    fn check(&self, body: &[u8], has_authorization: bool) -> Result<Value, String> {
        if has_authorization {
            return Err("an Authorization header".into());
        }
        let form: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        let names: Vec<&str> = form.iter().map(|(n, _)| n.as_str()).collect();
        if names != ["grant_type", "assertion"] {
            return Err(format!("body parameters {names:?}"));
        }
        if form[0].1 != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
            return Err("grant_type".into());
        }
        let jwt = &form[1].1;
        let header = jsonwebtoken::decode_header(jwt).map_err(|e| e.to_string())?;
        if header.alg != Algorithm::RS256 || header.kid.as_deref() != Some(KID) {
            return Err(format!("header {:?} {:?}", header.alg, header.kid));
        }
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = 0;
        validation.set_issuer(&[EMAIL]);
        validation.set_audience(&[self.token_uri()]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Value>(jwt, &self.key, &validation)
            .map_err(|e| format!("Invalid JWT: {e}"))?
            .claims;
        let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
        if !matches!((iat, exp), (Some(i), Some(e)) if e > i && e - i <= 3600) {
            return Err("Invalid JWT: exp more than an hour after iat".into());
        }
        if claims["scope"].as_str().is_none_or(str::is_empty) {
            return Err("scope".into());
        }
        Ok(claims)
    }

    fn seen(&self) -> Vec<Result<Value, String>> {
        self.seen.lock().unwrap().clone()
    }
}

fn key_file(key: &TestKey, token_uri: &str) -> String {
    json!({
        "type": "service_account",
        "project_id": "my-project",
        "private_key_id": KID,
        "private_key": key.pkcs8,
        "client_email": EMAIL,
        "client_id": "104857600000000000000",
        "token_uri": token_uri,
    })
    .to_string()
}

#[tokio::test]
async fn a_google_service_account_key_file_gets_tokens_as_google_asks() {
    let key = TestKey::new(Kind::Rsa(2048));
    let google = Google::start(&key.public).await;
    let dir = std::env::temp_dir().join(format!("tower-oauth-google-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("service-account.json");
    std::fs::write(&path, key_file(&key, &google.token_uri())).unwrap();

    let grant = JwtBearer::google_service_account_file(&path).unwrap();
    assert_eq!(grant.token_url(), Some(google.token_uri().as_str()));
    assert!(!format!("{grant:?}").contains("PRIVATE KEY"));
    let oauth = support::with_transport(OAuthLayer::builder().jwt_bearer(grant).scope(SCOPE))
        .build()
        .unwrap();
    assert_eq!(oauth.token_url().unwrap().to_string(), google.token_uri());
    let token = oauth.token().await.unwrap();
    assert_eq!(token.expose_token(), "ya29.a0-test-token");
    let seen = google.seen();
    assert_eq!(seen.len(), 1);
    let claims = seen[0].as_ref().unwrap();
    assert_eq!(claims["scope"], SCOPE);
    assert_eq!(claims["sub"], EMAIL);

    // Domain-wide delegation: the subject is the user.
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .jwt_bearer(
                JwtBearer::google_service_account_file(&path)
                    .unwrap()
                    .subject("alice@example.com"),
            )
            .scope(SCOPE),
    )
    .build()
    .unwrap();
    oauth.token().await.unwrap();
    assert_eq!(
        google.seen()[1].as_ref().unwrap()["sub"],
        "alice@example.com"
    );

    // Without a scope, Google's answer reaches the user as it is.
    let oauth = support::with_transport(
        OAuthLayer::builder().jwt_bearer(JwtBearer::google_service_account_file(&path).unwrap()),
    )
    .build()
    .unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(
        err.to_string(),
        "token endpoint refused the request with HTTP 400 Bad Request (invalid_scope: Empty or \
         missing scope not allowed.)"
    );
}

#[test]
fn a_bad_key_file_is_named_never_shown() {
    let key = TestKey::new(Kind::Rsa(2048));
    let message = |json: &str| {
        let err = JwtBearer::google_service_account(json).unwrap_err();
        assert_eq!(err.kind(), ConfigErrorKind::InvalidKey);
        assert!(!err.to_string().contains("PRIVATE KEY"));
        err.message().to_owned()
    };
    assert_eq!(
        message("{not json"),
        "the Google service account key is not JSON"
    );
    let user = json!({"type": "authorized_user", "client_id": "x", "refresh_token": "r"});
    assert!(message(&user.to_string())
        .starts_with("the Google service account key is not of `type` `service_account`"));
    let mut doc: Value =
        serde_json::from_str(&key_file(&key, "https://oauth2.googleapis.com/token")).unwrap();
    doc.as_object_mut().unwrap().remove("client_email");
    assert_eq!(
        message(&doc.to_string()),
        "the Google service account key has no `client_email`"
    );
    doc["client_email"] = json!(EMAIL);
    doc["private_key"] = json!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    assert!(message(&doc.to_string())
        .starts_with("the Google service account key has a `private_key` that does not read"));
    let missing = std::env::temp_dir().join("tower-oauth-no-such-key.json");
    let err = JwtBearer::google_service_account_file(&missing).unwrap_err();
    assert!(
        err.message()
            .starts_with(&format!("cannot read `{}`", missing.display())),
        "{err}"
    );
    // A key file without token_uri: Google's.
    doc["private_key"] = json!(key.pkcs8);
    doc.as_object_mut().unwrap().remove("token_uri");
    let grant = JwtBearer::google_service_account(doc.to_string()).unwrap();
    assert_eq!(
        grant.token_url(),
        Some("https://oauth2.googleapis.com/token")
    );
}

/// A token request as the generic server saw it: its Authorization header
/// and its form.
type Request = (Option<String>, Vec<(String, String)>);

/// A server of the generic kind (RFC 7523 section 2.1): the scope in the
/// body, the client authenticating with Basic besides the grant.
#[tokio::test]
async fn a_signed_grant_with_a_subject_and_the_client_s_own_authentication() {
    let key = TestKey::new(Kind::P256);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    serve_state(listener, Arc::clone(&seen), |seen, req| async move {
        let basic = req
            .headers()
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let form = form_urlencoded::parse(&body).into_owned().collect();
        seen.lock().unwrap().push((basic, form));
        answer(
            200,
            json!({"access_token": "granted", "token_type": "Bearer", "expires_in": 600}),
        )
    });
    let signing = tower_oauth::client_auth::SigningKey::from_pem(
        &key.pkcs8,
        tower_oauth::client_auth::Algorithm::Es256,
    )
    .unwrap()
    .key_id("grant-key");
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(&url)
            .client_id("connected-app")
            .client_secret("app-secret")
            .jwt_bearer(
                JwtBearer::signed(signing, "connected-app")
                    .subject("integration@example.com")
                    .audience("https://login.example.com"),
            )
            .scope("api refresh_token"),
    )
    .build()
    .unwrap();
    assert_eq!(oauth.token().await.unwrap().expose_token(), "granted");
    let (basic, form) = seen.lock().unwrap()[0].clone();
    assert!(basic.unwrap().starts_with("Basic "));
    let get = |name: &str| form.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(
        get("grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
    );
    assert_eq!(get("scope").as_deref(), Some("api refresh_token"));
    let jwt = get("assertion").unwrap();
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&["connected-app"]);
    validation.set_audience(&["https://login.example.com"]);
    validation.sub = Some("integration@example.com".into());
    let decoded = jsonwebtoken::decode::<Value>(
        &jwt,
        &DecodingKey::from_ec_pem(key.public.as_bytes()).unwrap(),
        &validation,
    )
    .unwrap();
    assert_eq!(decoded.header.kid.as_deref(), Some("grant-key"));
    assert!(decoded.claims.get("scope").is_none());
}

#[test]
fn grant_settings_are_checked() {
    let key = TestKey::new(Kind::P256);
    let signing = tower_oauth::client_auth::SigningKey::from_pem(
        &key.pkcs8,
        tower_oauth::client_auth::Algorithm::Es256,
    )
    .unwrap();
    let err = OAuthLayer::builder()
        .auth_url("https://auth.example.com")
        .jwt_bearer(JwtBearer::signed(signing, "me"))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    let err = OAuthLayer::builder()
        .token_url("https://idp.example.com/token")
        .client_id("c")
        .client_auth(tower_oauth::client_auth::ClientAuth::None)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    assert!(
        err.message().contains("client credentials grant needs"),
        "{err}"
    );
    let err = OAuthLayer::builder()
        .jwt_bearer(JwtBearer::from_file("/var/run/secrets/tokens/grant"))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingUrl);
}

/// With an issuer, the grant's assertion follows the audience rule of
/// client assertions: the issuer first, the token endpoint's URL once after
/// an `invalid_grant`, the one taken kept for the layer (its token slots
/// too). A server that takes the issuer is asked once.
#[tokio::test]
async fn with_an_issuer_the_grant_s_audience_is_learnt_once_per_layer() {
    use support::provider::{Provider, TokenRequest};
    let key = TestKey::new(Kind::P256);
    for takes_issuer in [false, true] {
        let public = DecodingKey::from_ec_pem(key.public.as_bytes()).unwrap();
        let provider = Provider::start(
            "/oauth2/token",
            json!({"token_type": "Bearer", "expires_in": 600}),
            move |req: &TokenRequest| {
                let host = req.headers["host"].to_str().unwrap();
                let aud = if takes_issuer {
                    format!("http://{host}")
                } else {
                    format!("http://{host}/oauth2/token")
                };
                let mut validation = Validation::new(Algorithm::ES256);
                validation.set_issuer(&["integration"]);
                validation.set_audience(&[aud]);
                jsonwebtoken::decode::<Value>(req.get("assertion").unwrap_or(""), &public, &validation)
                    .map(|_| ())
                    .map_err(|e| (400, json!({"error": "invalid_grant", "error_description": format!("Invalid JWT: {e}")})))
            },
        )
        .await;
        provider.publish(
            "/.well-known/oauth-authorization-server",
            json!({"issuer": provider.base, "token_endpoint": provider.url("/oauth2/token")}),
        );
        let signing = tower_oauth::client_auth::SigningKey::from_pem(
            &key.pkcs8,
            tower_oauth::client_auth::Algorithm::Es256,
        )
        .unwrap();
        let oauth = support::with_transport(
            OAuthLayer::builder()
                .issuer(&provider.base)
                .jwt_bearer(JwtBearer::signed(signing, "integration")),
        )
        .build()
        .unwrap();
        oauth.token().await.unwrap();
        oauth
            .token_for(&tower_oauth::TokenParams::new().scope("other"))
            .await
            .unwrap();
        let outcomes: Vec<bool> = provider.requests().iter().map(Result::is_ok).collect();
        let expected = if takes_issuer {
            vec![true, true]
        } else {
            vec![false, true, true]
        };
        assert_eq!(outcomes, expected, "takes the issuer: {takes_issuer}");
    }
}

/// A refused grant says what to check: the assertion's `iss`, `sub`, `aud`
/// and key id, read back from what was sent; never the key, the signature
/// or the assertion itself.
#[tokio::test]
async fn a_refused_grant_names_its_issuer_subject_audience_and_key_id() {
    let registered = TestKey::new(Kind::Rsa(2048));
    let google = Google::start(&registered.public).await;
    // The key file holds another key than the one Google knows.
    let other = TestKey::new(Kind::Rsa(2048));
    let grant = JwtBearer::google_service_account(key_file(&other, &google.token_uri()))
        .unwrap()
        .subject("alice@example.com");
    let oauth = support::with_transport(OAuthLayer::builder().jwt_bearer(grant).scope(SCOPE))
        .build()
        .unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(err.error_code(), Some("invalid_grant"));
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "the token endpoint refused the JWT-bearer grant's assertion (iss `{EMAIL}`, sub \
             `alice@example.com`, aud `{}`, key id `{KID}`): check that the server trusts this \
             issuer and its key (by that key id) for the subject",
            google.token_uri()
        )),
        "{text}"
    );
    assert!(text.contains("JwtBearer::audience"), "{text}");
    // The signed assertion Google saw, and the key, are nowhere in it.
    let sent = google.seen().len();
    assert_eq!(
        sent, 1,
        "an invalid_grant without an issuer is not tried again"
    );
    for shown in [text.clone(), format!("{err:?}")] {
        assert!(
            !shown.contains("PRIVATE KEY") && !shown.contains("eyJ"),
            "{shown}"
        );
    }
}

/// The grant's assertion from another layer's current token (an ID token
/// or ID-JAG another server issues, say) and from a function: sent as it
/// is, renewed with its source, named (never shown) when refused.
#[tokio::test]
async fn an_assertion_from_another_layer_or_a_function() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
    serve_state(listener, Arc::clone(&seen), |seen, req| async move {
        if req.uri().path() == "/idp" {
            let n = seen.lock().unwrap().len();
            return answer(
                200,
                json!({"access_token": format!("eyJ.upstream-assertion-{n}"), "expires_in": 600}),
            );
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
        seen.lock().unwrap().push((None, form.clone()));
        let assertion = form
            .iter()
            .find(|(n, _)| n == "assertion")
            .map(|(_, v)| v.clone());
        if assertion.as_deref() == Some("refused-assertion-value") {
            return answer(
                400,
                json!({"error": "invalid_grant", "error_description": "bad refused-assertion-value"}),
            );
        }
        answer(
            200,
            json!({"access_token": "granted", "token_type": "Bearer", "expires_in": 600}),
        )
    });
    let upstream = support::with_transport(
        OAuthLayer::builder()
            .token_url(format!("{base}/idp"))
            .client_id("agent")
            .client_secret("agent-secret"),
    )
    .build()
    .unwrap();
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(format!("{base}/token"))
            .jwt_bearer(JwtBearer::assertion_from(
                tower_oauth::grant::SubjectToken::from(&upstream),
            )),
    )
    .build()
    .unwrap();
    assert_eq!(oauth.token().await.unwrap().expose_token(), "granted");
    let (_, form) = seen.lock().unwrap()[0].clone();
    let get = |name: &str| form.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(
        get("grant_type").as_deref(),
        Some(tower_oauth::grant::grant_type::JWT_BEARER)
    );
    assert_eq!(
        get("assertion").as_deref(),
        Some("eyJ.upstream-assertion-0")
    );
    assert_eq!(
        get("client_id"),
        None,
        "no client authentication of its own"
    );
    // From a function; a refusal names the source, never the assertion.
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .token_url(format!("{base}/token"))
            .jwt_bearer(JwtBearer::assertion_from(
                tower_oauth::grant::SubjectToken::from_fn("workload-idp", || {
                    Box::pin(async { Ok("refused-assertion-value".to_owned()) })
                }),
            )),
    )
    .build()
    .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Status);
    let text = format!("{e} {e:?}");
    assert!(text.contains("fn:workload-idp"), "{text}");
    assert!(!text.contains("refused-assertion-value"), "{text}");
    // An empty answer is a credential error naming the function.
    let empty = support::with_transport(
        OAuthLayer::builder()
            .token_url(format!("{base}/token"))
            .jwt_bearer(JwtBearer::assertion_from(
                tower_oauth::grant::SubjectToken::from_fn("blank", || {
                    Box::pin(async { Ok("  ".to_owned()) })
                }),
            )),
    )
    .build()
    .unwrap();
    let e = empty.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Credential);
    assert!(e.to_string().contains("assertion `blank` is empty"), "{e}");
    // An assertion whose `exp` has passed is not sent, as from a file.
    let expired = {
        use base64::Engine;
        let b64 = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let jwt = format!(
            "{}.{}.c2ln",
            b64(json!({"alg": "RS256"})),
            b64(json!({"sub": "workload", "exp": now - 60}))
        );
        support::with_transport(
            OAuthLayer::builder()
                .token_url(format!("{base}/token"))
                .jwt_bearer(JwtBearer::assertion_from(
                    tower_oauth::grant::SubjectToken::from_fn("stale", move || {
                        let jwt = jwt.clone();
                        Box::pin(async move { Ok(jwt) })
                    }),
                )),
        )
        .build()
        .unwrap()
    };
    let requests = seen.lock().unwrap().len();
    let e = expired.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Credential);
    assert!(e.to_string().contains("`fn:stale` has expired"), "{e}");
    assert_eq!(seen.lock().unwrap().len(), requests, "nothing was sent");
}

/// Enterprise-managed authorization (ID-JAG, MCP's SEP-990) against three
/// loopback servers: the company's identity provider (a token exchange of
/// the employee's ID token for an ID-JAG it signs), the MCP server's
/// authorization server (the JWT-bearer grant, the ID-JAG verified with
/// jsonwebtoken, the client's Basic authentication) and the MCP server
/// (its RFC 9728 metadata naming that server).
mod id_jag {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;
    use tower_oauth::{
        grant::{IdentityAssertion, SubjectToken},
        OAuthLayerBuilder,
    };

    const ID_TOKEN: &str = "eyJ.employee-id-token.sig";
    const IDP_KEY: &[u8] = b"the identity provider's signing key, shared with the server";

    #[derive(Default)]
    struct Enterprise {
        idp: Mutex<String>,
        auth: Mutex<String>,
        resource: Mutex<String>,
        /// The token exchanges the IdP answered, with their parameters.
        exchanges: Mutex<Vec<Vec<(String, String)>>>,
        /// The ID-JAGs the authorization server took (their `jti`).
        grants: Mutex<Vec<String>>,
        idp_refuses: AtomicBool,
        auth_refuses: AtomicBool,
        /// How many ID-JAGs the authorization server still calls expired.
        expired: AtomicUsize,
    }

    impl Enterprise {
        async fn start() -> Arc<Enterprise> {
            let state = Arc::new(Enterprise::default());
            for role in ["idp", "auth", "resource"] {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("http://{}", listener.local_addr().unwrap());
                match role {
                    "idp" => *state.idp.lock().unwrap() = url,
                    "auth" => *state.auth.lock().unwrap() = url,
                    _ => *state.resource.lock().unwrap() = format!("{url}/mcp"),
                }
                serve_state(listener, Arc::clone(&state), move |state, req| async move {
                    state.handle(role, req).await
                });
            }
            state
        }

        fn idp(&self) -> String {
            self.idp.lock().unwrap().clone()
        }

        fn auth(&self) -> String {
            self.auth.lock().unwrap().clone()
        }

        fn resource(&self) -> String {
            self.resource.lock().unwrap().clone()
        }

        async fn handle(&self, role: &str, req: http::Request<hyper::body::Incoming>) -> Response {
            let path = req.uri().path().to_owned();
            let basic = req
                .headers()
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned());
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
            let get = |name: &str| form.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            match (role, path.as_str()) {
                ("resource", "/.well-known/oauth-protected-resource/mcp") => answer(
                    200,
                    json!({"resource": self.resource(), "authorization_servers": [self.auth()]}),
                ),
                ("auth", "/.well-known/oauth-authorization-server") => answer(
                    200,
                    json!({
                        "issuer": self.auth(),
                        "token_endpoint": format!("{}/token", self.auth()),
                        "grant_types_supported": [tower_oauth::grant::grant_type::JWT_BEARER],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
                    }),
                ),
                ("idp", "/token") => {
                    self.exchanges.lock().unwrap().push(form.clone());
                    let expected = [
                        (
                            "grant_type",
                            tower_oauth::grant::grant_type::TOKEN_EXCHANGE.to_owned(),
                        ),
                        ("subject_token", ID_TOKEN.to_owned()),
                        (
                            "subject_token_type",
                            tower_oauth::grant::token_type::ID_TOKEN.to_owned(),
                        ),
                        (
                            "requested_token_type",
                            tower_oauth::grant::token_type::ID_JAG.to_owned(),
                        ),
                        ("audience", self.auth()),
                        ("resource", self.resource()),
                        ("client_id", "agent-at-idp".to_owned()),
                    ];
                    for (name, value) in expected {
                        if get(name).as_deref() != Some(value.as_str()) {
                            return answer(
                                400,
                                json!({"error": "invalid_request", "error_description": format!("{name}")}),
                            );
                        }
                    }
                    if self.idp_refuses.load(Ordering::SeqCst) {
                        return answer(
                            400,
                            json!({"error": "invalid_grant", "error_description": "the ID token expired"}),
                        );
                    }
                    let now = jsonwebtoken::get_current_timestamp();
                    let jti = format!("jag-{}", self.exchanges.lock().unwrap().len());
                    let claims = json!({
                        "iss": self.idp(), "sub": "employee@acme.example", "aud": self.auth(),
                        "resource": self.resource(), "client_id": "agent", "scope": get("scope"),
                        "iat": now, "exp": now + 300, "jti": jti,
                    });
                    let mut header = jsonwebtoken::Header::new(Algorithm::HS256);
                    header.typ = Some("oauth-id-jag+jwt".into());
                    let jag = jsonwebtoken::encode(
                        &header,
                        &claims,
                        &jsonwebtoken::EncodingKey::from_secret(IDP_KEY),
                    )
                    .unwrap();
                    answer(
                        200,
                        json!({"access_token": jag, "issued_token_type": tower_oauth::grant::token_type::ID_JAG, "token_type": "N_A"}),
                    )
                }
                ("auth", "/token") => {
                    use base64::Engine;
                    let expected = format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode("agent:agent-secret")
                    );
                    if basic.as_deref() != Some(expected.as_str()) {
                        return answer(401, json!({"error": "invalid_client"}));
                    }
                    if get("grant_type").as_deref()
                        != Some(tower_oauth::grant::grant_type::JWT_BEARER)
                    {
                        return answer(400, json!({"error": "unsupported_grant_type"}));
                    }
                    let mut validation = Validation::new(Algorithm::HS256);
                    validation.set_issuer(&[self.idp()]);
                    validation.set_audience(&[self.auth()]);
                    let Ok(jag) = jsonwebtoken::decode::<Value>(
                        &get("assertion").unwrap_or_default(),
                        &DecodingKey::from_secret(IDP_KEY),
                        &validation,
                    ) else {
                        return answer(
                            400,
                            json!({"error": "invalid_grant", "error_description": "not an ID-JAG"}),
                        );
                    };
                    if jag.claims["resource"] != json!(self.resource()) {
                        return answer(
                            400,
                            json!({"error": "invalid_grant", "error_description": "resource"}),
                        );
                    }
                    if self.auth_refuses.load(Ordering::SeqCst) {
                        return answer(
                            400,
                            json!({"error": "invalid_grant", "error_description": "this client may not act for that user"}),
                        );
                    }
                    let expired = self
                        .expired
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    if expired {
                        return answer(
                            400,
                            json!({"error": "invalid_grant", "error_description": "the ID-JAG expired"}),
                        );
                    }
                    let jti = jag.claims["jti"].as_str().unwrap().to_owned();
                    self.grants.lock().unwrap().push(jti.clone());
                    answer(
                        200,
                        json!({"access_token": format!("mcp-token-{jti}"), "token_type": "Bearer", "expires_in": 3600}),
                    )
                }
                _ => answer(404, json!({})),
            }
        }
    }

    fn layer(enterprise: &Enterprise, id_token: SubjectToken) -> OAuthLayerBuilder {
        support::with_transport(
            OAuthLayer::builder()
                .protected_resource(enterprise.resource())
                .trusted_issuers([enterprise.auth()])
                .client_id("agent")
                .client_secret("agent-secret")
                .identity_assertion(
                    IdentityAssertion::token_url(format!("{}/token", enterprise.idp()), id_token)
                        .client_id("agent-at-idp"),
                )
                .scope("tools:call"),
        )
    }

    fn id_token() -> SubjectToken {
        SubjectToken::from_fn("employee-id-token", || {
            Box::pin(async { Ok(ID_TOKEN.to_owned()) })
        })
    }

    #[tokio::test]
    async fn an_id_token_becomes_an_id_jag_then_a_token_and_renewals_reuse_the_id_jag() {
        let enterprise = Enterprise::start().await;
        let oauth = layer(&enterprise, id_token()).build().unwrap();
        let token = oauth.token().await.unwrap();
        assert_eq!(token.expose_token(), "mcp-token-jag-1");
        let exchange = enterprise.exchanges.lock().unwrap()[0].clone();
        assert!(
            exchange.contains(&("scope".into(), "tools:call".into())),
            "{exchange:?}"
        );
        // A renewal presents the ID-JAG again while it lasts.
        assert!(oauth.force_renewal());
        let token = oauth.token().await.unwrap();
        assert_eq!(token.expose_token(), "mcp-token-jag-1");
        assert_eq!(enterprise.exchanges.lock().unwrap().len(), 1);
        assert_eq!(enterprise.grants.lock().unwrap().len(), 2);
        // An ID-JAG the server calls expired is dropped, and the request
        // made once more with a new one.
        enterprise.expired.store(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let fresh = support::with_transport(
            layer(&enterprise, id_token()).forced_renewal_interval(Duration::from_millis(1)),
        )
        .build()
        .unwrap();
        assert_eq!(
            fresh.token().await.unwrap().expose_token(),
            "mcp-token-jag-3"
        );
        assert_eq!(enterprise.exchanges.lock().unwrap().len(), 3);
    }

    #[tokio::test]
    async fn a_refusal_names_its_step_its_server_and_what_was_asked_never_a_token() {
        let enterprise = Enterprise::start().await;
        enterprise.idp_refuses.store(true, Ordering::SeqCst);
        let oauth = layer(&enterprise, id_token()).build().unwrap();
        let e = oauth.token().await.unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(text.contains("step 1 of 2"), "{text}");
        assert!(text.contains(&enterprise.idp()), "{text}");
        assert!(
            text.contains(&format!("audience `{}`", enterprise.auth())),
            "{text}"
        );
        assert!(text.contains("the ID token expired"), "{text}");
        assert!(!text.contains("employee-id-token.sig"), "{text}");
        // The authorization server's refusal: the second step.
        enterprise.idp_refuses.store(false, Ordering::SeqCst);
        enterprise.auth_refuses.store(true, Ordering::SeqCst);
        let oauth = layer(&enterprise, id_token()).build().unwrap();
        let e = oauth.token().await.unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(text.contains("id-jag:"), "{text}");
        assert!(text.contains("may not act for that user"), "{text}");
        assert!(!text.contains("eyJ"), "{text}");
        // The ID token's source failing: a credential error naming it.
        let failing = SubjectToken::from_fn("employee-id-token", || {
            Box::pin(async { Err("the desktop session is locked".into()) })
        });
        let e = layer(&enterprise, failing)
            .build()
            .unwrap()
            .token()
            .await
            .unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Credential, "{e}");
        let text = e.to_string();
        assert!(
            text.contains("step 1 of 2") && text.contains("employee-id-token"),
            "{text}"
        );
    }

    #[test]
    fn it_needs_the_servers_issuer_and_no_other_grant() {
        let id = || IdentityAssertion::token_url("https://idp.example.com/token", id_token());
        let e = OAuthLayer::builder()
            .token_url("https://auth.example.com/token")
            .client_id("agent")
            .client_secret("s")
            .identity_assertion(id())
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("protected_resource"), "{e}");
        let e = OAuthLayer::builder()
            .protected_resource("https://mcp.example.com/mcp")
            .client_id("agent")
            .client_secret("s")
            .identity_assertion(id())
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("trusted_issuers"), "{e}");
        let e = OAuthLayer::builder()
            .issuer("https://auth.example.com")
            .identity_assertion(id())
            .jwt_bearer(JwtBearer::from_file("/tmp/x"))
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("another grant"), "{e}");
        assert!(!format!("{:?}", id().client_secret("idp-secret")).contains("idp-secret"));
    }
}
