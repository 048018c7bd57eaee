//! Token exchange (RFC 8693) against a loopback security token service that
//! checks what the RFC asks: the grant type, a subject token it issued
//! itself (or a platform JWT it verifies with jsonwebtoken), its type, the
//! requested type, the audience, and the client's own authentication; it
//! answers with `issued_token_type`. The exchanged token is cached and
//! renewed like any other, per audience in token slots.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::json;
use support::serve::{answer, bearer, has_basic, serve_state, Response};
use tokio::net::TcpListener;
use tower::ServiceExt;
use tower_oauth::{
    grant::token_type,
    grant::{SubjectToken, TokenExchange},
    OAuthLayer, TokenErrorKind, TokenParams,
};

const GATEWAY: (&str, &str) = ("gateway", "gateway-secret");
const ORDERS: (&str, &str) = ("orders", "orders-secret");

#[derive(Default)]
struct Sts {
    url: Mutex<String>,
    issued: Mutex<HashMap<String, Issued>>,
    serial: AtomicUsize,
    exchanges: AtomicUsize,
    refusals: Mutex<Vec<String>>,
    /// The subject tokens traded, in order.
    subjects: Mutex<Vec<String>>,
    /// The lifetime of a client's own token, in seconds (0: an hour).
    own_lifetime: AtomicU64,
    /// Exchanged tokens live as long as their subject still does, at most
    /// 8 s (as some servers give the exchanged token the subject's `exp`),
    /// where they otherwise live 1 s.
    capped: AtomicBool,
    /// The lifetime given to each exchanged token, in seconds.
    granted: Mutex<Vec<u64>>,
}

#[derive(Clone, Debug)]
struct Issued {
    /// `None`: the client's own token; else the audience it was exchanged for.
    audience: Option<String>,
    /// When it runs out.
    expires_at: std::time::Instant,
}

impl Sts {
    async fn start() -> Arc<Sts> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sts = Arc::new(Sts::default());
        *sts.url.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
        serve_state(listener, Arc::clone(&sts), |sts, req| async move {
            sts.handle(req).await
        });
        sts
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url.lock().unwrap())
    }

    fn issue(&self, audience: Option<String>, lifetime: u64, exchanged: bool) -> Response {
        let n = self.serial.fetch_add(1, Ordering::SeqCst);
        let token = format!("{}-{n}", audience.as_deref().unwrap_or("own"));
        let expires_at = std::time::Instant::now() + Duration::from_secs(lifetime);
        self.issued.lock().unwrap().insert(
            token.clone(),
            Issued {
                audience,
                expires_at,
            },
        );
        let mut body =
            json!({"access_token": token, "token_type": "Bearer", "expires_in": lifetime});
        if exchanged {
            body["issued_token_type"] = json!(token_type::ACCESS_TOKEN);
        }
        answer(200, body)
    }

    async fn handle(&self, req: http::Request<hyper::body::Incoming>) -> Response {
        if req.uri().path().starts_with("/api/") {
            let audience = req.uri().path().trim_start_matches("/api/").to_owned();
            let token = bearer(req.headers());
            let issued = self.issued.lock().unwrap().get(token).cloned();
            return match issued {
                Some(Issued {
                    audience: Some(a),
                    expires_at,
                }) if a == audience && std::time::Instant::now() < expires_at => {
                    answer(200, json!({}))
                }
                _ => answer(401, json!({"error": "invalid_token"})),
            };
        }
        let gateway = has_basic(&req, GATEWAY.0, GATEWAY.1);
        let orders = has_basic(&req, ORDERS.0, ORDERS.1);
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
        let get = |name: &str| form.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        match get("grant_type").as_deref() {
            Some("client_credentials") if gateway => {
                let lifetime = match self.own_lifetime.load(Ordering::SeqCst) {
                    0 => 3600,
                    secs => secs,
                };
                self.issue(None, lifetime, false)
            }
            Some("urn:ietf:params:oauth:grant-type:token-exchange") if orders => {
                match self.check_exchange(&get) {
                    Ok((audience, subject_left)) => {
                        self.exchanges.fetch_add(1, Ordering::SeqCst);
                        let lifetime = if self.capped.load(Ordering::SeqCst) {
                            subject_left.as_secs().min(8)
                        } else {
                            1
                        };
                        self.granted.lock().unwrap().push(lifetime);
                        self.issue(Some(audience), lifetime, true)
                    }
                    Err(why) => {
                        self.refusals.lock().unwrap().push(why.clone());
                        answer(
                            400,
                            json!({"error": "invalid_request", "error_description": why}),
                        )
                    }
                }
            }
            _ => answer(401, json!({"error": "invalid_client"})),
        }
    }

    /// The audience asked for, and how long the subject token still lives.
    fn check_exchange(
        &self,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(String, Duration), String> {
        let subject = get("subject_token").ok_or("no subject_token")?;
        if get("subject_token_type").as_deref() != Some(token_type::ACCESS_TOKEN) {
            return Err(format!(
                "subject_token_type {:?}",
                get("subject_token_type")
            ));
        }
        let subject_left = match self.issued.lock().unwrap().get(&subject) {
            Some(Issued {
                audience: None,
                expires_at,
            }) => expires_at.saturating_duration_since(std::time::Instant::now()),
            // Echoed, as some servers do: the layer must scrub it.
            _ => return Err(format!("the subject token {subject} is not one of ours")),
        };
        if get("requested_token_type").as_deref() != Some(token_type::ACCESS_TOKEN) {
            return Err("requested_token_type".into());
        }
        if subject_left.is_zero() {
            return Err("the subject token has expired".into());
        }
        self.subjects.lock().unwrap().push(subject);
        let audience = get("audience").ok_or_else(|| "no audience".to_owned())?;
        Ok((audience, subject_left))
    }
}

