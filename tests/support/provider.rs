//! A loopback double of an identity provider's token endpoint: the
//! provider's own paths, its metadata documents, and a rule that checks
//! each token request as the provider documents (and answers its errors in
//! the provider's words); an API beside it takes only the tokens issued.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::serve::{answer, bearer, serve_state, Response};

/// A token request as the rule sees it.
pub struct TokenRequest {
    pub path: String,
    pub headers: http::HeaderMap,
    /// The form body, in order.
    pub form: Vec<(String, String)>,
}

impl TokenRequest {
    /// The one value of `name`, if sent once.
    pub fn get(&self, name: &str) -> Option<&str> {
        let mut values = self.form.iter().filter(|(n, _)| n == name);
        let first = values.next().map(|(_, v)| v.as_str());
        if values.next().is_some() {
            return None;
        }
        first
    }

    /// The `Basic` credentials, decoded as the provider decodes them
    /// (form-decoding each part, as RFC 6749 says).
    pub fn basic(&self) -> Option<(String, String)> {
        use base64::Engine;
        let value = self.headers.get("authorization")?.to_str().ok()?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value.strip_prefix("Basic ")?)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (id, secret) = text.split_once(':')?;
        let decode = |v: &str| {
            form_urlencoded::parse(format!("x={v}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
        };
        Some((decode(id)?, decode(secret)?))
    }
}

/// A refusal: status and body, in the provider's words.
pub type Refusal = (u16, Value);

type Rule = Box<dyn Fn(&TokenRequest) -> Result<(), Refusal> + Send + Sync>;

pub struct Provider {
    pub base: String,
    state: Arc<State>,
}

struct State {
    token_path: String,
    rule: Rule,
    /// The token response besides `access_token` (the provider's shape).
    extra: Value,
    documents: Mutex<HashMap<String, Value>>,
    issued: Mutex<HashSet<String>>,
    requests: Mutex<Vec<Result<(), Refusal>>>,
}

impl Provider {
    /// Serves the token endpoint at `token_path`, checking each request
    /// with `rule`, answering success with `extra` and a fresh token.
    pub async fn start(
        token_path: &str,
        extra: Value,
        rule: impl Fn(&TokenRequest) -> Result<(), Refusal> + Send + Sync + 'static,
    ) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State {
            token_path: token_path.to_owned(),
            rule: Box::new(rule),
            extra,
            documents: Mutex::new(HashMap::new()),
            issued: Mutex::new(HashSet::new()),
            requests: Mutex::new(Vec::new()),
        });
        serve_state(listener, Arc::clone(&state), |state, req| async move {
            handle(&state, req).await
        });
        Provider { base, state }
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Serves `doc` at `path` (a metadata document).
    pub fn publish(&self, path: &str, doc: Value) {
        self.state
            .documents
            .lock()
            .unwrap()
            .insert(path.to_owned(), doc);
    }

    /// What each token request got: success, or the refusal.
    pub fn requests(&self) -> Vec<Result<(), Refusal>> {
        self.state.requests.lock().unwrap().clone()
    }
}

async fn handle(state: &State, req: http::Request<hyper::body::Incoming>) -> Response {
    let path = req.uri().path().to_owned();
    if path == "/api" {
        let token = bearer(req.headers()).to_owned();
        return if state.issued.lock().unwrap().contains(&token) {
            answer(200, json!({"ok": true}))
        } else {
            answer(401, json!({"error": "invalid_token"}))
        };
    }
    if let Some(doc) = state.documents.lock().unwrap().get(&path) {
        return answer(200, doc.clone());
    }
    if path != state.token_path || req.method() != http::Method::POST {
        return answer(404, json!({"error": "not_found"}));
    }
    let headers = req.headers().clone();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let request = TokenRequest {
        path,
        headers,
        form: form_urlencoded::parse(&body).into_owned().collect(),
    };
    let checked = (state.rule)(&request);
    state.requests.lock().unwrap().push(checked.clone());
    match checked {
        Ok(()) => {
            let n = state.issued.lock().unwrap().len();
            let token = format!("provider-token-{n}");
            state.issued.lock().unwrap().insert(token.clone());
            let mut body = state.extra.clone();
            body["access_token"] = json!(token);
            answer(200, body)
        }
        Err((status, body)) if body.is_null() => {
            let mut response = answer(status, json!({}));
            *response.body_mut() = Default::default();
            response
        }
        Err((status, body)) => answer(status, body),
    }
}
