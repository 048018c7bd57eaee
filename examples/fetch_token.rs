//! Checks a set of credentials: fetches one token and prints what the token
//! endpoint said about it (the token itself redacted), or what went wrong
//! and what to try.
//!
//! ```text
//! OAUTH_AUTH_URL=https://auth.example.com OAUTH_CLIENT_ID=... OAUTH_CLIENT_SECRET=... \
//!     cargo run --example fetch_token
//! cargo run --example fetch_token -- --token-url https://idp.example.com/oauth2/token \
//!     --client-id my-client --scope read     # the secret still from OAUTH_CLIENT_SECRET
//! cargo run --example fetch_token            # no configuration: a demonstration
//! ```
//!
//! Flags: `--auth-url`, `--token-url`, `--client-id`, `--client-secret`,
//! `--scope` override the `OAUTH_*` variables. Prefer the variable for the
//! secret: command lines are visible to other users of the machine.
//!
//! Without configuration it runs against an embedded token endpoint on
//! 127.0.0.1: one success, then each failure kind with its explanation.

#[path = "../tests/support/authority.rs"]
mod authority;

use std::time::{Duration, SystemTime};

use tower::BoxError;
use tower_oauth::{AccessToken, OAuthLayer, OAuthLayerBuilder, TokenError, TokenErrorKind};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let configured = !args.is_empty()
        || ["OAUTH_AUTH_URL", "OAUTH_TOKEN_URL", "OAUTH_CLIENT_ID"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
    if configured {
        let builder = from_args(&args)?;
        let oauth = builder.build()?;
        return match check(&oauth).await {
            true => Ok(()),
            false => Err("no token".into()),
        };
    }
    demonstration().await
}

/// The `OAUTH_*` environment, overridden by flags.
fn from_args(args: &[String]) -> Result<OAuthLayerBuilder, BoxError> {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(unknown) = args.iter().step_by(2).find(|a| {
        ![
            "--auth-url",
            "--token-url",
            "--client-id",
            "--client-secret",
            "--scope",
        ]
        .contains(&a.as_str())
    }) {
        return Err(format!("unknown flag {unknown}").into());
    }
    let mut b = OAuthLayer::builder();
    match (
        flag("--token-url").or_else(|| var("OAUTH_TOKEN_URL")),
        flag("--auth-url").or_else(|| var("OAUTH_AUTH_URL")),
    ) {
        (Some(t), _) => b = b.token_url(t),
        (None, Some(a)) => b = b.auth_url(a),
        (None, None) => {
            return Err(
                "set OAUTH_AUTH_URL or OAUTH_TOKEN_URL (or --auth-url / --token-url)".into(),
            )
        }
    }
    if let Some(id) = flag("--client-id").or_else(|| var("OAUTH_CLIENT_ID")) {
        b = b.client_id(id);
    }
    if let Some(secret) = flag("--client-secret").or_else(|| var("OAUTH_CLIENT_SECRET")) {
        b = b.client_secret(secret);
    }
    if let Some(scope) = flag("--scope").or_else(|| var("OAUTH_SCOPE")) {
        b = b.scope(scope);
    }
    Ok(b)
}

/// Fetches one token with `oauth` and prints the outcome; whether it worked.
async fn check(oauth: &OAuthLayer) -> bool {
    if let Some(url) = oauth.token_url() {
        println!("token endpoint: {url}");
    }
    match oauth.token().await {
        Ok(token) => {
            describe(&token);
            true
        }
        Err(e) => {
            explain(&e);
            false
        }
    }
}

