//! A loopback authority for tests and examples: a strict token endpoint
//! (`POST /v1/oauth/accesstoken`, exactly as the specification says) and a
//! protected product API (`/api/...`) that accepts only live tokens it
//! issued. Real HTTP/1.1 over 127.0.0.1, served by hyper.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub const TOKEN_PATH: &str = "/v1/oauth/accesstoken";

/// One scripted answer from the token endpoint, instead of a token.
#[derive(Clone, Debug)]
pub struct Fault {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

/// How the authority expects the client to authenticate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// The specification: the exact unencoded body.
    Unencoded,
    /// Id and secret in a form-urlencoded body.
    Form,
    /// HTTP Basic, id and secret form-decoded (as RFC 6749 says); only
    /// `grant_type` and extras in the body.
    Basic,
    /// HTTP Basic, id and secret percent-decoded only (a `+` stays a `+`),
    /// as some common servers do.
    BasicPercent,
    /// HTTP Basic, id and secret taken as they are, not decoded.
    BasicRaw,
}

#[derive(Debug)]
struct Issued {
    expires: Instant,
    revoked: bool,
}

#[derive(Debug)]
struct State {
    client_id: String,
    client_secret: Mutex<String>,
    style: Mutex<Style>,
    extras: Mutex<Vec<(String, String)>>,
    lifetime: Mutex<Duration>,
    delay: Mutex<Duration>,
    /// How long the answer stalls after the token was issued.
    stall_after_issue: Mutex<Duration>,
    /// Metadata documents served at their paths.
    metadata: Mutex<HashMap<String, String>>,
    metadata_requests: AtomicUsize,
    /// Until then, every token request is answered 503.
    outage_until: Mutex<Option<Instant>>,
    faults: Mutex<Vec<Fault>>,
    tokens: Mutex<HashMap<String, Issued>>,
    token_requests: AtomicUsize,
    api_requests: AtomicUsize,
    api_refused: AtomicUsize,
    /// Every token request that broke a rule of the specification, described.
    violations: Mutex<Vec<String>>,
    /// The token each accepted API request carried, in order.
    presented: Mutex<Vec<String>>,
    /// When each token request arrived.
    token_times: Mutex<Vec<Instant>>,
}

