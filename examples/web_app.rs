//! A web app that calls an API for each of its signed-in people, in axum:
//! `/login` sends the browser to the authorization server, `/callback` finishes
//! the login, `/me` calls the API with that person's own token, and `/logout`
//! signs the person out (the refresh token revoked). One layer serves
//! everyone. Each person's tokens and refresh-token chain are kept apart by
//! [`TokenParams::account`].
//!
//! ```text
//! cargo run --example web_app
//! ```
//!
//! Offline, it starts on 127.0.0.1 an authorization server that approves
//! every login at once, with an API that answers with the person each token
//! was issued for. The example then plays two browsers, Alice's and Bob's, and
//! each signs in, calls `/me` and signs out. It exits 0 only when each saw
//! their own name and a signed-out person's `/me` sent no token.
//!
//! For a real server, the app's confidential client, and an API (the app
//! listens on 127.0.0.1:3000, and its redirect URI is
//! `http://127.0.0.1:3000/callback`):
//!
//! ```text
//! OAUTH_ISSUER=https://login.example.com OAUTH_CLIENT_ID=my-app OAUTH_CLIENT_SECRET=... \
//!   API_URL=https://api.example.com/v1/me cargo run --example web_app
//! ```
//!
//! Here the account is the app's session id. A real app takes its own user
//! id, from its own sign-in.

#[path = "../tests/support/id_tokens.rs"]
mod id_tokens;
#[path = "../tests/support/login_server.rs"]
mod login_server;
#[path = "../tests/support/serve.rs"]
mod serve;

use std::error::Error;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, OAuthService, TokenError, TokenErrorKind, TokenParams};

type BoxError = Box<dyn Error + Send + Sync>;
type ApiClient = OAuthService<Client<HttpConnector, Full<Bytes>>>;

/// The plain hyper client the offline server's helpers use.
fn hyper_client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// What every route shares: the layer and the API client built on it.
#[derive(Clone)]
struct App {
    oauth: OAuthLayer,
    api: ApiClient,
    api_url: String,
    /// Where the authorization server sends the browser back.
    callback: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let offline = std::env::var("OAUTH_ISSUER").is_err();
    let (listener, server) = match offline {
        true => {
            let server =
                login_server::LoginServer::start(std::time::Duration::from_secs(3600)).await;
            (listener, Some(server))
        }
        false => (tokio::net::TcpListener::bind("127.0.0.1:3000").await?, None),
    };
    let base = format!("http://{}", listener.local_addr()?);
    let (oauth, api_url) = match &server {
        Some(server) => (
            OAuthLayer::builder()
                .issuer(server.issuer())
                .client_id(login_server::WEB_CLIENT)
                .client_secret(login_server::WEB_SECRET)
                .scope("read")
                .build()?,
            server.api_url(),
        ),
        None => (OAuthLayer::from_env()?, std::env::var("API_URL")?),
    };
    let api = ServiceBuilder::new()
        .layer(oauth.clone())
        .service(hyper_client());
    let app = App {
        oauth,
        api,
        api_url,
        callback: format!("{base}/callback"),
    };
    let router = Router::new()
        .route("/login", get(login))
        .route("/callback", get(callback))
        .route("/me", get(me))
        .route("/logout", get(logout))
        .with_state(app);
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });
    println!("The web app:          {base}");
    if server.is_none() {
        return Ok(serving.await??);
    }
    for person in ["alice", "bob"] {
        let browser = Browser::new(&base);
        browser.sign_in(person).await?;
        let (status, body) = browser.get("/me").await?;
        println!("{person:>5}'s /me:        {status} {body}");
        if status != 200 || !body.contains(&format!("\"{person}\"")) {
            return Err(format!("{person} did not get their own answer").into());
        }
        let (status, _) = browser.get("/logout").await?;
        let (after, body) = browser.get("/me").await?;
        println!("{person:>5} signed out:   {status}; /me: {after} {body}");
        if after != 401 {
            return Err("a signed-out person's /me still called the API".into());
        }
    }
    let server = server.expect("offline");
    println!(
        "The server saw {} logins, {} refreshes, {} revocations.",
        server.logins(),
        server.refreshes(),
        server.revoked().len()
    );
    if server.revoked() != ["alice", "bob"] {
        return Err("each sign-out revokes its refresh token".into());
    }
    Ok(())
}

