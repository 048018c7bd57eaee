//! A loopback authorization server for the refresh token grant that
//! rotates refresh tokens and detects reuse, as Auth0 and Okta do with
//! rotation on (RFC 9700 section 4.14.2): every refresh hands out a new
//! refresh token and retires the old one; a retired one sent again revokes
//! the whole login (its family). Beside it, an API that takes only the
//! access tokens it issued, while they last.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::serve::{answer, bearer, serve_state, Response};

/// What the server answers a refresh with, beyond the usual.
#[derive(Clone, Debug, Default)]
pub enum Answer {
    /// A new access token and a new refresh token.
    #[default]
    Rotate,
    /// A new access token, and the refresh token stays (no rotation).
    Keep,
    /// A new access token, and this as `refresh_token` (the old one
    /// retired all the same).
    Hostile(Value),
    /// A new refresh token, beside an access token no header can carry.
    UnusableAccessToken,
}

#[derive(Default)]
pub struct State {
    pub url: Mutex<String>,
    /// Each refresh token: its login (family) and whether it is retired.
    tokens: Mutex<HashMap<String, (u64, bool)>>,
    /// Logins revoked (by reuse, or by hand).
    revoked: Mutex<Vec<u64>>,
    /// Access tokens and when they run out.
    access: Mutex<HashMap<String, Instant>>,
    serial: AtomicU64,
    /// Refresh requests answered (whatever the answer).
    pub refreshes: AtomicUsize,
    /// Retired refresh tokens sent again.
    pub reuses: AtomicUsize,
    /// Refresh tokens sent that were never issued.
    pub unknown: AtomicUsize,
    /// Every refresh token sent, in order.
    pub sent: Mutex<Vec<String>>,
    /// Every refresh token issued, in order.
    pub issued: Mutex<Vec<String>>,
    /// The `client_id` and `scope` of each refresh.
    pub params: Mutex<Vec<(Option<String>, Option<String>)>>,
    /// Requests to the API, and those refused.
    pub api_calls: AtomicUsize,
    pub api_refused: AtomicUsize,
    /// The lifetime of access tokens, in milliseconds.
    pub lifetime_ms: AtomicU64,
    /// A pause before each answer, in milliseconds.
    pub delay_ms: AtomicU64,
    pub answer: Mutex<Answer>,
    /// An error answer's description echoes the refresh token sent.
    pub echo: std::sync::atomic::AtomicBool,
}

pub struct RefreshServer {
    pub state: Arc<State>,
}

impl RefreshServer {
    /// Started on 127.0.0.1, with access tokens of `lifetime`.
    pub async fn start(lifetime: Duration) -> RefreshServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let state = Arc::new(State::default());
        *state.url.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
        state
            .lifetime_ms
            .store(lifetime.as_millis() as u64, Ordering::SeqCst);
        serve_state(listener, Arc::clone(&state), |state, req| async move {
            state.handle(req).await
        });
        RefreshServer { state }
    }

    pub fn token_url(&self) -> String {
        format!("{}/token", self.state.url.lock().unwrap())
    }

    pub fn issuer(&self) -> String {
        self.state.url.lock().unwrap().clone()
    }

    pub fn api_url(&self) -> String {
        format!("{}/api", self.state.url.lock().unwrap())
    }

    /// A login made beforehand: its first refresh token.
    pub fn login(&self) -> String {
        let family = self.state.serial.fetch_add(1, Ordering::SeqCst) + 1_000_000;
        let token = format!("rt-login{family}-first-{}", random());
        self.state
            .tokens
            .lock()
            .unwrap()
            .insert(token.clone(), (family, false));
        self.state.issued.lock().unwrap().push(token.clone());
        token
    }

    /// Revokes the login `token` belongs to.
    pub fn revoke(&self, token: &str) {
        let family = self.state.tokens.lock().unwrap()[token].0;
        self.state.revoked.lock().unwrap().push(family);
    }

    /// Whether the login `token` belongs to is revoked.
    pub fn is_revoked(&self, token: &str) -> bool {
        let family = self.state.tokens.lock().unwrap()[token].0;
        self.state.revoked.lock().unwrap().contains(&family)
    }

    pub fn refreshes(&self) -> usize {
        self.state.refreshes.load(Ordering::SeqCst)
    }

    pub fn reuses(&self) -> usize {
        self.state.reuses.load(Ordering::SeqCst)
    }

    pub fn issued(&self) -> Vec<String> {
        self.state.issued.lock().unwrap().clone()
    }

    /// Every access token issued so far.
    pub fn issued_access(&self) -> Vec<String> {
        self.state.access.lock().unwrap().keys().cloned().collect()
    }

    pub fn sent(&self) -> Vec<String> {
        self.state.sent.lock().unwrap().clone()
    }
}