fn upstream(sts: &Sts) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(sts.url("/token"))
            .client_id(GATEWAY.0)
            .client_secret(GATEWAY.1),
    )
    .build()
    .unwrap()
}

fn exchanging(sts: &Sts, subject: SubjectToken) -> tower_oauth::OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(sts.url("/token"))
            .client_id(ORDERS.0)
            .client_secret(ORDERS.1)
            .token_exchange(
                TokenExchange::new(subject).requested_token_type(token_type::ACCESS_TOKEN),
            ),
    )
}

#[tokio::test]
async fn another_layer_s_token_is_exchanged_cached_and_renewed_per_audience() {
    let sts = Sts::start().await;
    let gateway = upstream(&sts);
    let oauth = exchanging(&sts, SubjectToken::from(&gateway))
        .audience("ledger")
        .params_for(|req| {
            req.uri
                .path()
                .strip_prefix("/api/")
                .filter(|a| *a != "ledger")
                .map(|a| TokenParams::new().audience(a))
        })
        .build()
        .unwrap();
    let client = support::client(&oauth);
    for round in 0..3 {
        if round > 0 {
            // The exchanged tokens live 1 s.
            tokio::time::sleep(Duration::from_millis(1_100)).await;
        }
        for api in ["ledger", "billing", "ledger", "billing"] {
            let response = client
                .clone()
                .oneshot(support::get(&sts.url(&format!("/api/{api}"))))
                .await
                .unwrap();
            assert_eq!(
                response.status(),
                200,
                "round {round}, {api}: {:?}",
                sts.refusals.lock().unwrap()
            );
        }
    }
    assert_eq!(sts.refusals.lock().unwrap().clone(), Vec::<String>::new());
    // One exchange per audience per round; the upstream token, cached by
    // its own layer, is the subject every time.
    assert_eq!(sts.exchanges.load(Ordering::SeqCst), 6);
    let subjects = sts.subjects.lock().unwrap().clone();
    assert!(subjects.iter().all(|s| *s == subjects[0]), "{subjects:?}");
    assert_eq!(gateway.stats().token_requests, 1);
}

