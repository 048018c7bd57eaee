//! A strict DPoP authorization server and resource servers on 127.0.0.1
//! (RFC 9449), checking every proof with jsonwebtoken, an independent JOSE
//! implementation: the signature under the header's `jwk` (public members
//! only), `typ`, `alg`, `htm`, `htu` (without query), `iat` within a minute,
//! `jti` never reused (remembered), `ath` against the token presented, the
//! token's binding to the key's RFC 7638 thumbprint (computed here), and
//! nonces: both servers can demand one (`use_dpop_nonce`) and rotate it.
//!
//! The token endpoint is `/token` on the first origin; every origin
//! (`api_url(i, path)`) serves the API at any other path.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::serve::{answer, has_basic, serve, Response};
use super::tally::Tally;

pub const CLIENT_ID: &str = "dpop-client";
pub const CLIENT_SECRET: &str = "dpop-secret";

/// How the servers treat nonces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nonces {
    /// None demanded.
    Off,
    /// Demanded; only the current one is accepted.
    Strict,
    /// Demanded; the current one and the one before are accepted.
    Grace,
}

/// One origin's nonces.
#[derive(Default)]
struct NonceState {
    current: String,
    previous: String,
}

/// A proof as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub htm: String,
    pub htu: String,
    pub nonce: Option<String>,
    pub jkt: String,
    pub ath: Option<String>,
    pub request_id: Option<String>,
}

struct State {
    tally: Tally,
    origins: Vec<String>,
    nonces_mode: Nonces,
    nonces: Mutex<HashMap<String, NonceState>>,
    next_nonce: AtomicU64,
    jtis: Mutex<HashSet<String>>,
    /// token -> (jkt, expires at)
    issued: Mutex<HashMap<String, (String, Instant)>>,
    lifetime_secs: u64,
    /// Issue bearer tokens, ignoring DPoP.
    bearer: AtomicBool,
    seen: Mutex<Vec<Seen>>,
    token_nonce_challenges: AtomicUsize,
    api_nonce_challenges: AtomicUsize,
    sends: Mutex<HashMap<String, usize>>,
    /// Request id -> the number of the nonce its last answer named.
    named: Mutex<HashMap<String, u64>>,
    /// Requests resent with a nonce older than the one they were given.
    stale_resends: Mutex<Vec<String>>,
    metadata: Mutex<Option<Value>>,
    /// The first origin's API's protected-resource metadata (RFC 9728), at
    /// `/.well-known/oauth-protected-resource/api`.
    resource_metadata: Mutex<Option<Value>>,
}

pub struct DpopServer {
    addrs: Vec<SocketAddr>,
    state: Arc<State>,
}

impl DpopServer {
    /// Starts the token endpoint and `origins` API origins (the first one
    /// shares its port with the token endpoint).
    pub async fn start(origins: usize, nonces: Nonces, lifetime_secs: u64) -> DpopServer {
        let mut listeners = Vec::new();
        for _ in 0..origins.max(1) {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let state = Arc::new(State {
            tally: Tally::default(),
            origins: addrs.iter().map(|a| format!("http://{a}")).collect(),
            nonces_mode: nonces,
            nonces: Mutex::new(HashMap::new()),
            next_nonce: AtomicU64::new(1),
            jtis: Mutex::new(HashSet::new()),
            issued: Mutex::new(HashMap::new()),
            lifetime_secs,
            bearer: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
            token_nonce_challenges: AtomicUsize::new(0),
            api_nonce_challenges: AtomicUsize::new(0),
            sends: Mutex::new(HashMap::new()),
            named: Mutex::new(HashMap::new()),
            stale_resends: Mutex::new(Vec::new()),
            metadata: Mutex::new(None),
            resource_metadata: Mutex::new(None),
        });
        for (i, listener) in listeners.into_iter().enumerate() {
            let origin = state.origins[i].clone();
            state.rotate(&origin);
            let served = Arc::clone(&state);
            serve(
                listener,
                |stream| async move { Some((stream, ())) },
                move |(), req| {
                    let (state, origin) = (Arc::clone(&served), origin.clone());
                    async move { handle(&state, &origin, i == 0, req).await }
                },
            );
        }
        DpopServer { addrs, state }
    }

    pub fn token_url(&self) -> String {
        format!("{}/token", self.state.origins[0])
    }

    /// The origin `i` (`http://127.0.0.1:port`).
    pub fn origin(&self, i: usize) -> &str {
        &self.state.origins[i]
    }

    /// A URL on origin `i`.
    pub fn api_url(&self, i: usize, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.state.origins[i])
    }