/// A running authority; stops with the runtime that started it.
#[derive(Clone, Debug)]
pub struct Authority {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Authority {
    /// Starts on an ephemeral port of 127.0.0.1; tokens live `lifetime`.
    pub async fn start(client_id: &str, client_secret: &str, lifetime: Duration) -> Authority {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            client_id: client_id.into(),
            client_secret: Mutex::new(client_secret.into()),
            style: Mutex::new(Style::Unencoded),
            extras: Mutex::new(Vec::new()),
            lifetime: Mutex::new(lifetime),
            delay: Mutex::new(Duration::ZERO),
            stall_after_issue: Mutex::new(Duration::ZERO),
            outage_until: Mutex::new(None),
            metadata: Mutex::new(HashMap::new()),
            metadata_requests: AtomicUsize::new(0),
            faults: Mutex::new(Vec::new()),
            tokens: Mutex::new(HashMap::new()),
            token_requests: AtomicUsize::new(0),
            api_requests: AtomicUsize::new(0),
            api_refused: AtomicUsize::new(0),
            violations: Mutex::new(Vec::new()),
            presented: Mutex::new(Vec::new()),
            token_times: Mutex::new(Vec::new()),
        });
        let accept_state = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&accept_state);
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(handle(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Authority { addr, state }
    }

    /// A layer for this authority's client, every other setting at its
    /// default.
    pub fn layer(&self) -> tower_oauth::OAuthLayer {
        tower_oauth::OAuthLayer::builder()
            .auth_url(self.base_url())
            .client_id(&self.state.client_id)
            .client_secret(self.secret())
            .build()
            .unwrap()
    }

    /// The client secret it takes now.
    pub fn secret(&self) -> String {
        self.state.client_secret.lock().unwrap().clone()
    }

    /// From now on it takes `secret` only (a rotation at the server).
    pub fn set_secret(&self, secret: &str) {
        *self.state.client_secret.lock().unwrap() = secret.into();
    }

    /// The token endpoint's full URL: a `token_url`.
    pub fn token_url(&self) -> String {
        format!("{}{TOKEN_PATH}", self.base_url())
    }

    /// `http://127.0.0.1:port`: the `auth_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The protected API's URL for `path` (which starts with `/`).
    pub fn api_url(&self, path: &str) -> String {
        format!("http://{}/api{path}", self.addr)
    }

    pub fn token_requests(&self) -> usize {
        self.state.token_requests.load(Ordering::SeqCst)
    }

    /// When each token request arrived.
    pub fn token_request_times(&self) -> Vec<Instant> {
        self.state.token_times.lock().unwrap().clone()
    }

    pub fn api_requests(&self) -> usize {
        self.state.api_requests.load(Ordering::SeqCst)
    }

    /// API requests answered 401.
    pub fn api_refused(&self) -> usize {
        self.state.api_refused.load(Ordering::SeqCst)
    }

    /// Token requests that broke a rule of the specification.
    pub fn violations(&self) -> Vec<String> {
        self.state.violations.lock().unwrap().clone()
    }

    /// The tokens accepted API requests carried, in order.
    pub fn presented(&self) -> Vec<String> {
        self.state.presented.lock().unwrap().clone()
    }

    /// Whether the protected API would accept `token` now.
    pub fn accepts(&self, token: &str) -> bool {
        self.state
            .tokens
            .lock()
            .unwrap()
            .get(token)
            .is_some_and(|i| !i.revoked && Instant::now() < i.expires)
    }

    /// Tokens issued so far.
    pub fn issued(&self) -> Vec<String> {
        self.state.tokens.lock().unwrap().keys().cloned().collect()
    }

    /// Expect this client authentication and these extra body parameters
    /// (in this order, for the unencoded style).
    pub fn expect(&self, style: Style, extras: &[(&str, &str)]) {
        *self.state.style.lock().unwrap() = style;
        *self.state.extras.lock().unwrap() = extras
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    pub fn set_lifetime(&self, lifetime: Duration) {
        *self.state.lifetime.lock().unwrap() = lifetime;
    }

    /// Every token response waits this long first.
    pub fn set_delay(&self, delay: Duration) {
        *self.state.delay.lock().unwrap() = delay;
    }

    /// The next token requests get these answers, in order, instead of tokens.
    /// The answer stalls `stall` after the token was issued (and its
    /// lifetime started), as a slow network between us and the client would.
    pub fn set_stall_after_issue(&self, stall: Duration) {
        *self.state.stall_after_issue.lock().unwrap() = stall;
    }

    /// Serves `json` at `path` (a metadata document, say).
    pub fn publish(&self, path: &str, json: String) {
        self.state
            .metadata
            .lock()
            .unwrap()
            .insert(path.to_owned(), json);
    }

    /// Requests for published documents so far.
    pub fn metadata_requests(&self) -> usize {
        self.state.metadata_requests.load(Ordering::SeqCst)
    }

    /// Every token request is answered `503` for `outage` from now.
    pub fn fail_for(&self, outage: Duration) {
        *self.state.outage_until.lock().unwrap() = Some(Instant::now() + outage);
    }

    pub fn push_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.state.faults.lock().unwrap().extend(faults);
    }

    /// Every token issued so far is refused by the API from now on.
    pub fn revoke_all(&self) {
        for t in self.state.tokens.lock().unwrap().values_mut() {
            t.revoked = true;
        }
    }
}

