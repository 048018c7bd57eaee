//! A token endpoint on 127.0.0.1 that authenticates clients by JWT
//! assertion (RFC 7523 section 2.2) and checks each with jsonwebtoken, an
//! independent JOSE implementation: signature and `alg`, `iss`, `sub`,
//! `aud`, `exp`, `nbf`, and `jti` never reused (it remembers them). Bad
//! assertions get `401 invalid_client`. An API beside it accepts only the
//! tokens it issued.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::serve::{answer, serve_state, Response};
use super::tally::Tally;

pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How the endpoint checks signatures.
pub enum Check {
    /// With this public key (SPKI PEM) and algorithm.
    Public(String, Algorithm),
    /// HS256 under this client secret.
    Secret(String),
}

struct State {
    tally: Tally,
    client_id: String,
    audience: Mutex<String>,
    key: Mutex<(DecodingKey, Algorithm)>,
    jtis: Mutex<HashSet<String>>,
    headers: Mutex<Vec<jsonwebtoken::Header>>,
    claims: Mutex<Vec<Value>>,
    issued: Mutex<HashSet<String>>,
    lifetime_secs: u64,
    metadata: Mutex<Option<String>>,
    /// The API's protected-resource metadata (RFC 9728), if published.
    resource_metadata: Mutex<Option<String>>,
    /// The form of every accepted token request.
    forms: Mutex<Vec<Vec<(String, String)>>>,
    /// Refusals are an empty 403, as some servers answer.
    empty_refusals: std::sync::atomic::AtomicBool,
}

pub struct AssertionEndpoint {
    pub addr: SocketAddr,
    state: Arc<State>,
}

fn decoding_key(check: &Check) -> (DecodingKey, Algorithm) {
    match check {
        Check::Secret(secret) => (
            DecodingKey::from_secret(secret.as_bytes()),
            Algorithm::HS256,
        ),
        Check::Public(pem, alg) => {
            let key = match alg {
                Algorithm::RS256 | Algorithm::PS256 => DecodingKey::from_rsa_pem(pem.as_bytes()),
                Algorithm::ES256 => DecodingKey::from_ec_pem(pem.as_bytes()),
                Algorithm::EdDSA => DecodingKey::from_ed_pem(pem.as_bytes()),
                other => panic!("no test key for {other:?}"),
            };
            (key.expect("openssl's public key"), *alg)
        }
    }
}