#[tokio::test]
async fn a_subject_that_cannot_be_had_is_a_credential_error_naming_it() {
    let sts = Sts::start().await;
    let oauth = exchanging(
        &sts,
        SubjectToken::from_fn("ci-oidc", || {
            Box::pin(async { Err("CI_JOB_JWT is not set".into()) })
        }),
    )
    .audience("ledger")
    .build()
    .unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Credential);
    assert_eq!(
        err.to_string(),
        "client credential could not be read: the subject token `ci-oidc` could not be had: \
         CI_JOB_JWT is not set"
    );
    let oauth = exchanging(
        &sts,
        SubjectToken::from_fn("blank", || Box::pin(async { Ok(" ".to_owned()) })),
    )
    .audience("ledger")
    .build()
    .unwrap();
    assert_eq!(
        oauth.token().await.unwrap_err().to_string(),
        "client credential could not be read: the subject token `blank` is empty"
    );
    // A token the service does not know: its answer, and what to check.
    let oauth = exchanging(
        &sts,
        SubjectToken::from_fn("stranger", || {
            Box::pin(async { Ok("forged-subject-token".to_owned()) })
        }),
    )
    .audience("ledger")
    .build()
    .unwrap();
    let err = oauth.token().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "token endpoint refused the request with HTTP 400 Bad Request (invalid_request: the \
         subject token [redacted] is not one of ours): the token endpoint refused the token \
         exchange of the subject token from `fn:stranger` (type \
         `urn:ietf:params:oauth:token-type:access_token`) for audience `ledger`: check that \
         the server trusts the subject token's issuer and type, that this client may exchange \
         it, and that it may ask for that audience or resource"
    );
    assert_eq!(sts.exchanges.load(Ordering::SeqCst), 0);
    assert!(!format!("{err:?}").contains("forged"));
    // A platform token file that does not hold a JWT: named, not shown.
    let file = std::env::temp_dir().join(format!("tower-oauth-subject-{}", std::process::id()));
    std::fs::write(&file, "opaque-secret-text").unwrap();
    let oauth = exchanging(&sts, SubjectToken::file(&file))
        .audience("ledger")
        .build()
        .unwrap();
    assert_eq!(
        oauth.token().await.unwrap_err().to_string(),
        format!(
            "client credential could not be read: the subject token file `{}` does not hold a \
             JWT: a JWT has three dot-separated parts",
            file.display()
        )
    );
}

#[test]
fn exchange_settings_are_checked() {
    let err = OAuthLayer::builder()
        .auth_url("https://auth.example.com")
        .token_exchange(TokenExchange::new(SubjectToken::file("/t")))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), tower_oauth::ConfigErrorKind::Conflicting);
    let err = OAuthLayer::builder()
        .token_url("https://sts.example.com/token")
        .token_exchange(TokenExchange::new(SubjectToken::file("/t")))
        .param("subject_token", "x")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), tower_oauth::ConfigErrorKind::InvalidParameter);
    let exchange = TokenExchange::new(SubjectToken::file("/var/run/secrets/tokens/sts"))
        .subject_token_type("urn:ietf:params:oauth:token-type:id_token");
    assert!(format!("{exchange:?}").contains("id_token"));
}

/// A subject past its renewal point is renewed (and waited for) before it is
/// traded: a server that gives the exchanged token the subject's expiry then
/// issues tokens with at least half the subject's lifetime, not the little
/// the old subject had left.
#[tokio::test]
async fn exchanged_tokens_start_with_a_fresh_subject() {
    let sts = Sts::start().await;
    sts.own_lifetime.store(4, Ordering::SeqCst);
    sts.capped.store(true, Ordering::SeqCst);
    let gateway = upstream(&sts);
    let oauth = exchanging(&sts, SubjectToken::from(&gateway))
        .audience("ledger")
        .build()
        .unwrap();
    let client = support::client(&oauth);
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let response = client
            .clone()
            .oneshot(support::get(&sts.url("/api/ledger")))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{:?}", sts.refusals.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let granted = sts.granted.lock().unwrap().clone();
    println!(
        "exchanged lifetimes {granted:?}; the subject renewed {} times",
        gateway.stats().renewals_ahead
    );
    assert!(granted.len() >= 4, "{granted:?}");
    // The subject lives 4 s: every exchanged token starts with at least 2.
    assert!(granted.iter().all(|&secs| secs >= 2), "{granted:?}");
    assert!(gateway.stats().renewals_ahead >= 2);
}

/// Identity from the platform: doubles of GitHub Actions' OIDC endpoint,
/// GCP's metadata server and Azure's managed identity endpoints (App
/// Service's `IDENTITY_ENDPOINT`, and IMDS), each as its documentation
/// says (headers, query, answer shape, errors), and a token endpoint that
/// records what each platform token was used as: a token exchange's
/// subject, a JWT-bearer assertion, a client assertion. The variables the
/// platforms set are set here, in one test, one platform after the other.
mod platforms {
    use super::*;
    use std::collections::HashMap;
    use tower_oauth::{client_auth::ClientAuth, grant::token_type, grant::JwtBearer};

