//! Quickstart: the layer in a hyper client stack, end to end.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! With no configuration it starts an embedded token endpoint and product API
//! on 127.0.0.1 that issue tokens living 6 seconds, makes requests for about
//! 8 seconds (across two renewals), and prints what happened. It exits 0 only
//! if every request got through.
//!
//! To talk to a real service instead, set `API_URL` (the URL of one
//! protected GET) and the layer's environment (`OAuthLayer::from_env`):
//! `OAUTH_ISSUER` (a standard OAuth 2.0 or OpenID Connect server, found by
//! discovery), `OAUTH_TOKEN_URL` (its token endpoint) or `OAUTH_AUTH_URL`
//! (the product-information API's token endpoint); `OAUTH_CLIENT_ID`, `OAUTH_CLIENT_SECRET`;
//! and optionally `OAUTH_CLIENT_AUTH`, `OAUTH_SCOPE`, `OAUTH_RESOURCE`.
//!
//! ```text
//! OAUTH_ISSUER=https://login.example.com/realms/main OAUTH_CLIENT_ID=... \
//!   OAUTH_CLIENT_SECRET=... OAUTH_SCOPE="orders:read" API_URL=https://api.example.com/orders \
//!   cargo run --example quickstart
//! ```

#[path = "../tests/support/authority.rs"]
mod authority;

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_oauth::{OAuthLayer, TokenError};

type BoxError = Box<dyn Error + Send + Sync>;

/// Any of these asks for a real service.
const VARS: [&str; 6] = [
    "OAUTH_ISSUER",
    "OAUTH_TOKEN_URL",
    "OAUTH_AUTH_URL",
    "OAUTH_CLIENT_ID",
    "OAUTH_CLIENT_SECRET",
    "API_URL",
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    if VARS.iter().any(|v| std::env::var_os(v).is_some()) {
        if let Err(e) = real_service().await {
            eprintln!("quickstart: {e}");
            std::process::exit(1);
        }
        Ok(())
    } else {
        embedded().await
    }
}

/// A hyper-util client that speaks http and https (rustls, webpki roots).
fn hyper_client() -> Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(https)
}

async fn embedded() -> Result<(), BoxError> {
    let lifetime = Duration::from_secs(6);
    let authority =
        authority::Authority::start("quickstart-client", "quickstart-secret", lifetime).await;
    println!(
        "tower-oauth quickstart: token endpoint and product API on {} (tokens live {}s)\n",
        authority.addr,
        lifetime.as_secs()
    );

    // The whole integration: one layer in the client stack.
    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id("quickstart-client")
        .client_secret("quickstart-secret")
        .build()?;

    // Which token each request carried (numbered, never printed), seen just
    // below the layer.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = Arc::clone(&seen);
    let client = ServiceBuilder::new()
        .layer(oauth)
        .map_request(move |req: http::Request<Full<Bytes>>| {
            if let Some(v) = req.headers().get(http::header::AUTHORIZATION) {
                record
                    .lock()
                    .unwrap()
                    .push(v.to_str().unwrap_or("").to_owned());
            }
            req
        })
        .service(hyper_client());

    let start = Instant::now();
    let mut tokens: Vec<(String, Instant, usize)> = Vec::new();
    let (mut ok, mut refused, mut failed) = (0, 0, 0);
    let mut slowest = Duration::ZERO;
    let mut n = 0;
    while start.elapsed() < Duration::from_secs(8) {
        n += 1;
        let url = authority.api_url(&format!("/products/{n}"));
        let req = http::Request::get(&url).body(Full::default())?;
        let sent = Instant::now();
        let outcome = client.clone().oneshot(req).await;
        if n > 1 {
            slowest = slowest.max(sent.elapsed());
        }
        match outcome {
            Ok(resp) if resp.status().is_success() => ok += 1,
            Ok(resp) => {
                refused += 1;
                println!(
                    "{:>6.2}s  GET /api/products/{n} -> {}",
                    start.elapsed().as_secs_f64(),
                    resp.status()
                );
            }
            Err(e) => {
                failed += 1;
                println!(
                    "{:>6.2}s  GET /api/products/{n} failed: {e}",
                    start.elapsed().as_secs_f64()
                );
            }
        }
        let used = seen.lock().unwrap().last().cloned().unwrap_or_default();
        match tokens.last_mut() {
            Some((t, _, uses)) if *t == used => *uses += 1,
            previous => {
                let at = Instant::now();
                let how = match previous {
                    None => "fetched on the first request".to_owned(),
                    Some((_, since, _)) => {
                        let left = lifetime.saturating_sub(at - *since);
                        format!(
                            "renewed ahead of expiry: token #{} still had {:.1}s to live",
                            tokens.len(),
                            left.as_secs_f64()
                        )
                    }
                };
                println!(
                    "{:>6.2}s  token #{} in use ({how})",
                    (at - start).as_secs_f64(),
                    tokens.len() + 1
                );
                tokens.push((used, at, 1));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    println!();
    for (i, (_, _, uses)) in tokens.iter().enumerate() {
        println!("token #{}: used by {uses} requests", i + 1);
    }
    println!(
        "\n{n} requests: {ok} succeeded, {refused} refused, {failed} failed; \
         {} token requests for {} tokens; slowest request after the first: {:.1} ms",
        authority.token_requests(),
        tokens.len(),
        slowest.as_secs_f64() * 1000.0
    );
    if ok != n || tokens.len() < 3 {
        return Err("the quickstart did not go as expected".into());
    }
    println!("every request carried a valid token.");
    Ok(())
}

async fn real_service() -> Result<(), BoxError> {
    let Some(api) = std::env::var("API_URL").ok().filter(|v| !v.is_empty()) else {
        return Err("set API_URL to the URL of one protected GET of the API".into());
    };
    let oauth = match OAuthLayer::from_env() {
        Ok(oauth) => oauth,
        // A sentence naming the variable, not a debug dump.
        Err(e) => return Err(e.message().into()),
    };
    match (oauth.issuer(), oauth.token_url()) {
        (Some(issuer), _) => println!("tower-oauth quickstart: issuer {issuer}"),
        (None, Some(url)) => println!("tower-oauth quickstart: token endpoint {url}"),
        (None, None) => {}
    }
    let mut client = ServiceBuilder::new()
        .layer(oauth.clone())
        .service(hyper_client());
    for i in 1..=3 {
        let req = http::Request::get(&api).body(Full::default())?;
        let started = Instant::now();
        match client.ready().await?.call(req).await {
            Ok(resp) => {
                let status = resp.status();
                let body = resp.into_body().collect().await?.to_bytes();
                println!(
                    "request {i}: {status}, {} bytes, {:?}",
                    body.len(),
                    started.elapsed()
                );
            }
            Err(e) => match e.downcast_ref::<TokenError>() {
                Some(t) => return Err(format!("no token: {t}").into()),
                None => return Err(format!("request failed: {e}").into()),
            },
        }
        if i == 1 {
            if let Some(found) = oauth.server_metadata() {
                println!(
                    "discovered: token endpoint {}, client authentication {:?}",
                    found.token_endpoint, found.client_auth
                );
            }
        }
    }
    Ok(())
}