impl AssertionEndpoint {
    /// Starts on a free port; the assertion's `aud` must be the token
    /// endpoint's URL until [`set_audience`](Self::set_audience).
    pub async fn start(client_id: &str, check: Check, lifetime_secs: u64) -> AssertionEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            tally: Tally::default(),
            client_id: client_id.into(),
            audience: Mutex::new(format!("http://{addr}/token")),
            key: Mutex::new(decoding_key(&check)),
            jtis: Mutex::new(HashSet::new()),
            headers: Mutex::new(Vec::new()),
            claims: Mutex::new(Vec::new()),
            issued: Mutex::new(HashSet::new()),
            lifetime_secs,
            metadata: Mutex::new(None),
            resource_metadata: Mutex::new(None),
            forms: Mutex::new(Vec::new()),
            empty_refusals: Default::default(),
        });
        serve_state(listener, Arc::clone(&state), |state, req| async move {
            handle(&state, req).await
        });
        AssertionEndpoint { addr, state }
    }

    pub fn token_url(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// From now on assertions must be signed with this key (a rotation
    /// registered at the server).
    pub fn set_key(&self, check: Check) {
        *self.state.key.lock().unwrap() = decoding_key(&check);
    }

    /// The `aud` required from now on.
    pub fn set_audience(&self, audience: &str) {
        *self.state.audience.lock().unwrap() = audience.into();
    }

    /// From now on a refused assertion gets 403 with an empty body, as
    /// some servers (Glewlwyd) answer, instead of 401 `invalid_client`.
    pub fn refuse_with_empty_403(&self) {
        self.state
            .empty_refusals
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Publishes RFC 8414 metadata naming the token endpoint.
    pub fn publish_metadata(&self, auth_methods: &[&str]) {
        *self.state.metadata.lock().unwrap() = Some(
            json!({
                "issuer": self.issuer(),
                "token_endpoint": self.token_url(),
                "token_endpoint_auth_methods_supported": auth_methods,
            })
            .to_string(),
        );
    }

    /// Publishes the API's protected-resource metadata (RFC 9728) at
    /// `/.well-known/oauth-protected-resource/api`.
    pub fn publish_resource_metadata(&self, doc: Value) {
        *self.state.resource_metadata.lock().unwrap() = Some(doc.to_string());
    }

    /// The form of every accepted token request, in order.
    pub fn forms(&self) -> Vec<Vec<(String, String)>> {
        self.state.forms.lock().unwrap().clone()
    }

    /// Tokens issued, one per accepted assertion.
    pub fn issued(&self) -> usize {
        self.state.issued.lock().unwrap().len()
    }

    /// The JWS headers of the accepted assertions.
    pub fn headers(&self) -> Vec<jsonwebtoken::Header> {
        self.state.headers.lock().unwrap().clone()
    }

    /// The claims of the accepted assertions.
    pub fn claims(&self) -> Vec<Value> {
        self.state.claims.lock().unwrap().clone()
    }
}

async fn handle(state: &State, req: http::Request<hyper::body::Incoming>) -> Response {
    match req.uri().path() {
        "/token" => {
            let n = state.tally.token_request();
            let has_basic = req.headers().contains_key(http::header::AUTHORIZATION);
            let body = req.into_body().collect().await.unwrap().to_bytes();
            match verify(state, &body, has_basic) {
                Ok(()) => {
                    let token = format!("at-{}", n);
                    state.issued.lock().unwrap().insert(token.clone());
                    answer(
                        200,
                        json!({"access_token": token, "token_type": "Bearer", "expires_in": state.lifetime_secs}),
                    )
                }
                Err(why)
                    if state
                        .empty_refusals
                        .load(std::sync::atomic::Ordering::SeqCst) =>
                {
                    state.tally.refused(why);
                    let mut response = Response::new(Default::default());
                    *response.status_mut() = http::StatusCode::FORBIDDEN;
                    response
                }
                Err(why) => {
                    state.tally.refused(why.clone());
                    answer(
                        401,
                        json!({"error": "invalid_client", "error_description": why}),
                    )
                }
            }
        }
        "/api" => {
            let token = req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or_default();
            if state.issued.lock().unwrap().contains(token) {
                state.tally.accepted();
                answer(200, json!({"ok": true}))
            } else {
                state.tally.api_refusal();
                answer(401, json!({"error": "invalid_token"}))
            }
        }
        "/.well-known/oauth-authorization-server" => match &*state.metadata.lock().unwrap() {
            Some(doc) => answer(200, serde_json::from_str(doc).unwrap()),
            None => answer(404, json!({})),
        },
        "/.well-known/oauth-protected-resource/api" => {
            match &*state.resource_metadata.lock().unwrap() {
                Some(doc) => answer(200, serde_json::from_str(doc).unwrap()),
                None => answer(404, json!({})),
            }
        }
        _ => answer(404, json!({})),
    }
}

fn verify(state: &State, body: &[u8], has_basic: bool) -> Result<(), String> {
    if has_basic {
        return Err("an Authorization header was sent with an assertion".into());
    }
    let form: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
    let param = |name: &str| {
        let mut values = form
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(format!("`{name}` was sent twice"));
        }
        Ok(first)
    };
    if param("grant_type")? != Some("client_credentials") {
        return Err("grant_type is not client_credentials".into());
    }
    if param("client_secret")?.is_some() {
        return Err("a client_secret was sent with an assertion".into());
    }
    if let Some(id) = param("client_id")? {
        if id != state.client_id {
            return Err(format!("client_id `{id}` is not the client's"));
        }
    }
    if param("client_assertion_type")? != Some(ASSERTION_TYPE) {
        return Err("client_assertion_type is not jwt-bearer".into());
    }
    let jwt = param("client_assertion")?.ok_or("no client_assertion")?;
    let header = jsonwebtoken::decode_header(jwt).map_err(|e| format!("header: {e}"))?;
    let (key, alg) = {
        let key = state.key.lock().unwrap();
        (key.0.clone(), key.1)
    };
    if header.alg != alg {
        return Err(format!("alg {:?} is not {alg:?}", header.alg));
    }
    let mut validation = Validation::new(alg);
    validation.leeway = 0;
    validation.validate_nbf = true;
    validation.set_issuer(&[&state.client_id]);
    validation.sub = Some(state.client_id.clone());
    validation.set_audience(&[state.audience.lock().unwrap().as_str()]);
    validation.set_required_spec_claims(&["exp", "nbf", "iss", "sub", "aud"]);
    let claims = jsonwebtoken::decode::<Value>(jwt, &key, &validation)
        .map_err(|e| format!("assertion refused: {e}"))?
        .claims;
    let jti = claims["jti"].as_str().ok_or("no jti")?.to_owned();
    if jti.len() < 16 {
        return Err("jti too short to be unique".into());
    }
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    match (iat, exp) {
        (Some(iat), Some(exp)) if exp > iat && exp - iat <= 300 => {}
        _ => return Err("iat missing, or exp not shortly after it".into()),
    }
    if !state.jtis.lock().unwrap().insert(jti.clone()) {
        return Err(format!("jti `{jti}` was used before"));
    }
    state.headers.lock().unwrap().push(header);
    state.claims.lock().unwrap().push(claims);
    state.forms.lock().unwrap().push(form);
    Ok(())
}

impl std::ops::Deref for AssertionEndpoint {
    type Target = Tally;

    /// The counts: token requests, API requests accepted and refused.
    fn deref(&self) -> &Tally {
        &self.state.tally
    }
}