impl State {
    async fn handle(self: Arc<Self>, req: http::Request<hyper::body::Incoming>) -> Response {
        if req.uri().path() == "/api" {
            self.api_calls.fetch_add(1, Ordering::SeqCst);
            let ok = self
                .access
                .lock()
                .unwrap()
                .get(bearer(req.headers()))
                .is_some_and(|until| Instant::now() < *until);
            if ok {
                return answer(200, json!({"ok": true}));
            }
            self.api_refused.fetch_add(1, Ordering::SeqCst);
            return answer(401, json!({"error": "invalid_token"}));
        }
        if req.uri().path() == "/.well-known/oauth-authorization-server" {
            let issuer = self.url.lock().unwrap().clone();
            return answer(
                200,
                json!({
                    "issuer": issuer,
                    "token_endpoint": format!("{issuer}/token"),
                    "grant_types_supported": ["refresh_token", "authorization_code"],
                    "token_endpoint_auth_methods_supported": ["none", "client_secret_post"],
                }),
            );
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
        if form.get("grant_type").map(String::as_str) != Some("refresh_token") {
            return answer(400, json!({"error": "unsupported_grant_type"}));
        }
        let sent = form.get("refresh_token").cloned().unwrap_or_default();
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        self.sent.lock().unwrap().push(sent.clone());
        self.params
            .lock()
            .unwrap()
            .push((form.get("client_id").cloned(), form.get("scope").cloned()));
        let refused = |why: &str| {
            let description = if self.echo.load(Ordering::SeqCst) {
                use base64::Engine;
                format!(
                    "{why}: {sent} {} {} {}",
                    form_urlencoded::byte_serialize(sent.as_bytes()).collect::<String>(),
                    base64::engine::general_purpose::STANDARD.encode(&sent),
                    serde_json::to_string(&sent).unwrap()
                )
            } else {
                why.to_owned()
            };
            answer(
                400,
                json!({"error": "invalid_grant", "error_description": description}),
            )
        };
        let family = {
            let mut tokens = self.tokens.lock().unwrap();
            let Some((family, retired)) = tokens.get(&sent).copied() else {
                self.unknown.fetch_add(1, Ordering::SeqCst);
                return refused("unknown refresh token");
            };
            if self.revoked.lock().unwrap().contains(&family) {
                return refused("the login was revoked");
            }
            if retired {
                self.reuses.fetch_add(1, Ordering::SeqCst);
                self.revoked.lock().unwrap().push(family);
                return refused("refresh token reuse detected; the login is revoked");
            }
            let answer = self.answer.lock().unwrap().clone();
            if !matches!(answer, Answer::Keep) {
                tokens.insert(sent.clone(), (family, true));
            }
            family
        };
        let serial = self.serial.fetch_add(1, Ordering::SeqCst);
        let lifetime = Duration::from_millis(self.lifetime_ms.load(Ordering::SeqCst));
        let access = format!("at-{family}-{serial}-{}", random());
        self.access
            .lock()
            .unwrap()
            .insert(access.clone(), Instant::now() + lifetime);
        let mut body = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": lifetime.as_secs_f64(),
        });
        match self.answer.lock().unwrap().clone() {
            Answer::Rotate | Answer::UnusableAccessToken => {
                let new = format!("rt-login{family}-{serial}-{}", random());
                self.tokens
                    .lock()
                    .unwrap()
                    .insert(new.clone(), (family, false));
                self.issued.lock().unwrap().push(new.clone());
                body["refresh_token"] = new.into();
            }
            Answer::Keep => {}
            Answer::Hostile(value) => body["refresh_token"] = value,
        }
        if matches!(*self.answer.lock().unwrap(), Answer::UnusableAccessToken) {
            body["access_token"] = "has a space".into();
        }
        // Rotated already: a client that is gone before the answer comes
        // has lost the new refresh token.
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        answer(200, body)
    }
}

fn random() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    format!("{:016x}", h.finish())
}
