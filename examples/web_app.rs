//! A web app that signs people in with OpenID Connect and calls an API for
//! each of them, in axum: `/login` sends the browser to the authorization
//! server, `/callback` finishes the login and learns who signed in (the
//! verified ID token's [`Identity`]), `/me` calls the API with that person's
//! own token, `/logout` ends the person's session at the server too
//! (RP-initiated logout), and `/backchannel-logout` takes the server's
//! logout tokens, which sign a person out on every replica. One layer
//! serves everyone. Each browser's tokens are kept apart by its session's
//! account ([`TokenParams::account`]); who it is, by the identity's issuer
//! and subject.
//!
//! ```text
//! cargo run --example web_app
//! ```
//!
//! Offline, it starts on 127.0.0.1 an authorization server that approves
//! every login at once and signs ID tokens, with an API that answers with
//! the person each token was issued for. The example then plays two
//! browsers. Alice signs in, sees her own name, and logs out through the
//! server. Bob signs in, then the server ends his session on its side: its
//! logout token comes to `/backchannel-logout`, and Bob's next `/me` sends
//! no token. It exits 0 only when all of that held.
//!
//! For a real server, the app's confidential client (its redirect URI
//! `http://127.0.0.1:3000/callback`, its back-channel logout URI
//! `http://127.0.0.1:3000/backchannel-logout`, its post-logout redirect URI
//! `http://127.0.0.1:3000/signed-out`) and an API:
//!
//! ```text
//! OAUTH_ISSUER=https://login.example.com OAUTH_CLIENT_ID=my-app OAUTH_CLIENT_SECRET=... \
//!   OAUTH_SCOPE="openid read" API_URL=https://api.example.com/v1/me cargo run --example web_app
//! ```

#[path = "../tests/support/id_tokens.rs"]
mod id_tokens;
#[path = "../tests/support/login_server.rs"]
mod login_server;
#[path = "../tests/support/serve.rs"]
mod serve;

use std::collections::HashMap;
use std::error::Error;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::login::Identity;
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
    base: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let offline = std::env::var("OAUTH_ISSUER").is_err();
    let (listener, server) = match offline {
        true => {
            let server =
                login_server::LoginServer::start(std::time::Duration::from_secs(3600)).await;
            (
                tokio::net::TcpListener::bind("127.0.0.1:0").await?,
                Some(server),
            )
        }
        false => (tokio::net::TcpListener::bind("127.0.0.1:3000").await?, None),
    };
    let base = format!("http://{}", listener.local_addr()?);
    let (oauth, api_url) = match &server {
        Some(server) => {
            server.set_backchannel_uri(&format!("{base}/backchannel-logout"));
            (
                OAuthLayer::builder()
                    .issuer(server.issuer())
                    .client_id(login_server::WEB_CLIENT)
                    .client_secret(login_server::WEB_SECRET)
                    .scope("openid read")
                    .build()?,
                server.api_url(),
            )
        }
        None => (OAuthLayer::from_env()?, std::env::var("API_URL")?),
    };
    let api = ServiceBuilder::new()
        .layer(oauth.clone())
        .service(hyper_client());
    let app = App {
        oauth,
        api,
        api_url,
        base: base.clone(),
    };
    let router = Router::new()
        .route("/login", get(login))
        .route("/callback", get(callback))
        .route("/me", get(me))
        .route("/whoami", get(whoami))
        .route("/logout", get(logout))
        .route("/signed-out", get(|| async { "signed out" }))
        .route("/backchannel-logout", post(backchannel_logout))
        .with_state(app);
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });
    println!("The web app:          {base}");
    let Some(server) = server else {
        return Ok(serving.await??);
    };
    // Alice signs in, sees her own answer, and logs out at the server too.
    let alice = Browser::new(&base);
    let who = alice.sign_in("alice").await?;
    let (status, body) = alice.get("/me").await?;
    println!("alice signed in as   {who}; /me: {status} {body}");
    if status != 200 || !body.contains("\"alice\"") || !who.starts_with("alice ") {
        return Err("alice did not get her own answer".into());
    }
    let back = alice.log_out().await?;
    let (after, _) = alice.get("/me").await?;
    println!("alice logged out:    back at {back}; /me: {after}");
    if after != 401 || !back.ends_with("/signed-out") {
        return Err("alice's logout did not end her session".into());
    }
    // Bob signs in; the server ends his session on its side.
    let bob = Browser::new(&base);
    let who = bob.sign_in("bob").await?;
    let (status, _) = bob.get("/me").await?;
    let told = server.end_session("bob").await;
    let (after, body) = bob.get("/me").await?;
    let (whoami, _) = bob.get("/whoami").await?;
    println!("bob signed in as     {who}; /me: {status}");
    println!(
        "the server ended bob's session (its logout token: HTTP {told:?}); /me: {after} {body}"
    );
    if status != 200 || told != Some(200) || after != 401 || whoami != 401 {
        return Err("a back-channel logout did not sign bob out".into());
    }
    println!(
        "The server saw {} logins, {} revocations, {} end-session requests.",
        server.logins(),
        server.revoked().len(),
        server.state.end_sessions.lock().unwrap().len()
    );
    Ok(())
}

