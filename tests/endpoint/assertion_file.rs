//! A client assertion a platform writes to a file and renews (Kubernetes,
//! Azure workload identity), read at each token request, against a loopback
//! token endpoint of the federated kind that verifies it with jsonwebtoken.
//! The platform's tokens are signed with jsonwebtoken too (the test's keys
//! only: the layer needs none). Every failure's text, as a user sees it.
#![cfg(feature = "reqwest")]

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use support::{replace, scratch};
use tower_oauth::{client_auth::ClientAuth, OAuthLayer, TokenErrorKind};

const CLIENT: &str = "federated-client";

/// A token endpoint of the federated kind (Entra ID, Okta, Google): it
/// takes a `client_assertion` the platform signed (checked with jsonwebtoken
/// against the platform's public key: signature, issuer, subject, audience,
/// `exp` without leeway), and issues 1-second tokens; an API beside it.
mod federated {
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};

    use jsonwebtoken::{Algorithm, DecodingKey, Validation};
    use serde_json::{json, Value};

    use super::support::provider::{Provider, TokenRequest};

    pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
    pub const SUBJECT: &str = "system:serviceaccount:shop:orders";
    pub const AUDIENCE: &str = "api://AzureADTokenExchange";

    pub struct Server {
        pub url: String,
        provider: Provider,
        /// Every assertion taken, in order.
        taken: Arc<Mutex<Vec<String>>>,
    }

    impl Server {
        pub async fn start(platform_public_pem: &str) -> Server {
            let key = DecodingKey::from_ec_pem(platform_public_pem.as_bytes()).unwrap();
            let taken: Arc<Mutex<Vec<String>>> = Arc::default();
            let seen = Arc::clone(&taken);
            let provider = Provider::start(
                "/token",
                json!({"token_type": "Bearer", "expires_in": 1}),
                move |req: &TokenRequest| {
                    let refuse = |why: String| {
                        (
                            401,
                            json!({"error": "invalid_client", "error_description": why}),
                        )
                    };
                    if req.get("client_id") != Some(super::CLIENT) {
                        return Err(refuse("client_id".into()));
                    }
                    if req.get("client_assertion_type")
                        != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
                    {
                        return Err(refuse("client_assertion_type".into()));
                    }
                    let jwt = req
                        .get("client_assertion")
                        .ok_or_else(|| refuse("no client_assertion".into()))?;
                    let mut validation = Validation::new(Algorithm::ES256);
                    validation.leeway = 0;
                    validation.set_issuer(&[ISSUER]);
                    validation.sub = Some(SUBJECT.into());
                    validation.set_audience(&[AUDIENCE]);
                    jsonwebtoken::decode::<Value>(jwt, &key, &validation)
                        .map_err(|e| refuse(format!("assertion refused: {e}")))?;
                    seen.lock().unwrap().push(jwt.to_owned());
                    Ok(())
                },
            )
            .await;
            Server {
                url: provider.base.clone(),
                provider,
                taken,
            }
        }

        /// The distinct assertions taken.
        pub fn distinct_assertions(&self) -> usize {
            let taken = self.taken.lock().unwrap();
            taken.iter().collect::<HashSet<_>>().len()
        }

        pub fn token_requests(&self) -> usize {
            self.provider.requests().len()
        }

        /// Why each refused token request was refused.
        pub fn refusals(&self) -> Vec<String> {
            self.provider
                .requests()
                .into_iter()
                .filter_map(Result::err)
                .map(|(_, body)| body["error_description"].to_string())
                .collect()
        }
    }
}

/// The platform: signs service account tokens with its key.
struct Platform {
    key: jsonwebtoken::EncodingKey,
    serial: AtomicUsize,
}

impl Platform {
    fn new(pkcs8: &str) -> Platform {
        Platform {
            key: jsonwebtoken::EncodingKey::from_ec_pem(pkcs8.as_bytes()).unwrap(),
            serial: AtomicUsize::new(0),
        }
    }

    /// A token that expires `lifetime` from now (or before, if negative).
    fn token(&self, lifetime: i64) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let claims = serde_json::json!({
            "iss": federated::ISSUER,
            "sub": federated::SUBJECT,
            "aud": federated::AUDIENCE,
            "iat": now,
            "exp": now + lifetime,
            "serial": self.serial.fetch_add(1, Ordering::SeqCst),
        });
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
            &claims,
            &self.key,
        )
        .unwrap()
    }
}

fn assertion_layer(token_url: &str, file: &Path) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(token_url)
            .client_id(CLIENT)
            .client_auth(ClientAuth::AssertionFile(file.to_owned())),
    )
    .build()
    .unwrap()
}