fn json(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// A request body, whole (empty if it broke off).
async fn whole(body: Incoming) -> Bytes {
    body.collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default()
}

async fn handle(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let published = state.metadata.lock().unwrap().get(&path).cloned();
    if let Some(doc) = published {
        state.metadata_requests.fetch_add(1, Ordering::SeqCst);
        return json(StatusCode::OK, doc);
    }
    if path == TOKEN_PATH {
        token_endpoint(state, req).await
    } else if path.starts_with("/api/") {
        api(state, req).await
    } else {
        json(StatusCode::NOT_FOUND, r#"{"error":"not_found"}"#.into())
    }
}

async fn token_endpoint(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    state.token_requests.fetch_add(1, Ordering::SeqCst);
    state.token_times.lock().unwrap().push(Instant::now());
    let (parts, body) = req.into_parts();
    let body = whole(body).await;
    let mut problems = Vec::new();
    if parts.method != Method::POST {
        problems.push(format!("method is {}", parts.method));
    }
    if parts.uri.query().is_some() {
        problems.push("the URL has a query string".to_owned());
    }
    match parts.headers.get(header::CONTENT_TYPE) {
        Some(v) if v == "application/x-www-form-urlencoded" => {}
        other => problems.push(format!("Content-Type is {other:?}")),
    }
    let body = String::from_utf8_lossy(&body).into_owned();
    let credentials_ok = check_credentials(state, &parts.headers, &body, &mut problems);
    let delay = *state.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if !problems.is_empty() {
        state
            .violations
            .lock()
            .unwrap()
            .extend(problems.iter().cloned());
        return json(
            StatusCode::BAD_REQUEST,
            format!(
                r#"{{"error":"invalid_request","error_description":"{}"}}"#,
                problems.join("; ")
            ),
        );
    }
    let fault = {
        let mut faults = state.faults.lock().unwrap();
        (!faults.is_empty()).then(|| faults.remove(0))
    };
    let down = state
        .outage_until
        .lock()
        .unwrap()
        .is_some_and(|until| Instant::now() < until);
    if down {
        return json(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"error":"temporarily_unavailable"}"#.into(),
        );
    }
    if let Some(fault) = fault {
        let mut resp = Response::builder().status(fault.status);
        for (k, v) in &fault.headers {
            resp = resp.header(k.as_str(), v.as_str());
        }
        return resp.body(Full::new(Bytes::from(fault.body))).unwrap();
    }
    if !credentials_ok {
        return json(
            StatusCode::UNAUTHORIZED,
            r#"{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}"#.into(),
        );
    }
    let lifetime = *state.lifetime.lock().unwrap();
    let n = state.token_requests.load(Ordering::SeqCst);
    let token = format!("tok{n}x{:08x}", fastish_random());
    state.tokens.lock().unwrap().insert(
        token.clone(),
        Issued {
            expires: Instant::now() + lifetime,
            revoked: false,
        },
    );
    let stall = *state.stall_after_issue.lock().unwrap();
    if !stall.is_zero() {
        tokio::time::sleep(stall).await;
    }
    let issued_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    json(
        StatusCode::OK,
        format!(
            r#"{{"access_token":"{token}","token_type":"bearer","expires_in":{},"scope":"","application_name":"quickstart-app","developer.email":"dev@example.com","issued_at":"{issued_at}","client_id":"{}"}}"#,
            lifetime.as_secs(),
            state.client_id
        ),
    )
}

async fn api(state: &State, req: Request<Incoming>) -> Response<Full<Bytes>> {
    state.api_requests.fetch_add(1, Ordering::SeqCst);
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let verdict = match &token {
        None => Err("keymanagement.service.invalid_access_token"),
        Some(t) => match state.tokens.lock().unwrap().get(t) {
            None => Err("keymanagement.service.invalid_access_token"),
            Some(i) if i.revoked => Err("keymanagement.service.invalid_access_token"),
            Some(i) if Instant::now() >= i.expires => {
                Err("keymanagement.service.access_token_expired")
            }
            Some(_) => Ok(()),
        },
    };
    match verdict {
        Ok(()) => {
            state.presented.lock().unwrap().push(token.unwrap());
            let echo = req
                .headers()
                .get("x-echo")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            let (parts, body) = req.into_parts();
            let body = whole(body).await;
            json(
                StatusCode::OK,
                format!(
                    r#"{{"method":"{}","path":"{}","query":"{}","echo":"{}","body_len":{}}}"#,
                    parts.method,
                    parts.uri.path(),
                    parts.uri.query().unwrap_or(""),
                    echo,
                    body.len()
                ),
            )
        }
        Err(code) => {
            state.api_refused.fetch_add(1, Ordering::SeqCst);
            let mut resp = json(
                StatusCode::UNAUTHORIZED,
                format!(
                    r#"{{"fault":{{"faultstring":"Invalid Access Token","detail":{{"errorcode":"{code}"}}}}}}"#
                ),
            );
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
            resp
        }
    }
}

/// Checks the request the way a strict server of the expected style would.
/// Shape problems go to `problems`; whether the credentials are right is
/// returned. Problems never quote the secret.
fn check_credentials(
    state: &State,
    headers: &http::HeaderMap,
    body: &str,
    problems: &mut Vec<String>,
) -> bool {
    let style = *state.style.lock().unwrap();
    let extras = state.extras.lock().unwrap().clone();
    let client_secret = state.client_secret.lock().unwrap().clone();
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "));
    match style {
        Style::Unencoded => {
            if basic.is_some() {
                problems.push("unexpected Authorization header".into());
            }
            let mut expected = format!(
                "grant_type=client_credentials&client_id={}&client_secret={}",
                state.client_id, client_secret
            );
            for (k, v) in &extras {
                expected.push_str(&format!("&{k}={v}"));
            }
            if !body.starts_with("grant_type=client_credentials&client_id=") {
                problems.push("body is not in the product-information API's shape".into());
            }
            body == expected
        }
        Style::Form | Style::Basic | Style::BasicPercent | Style::BasicRaw => {
            let Some(pairs) = form_decode(body) else {
                problems.push("body is not valid form-urlencoded".into());
                return false;
            };
            let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            if get("grant_type").as_deref() != Some("client_credentials") {
                problems.push("grant_type is not client_credentials".into());
            }
            for (k, v) in &extras {
                if !pairs.iter().any(|(n, value)| n == k && value == v) {
                    problems.push(format!("parameter {k}={v} is missing"));
                }
            }
            let expected_len = 1 + extras.len() + if style == Style::Form { 2 } else { 0 };
            if pairs.len() != expected_len {
                problems.push(format!(
                    "{} body parameters, expected {expected_len}",
                    pairs.len()
                ));
            }
            if style == Style::Form {
                if basic.is_some() {
                    problems.push("unexpected Authorization header".into());
                }
                return get("client_id").as_deref() == Some(state.client_id.as_str())
                    && get("client_secret").as_deref() == Some(client_secret.as_str());
            }
            if get("client_secret").is_some() || get("client_id").is_some() {
                problems.push("credentials in the body with Basic authentication".into());
            }
            let Some(decoded) = basic.and_then(base64_decode) else {
                problems.push("no valid Basic Authorization header".into());
                return false;
            };
            let decoded = String::from_utf8_lossy(&decoded).into_owned();
            let Some((id, secret)) = decoded.split_once(':') else {
                problems.push("Basic credentials without `:`".into());
                return false;
            };
            // Each kind of server decodes the two parts its own way, with
            // the decoders of the crates everyone uses.
            let decode = |v: &str| -> Option<String> {
                match style {
                    Style::BasicRaw => Some(v.to_owned()),
                    Style::BasicPercent => percent_encoding::percent_decode_str(v)
                        .decode_utf8()
                        .ok()
                        .map(|v| v.into_owned()),
                    _ => form_urlencoded::parse(v.as_bytes())
                        .next()
                        .map(|(v, _)| v.into_owned())
                        .or(Some(String::new())),
                }
            };
            match (decode(id), decode(secret)) {
                (Some(id), Some(secret)) => id == state.client_id && secret == client_secret,
                _ => {
                    problems.push("Basic credentials cannot be decoded".into());
                    false
                }
            }
        }
    }
}

/// Decodes `application/x-www-form-urlencoded`; `None` when malformed.
pub fn form_decode(body: &str) -> Option<Vec<(String, String)>> {
    if body.is_empty() {
        return Some(Vec::new());
    }
    body.split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((form_decode_value(k)?, form_decode_value(v)?))
        })
        .collect()
}

/// Decodes one form-urlencoded value; `None` on a bad escape, or a raw
/// character that a form encoder would have escaped.
pub fn form_decode_value(v: &str) -> Option<String> {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b if b.is_ascii_alphanumeric() || b"*-._".contains(&b) => out.push(b),
            _ => return None,
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Decodes standard base64 with padding.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let mut n = 0u32;
        let mut pad = 0;
        for &c in chunk {
            n <<= 6;
            if c == b'=' {
                pad += 1;
            } else {
                n |= ALPHABET.iter().position(|&a| a == c)? as u32;
            }
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

fn fastish_random() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u32
}