/// The app's session: here a cookie that names the account.
fn account(headers: &HeaderMap) -> Option<String> {
    let cookies = headers.get(header::COOKIE)?.to_str().ok()?;
    cookies
        .split(';')
        .find_map(|c| c.trim().strip_prefix("session="))
        .map(str::to_owned)
}

/// `/login?as=NAME`: a session for NAME, and the browser sent to sign in.
async fn login(State(app): State<App>, uri: Uri) -> Response {
    let name = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "as")
        .map(|(_, name)| name.into_owned());
    let Some(name) = name.filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric()))
    else {
        return (StatusCode::BAD_REQUEST, "say who: /login?as=alice").into_response();
    };
    match app.oauth.begin_login(&name, &app.callback).await {
        Ok(url) => (
            [(
                header::SET_COOKIE,
                format!("session={name}; HttpOnly; SameSite=Lax; Path=/"),
            )],
            Redirect::to(&url),
        )
            .into_response(),
        Err(e) => error(&e),
    }
}

/// `/callback`: the login finished for the session's account, and only
/// for it.
async fn callback(State(app): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    let Some(account) = account(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    match app.oauth.finish_login(&account, uri.to_string()).await {
        Ok(_) => Redirect::to("/me").into_response(),
        Err(e) => error(&e),
    }
}

/// `/me`: the API called with the session's account's token.
async fn me(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some(account) = account(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    let mut request = http::Request::get(&app.api_url)
        .body(Full::new(Bytes::new()))
        .expect("a valid URL");
    request
        .extensions_mut()
        .insert(TokenParams::new().account(account));
    match app.api.clone().oneshot(request).await {
        Ok(response) => {
            let status = response.status();
            let body = response.into_body().collect().await;
            let body = body.map(|b| b.to_bytes()).unwrap_or_default();
            (status, body).into_response()
        }
        Err(e) => match e.downcast_ref::<TokenError>() {
            Some(e) => error(e),
            None => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
        },
    }
}

/// `/logout`: the account signed out, its refresh token revoked.
async fn logout(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some(account) = account(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    match app.oauth.sign_out(&account).await {
        Ok(()) => "signed out".into_response(),
        Err(e) => error(&e),
    }
}

/// A token error as the app answers it: a person who must sign in (again)
/// gets 401, anything else 502. The error's text names no account.
fn error(e: &TokenError) -> Response {
    let status = match e.kind() {
        TokenErrorKind::LoginRequired | TokenErrorKind::LoginFailed => StatusCode::UNAUTHORIZED,
        _ => StatusCode::BAD_GATEWAY,
    };
    (status, e.to_string()).into_response()
}

/// A browser of the offline run: it keeps its session cookie, follows the
/// app's redirects, and signs in at the authorization server at once.
struct Browser {
    base: String,
    cookie: std::sync::Mutex<String>,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Browser {
    fn new(base: &str) -> Arc<Browser> {
        Arc::new(Browser {
            base: base.to_owned(),
            cookie: Default::default(),
            client: hyper_client(),
        })
    }

    /// `/login?as=NAME`, the authorization server, `/callback`.
    async fn sign_in(&self, name: &str) -> Result<(), BoxError> {
        let response = self.send(&format!("{}/login?as={name}", self.base)).await?;
        if let Some(cookie) = response.headers().get(header::SET_COOKIE) {
            let cookie = cookie.to_str()?.split(';').next().unwrap_or_default();
            *self.cookie.lock().unwrap() = cookie.to_owned();
        }
        let authorize = location(&response)?;
        // The server's login form would ask who signs in.
        let callback = login_server::LoginServer::sign_in(&authorize, name).await;
        let response = self.send(&callback).await?;
        if location(&response)? != "/me" {
            return Err("the callback did not finish the login".into());
        }
        Ok(())
    }

    async fn get(&self, path: &str) -> Result<(u16, String), BoxError> {
        let response = self.send(&format!("{}{path}", self.base)).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    async fn send(&self, url: &str) -> Result<http::Response<hyper::body::Incoming>, BoxError> {
        let request = http::Request::get(url)
            .header(header::COOKIE, self.cookie.lock().unwrap().clone())
            .body(Full::new(Bytes::new()))?;
        Ok(self.client.request(request).await?)
    }
}

fn location(response: &http::Response<hyper::body::Incoming>) -> Result<String, BoxError> {
    Ok(response
        .headers()
        .get(header::LOCATION)
        .ok_or("no redirect")?
        .to_str()?
        .to_owned())
}