    /// From now on the token endpoint issues bearer tokens and the APIs
    /// take them (a server without DPoP).
    pub fn ignore_dpop(&self) {
        self.state.bearer.store(true, Ordering::SeqCst);
    }

    /// The issuer identifier, for discovery.
    pub fn issuer(&self) -> &str {
        &self.state.origins[0]
    }

    /// Publishes RFC 8414 metadata listing `algorithms` for DPoP proofs.
    pub fn publish_metadata(&self, algorithms: &[&str]) {
        *self.state.metadata.lock().unwrap() = Some(json!({
            "issuer": self.issuer(),
            "token_endpoint": self.token_url(),
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "dpop_signing_alg_values_supported": algorithms,
        }));
    }

    /// Publishes the first origin's API (`{origin}/api`) as a protected
    /// resource that names this server and takes only DPoP-bound tokens.
    pub fn publish_resource_metadata(&self) {
        *self.state.resource_metadata.lock().unwrap() = Some(json!({
            "resource": format!("{}/api", self.issuer()),
            "authorization_servers": [self.issuer()],
            "dpop_bound_access_tokens_required": true,
        }));
    }

    /// Checks a request to `origin` (one of this server's, or one added with
    /// [`add_origin`](Self::add_origin)) as the APIs do: for a server of
    /// another protocol (gRPC) that carries the same tokens.
    pub fn check_api<B>(&self, origin: &str, req: &http::Request<B>) -> Result<(), ApiRefusal> {
        check_api(&self.state, origin, req)
    }

    /// Gives an origin served elsewhere a nonce of its own.
    pub fn add_origin(&self, origin: &str) {
        self.state.rotate(origin);
    }

    /// `origin`'s current nonce.
    pub fn nonce(&self, origin: &str) -> String {
        self.state.current_nonce(origin)
    }

    /// Gives origin `i` a new nonce (the token endpoint's is origin 0's).
    pub fn rotate(&self, i: usize) {
        self.state.rotate(&self.state.origins[i]);
    }

    /// The proofs accepted, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Tokens issued, and the thumbprint each is bound to.
    pub fn bindings(&self) -> Vec<String> {
        let issued = self.state.issued.lock().unwrap();
        issued.values().map(|(jkt, _)| jkt.clone()).collect()
    }

    pub fn token_nonce_challenges(&self) -> usize {
        self.state.token_nonce_challenges.load(Ordering::SeqCst)
    }

    pub fn api_nonce_challenges(&self) -> usize {
        self.state.api_nonce_challenges.load(Ordering::SeqCst)
    }

    /// Requests (by `x-request-id`) refused for their nonce although it was
    /// older than the one the server had named to them: a resend that did
    /// not take the nonce its challenge gave.
    pub fn stale_resends(&self) -> Vec<String> {
        self.state.stale_resends.lock().unwrap().clone()
    }

    /// How often each request (by `x-request-id`) reached an API.
    pub fn sends(&self) -> HashMap<String, usize> {
        self.state.sends.lock().unwrap().clone()
    }
}

impl std::ops::Deref for DpopServer {
    type Target = Tally;

    fn deref(&self) -> &Tally {
        &self.state.tally
    }
}

impl State {
    fn rotate(&self, origin: &str) {
        let n = self.next_nonce.fetch_add(1, Ordering::SeqCst);
        let mut nonces = self.nonces.lock().unwrap();
        let entry = nonces.entry(origin.to_owned()).or_default();
        entry.previous = std::mem::take(&mut entry.current);
        entry.current = format!("nonce-{n}-{}", URL_SAFE_NO_PAD.encode(n.to_be_bytes()));
    }

