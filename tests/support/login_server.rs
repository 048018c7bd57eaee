//! A loopback authorization server for a person's login: RFC 8414 metadata,
//! an authorization endpoint that approves at once (or refuses, or answers
//! with a wrong `iss`, as told), a token endpoint for the authorization code
//! (PKCE S256 checked with RustCrypto's SHA-256, not the crate's ring), the
//! device grant and rotating refresh tokens; and an API with RFC 9728
//! metadata that takes only the access tokens it issued. Where a login asks
//! for `openid`, an ID token signed by `jsonwebtoken` (`id_tokens.rs`) with
//! the keys at its `jwks_uri`; an end-session endpoint (RP-initiated
//! logout), and back-channel logout tokens posted to the app's route.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sha2::Digest;
use tokio::net::TcpListener;

use super::id_tokens::Issuer;
use super::serve::{answer, bearer, serve_state, Response};

pub const CLIENT: &str = "login-cli";

/// A web app's confidential client, which authenticates with
/// `client_secret_basic`.
pub const WEB_CLIENT: &str = "web-app";
pub const WEB_SECRET: &str = "web-app-secret";

/// How the authorization endpoint answers.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Approve {
    /// A code, the state and the server's `iss`.
    #[default]
    Yes,
    /// `error=access_denied`.
    Deny,
    /// A code with another server's `iss`.
    WrongIss,
    /// A code with another `state`.
    WrongState,
}

/// A code issued at the authorization endpoint.
#[derive(Clone, Debug)]
struct Grant {
    challenge: String,
    redirect_uri: String,
    resource: Option<String>,
    /// The person who signed in (`user` in the authorization request, as
    /// a test's browser adds it).
    user: String,
    client_id: String,
    /// The scope the authorization request asked for.
    scope: String,
    /// The OpenID Connect `nonce` it sent, if any.
    nonce: Option<String>,
}

/// A pushed authorization request's form, and its DPoP proof.
pub type Pushed = (HashMap<String, String>, Option<String>);

