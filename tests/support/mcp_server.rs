//! An MCP server and its authorization server on 127.0.0.1, for the `mcp`
//! example and tests. The MCP server is rmcp's own over Streamable HTTP in
//! axum, with one tool (`sum`); it publishes its protected-resource
//! metadata (RFC 9728) and takes only bearer tokens its authorization
//! server issued for it (`resource` = its URL), else `401` with a
//! `WWW-Authenticate` challenge naming its metadata. The authorization
//! server publishes RFC 8414 metadata and takes only `private_key_jwt`
//! (RFC 7523), each assertion checked by jsonwebtoken (signature, `iss`,
//! `sub`, `aud` = its issuer, `exp`, `jti` never reused). For a person's
//! login it also takes the public client `LOGIN_CLIENT_ID`: an
//! authorization endpoint that approves at once, the authorization code
//! with PKCE (S256 checked with RustCrypto's SHA-256) and rotating refresh
//! tokens.
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use http::{header, StatusCode};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use serde_json::{json, Value};
use tokio::net::TcpListener;

pub const CLIENT_ID: &str = "mcp-agent";
pub const SCOPE: &str = "tools:call";
/// The public client a person logs in with.
pub const LOGIN_CLIENT_ID: &str = "mcp-cli";

/// The MCP server's tool.
#[derive(Debug, Clone)]
pub struct Adder {
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, rmcp::serde::Deserialize, schemars::JsonSchema)]
#[serde(crate = "rmcp::serde")]
#[schemars(crate = "rmcp::schemars")]
pub struct SumRequest {
    pub a: i64,
    pub b: i64,
}

#[tool_router]
impl Adder {
    #[tool(description = "The sum of two numbers")]
    fn sum(&self, Parameters(SumRequest { a, b }): Parameters<SumRequest>) -> String {
        (a + b).to_string()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Adder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[derive(Default)]
struct Issuer {
    /// Tokens issued, with the resource and the scope each is for.
    tokens: HashMap<String, (String, String)>,
    jtis: HashSet<String>,
    /// Every accepted token request's form.
    forms: Vec<HashMap<String, String>>,
    refusals: Vec<String>,
    api_refusals: usize,
    api_calls: usize,
    /// Refuse every token.
    refuse_all: bool,
    /// A scope every call's token must have besides `SCOPE`, asked for
    /// with `403 insufficient_scope`.
    requires: Option<String>,
    /// Codes issued: the PKCE challenge, the redirect URI, the scope.
    codes: HashMap<String, (String, String, String)>,
    /// Refresh tokens, and whether each is retired; the scope of each.
    refresh: HashMap<String, (bool, String)>,
    /// Logins (codes exchanged) and refreshes.
    logins: usize,
    refreshes: usize,
}

struct Shared {
    issuer: String,
    mcp_url: String,
    key: DecodingKey,
    state: Mutex<Issuer>,
}

/// The two servers, running until dropped with the runtime.
pub struct McpServers {
    pub auth_addr: SocketAddr,
    pub mcp_addr: SocketAddr,
    shared: Arc<Shared>,
}

impl McpServers {
    /// Starts both; the client's assertions are checked with
    /// `public_key_pem` (SPKI, ES256).
    pub async fn start(public_key_pem: &str) -> McpServers {
        let auth = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (auth_addr, mcp_addr) = (auth.local_addr().unwrap(), mcp.local_addr().unwrap());
        let shared = Arc::new(Shared {
            issuer: format!("http://{auth_addr}"),
            mcp_url: format!("http://{mcp_addr}/mcp"),
            key: DecodingKey::from_ec_pem(public_key_pem.as_bytes()).unwrap(),
            state: Mutex::new(Issuer::default()),
        });
        let auth_app = Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                get(server_metadata),
            )
            .route("/token", post(token))
            .route("/authorize", get(authorize))
            .route("/bc", post(backchannel))
            .with_state(Arc::clone(&shared));
        let service: StreamableHttpService<Adder, LocalSessionManager> = StreamableHttpService::new(
            || {
                Ok(Adder {
                    tool_router: Adder::tool_router(),
                })
            },
            Default::default(),
            StreamableHttpServerConfig::default(),
        );
        let mcp_app = Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&shared),
                check_bearer,
            ))
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(resource_metadata),
            )
            .with_state(Arc::clone(&shared));
        tokio::spawn(async move { axum::serve(auth, auth_app).await.unwrap() });
        tokio::spawn(async move { axum::serve(mcp, mcp_app).await.unwrap() });
        McpServers {
            auth_addr,
            mcp_addr,
            shared,
        }
    }

    /// The MCP server's URL: its resource identifier.
    pub fn mcp_url(&self) -> String {
        self.shared.mcp_url.clone()
    }

    pub fn issuer(&self) -> String {
        self.shared.issuer.clone()
    }

    /// Token requests accepted.
    pub fn issued(&self) -> usize {
        self.shared.state.lock().unwrap().forms.len()
    }

    /// The form of every accepted token request.
    pub fn forms(&self) -> Vec<HashMap<String, String>> {
        self.shared.state.lock().unwrap().forms.clone()
    }

    /// Why token requests were refused.
    pub fn refusals(&self) -> Vec<String> {
        self.shared.state.lock().unwrap().refusals.clone()
    }

    /// Calls the MCP server refused, and took.
    pub fn api_refusals(&self) -> usize {
        self.shared.state.lock().unwrap().api_refusals
    }

    pub fn api_calls(&self) -> usize {
        self.shared.state.lock().unwrap().api_calls
    }

    /// From now on the MCP server refuses every token (or not).
    pub fn refuse_all(&self, on: bool) {
        self.shared.state.lock().unwrap().refuse_all = on;
    }

    /// From now on every call's token must also have `scope`.
    pub fn require_scope(&self, scope: &str) {
        self.shared.state.lock().unwrap().requires = Some(scope.to_owned());
    }

    /// The MCP server takes none of the tokens issued so far.
    pub fn revoke_all(&self) {
        self.shared.state.lock().unwrap().tokens.clear();
    }

    /// Codes exchanged for tokens: logins done.
    pub fn logins(&self) -> usize {
        self.shared.state.lock().unwrap().logins
    }

    /// Refreshes done.
    pub fn refreshes(&self) -> usize {
        self.shared.state.lock().unwrap().refreshes
    }
}