/// The app's session: here a cookie with a random id, which is the
/// account the session's tokens are kept under.
fn session(headers: &HeaderMap) -> Option<String> {
    let cookies = headers.get(header::COOKIE)?.to_str().ok()?;
    cookies
        .split(';')
        .find_map(|c| c.trim().strip_prefix("session="))
        .map(str::to_owned)
}

/// `/login`: a new session, and the browser sent to sign in.
async fn login(State(app): State<App>) -> Response {
    let mut id = [0u8; 16];
    if getrandom::getrandom(&mut id).is_err() {
        return (StatusCode::INTERNAL_SERVER_ERROR, "no randomness").into_response();
    }
    let session: String = id.iter().map(|b| format!("{b:02x}")).collect();
    match app
        .oauth
        .begin_login(&session, format!("{}/callback", app.base))
        .await
    {
        Ok(url) => (
            [(
                header::SET_COOKIE,
                format!("session={session}; HttpOnly; SameSite=Lax; Path=/"),
            )],
            Redirect::to(&url),
        )
            .into_response(),
        Err(e) => error(&e),
    }
}

/// `/callback`: the login finished for the session's account, and only
/// for it; the ID token, verified, says who signed in.
async fn callback(State(app): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    let Some(session) = session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    match app.oauth.finish_login(&session, uri.to_string()).await {
        Ok(Some(identity)) => {
            // A real app finds (or makes) its user by the identity's issuer
            // and subject here, and keeps the session for it.
            println!("  signed in: {}", describe(&identity));
            Redirect::to("/me").into_response()
        }
        Ok(None) => (StatusCode::FORBIDDEN, "the login's scope needs openid").into_response(),
        Err(e) => error(&e),
    }
}

/// `/me`: who signed in, and the API called with their token.
async fn me(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some(session) = session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    let mut request = http::Request::get(&app.api_url)
        .body(Full::new(Bytes::new()))
        .expect("a valid URL");
    request
        .extensions_mut()
        .insert(TokenParams::new().account(&session));
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

/// `/whoami`: who signed in on this session, from the layer (memory, or
/// the token store on another replica).
async fn whoami(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some(session) = session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    let identity = match app.oauth.for_account(&session) {
        Ok(layer) => layer.identity().await,
        Err(e) => return error(&e),
    };
    match identity {
        Some(identity) => describe(&identity).into_response(),
        None => (StatusCode::UNAUTHORIZED, "nobody").into_response(),
    }
}

/// Who an identity is, for a person to read.
fn describe(identity: &Identity) -> String {
    let name = identity.claims().get("name").and_then(|n| n.as_str());
    format!(
        "{} at {} ({})",
        identity.subject(),
        identity.issuer(),
        name.unwrap_or("no name")
    )
}

/// `/logout`: signed out here (the refresh token revoked, on every
/// replica), and the browser sent to end its session at the server.
async fn logout(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some(session) = session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "no session").into_response();
    };
    let back = format!("{}/signed-out", app.base);
    match app.oauth.end_session_url(&session, back).await {
        Ok(url) => Redirect::to(&url).into_response(),
        Err(e) => error(&e),
    }
}

/// `/backchannel-logout`: the server's logout token (a form POST); every
/// account of the person or session it names signed out. 400 for a token
/// that fails a check, as the specification asks.
async fn backchannel_logout(
    State(app): State<App>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let token = form
        .get("logout_token")
        .map(String::as_str)
        .unwrap_or_default();
    match app.oauth.back_channel_logout(token).await {
        Ok(signed_out) => {
            println!("  a back-channel logout signed out {signed_out} account(s)");
            StatusCode::OK.into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
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
    cookie: Mutex<String>,
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

    /// `/login`, the authorization server as `name`, `/callback`: who the
    /// app says signed in.
    async fn sign_in(&self, name: &str) -> Result<String, BoxError> {
        let response = self.send(&format!("{}/login", self.base)).await?;
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
        let (status, who) = self.get("/whoami").await?;
        match status {
            200 => Ok(who),
            _ => Err(format!("/whoami: {status} {who}").into()),
        }
    }

    /// `/logout`, then the server's end-session page: where the browser
    /// came back to.
    async fn log_out(&self) -> Result<String, BoxError> {
        let response = self.send(&format!("{}/logout", self.base)).await?;
        let end_session = location(&response)?;
        let response = self.send(&end_session).await?;
        location(&response)
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