#[derive(Default)]
pub struct State {
    pub url: Mutex<String>,
    /// The keys and ID tokens of OpenID Connect.
    pub oidc: Issuer,
    /// Each person's session id at the server (`sid`), from their last
    /// login with `openid`.
    pub sids: Mutex<HashMap<String, String>>,
    /// Where the app takes back-channel logout tokens.
    pub backchannel_uri: Mutex<Option<String>>,
    /// Every end-session request's query, decoded.
    pub end_sessions: Mutex<Vec<HashMap<String, String>>>,
    /// Pushed authorization requests (RFC 9126), by `request_uri`; each
    /// taken once by the authorization endpoint.
    pushed: Mutex<HashMap<String, HashMap<String, String>>>,
    /// Every pushed request's form, with the client the request
    /// authenticated as, and its DPoP proof.
    pub par_forms: Mutex<Vec<Pushed>>,
    /// The PAR endpoint's answer instead of its own: status and body.
    pub par_answer: Mutex<Option<(u16, String)>>,
    /// Whether an authorization request must be pushed.
    pub requires_par: AtomicBool,
    /// The metadata document, as the test wants it (filled at start).
    pub metadata: Mutex<Value>,
    pub approve: Mutex<Approve>,
    codes: Mutex<HashMap<String, Grant>>,
    /// Device codes and the polls left before approval (`None`: denied).
    devices: Mutex<HashMap<String, Option<usize>>>,
    /// The device authorization answer's fields, replaced as told.
    pub device_answer: Mutex<Value>,
    pub polls_before_approval: AtomicUsize,
    /// `slow_down` answers left before `authorization_pending` ones.
    pub slow_downs: AtomicUsize,
    /// Refresh tokens and whether they are retired.
    refresh: Mutex<HashMap<String, bool>>,
    access: Mutex<HashMap<String, Instant>>,
    /// The person each access or refresh token was issued for.
    pub users: Mutex<HashMap<String, String>>,
    /// The refresh tokens revoked (RFC 7009), and who they were issued for.
    pub revoked: Mutex<Vec<String>>,
    /// Refreshes per person.
    pub refreshes_of: Mutex<HashMap<String, usize>>,
    serial: AtomicU64,
    pub lifetime_ms: AtomicU64,
    /// Whether token answers carry a refresh token.
    pub gives_refresh: AtomicBool,
    /// Every authorization request's query, decoded.
    pub authorizations: Mutex<Vec<HashMap<String, String>>>,
    /// Codes exchanged (logins), device logins done, refreshes, polls.
    pub logins: AtomicUsize,
    pub device_logins: AtomicUsize,
    pub refreshes: AtomicUsize,
    pub polls: AtomicUsize,
    pub poll_times: Mutex<Vec<Instant>>,
    /// Every token request's form, in order.
    pub token_forms: Mutex<Vec<HashMap<String, String>>>,
    /// The DPoP proof of each token request that carried one.
    pub dpop_proofs: Mutex<Vec<String>>,
    /// Every rule the client broke, described.
    pub violations: Mutex<Vec<String>>,
    /// Client ids registered (RFC 7591), and the registrations' bodies.
    pub registered: Mutex<Vec<String>>,
    pub registrations: Mutex<Vec<Value>>,
    /// A registration's answer instead of a client: status and body.
    pub registration_answer: Mutex<Option<(u16, String)>>,
    /// A client metadata document's URL the server takes as a client id.
    pub metadata_document: Mutex<Option<String>>,
    /// Where the API's metadata is instead of its well-known URL (which then
    /// answers 404): the URL its 401 names.
    pub metadata_moved_to: Mutex<Option<String>>,
    /// How long the token endpoint takes to answer, in ms.
    pub token_delay_ms: AtomicU64,
    /// The scope each access and refresh token was granted with.
    granted: Mutex<HashMap<String, String>>,
    /// Whether a registered client's authorization requests must name one
    /// of its registered redirect URIs exactly (no loopback port of its
    /// choosing, which RFC 8252 section 7.3 asks servers to allow).
    pub exact_redirects: AtomicBool,
    /// The redirect URIs each registered client was registered with.
    client_redirects: Mutex<HashMap<String, Vec<String>>>,
    /// Registered clients the server deleted: they get `invalid_client`.
    forgotten: Mutex<Vec<String>>,
    /// A scope the API needs: a token without it gets `403
    /// insufficient_scope` naming it.
    pub required_scope: Mutex<Option<String>>,
    /// Registrations make confidential clients: each gets the secret
    /// `secret-of-<id>` (`client_secret_basic`), and the ID tokens are
    /// signed with HS256 under it from then on.
    pub registers_confidential: AtomicBool,
}

pub struct LoginServer {
    pub state: Arc<State>,
}