/// The authorization endpoint: approves the login client at once.
async fn authorize(State(shared): State<Arc<Shared>>, uri: http::Uri) -> Response {
    let q: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let field = |name: &str| q.get(name).map(String::as_str);
    let (Some(state), Some(redirect), Some(challenge)) = (
        field("state"),
        field("redirect_uri"),
        field("code_challenge"),
    ) else {
        return (
            StatusCode::BAD_REQUEST,
            "state, redirect_uri and code_challenge",
        )
            .into_response();
    };
    if field("client_id") != Some(LOGIN_CLIENT_ID)
        || field("code_challenge_method") != Some("S256")
        || field("resource") != Some(shared.mcp_url.as_str())
    {
        return (StatusCode::BAD_REQUEST, "client_id, S256 and resource").into_response();
    }
    let code = format!("code-{}", random_hex());
    let scope = field("scope").unwrap_or_default().to_owned();
    shared.state.lock().unwrap().codes.insert(
        code.clone(),
        (challenge.to_owned(), redirect.to_owned(), scope),
    );
    let iss: String = form_urlencoded::byte_serialize(shared.issuer.as_bytes()).collect();
    let state: String = form_urlencoded::byte_serialize(state.as_bytes()).collect();
    let location = format!("{redirect}?code={code}&state={state}&iss={iss}");
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

/// A login's token request: the code with its verifier, or a refresh.
fn login_grant(shared: &Shared, form: &HashMap<String, String>) -> Result<String, String> {
    use base64::Engine;
    use sha2::Digest;
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or_default();
    if field("resource") != shared.mcp_url {
        return Err("resource is not the MCP server".into());
    }
    let mut state = shared.state.lock().unwrap();
    let scope = match field("grant_type") {
        "authorization_code" => {
            let (challenge, redirect, scope) =
                state.codes.remove(field("code")).ok_or("unknown code")?;
            let digest = sha2::Sha256::digest(field("code_verifier").as_bytes());
            if base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest) != challenge {
                return Err("the code_verifier does not match".into());
            }
            if redirect != field("redirect_uri") {
                return Err("another redirect_uri".into());
            }
            state.logins += 1;
            scope
        }
        _ => {
            let (retired, scope) = state
                .refresh
                .get(field("refresh_token"))
                .cloned()
                .ok_or("unknown refresh token")?;
            if retired {
                return Err("a retired refresh token".into());
            }
            state
                .refresh
                .insert(field("refresh_token").to_owned(), (true, scope.clone()));
            state.refreshes += 1;
            scope
        }
    };
    let refresh = format!("rt-{}", random_hex());
    state
        .refresh
        .insert(refresh.clone(), (false, scope.clone()));
    Ok(refresh)
}

async fn server_metadata(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "issuer": shared.issuer,
        "token_endpoint": format!("{}/token", shared.issuer),
        "authorization_endpoint": format!("{}/authorize", shared.issuer),
        "token_endpoint_auth_methods_supported": ["private_key_jwt", "none"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
        "grant_types_supported": ["client_credentials", "authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": [SCOPE, "offline_access"],
        "authorization_response_iss_parameter_supported": true,
        "backchannel_authentication_endpoint": format!("{}/bc", shared.issuer),
        "backchannel_token_delivery_modes_supported": ["poll"],
    }))
}

/// A backchannel (CIBA) request: taken, the person asked (nobody here
/// answers; its polls stay pending).
async fn backchannel(Form(form): Form<HashMap<String, String>>) -> Json<Value> {
    let _ = form;
    Json(json!({"auth_req_id": "mcp-ciba-1", "expires_in": 60, "interval": 2}))
}

async fn resource_metadata(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({
        "resource": shared.mcp_url,
        "authorization_servers": [shared.issuer],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
    }))
}