#[tokio::test]
async fn an_assertion_file_rewritten_while_traffic_flows_is_taken_with_no_failed_request() {
    let key = support::keys::TestKey::new(support::keys::Kind::P256);
    let platform = Arc::new(Platform::new(&key.pkcs8));
    let server = federated::Server::start(&key.public).await;
    let dir = scratch("assertion-file");
    let file = dir.join("token");
    replace(&file, &platform.token(2));
    let oauth = assertion_layer(&format!("{}/token", server.url), &file);

    // The platform renews its 2-second tokens every 600 ms, in turn by
    // renaming a new file over the old (as Kubernetes does) and by writing
    // the file in place in two parts (a writer that truncates first).
    let stop = Arc::new(Mutex::new(false));
    let renewing = {
        let (platform, file, stop) = (Arc::clone(&platform), file.clone(), Arc::clone(&stop));
        tokio::task::spawn_blocking(move || {
            let mut round = 0;
            while !*stop.lock().unwrap() {
                std::thread::sleep(Duration::from_millis(600));
                let token = platform.token(2);
                if round % 2 == 0 {
                    replace(&file, &token);
                } else {
                    use std::io::Write;
                    let mut out = std::fs::File::create(&file).unwrap();
                    let (head, tail) = token.split_at(token.len() / 2);
                    out.write_all(head.as_bytes()).unwrap();
                    out.flush().unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                    out.write_all(tail.as_bytes()).unwrap();
                }
                round += 1;
            }
        })
    };
    let senders = support::Senders::start(
        std::slice::from_ref(&oauth),
        &format!("{}/api", server.url),
        Instant::now() + Duration::from_secs(5),
    );
    let (ok, failed) = senders.finish().await;
    *stop.lock().unwrap() = true;
    renewing.await.unwrap();
    assert_eq!(
        failed,
        0,
        "{ok} succeeded; refusals {:?}",
        server.refusals()
    );
    assert!(ok > 100, "{ok}");
    assert_eq!(server.refusals(), Vec::<String>::new());
    // Tokens of 1 s over 5 s: renewed often, with the file's newest tokens.
    assert!(server.token_requests() >= 5, "{}", server.token_requests());
    assert!(
        server.distinct_assertions() >= 3,
        "{} distinct assertions",
        server.distinct_assertions()
    );
}

#[tokio::test]
async fn a_bad_assertion_file_is_a_credential_error_naming_the_file_never_its_content() {
    let key = support::keys::TestKey::new(support::keys::Kind::P256);
    let platform = Platform::new(&key.pkcs8);
    let server = federated::Server::start(&key.public).await;
    let token_url = format!("{}/token", server.url);
    let dir = scratch("assertion-bad");
    let file = dir.join("token");
    let fetch = |file: PathBuf| {
        let token_url = token_url.clone();
        async move {
            let err = assertion_layer(&token_url, &file)
                .token()
                .await
                .unwrap_err();
            assert_eq!(err.kind(), TokenErrorKind::Credential, "{err}");
            assert!(err.is_retryable());
            err.to_string()
        }
    };

    let missing = fetch(file.clone()).await;
    assert!(
        missing.starts_with(&format!(
            "client credential could not be read: cannot read `{}`: No such file or directory",
            file.display()
        )),
        "{missing}"
    );

    std::fs::write(&file, "\n").unwrap();
    assert_eq!(
        fetch(file.clone()).await,
        format!(
            "client credential could not be read: `{}` is empty",
            file.display()
        )
    );

    std::fs::write(&file, "a-secret-that-is-no-jwt").unwrap();
    let text = fetch(file.clone()).await;
    assert_eq!(
        text,
        format!(
            "client credential could not be read: the client assertion file `{}` does not hold \
             a JWT: a JWT has three dot-separated parts",
            file.display()
        )
    );

    let expired = platform.token(-30);
    std::fs::write(&file, &expired).unwrap();
    let text = fetch(file.clone()).await;
    let prefix = format!(
        "client credential could not be read: the client assertion in `{}` expired ",
        file.display()
    );
    assert!(text.starts_with(&prefix), "{text}");
    assert!(
        text.ends_with(
            ": whatever writes the file (the platform's token projection) has not renewed it"
        ),
        "{text}"
    );
    assert!(!text.contains(&expired[..20]));
    // Nothing of it reached the server.
    assert_eq!(server.token_requests(), 0);

    // A token the server refuses: the error names the file.
    let other = support::keys::TestKey::new(support::keys::Kind::P256);
    std::fs::write(&file, Platform::new(&other.pkcs8).token(600)).unwrap();
    let err = assertion_layer(&token_url, &file)
        .token()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(
        err.to_string(),
        format!(
            "token endpoint refused the request with HTTP 401 Unauthorized (invalid_client: \
             assertion refused: InvalidSignature): the token endpoint refused the client \
             assertion read from `{}`: check that the server trusts its issuer and subject for \
             this client (a federated credential), and that its audience is the one the server \
             expects",
            file.display()
        )
    );
    // The file did not change: it was not sent again.
    assert_eq!(server.token_requests(), 1);
}
