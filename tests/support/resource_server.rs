//! A token endpoint on 127.0.0.1 that issues tokens bound to the
//! `resource`, `audience` and `scope` requested, and APIs (`/api/{name}`)
//! that accept only live tokens for their own resource (`urn:api:{name}`;
//! `/api/default` takes a token requested without a resource).
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::json;
use tokio::net::TcpListener;

use super::serve::{answer, bearer, has_basic, serve_state, Response};
use super::tally::Tally;

pub const CLIENT_ID: &str = "gateway";
pub const CLIENT_SECRET: &str = "gateway-secret";

/// What a token was requested for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grant {
    pub resource: Vec<String>,
    pub audience: Option<String>,
    pub scope: Option<String>,
}

struct State {
    tally: Tally,
    tokens: Mutex<HashMap<String, (Grant, Instant)>>,
    requests: Mutex<HashMap<Grant, usize>>,
    revoked: Mutex<HashSet<String>>,
    lifetime_ms: AtomicU64,
    delay_ms: AtomicU64,
    metadata_reads: AtomicU64,
    issuer: String,
}

pub struct ResourceServer {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl ResourceServer {
    pub async fn start(lifetime: Duration) -> ResourceServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            tally: Tally::default(),
            tokens: Mutex::new(HashMap::new()),
            requests: Mutex::new(HashMap::new()),
            revoked: Mutex::new(HashSet::new()),
            lifetime_ms: AtomicU64::new(lifetime.as_millis() as u64),
            delay_ms: AtomicU64::new(0),
            metadata_reads: AtomicU64::new(0),
            issuer: format!("http://{addr}"),
        });
        serve_state(listener, Arc::clone(&state), |state, req| async move {
            handle(&state, req).await
        });
        ResourceServer { addr, state }
    }

    pub fn token_url(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// The issuer identifier: its RFC 8414 metadata names the token
    /// endpoint.
    pub fn issuer(&self) -> &str {
        &self.state.issuer
    }

    /// How often the metadata was read.
    pub fn metadata_reads(&self) -> u64 {
        self.state.metadata_reads.load(Ordering::SeqCst)
    }

    pub fn api_url(&self, name: &str) -> String {
        format!("http://{}/api/{name}", self.addr)
    }

    /// The resource of API `name`.
    pub fn resource(name: &str) -> String {
        format!("urn:api:{name}")
    }

    /// Answers token requests after `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Token requests, per grant requested.
    pub fn requests(&self) -> HashMap<Grant, usize> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Token requests for tokens whose first resource is API `name`'s.
    pub fn requests_for(&self, name: &str) -> usize {
        let resource = Self::resource(name);
        self.requests()
            .iter()
            .filter(|(g, _)| g.resource.first() == Some(&resource))
            .map(|(_, n)| n)
            .sum()
    }

    /// Revokes every token issued for API `name`.
    pub fn revoke_for(&self, name: &str) {
        let resource = Self::resource(name);
        let tokens = self.state.tokens.lock().unwrap();
        let mut revoked = self.state.revoked.lock().unwrap();
        for (token, (grant, _)) in tokens.iter() {
            if grant.resource.contains(&resource) {
                revoked.insert(token.clone());
            }
        }
    }
}

impl std::ops::Deref for ResourceServer {
    type Target = Tally;

    fn deref(&self) -> &Tally {
        &self.state.tally
    }
}

async fn handle(state: &State, req: http::Request<hyper::body::Incoming>) -> Response {
    let path = req.uri().path().to_owned();
    if path == "/.well-known/oauth-authorization-server" {
        state.metadata_reads.fetch_add(1, Ordering::SeqCst);
        return answer(
            200,
            json!({"issuer": state.issuer, "token_endpoint": format!("{}/token", state.issuer)}),
        );
    }
    if path == "/token" {
        if !has_basic(&req, CLIENT_ID, CLIENT_SECRET) {
            state
                .tally
                .refused("token request: wrong client credentials");
            return answer(401, json!({"error": "invalid_client"}));
        }
        let body = req.into_body().collect().await.unwrap().to_bytes();
        let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
        let one = |name: &str| form.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        let grant = Grant {
            resource: form
                .iter()
                .filter(|(n, _)| n == "resource")
                .map(|(_, v)| v.clone())
                .collect(),
            audience: one("audience"),
            scope: one("scope"),
        };
        let n = state.tally.token_request();
        *state
            .requests
            .lock()
            .unwrap()
            .entry(grant.clone())
            .or_default() += 1;
        let delay = state.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let lifetime = Duration::from_millis(state.lifetime_ms.load(Ordering::SeqCst));
        let token = format!("tok-{n}");
        state
            .tokens
            .lock()
            .unwrap()
            .insert(token.clone(), (grant, Instant::now() + lifetime));
        return answer(
            200,
            json!({"access_token": token, "token_type": "Bearer", "expires_in": lifetime.as_secs_f64().ceil() as u64}),
        );
    }
    let Some(name) = path.strip_prefix("/api/") else {
        return answer(404, json!({}));
    };
    let token = bearer(req.headers());
    let grant = state.tokens.lock().unwrap().get(token).cloned();
    let why = match grant {
        None => Some("a token never issued".to_owned()),
        Some(_) if state.revoked.lock().unwrap().contains(token) => Some("revoked".to_owned()),
        Some((_, expires)) if Instant::now() >= expires => Some("expired".to_owned()),
        Some((grant, _)) => {
            let fits = if name == "default" {
                grant.resource.is_empty()
            } else {
                grant.resource.contains(&ResourceServer::resource(name))
            };
            (!fits).then(|| format!("a token for {:?} sent to {name}", grant.resource))
        }
    };
    match why {
        None => {
            state.tally.accepted();
            answer(200, json!({"api": name}))
        }
        Some(why) => {
            state.tally.api_refusal();
            if why != "revoked" {
                state.tally.refused(format!("{path}: {why}"));
            }
            answer(
                401,
                json!({"error": "invalid_token", "error_description": why}),
            )
        }
    }
}