async fn token(
    State(shared): State<Arc<Shared>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if form.get("client_id").map(String::as_str) == Some(LOGIN_CLIENT_ID) {
        return match login_grant(&shared, &form) {
            Ok(refresh) => {
                let token = format!("mcp-{}", random_hex());
                let mut state = shared.state.lock().unwrap();
                let scope = state.refresh[&refresh].1.clone();
                state
                    .tokens
                    .insert(token.clone(), (shared.mcp_url.clone(), scope.clone()));
                state.forms.push(form);
                Json(json!({
                    "access_token": token,
                    "token_type": "Bearer",
                    "expires_in": 3600,
                    "refresh_token": refresh,
                    "scope": scope,
                }))
                .into_response()
            }
            Err(why) => {
                shared.state.lock().unwrap().refusals.push(why.clone());
                let body = json!({"error": "invalid_grant", "error_description": why});
                (StatusCode::BAD_REQUEST, Json(body)).into_response()
            }
        };
    }
    match check_token_request(&shared, &form) {
        Ok(()) => {
            let token = format!("mcp-{}", random_hex());
            let mut state = shared.state.lock().unwrap();
            let scope = form.get("scope").cloned().unwrap_or_default();
            state
                .tokens
                .insert(token.clone(), (form["resource"].clone(), scope.clone()));
            state.forms.push(form);
            Json(json!({
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": 3600,
                "scope": scope,
            }))
            .into_response()
        }
        Err(why) => {
            shared.state.lock().unwrap().refusals.push(why.clone());
            let body = json!({"error": "invalid_client", "error_description": why});
            (StatusCode::UNAUTHORIZED, Json(body)).into_response()
        }
    }
}

fn check_token_request(shared: &Shared, form: &HashMap<String, String>) -> Result<(), String> {
    let field = |name: &str| form.get(name).map(String::as_str);
    if field("grant_type") != Some("client_credentials") {
        return Err("grant_type is not client_credentials".into());
    }
    if field("resource") != Some(shared.mcp_url.as_str()) {
        return Err(format!(
            "resource is {:?}, not the MCP server",
            field("resource")
        ));
    }
    if field("client_assertion_type")
        != Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    {
        return Err("client_assertion_type is not jwt-bearer".into());
    }
    let jwt = field("client_assertion").ok_or("no client_assertion")?;
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&[CLIENT_ID]);
    validation.sub = Some(CLIENT_ID.into());
    validation.set_audience(&[shared.issuer.as_str()]);
    validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
    let claims = jsonwebtoken::decode::<Value>(jwt, &shared.key, &validation)
        .map_err(|e| format!("assertion refused: {e}"))?
        .claims;
    let jti = claims["jti"].as_str().ok_or("no jti")?.to_owned();
    if !shared.state.lock().unwrap().jtis.insert(jti) {
        return Err("jti used before".into());
    }
    Ok(())
}

/// Only tokens issued for this server, else `401` with the challenge.
async fn check_bearer(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let (taken, lacks) = {
        let state = shared.state.lock().unwrap();
        match token.and_then(|token| state.tokens.get(token)) {
            Some((resource, scope)) if !state.refuse_all && *resource == shared.mcp_url => {
                let lacks = state
                    .requires
                    .clone()
                    .filter(|needed| !scope.split(' ').any(|s| s == needed));
                (true, lacks)
            }
            _ => (false, None),
        }
    };
    if let Some(needed) = lacks {
        shared.state.lock().unwrap().api_refusals += 1;
        let challenge = format!(
            r#"Bearer error="insufficient_scope", scope="{SCOPE} {needed}", error_description="more scope""#
        );
        return (
            StatusCode::FORBIDDEN,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    if !taken {
        shared.state.lock().unwrap().api_refusals += 1;
        let metadata = format!(
            "http://{}/.well-known/oauth-protected-resource/mcp",
            shared
                .mcp_url
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap()
        );
        let mut challenge = format!(r#"Bearer resource_metadata="{metadata}", scope="{SCOPE}""#);
        if token.is_some() {
            challenge.push_str(r#", error="invalid_token""#);
        }
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    shared.state.lock().unwrap().api_calls += 1;
    next.run(request).await
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a browser does on an authorization server that approves at once:
/// the authorization URL followed, and the URL it redirected to (not
/// followed) returned, for `Login::user_agent`.
pub fn follow_redirect(
    url: String,
) -> tower_oauth::BoxFuture<'static, Result<String, tower_oauth::BoxError>> {
    Box::pin(async move {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let response = client.get(&url).send().await?;
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .ok_or_else(|| format!("the authorization server answered {}", response.status()))?;
        Ok(location.to_str()?.to_owned())
    })
}

/// Calls the `sum` tool through `client`, and returns its text.
pub async fn call_sum(
    client: &rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    a: i64,
    b: i64,
) -> Result<String, tower_oauth::BoxError> {
    let arguments = json!({"a": a, "b": b});
    let params = rmcp::model::CallToolRequestParams::new("sum")
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(params).await?;
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .ok_or_else(|| "the tool answered no text".into())
}