    #[derive(Default)]
    struct Platforms {
        /// Requests per platform.
        asked: Mutex<HashMap<&'static str, usize>>,
        /// What the token endpoint received: the parameters of each request.
        received: Mutex<Vec<HashMap<String, String>>>,
    }

    /// A JWT that runs out in `seconds`.
    fn jwt(subject: &str, seconds: u64) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = json!({"sub": subject, "iat": now, "exp": now + seconds});
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(b"platform key"),
        )
        .unwrap()
    }

    impl Platforms {
        async fn handle(&self, req: http::Request<hyper::body::Incoming>) -> Response {
            let path = req.uri().path().to_owned();
            let query: HashMap<String, String> =
                form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
                    .into_owned()
                    .collect();
            let header = |name: &str| {
                req.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned()
            };
            let count = |platform: &'static str| {
                *self.asked.lock().unwrap().entry(platform).or_default() += 1;
            };
            match path.as_str() {
                "/_apis/oidc/token" => {
                    count("github");
                    if header("authorization") != "Bearer gh-request-token"
                        || query.get("api-version").map(String::as_str) != Some("2.0")
                    {
                        return answer(
                            401,
                            json!({"message": format!("bad credentials: {}", header("authorization"))}),
                        );
                    }
                    let audience = query.get("audience").cloned().unwrap_or_default();
                    answer(
                        200,
                        json!({"count": 1, "value": jwt(&format!("repo:acme/app@{audience}"), 600)}),
                    )
                }
                "/computeMetadata/v1/instance/service-accounts/default/identity" => {
                    count("gcp");
                    if header("metadata-flavor") != "Google"
                        || query.get("format").map(String::as_str) != Some("full")
                    {
                        return answer(403, json!({"error": "missing Metadata-Flavor"}));
                    }
                    let mut response = http::Response::new(http_body_util::Full::new(
                        bytes::Bytes::from(jwt(&format!("gce@{}", query["audience"]), 3600)),
                    ));
                    response
                        .headers_mut()
                        .insert("metadata-flavor", "Google".parse().unwrap());
                    response
                }
                "/msi/token" | "/metadata/identity/oauth2/token" => {
                    let (platform, ok, version) = if path == "/msi/token" {
                        (
                            "azure-app-service",
                            header("x-identity-header") == "app-service-secret",
                            "2019-08-01",
                        )
                    } else {
                        ("azure-imds", header("metadata") == "true", "2018-02-01")
                    };
                    count(platform);
                    if !ok || query.get("api-version").map(String::as_str) != Some(version) {
                        return answer(
                            400,
                            json!({"error": "invalid_request", "error_description": "no identity header"}),
                        );
                    }
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_secs();
                    answer(
                        200,
                        json!({
                            "access_token": jwt(&format!("{platform}@{}", query["resource"]), 3600),
                            "expires_on": (now + 3600).to_string(),
                            "resource": query["resource"],
                            "token_type": "Bearer",
                        }),
                    )
                }
                "/token" => {
                    let body = req.into_body().collect().await.unwrap().to_bytes();
                    let form = form_urlencoded::parse(&body).into_owned().collect();
                    self.received.lock().unwrap().push(form);
                    answer(
                        200,
                        json!({"access_token": "issued", "token_type": "Bearer", "expires_in": 3600}),
                    )
                }
                _ => answer(404, json!({})),
            }
        }

        fn asked(&self, platform: &str) -> usize {
            self.asked
                .lock()
                .unwrap()
                .get(platform)
                .copied()
                .unwrap_or(0)
        }

        fn last(&self, name: &str) -> String {
            self.received.lock().unwrap().last().unwrap()[name].clone()
        }
    }

    fn claims(jwt: &str) -> serde_json::Value {
        let mut validation = jsonwebtoken::Validation::default();
        validation.validate_aud = false;
        jsonwebtoken::decode::<serde_json::Value>(
            jwt,
            &jsonwebtoken::DecodingKey::from_secret(b"platform key"),
            &validation,
        )
        .unwrap()
        .claims
    }

    #[tokio::test]
    async fn each_platform_s_token_as_a_subject_an_assertion_and_a_client_assertion() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let base = format!("http://{addr}");
        let platforms = Arc::new(Platforms::default());
        serve_state(listener, Arc::clone(&platforms), |p, req| async move {
            p.handle(req).await
        });
        let token_url = format!("{base}/token");
        let layer = |b: tower_oauth::OAuthLayerBuilder| {
            support::with_transport(b.token_url(&token_url))
                .build()
                .unwrap()
        };

        // GitHub Actions: the token exchange's subject, a JWT.
        std::env::remove_var("ACTIONS_ID_TOKEN_REQUEST_URL");
        let exchange = layer(OAuthLayer::builder().token_exchange(TokenExchange::new(
            SubjectToken::github_actions("sts.example.com"),
        )));
        let e = exchange.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::Credential);
        assert!(e.to_string().contains("id-token: write"), "{e}");
        std::env::set_var(
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            format!("{base}/_apis/oidc/token?api-version=2.0"),
        );
        std::env::set_var("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "wrong-request-token");
        let exchange = layer(OAuthLayer::builder().token_exchange(TokenExchange::new(
            SubjectToken::github_actions("sts.example.com"),
        )));
        let e = exchange.token().await.unwrap_err();
        assert!(e.to_string().contains("401"), "{e}");
        assert!(!e.to_string().contains("wrong-request-token"), "{e}");
        std::env::set_var("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "gh-request-token");
        let exchange = layer(OAuthLayer::builder().token_exchange(TokenExchange::new(
            SubjectToken::github_actions("sts.example.com"),
        )));
        exchange.token().await.unwrap();
        assert_eq!(
            claims(&platforms.last("subject_token"))["sub"],
            "repo:acme/app@sts.example.com"
        );
        assert_eq!(platforms.last("subject_token_type"), token_type::JWT);
        // Kept until shortly before its `exp`: a renewal asks GitHub no more.
        let asked = platforms.asked("github");
        assert!(exchange.force_renewal());
        exchange.token().await.unwrap();
        assert_eq!(platforms.asked("github"), asked);

        // GCP's metadata server: a JWT-bearer assertion.
        std::env::set_var("GCE_METADATA_HOST", addr.to_string());
        let bearer = layer(OAuthLayer::builder().jwt_bearer(JwtBearer::assertion_from(
            SubjectToken::gcp_metadata("https://login.example.com"),
        )));
        bearer.token().await.unwrap();
        assert_eq!(
            claims(&platforms.last("assertion"))["sub"],
            "gce@https://login.example.com"
        );
        assert_eq!(platforms.asked("gcp"), 1);

        // Azure's managed identity: a client assertion (a federated
        // credential), from App Service's endpoint, then from IMDS.
        std::env::set_var("IDENTITY_ENDPOINT", format!("{base}/msi/token"));
        std::env::set_var("IDENTITY_HEADER", "app-service-secret");
        let federated = |b: tower_oauth::OAuthLayerBuilder| {
            layer(b.client_id("orders").client_auth(ClientAuth::Assertion(
                SubjectToken::azure_managed_identity("api://AzureADTokenExchange", None),
            )))
        };
        federated(OAuthLayer::builder()).token().await.unwrap();
        assert_eq!(
            claims(&platforms.last("client_assertion"))["sub"],
            "azure-app-service@api://AzureADTokenExchange"
        );
        assert_eq!(
            platforms.last("client_assertion_type"),
            tower_oauth::client_auth::assertion_type::JWT_BEARER
        );
        std::env::remove_var("IDENTITY_ENDPOINT");
        std::env::remove_var("IDENTITY_HEADER");
        std::env::set_var("AZURE_POD_IDENTITY_AUTHORITY_HOST", &base);
        federated(OAuthLayer::builder()).token().await.unwrap();
        assert_eq!(
            claims(&platforms.last("client_assertion"))["sub"],
            "azure-imds@api://AzureADTokenExchange"
        );
        assert_eq!(platforms.asked("azure-imds"), 1);
        for name in [
            "ACTIONS_ID_TOKEN_REQUEST_URL",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
            "GCE_METADATA_HOST",
            "AZURE_POD_IDENTITY_AUTHORITY_HOST",
        ] {
            std::env::remove_var(name);
        }
    }
}