fn describe(token: &AccessToken) {
    let shown = |v: Option<&str>| {
        v.map_or("(not sent)".to_owned(), |v| {
            if v.is_empty() {
                "(empty)".into()
            } else {
                v.to_owned()
            }
        })
    };
    println!("  ok: a token was issued");
    println!(
        "  access token:     [redacted, {} characters]",
        token.expose_token().len()
    );
    println!("  token type:       {}", shown(token.token_type()));
    println!("  application name: {}", shown(token.application_name()));
    println!("  developer e-mail: {}", shown(token.developer_email()));
    println!("  client id:        {}", shown(token.client_id()));
    println!("  scope:            {}", shown(token.scope()));
    match token.expires_in() {
        Some(d) => println!("  lifetime:         {}s", d.as_secs()),
        None => println!("  lifetime:         not sent; 60 minutes assumed"),
    }
    match token.issued_at_time() {
        Some(at) => {
            let skew = SystemTime::now()
                .duration_since(at)
                .or_else(|e| Ok::<_, ()>(e.duration()))
                .unwrap_or_default();
            println!(
                "  issued at:        {} (clocks {:.0}s apart)",
                httpdate::fmt_http_date(at),
                skew.as_secs_f64()
            );
        }
        None => println!("  issued at:        {}", shown(token.issued_at())),
    }
}

/// One line on what went wrong, one on what to try.
fn explain(e: &TokenError) {
    println!("  failed: {e}");
    let status = e.status().map(|s| s.as_u16());
    let hint = match (e.kind(), status) {
        (TokenErrorKind::Status, Some(400 | 401 | 403)) => {
            "the endpoint refused the credentials: check the client id and secret, and whether \
             the endpoint wants them form-encoded or as HTTP Basic (ClientAuth)"
        }
        (TokenErrorKind::Status, Some(429)) => {
            "rate-limited: wait (the endpoint's Retry-After, if any, is in the error) before trying again"
        }
        (TokenErrorKind::Status, Some(300..=399)) => {
            "the URL redirects; redirects are never followed with a secret: use the final URL"
        }
        (TokenErrorKind::Status, Some(404 | 405)) => {
            "no token endpoint at that URL: check the path (auth_url gets /v1/oauth/accesstoken appended; \
             token_url is used as given)"
        }
        (TokenErrorKind::Status, _) => "the endpoint is failing: try again later",
        (TokenErrorKind::Transport, _) => {
            "endpoint unreachable: check the URL's host and port, DNS, proxies and firewalls"
        }
        (TokenErrorKind::Timeout, _) => "no complete answer in time: the endpoint or the network is slow",
        (TokenErrorKind::InvalidResponse, _) => {
            "the answer is not a token response (not JSON, or a proxy's page): check that the URL \
             is the token endpoint itself"
        }
        _ => "unexpected failure",
    };
    println!("  hint:   {hint}");
}

/// No configuration: an embedded endpoint, one success, then each failure.
async fn demonstration() -> Result<(), BoxError> {
    let authority =
        authority::Authority::start("demo-client", "demo-secret", Duration::from_secs(3599)).await;
    println!(
        "no OAUTH_* configuration: demonstrating against an embedded endpoint on {}\n",
        authority.addr
    );
    let base = || {
        OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id("demo-client")
            .client_secret("demo-secret")
            .fetch_timeout(Duration::from_secs(2))
    };
    let mut outcomes = Vec::new();

    println!("1. valid credentials");
    outcomes.push(check(&base().build()?).await);

    println!("\n2. wrong secret");
    outcomes.push(!check(&base().client_secret("wrong").build()?).await);

    println!("\n3. endpoint unreachable");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    outcomes.push(
        !check(
            &base()
                .auth_url(format!("http://127.0.0.1:{closed}"))
                .build()?,
        )
        .await,
    );

    println!("\n4. an answer that is not JSON");
    authority.push_faults([authority::Fault {
        status: 200,
        body: "<html><body>Welcome to the proxy</body></html>".into(),
        headers: vec![("content-type".into(), "text/html".into())],
    }]);
    outcomes.push(!check(&base().build()?).await);

    println!("\n5. rate-limited");
    authority.push_faults([authority::Fault {
        status: 429,
        body: r#"{"fault":{"faultstring":"Spike arrest violation","detail":{"errorcode":"policies.ratelimit.SpikeArrestViolation"}}}"#.into(),
        headers: vec![("retry-after".into(), "30".into())],
    }]);
    outcomes.push(!check(&base().build()?).await);

    if outcomes.iter().all(|ok| *ok) {
        Ok(())
    } else {
        Err("the demonstration did not go as expected".into())
    }
}