impl LoginServer {
    /// Started on 127.0.0.1, with access tokens of `lifetime`.
    pub async fn start(lifetime: Duration) -> LoginServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State::default());
        *state.url.lock().unwrap() = url.clone();
        *state.metadata.lock().unwrap() = json!({
            "issuer": url,
            "authorization_endpoint": format!("{url}/authorize"),
            "token_endpoint": format!("{url}/token"),
            "device_authorization_endpoint": format!("{url}/device"),
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["openid", "read", "offline_access"],
            "jwks_uri": format!("{url}/jwks"),
            "id_token_signing_alg_values_supported": [state.oidc.alg()],
            "end_session_endpoint": format!("{url}/end_session"),
            "authorization_response_iss_parameter_supported": true,
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
            "registration_endpoint": format!("{url}/register"),
            "revocation_endpoint": format!("{url}/revoke"),
        });
        *state.device_answer.lock().unwrap() = json!({
            "user_code": "WDJB-MJHT",
            "verification_uri": format!("{url}/activate"),
            "expires_in": 60,
            "interval": 1,
        });
        state
            .lifetime_ms
            .store(lifetime.as_millis() as u64, Ordering::SeqCst);
        state.gives_refresh.store(true, Ordering::SeqCst);
        serve_state(listener, Arc::clone(&state), |state, req| async move {
            state.handle(req).await
        });
        LoginServer { state }
    }

    pub fn issuer(&self) -> String {
        self.state.url.lock().unwrap().clone()
    }

    /// The API, whose metadata names this server.
    pub fn api_url(&self) -> String {
        format!("{}/api", self.issuer())
    }

    /// Sets a member of the metadata (`Value::Null` removes it).
    pub fn set_metadata(&self, key: &str, value: Value) {
        let mut metadata = self.state.metadata.lock().unwrap();
        match value {
            Value::Null => {
                metadata.as_object_mut().unwrap().remove(key);
            }
            value => metadata[key] = value,
        }
    }

    pub fn approve(&self, approve: Approve) {
        *self.state.approve.lock().unwrap() = approve;
    }

    pub fn logins(&self) -> usize {
        self.state.logins.load(Ordering::SeqCst)
    }

    pub fn device_logins(&self) -> usize {
        self.state.device_logins.load(Ordering::SeqCst)
    }

    pub fn refreshes(&self) -> usize {
        self.state.refreshes.load(Ordering::SeqCst)
    }

    pub fn authorizations(&self) -> Vec<HashMap<String, String>> {
        self.state.authorizations.lock().unwrap().clone()
    }

    pub fn token_forms(&self) -> Vec<HashMap<String, String>> {
        self.state.token_forms.lock().unwrap().clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.violations.lock().unwrap().clone()
    }

    /// The people whose refresh tokens were revoked, in order.
    pub fn revoked(&self) -> Vec<String> {
        self.state.revoked.lock().unwrap().clone()
    }

    /// How many refreshes `user`'s tokens had.
    pub fn refreshes_of(&self, user: &str) -> usize {
        self.state
            .refreshes_of
            .lock()
            .unwrap()
            .get(user)
            .copied()
            .unwrap_or(0)
    }

    /// A browser that signs `user` in: it follows the authorization URL
    /// (with `user` added, as a login form would take it) and returns the
    /// URL the server redirected to, the app's callback (not followed).
    pub async fn sign_in(url: &str, user: &str) -> String {
        let response = get(&format!("{url}&user={user}")).await.unwrap();
        response
            .headers()
            .get("location")
            .expect("the authorization endpoint redirects")
            .to_str()
            .unwrap()
            .to_owned()
    }

    /// Where the app takes back-channel logout tokens.
    pub fn set_backchannel_uri(&self, uri: &str) {
        *self.state.backchannel_uri.lock().unwrap() = Some(uri.to_owned());
    }

    /// Ends `user`'s session at the server: a logout token posted to the
    /// app's back-channel route. The route's status.
    pub async fn end_session(&self, user: &str) -> Option<u16> {
        self.state.end_session_of(user).await
    }

    /// The serial the next token issued gets: every token issued so far
    /// has a lower one.
    pub fn next_serial(&self) -> u64 {
        self.state.serial.load(Ordering::SeqCst)
    }

    /// Every access and refresh token issued so far.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state.users.lock().unwrap().keys().cloned().collect()
    }

    /// How many token requests with `grant_type` arrived, answered or not.
    pub fn arrivals(&self, grant_type: &str) -> usize {
        self.token_forms()
            .iter()
            .filter(|form| form.get("grant_type").map(String::as_str) == Some(grant_type))
            .count()
    }

    /// Waits (at most 30 s) until more than `seen` token requests with
    /// `grant_type` have arrived, answered or not.
    pub async fn arrived(&self, grant_type: &str, seen: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.arrivals(grant_type) <= seen {
            assert!(
                Instant::now() < deadline,
                "no new {grant_type} request arrived"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Makes the token endpoint take `delay` to answer.
    pub fn delay_tokens(&self, delay: Duration) {
        self.state
            .token_delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    pub fn registrations(&self) -> Vec<Value> {
        self.state.registrations.lock().unwrap().clone()
    }

    /// Retires every refresh token: the next refresh is refused.
    /// Retires `user`'s refresh tokens: their next refresh is refused.
    pub fn retire_refresh_of(&self, user: &str) {
        let users = self.state.users.lock().unwrap();
        for (token, retired) in self.state.refresh.lock().unwrap().iter_mut() {
            if users.get(token).map(String::as_str) == Some(user) {
                *retired = true;
            }
        }
    }

    /// Deletes every registered client, as a server that forgets idle
    /// ones does: their requests get `invalid_client`.
    pub fn forget_clients(&self) {
        let gone = std::mem::take(&mut *self.state.registered.lock().unwrap());
        self.state.forgotten.lock().unwrap().extend(gone);
    }

    pub fn revoke_all(&self) {
        for retired in self.state.refresh.lock().unwrap().values_mut() {
            *retired = true;
        }
    }

    /// A user agent that follows the authorization URL as a browser does,
    /// and returns the URL the server redirected to (not followed).
    pub fn user_agent(
    ) -> impl Fn(String) -> tower_oauth::BoxFuture<'static, Result<String, tower_oauth::BoxError>>
           + Send
           + Sync
           + 'static {
        |url: String| {
            Box::pin(async move {
                let response = get(&url).await?;
                let location = response
                    .headers()
                    .get("location")
                    .ok_or("the authorization endpoint did not redirect")?
                    .to_str()?
                    .to_owned();
                Ok(location)
            }) as tower_oauth::BoxFuture<'static, Result<String, tower_oauth::BoxError>>
        }
    }
}

/// One GET of `url` with a plain hyper client.
pub async fn get(
    url: &str,
) -> Result<http::Response<hyper::body::Incoming>, tower_oauth::BoxError> {
    let client = super::hyper_client();
    let request = http::Request::get(url)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    Ok(client.request(request).await?)
}

fn query(req: &http::Request<hyper::body::Incoming>) -> HashMap<String, String> {
    form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn redirect(location: String) -> Response {
    http::Response::builder()
        .status(302)
        .header("location", location)
        .body(Default::default())
        .unwrap()
}

fn random() -> String {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl State {
    /// Whether `id` is a client of this server: the pre-registered one, a
    /// registered one, or the metadata document's URL it takes.
    fn knows(&self, id: &str) -> bool {
        id == CLIENT
            || id == WEB_CLIENT
            || self.registered.lock().unwrap().iter().any(|r| r == id)
            || self.metadata_document.lock().unwrap().as_deref() == Some(id)
    }

    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }

    async fn handle(self: Arc<Self>, req: http::Request<hyper::body::Incoming>) -> Response {
        let url = self.url.lock().unwrap().clone();
        match req.uri().path() {
            "/.well-known/oauth-authorization-server" => {
                answer(200, self.metadata.lock().unwrap().clone())
            }
            "/.well-known/oauth-protected-resource/api" | "/moved/prm.json" => {
                let moved = self.metadata_moved_to.lock().unwrap().is_some();
                if moved != (req.uri().path() == "/moved/prm.json") {
                    return answer(404, json!({"error": "not_found"}));
                }
                answer(
                    200,
                    json!({
                        "resource": format!("{url}/api"),
                        "authorization_servers": [url],
                        "scopes_supported": ["read"],
                    }),
                )
            }
            "/api" => {
                let ok = self
                    .access
                    .lock()
                    .unwrap()
                    .get(bearer(req.headers()))
                    .is_some_and(|until| Instant::now() < *until);
                let required = self.required_scope.lock().unwrap().clone();
                let granted = self
                    .granted
                    .lock()
                    .unwrap()
                    .get(bearer(req.headers()))
                    .cloned()
                    .unwrap_or_default();
                if let Some(needed) = required.filter(|n| ok && !granted.split(' ').any(|g| g == n))
                {
                    let mut refused = answer(403, json!({"error": "insufficient_scope"}));
                    let challenge =
                        format!(r#"Bearer error="insufficient_scope", scope="read {needed}""#);
                    refused
                        .headers_mut()
                        .insert("www-authenticate", challenge.parse().unwrap());
                    return refused;
                }
                if ok {
                    let token = bearer(req.headers()).to_owned();
                    let user = self.users.lock().unwrap().get(&token).cloned();
                    // The token's serial: which were issued before an instant.
                    let serial = serial_of(&token);
                    return answer(200, json!({"ok": true, "user": user, "serial": serial}));
                }
                let mut refused = answer(401, json!({"error": "invalid_token"}));
                if let Some(moved) = self.metadata_moved_to.lock().unwrap().clone() {
                    let challenge = format!(r#"Bearer resource_metadata="{moved}""#);
                    refused
                        .headers_mut()
                        .insert("www-authenticate", challenge.parse().unwrap());
                }
                refused
            }
            "/authorize" => {
                let q = query(&req);
                match q.get("request_uri") {
                    Some(uri) => {
                        let Some(mut pushed) = self.pushed.lock().unwrap().remove(uri) else {
                            return answer(400, json!({"error": "invalid_request_uri"}));
                        };
                        // `user`: who the test's browser signs in as.
                        let carried = q.keys().filter(|k| *k != "user").count();
                        if carried != 2 || q.get("client_id") != pushed.get("client_id") {
                            self.violation(format!("a pushed request's URL carried {q:?}"));
                            return answer(400, json!({"error": "invalid_request"}));
                        }
                        if let Some(user) = q.get("user") {
                            pushed.insert("user".into(), user.clone());
                        }
                        self.authorize(pushed, &url)
                    }
                    None if self.requires_par.load(Ordering::SeqCst) => {
                        self.violation("an authorization request that was not pushed".into());
                        answer(400, json!({"error": "invalid_request"}))
                    }
                    None => self.authorize(q, &url),
                }
            }
            "/par" => {
                let (mut form, client, proof) = client_form(req).await;
                if let Some(client) = client {
                    form.insert("client_id".into(), client);
                }
                self.par_forms.lock().unwrap().push((form.clone(), proof));
                if let Some((status, body)) = self.par_answer.lock().unwrap().clone() {
                    return http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                        .unwrap();
                }
                if !form.get("client_id").is_some_and(|id| self.knows(id)) {
                    return answer(401, json!({"error": "invalid_client"}));
                }
                let uri = format!("urn:ietf:params:oauth:request_uri:{}", random());
                self.pushed.lock().unwrap().insert(uri.clone(), form);
                answer(201, json!({"request_uri": uri, "expires_in": 60}))
            }
            "/jwks" => answer(200, self.oidc.jwks()),
            "/end_session" => {
                let q = query(&req);
                self.end_sessions.lock().unwrap().push(q.clone());
                let hint = q
                    .get("id_token_hint")
                    .map(|t| super::id_tokens::claims_of(t));
                if let Some(sub) = hint.as_ref().and_then(|c| c["sub"].as_str()) {
                    self.end_session_of(sub).await;
                }
                match (q.get("post_logout_redirect_uri"), q.get("state")) {
                    (Some(back), Some(state)) => redirect(format!("{back}?state={state}")),
                    (Some(back), None) => redirect(back.clone()),
                    _ => answer(200, json!({"signed_out": true})),
                }
            }
            "/register" => {
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let Ok(asked) = serde_json::from_slice::<Value>(&body) else {
                    self.violation("a registration that is not JSON".into());
                    return answer(400, json!({"error": "invalid_client_metadata"}));
                };
                self.registrations.lock().unwrap().push(asked.clone());
                if let Some((status, body)) = self.registration_answer.lock().unwrap().clone() {
                    return http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
                        .unwrap();
                }
                let id = format!("registered-{}", random());
                self.registered.lock().unwrap().push(id.clone());
                let redirects = asked["redirect_uris"]
                    .as_array()
                    .map(|uris| {
                        uris.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                self.client_redirects
                    .lock()
                    .unwrap()
                    .insert(id.clone(), redirects);
                if self.registers_confidential.load(Ordering::SeqCst) {
                    let secret = format!("secret-of-{id}");
                    self.oidc.rotate(
                        super::id_tokens::SigningKey {
                            alg: jsonwebtoken::Algorithm::HS256,
                            key: jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
                            public_jwk: json!({"kty": "oct", "kid": "hmac"}),
                        },
                        true,
                    );
                    return answer(
                        201,
                        json!({"client_id": id, "client_secret": secret,
                            "token_endpoint_auth_method": "client_secret_basic"}),
                    );
                }
                answer(
                    201,
                    json!({"client_id": id, "token_endpoint_auth_method": "none"}),
                )
            }
            "/device" => {
                let form = form(req).await;
                if !form.get("client_id").is_some_and(|id| self.knows(id)) {
                    self.violation(format!("device request without the client id: {form:?}"));
                }
                let code = format!("dc-{}", random());
                let polls = self.polls_before_approval.load(Ordering::SeqCst);
                self.devices
                    .lock()
                    .unwrap()
                    .insert(code.clone(), Some(polls));
                let mut body = self.device_answer.lock().unwrap().clone();
                body["device_code"] = code.into();
                answer(200, body)
            }
            "/revoke" => {
                let client = basic_client(&req);
                let form = form(req).await;
                // The web app's confidential client, or a public client
                // (a CLI's), which names itself (RFC 7009 section 2.1).
                let public = client.is_none()
                    && form.get("client_id").is_some_and(|c| {
                        c == CLIENT || self.registered.lock().unwrap().contains(c)
                    });
                if client.as_deref() != Some(WEB_CLIENT) && !public {
                    self.violation("a revocation without the web app's client or the CLI's".into());
                    return answer(401, json!({"error": "invalid_client"}));
                }
                let token = form.get("token").cloned().unwrap_or_default();
                if let Some(retired) = self.refresh.lock().unwrap().get_mut(&token) {
                    *retired = true;
                }
                let user = self.users.lock().unwrap().get(&token).cloned();
                self.revoked.lock().unwrap().push(user.unwrap_or_default());
                answer(200, json!({}))
            }
            "/token" => {
                let (mut form, client, proof) = client_form(req).await;
                // Recorded as it arrives; answered after the delay.
                self.token_forms.lock().unwrap().push(form.clone());
                let delay = self.token_delay_ms.load(Ordering::SeqCst);
                if delay > 0 {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
                if let Some(client) = client {
                    form.insert("client_id".into(), client);
                }
                let mut answer = self.token(form);
                if let Some(proof) = proof {
                    self.dpop_proofs.lock().unwrap().push(proof);
                    // A DPoP-bound token, as RFC 9449 section 5 answers.
                    let body = answer.body_mut();
                    let bytes = http_body_util::BodyExt::collect(std::mem::take(body))
                        .await
                        .unwrap()
                        .to_bytes();
                    let mut json: Value = serde_json::from_slice(&bytes).unwrap();
                    if json.get("token_type").is_some() {
                        json["token_type"] = "DPoP".into();
                    }
                    *body = http_body_util::Full::new(bytes::Bytes::from(json.to_string()));
                }
                answer
            }
            _ => answer(404, json!({"error": "not_found"})),
        }
    }

    fn authorize(&self, q: HashMap<String, String>, url: &str) -> Response {
        self.authorizations.lock().unwrap().push(q.clone());
        // A deleted client, or a redirect URI it was not registered with
        // where the server matches exactly: an error page, no redirect.
        let id = q.get("client_id").cloned().unwrap_or_default();
        if self.forgotten.lock().unwrap().contains(&id) {
            return answer(400, json!({"error": "invalid_client"}));
        }
        if self.exact_redirects.load(Ordering::SeqCst) {
            let registered = self.client_redirects.lock().unwrap().get(&id).cloned();
            let asked = q.get("redirect_uri").cloned().unwrap_or_default();
            if registered.is_some_and(|uris| !uris.contains(&asked)) {
                self.violation(format!(
                    "a redirect_uri the client was not registered with: {asked}"
                ));
                return answer(400, json!({"error": "invalid_request"}));
            }
        }
        if !q.get("client_id").is_some_and(|id| self.knows(id)) {
            self.violation(format!(
                "authorization request: client_id is {:?}",
                q.get("client_id")
            ));
            return answer(400, json!({"error": "invalid_client"}));
        }
        for (name, value) in [("response_type", "code"), ("code_challenge_method", "S256")] {
            if q.get(name).map(String::as_str) != Some(value) {
                self.violation(format!(
                    "authorization request: {name} is {:?}",
                    q.get(name)
                ));
                return answer(400, json!({"error": "invalid_request"}));
            }
        }
        let (Some(state), Some(redirect_uri), Some(challenge)) = (
            q.get("state"),
            q.get("redirect_uri"),
            q.get("code_challenge"),
        ) else {
            self.violation(
                "authorization request without state, redirect_uri or code_challenge".into(),
            );
            return answer(400, json!({"error": "invalid_request"}));
        };
        let iss = form_urlencoded::byte_serialize(url.as_bytes()).collect::<String>();
        let approve = self.approve.lock().unwrap().clone();
        if approve == Approve::Deny {
            return redirect(format!(
                "{redirect_uri}?error=access_denied&state={state}&iss={iss}"
            ));
        }
        let code = format!("code-{}", random());
        self.codes.lock().unwrap().insert(
            code.clone(),
            Grant {
                challenge: challenge.clone(),
                redirect_uri: redirect_uri.clone(),
                resource: q.get("resource").cloned(),
                user: q.get("user").cloned().unwrap_or_else(|| "person".into()),
                client_id: q.get("client_id").cloned().unwrap_or_default(),
                scope: q.get("scope").cloned().unwrap_or_default(),
                nonce: q.get("nonce").cloned(),
            },
        );
        let (state, iss) = match approve {
            Approve::WrongIss => (state.clone(), "https%3A%2F%2Fother.example".to_owned()),
            Approve::WrongState => ("not-the-state".to_owned(), iss),
            _ => (state.clone(), iss),
        };
        redirect(format!(
            "{redirect_uri}?code={code}&state={state}&iss={iss}"
        ))
    }

    fn token(&self, form: HashMap<String, String>) -> Response {
        let field = |name: &str| form.get(name).cloned().unwrap_or_default();
        if self.forgotten.lock().unwrap().contains(&field("client_id")) {
            return answer(401, json!({"error": "invalid_client"}));
        }
        if !self.knows(&field("client_id")) {
            self.violation(format!(
                "token request without the client id: {:?}",
                form.get("client_id")
            ));
            return answer(401, json!({"error": "invalid_client"}));
        }
        let invalid_grant = || answer(400, json!({"error": "invalid_grant"}));
        match field("grant_type").as_str() {
            "authorization_code" => {
                let Some(grant) = self.codes.lock().unwrap().remove(&field("code")) else {
                    self.violation("an unknown or used code was sent".into());
                    return invalid_grant();
                };
                let digest = sha2::Sha256::digest(field("code_verifier").as_bytes());
                let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
                if challenge != grant.challenge {
                    self.violation("the code_verifier does not match the challenge".into());
                    return invalid_grant();
                }
                if field("redirect_uri") != grant.redirect_uri {
                    self.violation(
                        "the redirect_uri differs from the authorization request's".into(),
                    );
                    return invalid_grant();
                }
                if form.get("resource") != grant.resource.as_ref() {
                    self.violation("the resource differs from the authorization request's".into());
                }
                if field("client_id") != grant.client_id {
                    self.violation("the code was exchanged by another client".into());
                    return invalid_grant();
                }
                self.logins.fetch_add(1, Ordering::SeqCst);
                let id_token = has_openid(&grant.scope).then(|| {
                    let sid = format!("sid-{}", random());
                    self.sids
                        .lock()
                        .unwrap()
                        .insert(grant.user.clone(), sid.clone());
                    let url = self.url.lock().unwrap().clone();
                    let nonce = grant.nonce.as_deref();
                    self.oidc
                        .id_token(&url, &grant.client_id, &grant.user, nonce, &sid)
                });
                self.issue_full(&grant.user, &grant.scope, id_token)
            }
            "urn:ietf:params:oauth:grant-type:device_code" => {
                self.polls.fetch_add(1, Ordering::SeqCst);
                self.poll_times.lock().unwrap().push(Instant::now());
                let mut devices = self.devices.lock().unwrap();
                let Some(left) = devices.get_mut(&field("device_code")) else {
                    return answer(400, json!({"error": "expired_token"}));
                };
                if self.slow_downs.load(Ordering::SeqCst) > 0 {
                    self.slow_downs.fetch_sub(1, Ordering::SeqCst);
                    return answer(400, json!({"error": "slow_down"}));
                }
                match left {
                    None => answer(400, json!({"error": "access_denied"})),
                    Some(0) => {
                        devices.remove(&field("device_code"));
                        drop(devices);
                        self.device_logins.fetch_add(1, Ordering::SeqCst);
                        self.issue("person")
                    }
                    Some(n) => {
                        *n -= 1;
                        answer(400, json!({"error": "authorization_pending"}))
                    }
                }
            }
            "refresh_token" => {
                let sent = field("refresh_token");
                let mut refresh = self.refresh.lock().unwrap();
                match refresh.get(&sent) {
                    Some(false) => {
                        refresh.insert(sent.clone(), true);
                        drop(refresh);
                        self.refreshes.fetch_add(1, Ordering::SeqCst);
                        let user = self.users.lock().unwrap().get(&sent).cloned();
                        let user = user.unwrap_or_else(|| "person".into());
                        *self
                            .refreshes_of
                            .lock()
                            .unwrap()
                            .entry(user.clone())
                            .or_default() += 1;
                        let scope = self.granted.lock().unwrap().get(&sent).cloned();
                        let scope = scope.unwrap_or_default();
                        // A refresh renews the ID token: the same person.
                        let sid = self.sids.lock().unwrap().get(&user).cloned();
                        let id_token = sid.filter(|_| has_openid(&scope)).map(|sid| {
                            let url = self.url.lock().unwrap().clone();
                            self.oidc
                                .id_token(&url, &field("client_id"), &user, None, &sid)
                        });
                        self.issue_full(&user, &scope, id_token)
                    }
                    Some(true) => {
                        self.violation("a retired refresh token was sent".into());
                        invalid_grant()
                    }
                    None => invalid_grant(),
                }
            }
            other => {
                self.violation(format!("grant_type {other}"));
                answer(400, json!({"error": "unsupported_grant_type"}))
            }
        }
    }

    fn issue(&self, user: &str) -> Response {
        self.issue_with(user, "")
    }

    /// Tokens for `user`, granted `scope`.
    fn issue_with(&self, user: &str, scope: &str) -> Response {
        self.issue_full(user, scope, None)
    }

    /// Ends `user`'s session here: a logout token for their `sub` and
    /// `sid` posted to the app's back-channel logout route, if one is set.
    /// The route's status.
    pub async fn end_session_of(&self, user: &str) -> Option<u16> {
        let back = self.backchannel_uri.lock().unwrap().clone()?;
        let sid = self.sids.lock().unwrap().remove(user);
        let url = self.url.lock().unwrap().clone();
        let token = self
            .oidc
            .logout_token(&url, WEB_CLIENT, Some(user), sid.as_deref(), None);
        Some(post_logout_token(&back, &token).await)
    }

    /// Tokens for `user`, granted `scope`, with an ID token.
    fn issue_full(&self, user: &str, scope: &str, id_token: Option<String>) -> Response {
        let serial = self.serial.fetch_add(1, Ordering::SeqCst);
        let lifetime = Duration::from_millis(self.lifetime_ms.load(Ordering::SeqCst));
        let access = format!("at-{serial}-{}", random());
        self.access
            .lock()
            .unwrap()
            .insert(access.clone(), Instant::now() + lifetime);
        self.users
            .lock()
            .unwrap()
            .insert(access.clone(), user.to_owned());
        self.granted
            .lock()
            .unwrap()
            .insert(access.clone(), scope.to_owned());
        let mut body = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": lifetime.as_secs_f64(),
        });
        if self.gives_refresh.load(Ordering::SeqCst) {
            let new = format!("rt-{serial}-{}", random());
            self.refresh.lock().unwrap().insert(new.clone(), false);
            self.users
                .lock()
                .unwrap()
                .insert(new.clone(), user.to_owned());
            self.granted
                .lock()
                .unwrap()
                .insert(new.clone(), scope.to_owned());
            body["refresh_token"] = new.into();
        }
        if let Some(id_token) = id_token {
            body["id_token"] = id_token.into();
        }
        answer(200, body)
    }
}

/// Whether `scope` holds `openid`.
fn has_openid(scope: &str) -> bool {
    scope.split(' ').any(|s| s == "openid")
}

/// Posts `token` as a back-channel logout's form to `uri`: its status.
pub async fn post_logout_token(uri: &str, token: &str) -> u16 {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let body = format!(
        "logout_token={}",
        form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>()
    );
    let request = http::Request::post(uri)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    match client.request(request).await {
        Ok(response) => response.status().as_u16(),
        Err(_) => 0,
    }
}

/// The serial of a token this server issued (`at-<serial>-<random>`).
fn serial_of(token: &str) -> Option<u64> {
    token.strip_prefix("at-")?.split('-').next()?.parse().ok()
}

/// The client of a request's `Authorization: Basic` header, if it holds the
/// web app's id and secret, or a registered confidential client's.
fn basic_client<B>(req: &http::Request<B>) -> Option<String> {
    let header = req.headers().get("authorization")?.to_str().ok()?;
    let encoded = header.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    let registered = id.starts_with("registered-") && secret == format!("secret-of-{id}");
    (id == WEB_CLIENT && secret == WEB_SECRET || registered).then(|| id.to_owned())
}

/// A client's request: its form, the client its Basic header names, and
/// its DPoP proof.
async fn client_form(
    req: http::Request<hyper::body::Incoming>,
) -> (HashMap<String, String>, Option<String>, Option<String>) {
    let client = basic_client(&req);
    let proof = req
        .headers()
        .get("dpop")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (form(req).await, client, proof)
}

async fn form(req: http::Request<hyper::body::Incoming>) -> HashMap<String, String> {
    let body = req.into_body().collect().await.unwrap().to_bytes();
    form_urlencoded::parse(&body).into_owned().collect()
}