    fn current_nonce(&self, origin: &str) -> String {
        self.nonces.lock().unwrap()[origin].current.clone()
    }

    /// Whether `nonce` is acceptable at `origin` now.
    fn nonce_ok(&self, origin: &str, nonce: Option<&str>) -> bool {
        let nonces = self.nonces.lock().unwrap();
        let state = &nonces[origin];
        match (self.nonces_mode, nonce) {
            (Nonces::Off, _) => true,
            (_, None) => false,
            (Nonces::Strict, Some(n)) => n == state.current,
            (Nonces::Grace, Some(n)) => n == state.current || n == state.previous,
        }
    }
}

/// The serial number of a nonce this server made (`nonce-{n}-...`).
fn nonce_number(nonce: &str) -> Option<u64> {
    nonce
        .strip_prefix("nonce-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Why a proof was refused.
enum Refusal {
    /// The nonce the proof carried, if any.
    UseNonce(Option<String>),
    Invalid(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Self {
        Refusal::Invalid(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Refusal::Invalid(why.to_owned())
    }
}

async fn handle(
    state: &State,
    origin: &str,
    has_token_endpoint: bool,
    req: http::Request<hyper::body::Incoming>,
) -> Response {
    let metadata = state.metadata.lock().unwrap().clone();
    let id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let response = if has_token_endpoint && req.uri().path() == "/token" {
        token(state, origin, req)
    } else if has_token_endpoint && req.uri().path() == "/.well-known/oauth-authorization-server" {
        match metadata {
            Some(doc) => answer(200, doc),
            None => answer(404, json!({})),
        }
    } else if has_token_endpoint && req.uri().path() == "/.well-known/oauth-protected-resource/api"
    {
        match state.resource_metadata.lock().unwrap().clone() {
            Some(doc) => answer(200, doc),
            None => answer(404, json!({})),
        }
    } else {
        api(state, origin, req)
    };
    // Every answer names the current nonce (RFC 9449 sections 8.2, 9.2).
    let mut response = response;
    if state.nonces_mode != Nonces::Off {
        let nonce = state.current_nonce(origin);
        if let (Some(id), Some(n)) = (id, nonce_number(&nonce)) {
            state.named.lock().unwrap().insert(id, n);
        }
        response
            .headers_mut()
            .insert("dpop-nonce", nonce.parse().unwrap());
    }
    response
}

fn token(state: &State, origin: &str, req: http::Request<hyper::body::Incoming>) -> Response {
    if !has_basic(&req, CLIENT_ID, CLIENT_SECRET) {
        state
            .tally
            .refused("token request: wrong client credentials");
        return answer(401, json!({"error": "invalid_client"}));
    }
    if state.bearer.load(Ordering::SeqCst) {
        let n = state.tally.token_request();
        let token = format!("bearer-{n}");
        state.issued.lock().unwrap().insert(
            token.clone(),
            (String::new(), Instant::now() + secs(state.lifetime_secs)),
        );
        return answer(
            200,
            json!({"access_token": token, "token_type": "Bearer", "expires_in": state.lifetime_secs}),
        );
    }
    let htu = format!("{origin}/token");
    match check_proof(state, origin, &req, "POST", &htu, None) {
        Ok(seen) => {
            let n = state.tally.token_request();
            let token = format!("dpop-token-{n}");
            state.issued.lock().unwrap().insert(
                token.clone(),
                (seen.jkt.clone(), Instant::now() + secs(state.lifetime_secs)),
            );
            state.seen.lock().unwrap().push(seen);
            answer(
                200,
                json!({"access_token": token, "token_type": "DPoP", "expires_in": state.lifetime_secs}),
            )
        }
        Err(Refusal::UseNonce(_)) => {
            state.token_nonce_challenges.fetch_add(1, Ordering::SeqCst);
            answer(
                400,
                json!({"error": "use_dpop_nonce", "error_description": "Authorization server requires nonce in DPoP proof"}),
            )
        }
        Err(Refusal::Invalid(why)) => {
            state.tally.refused(format!("token request: {why}"));
            answer(
                400,
                json!({"error": "invalid_dpop_proof", "error_description": why}),
            )
        }
    }
}

fn api(state: &State, origin: &str, req: http::Request<hyper::body::Incoming>) -> Response {
    match check_api(state, origin, &req) {
        Ok(()) => answer(
            200,
            json!({"method": req.method().as_str(), "path": req.uri().path()}),
        ),
        Err(refusal) => {
            let mut response = answer(
                401,
                json!({"error": refusal.error, "error_description": refusal.why}),
            );
            response
                .headers_mut()
                .insert("www-authenticate", refusal.challenge().parse().unwrap());
            response
        }
    }
}

/// Why an API request was refused: the DPoP challenge's error code, and why.
#[derive(Debug)]
pub struct ApiRefusal {
    pub error: &'static str,
    pub why: String,
}

impl ApiRefusal {
    /// The `WWW-Authenticate` value.
    pub fn challenge(&self) -> String {
        format!(
            r#"DPoP algs="ES256 EdDSA RS256 PS256", error="{}""#,
            self.error
        )
    }
}

/// Checks an API request to `origin` as a resource server must: the
/// `DPoP` token, issued, unexpired, and its proof, bound to the token's key.
fn check_api<B>(state: &State, origin: &str, req: &http::Request<B>) -> Result<(), ApiRefusal> {
    if let Some(id) = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
    {
        *state
            .sends
            .lock()
            .unwrap()
            .entry(id.to_owned())
            .or_default() += 1;
    }
    let refuse = |error: &'static str, why: String| {
        state.tally.api_refusal();
        state
            .tally
            .refused(format!("{} {}: {why}", req.method(), req.uri()));
        Err(ApiRefusal { error, why })
    };
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if state.bearer.load(Ordering::SeqCst) {
        let token = authorization.strip_prefix("Bearer ").unwrap_or_default();
        if req.headers().contains_key("dpop") || !state.issued.lock().unwrap().contains_key(token) {
            return refuse("invalid_token", "not one of the bearer tokens".into());
        }
        state.tally.accepted();
        return Ok(());
    }
    let Some(token) = authorization.strip_prefix("DPoP ") else {
        return refuse(
            "invalid_token",
            format!("not a DPoP authorization: `{authorization:.12}`"),
        );
    };
    let binding = state.issued.lock().unwrap().get(token).cloned();
    let Some((jkt, expires_at)) = binding else {
        return refuse("invalid_token", "a token never issued".into());
    };
    if Instant::now() >= expires_at {
        return refuse("invalid_token", format!("token {token} has expired"));
    }
    let htu = format!("{origin}{}", req.uri().path());
    match check_proof(state, origin, req, req.method().as_str(), &htu, Some(token)) {
        Ok(seen) if seen.jkt != jkt => refuse(
            "invalid_token",
            format!(
                "the token is bound to {jkt}, the proof's key is {}",
                seen.jkt
            ),
        ),
        Ok(seen) => {
            state.seen.lock().unwrap().push(seen);
            state.tally.accepted();
            Ok(())
        }
        Err(Refusal::UseNonce(carried)) => {
            let id = req
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok());
            if let Some(id) = id {
                let named = state.named.lock().unwrap().get(id).copied();
                let carried = carried.as_deref().and_then(nonce_number);
                if named.is_some_and(|named| carried.is_none_or(|c| c < named)) {
                    state.stale_resends.lock().unwrap().push(id.to_owned());
                }
            }
            state.api_nonce_challenges.fetch_add(1, Ordering::SeqCst);
            Err(ApiRefusal {
                error: "use_dpop_nonce",
                why: "Resource server requires nonce in DPoP proof".into(),
            })
        }
        Err(Refusal::Invalid(why)) => refuse("invalid_dpop_proof", why),
    }
}

/// Checks the request's one `DPoP` proof (RFC 9449 section 4.3).
fn check_proof<B>(
    state: &State,
    origin: &str,
    req: &http::Request<B>,
    htm: &str,
    htu: &str,
    token: Option<&str>,
) -> Result<Seen, Refusal> {
    let mut proofs = req.headers().get_all("dpop").iter();
    let proof = proofs.next().ok_or("no DPoP header")?;
    if proofs.next().is_some() {
        return Err("more than one DPoP header".into());
    }
    let proof = proof.to_str().map_err(|_| "DPoP header is not text")?;
    let header = jsonwebtoken::decode_header(proof).map_err(|e| format!("header: {e}"))?;
    if header.typ.as_deref() != Some("dpop+jwt") {
        return Err(format!("typ is {:?}", header.typ).into());
    }
    // The jwk as sent: public members only.
    let raw: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(proof.split('.').next().unwrap())
            .map_err(|_| "header is not base64url")?,
    )
    .map_err(|_| "header is not JSON")?;
    if ["d", "p", "q", "dp", "dq", "qi", "k"]
        .iter()
        .any(|m| raw["jwk"].get(m).is_some())
    {
        return Err("the jwk holds private key members".into());
    }
    let jwk = header.jwk.clone().ok_or("no jwk in the header")?;
    let allowed = [
        Algorithm::ES256,
        Algorithm::EdDSA,
        Algorithm::RS256,
        Algorithm::PS256,
    ];
    if !allowed.contains(&header.alg) {
        return Err(format!("alg {:?} not allowed", header.alg).into());
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|e| format!("jwk: {e}"))?;
    let mut validation = Validation::new(header.alg);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims = HashSet::new();
    let claims = jsonwebtoken::decode::<Value>(proof, &key, &validation)
        .map_err(|e| format!("signature or claims: {e}"))?
        .claims;
    let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
    if text("htm").as_deref() != Some(htm) {
        return Err(format!("htm {:?} is not {htm}", text("htm")).into());
    }
    if text("htu").as_deref() != Some(htu) {
        return Err(format!("htu {:?} is not {htu}", text("htu")).into());
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let iat = claims.get("iat").and_then(Value::as_u64).ok_or("no iat")?;
    if iat.abs_diff(now) > 60 {
        return Err(format!("iat {iat} is not within a minute of {now}").into());
    }
    let ath = text("ath");
    if let Some(token) = token {
        let expected = URL_SAFE_NO_PAD.encode(ring::digest::digest(
            &ring::digest::SHA256,
            token.as_bytes(),
        ));
        if ath.as_deref() != Some(expected.as_str()) {
            return Err(format!("ath {ath:?} is not the hash of the token presented").into());
        }
    }
    let nonce = text("nonce");
    if !state.nonce_ok(origin, nonce.as_deref()) {
        return Err(Refusal::UseNonce(nonce));
    }
    let jti = text("jti").ok_or("no jti")?;
    if jti.len() < 16 {
        return Err("jti too short to be unique".into());
    }
    if !state.jtis.lock().unwrap().insert(jti.clone()) {
        return Err(format!("jti {jti} replayed").into());
    }
    Ok(Seen {
        htm: htm.to_owned(),
        htu: htu.to_owned(),
        nonce,
        jkt: thumbprint(&jwk)?,
        ath,
        request_id: req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    })
}

/// The RFC 7638 thumbprint of `jwk`, computed here from jsonwebtoken's
/// parse of it.
pub fn thumbprint(jwk: &Jwk) -> Result<String, String> {
    let canonical = match &jwk.algorithm {
        AlgorithmParameters::EllipticCurve(ec) => format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            ec.x, ec.y
        ),
        AlgorithmParameters::OctetKeyPair(okp) => {
            format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#, okp.x)
        }
        AlgorithmParameters::RSA(rsa) => {
            format!(r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#, rsa.e, rsa.n)
        }
        AlgorithmParameters::OctetKey(_) => return Err("a symmetric jwk".into()),
    };
    Ok(URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        canonical.as_bytes(),
    )))
}

fn secs(n: u64) -> std::time::Duration {
    std::time::Duration::from_secs(n)
}
