//! Checks a set of credentials: fetches one token and prints what the token
//! endpoint said about it (the token itself redacted), or what went wrong
//! and what to try.
//!
//! ```text
//! # A standard OAuth 2.0 / OpenID Connect server, by its issuer:
//! OAUTH_ISSUER=https://login.example.com/realms/main OAUTH_CLIENT_ID=... OAUTH_CLIENT_SECRET=... \
//!     cargo run --example fetch_token -- --scope "read write" --resource https://api.example.com/
//! # By its token endpoint, choosing the client authentication:
//! cargo run --example fetch_token -- --token-url https://idp.example.com/oauth2/token \
//!     --client-id my-client --client-auth form     # the secret still from OAUTH_CLIENT_SECRET
//! # The product-information API's token endpoint:
//! OAUTH_AUTH_URL=https://auth.example.com OAUTH_CLIENT_ID=... OAUTH_CLIENT_SECRET=... \
//!     cargo run --example fetch_token
//! cargo run --example fetch_token            # no configuration: a demonstration
//! # Diagnosis: every client authentication the server offers, without and
//! # with a scope, and what to set (no other argument: against an embedded server):
//! cargo run --example fetch_token -- --diagnose --issuer https://login.example.com \
//!     --client-id my-client                   # the secret from OAUTH_CLIENT_SECRET
//! # An API that names its server (RFC 9728, an MCP server): what it names,
//! # whether the credential would go there and why, then one token:
//! cargo run --example fetch_token -- --diagnose --resource-url https://mcp.example.com/mcp \
//!     --client-id my-client --private-key client-key.pem [--trusted-issuer https://login.example.com]
//! # private_key_jwt (RFC 7523), the key from a PEM file:
//! cargo run --example fetch_token -- --issuer https://login.example.com \
//!     --client-id my-client --private-key client-key.pem --key-alg ES256 --key-id key-1
//! # A refresh token (RFC 6749 section 6) of a login made elsewhere, the chain
//! # kept in a file between runs (a rotating server retires the one given):
//! OAUTH_REFRESH_TOKEN=... cargo run --example fetch_token -- --issuer https://login.example.com \
//!     --client-id my-cli --store-file ~/.config/my-cli/tokens
//! # A person's login in the browser (or --device for the device grant), the
//! # login kept in a file, so that the next run refreshes instead:
//! cargo run --example fetch_token -- --login --resource-url https://mcp.example.com/mcp \
//!     --client-id my-cli --store-file ~/.config/my-cli/tokens
//! # Mutual TLS (RFC 8705, tls_client_auth):
//! cargo run --example fetch_token -- --token-url https://mtls.example.com/token \
//!     --client-id my-client --client-auth tls_client_auth \
//!     --client-cert client.pem --client-key client-key.pem [--ca-cert private-ca.pem]
//! ```
//!
//! Flags `--issuer`, `--token-url`, `--auth-url`, `--client-id`,
//! `--client-secret`, `--client-auth` (`basic`, `form`, `basic-unencoded`,
//! `unencoded`, `client_secret_jwt`, `tls_client_auth`), `--scope` and
//! `--resource` (repeatable) override the
//! `OAUTH_*` variables of the same names (`OAUTH_RESOURCE` takes several,
//! separated by spaces). Prefer the variable for the secret: command lines
//! are visible to other users of the machine. `--private-key` (a PEM file;
//! with `--key-alg`, default ES256, and `--key-id`) chooses
//! `private_key_jwt`; `--client-cert` and `--client-key`
//! (PEM files; `--ca-cert` for a private CA) present a client certificate.
//! `--refresh-token` (or `OAUTH_REFRESH_TOKEN`, better: command lines are
//! visible) refreshes with a login's refresh token; `--store-file` keeps the
//! tokens and the refresh token's chain in a `FileStore`, so that the next
//! run goes on from a refresh token the server rotated. `--login` signs a
//! person in with the browser (whose address, where the browser runs on
//! another machine, the person pastes at the terminal), `--device` with the
//! device grant; with
//! `--store-file` the next run finds the login there. `--help` lists every
//! flag.
//!
//! Without configuration it runs against an embedded token endpoint on
//! 127.0.0.1: one success, then each failure kind with its explanation, then
//! discovery by issuer.

#[path = "../../tests/support/authority.rs"]
mod authority;
mod diagnose;
mod resource;

use std::time::{Duration, SystemTime};

use tower::BoxError;
use tower_oauth::{
    client_auth::ClientAuth, AccessToken, ConfigError, ConfigErrorKind, OAuthLayer,
    OAuthLayerBuilder, TokenError, TokenErrorKind,
};

const FLAGS: [&str; 18] = [
    "--refresh-token",
    "--store-file",
    "--resource-url",
    "--trusted-issuer",
    "--private-key",
    "--key-alg",
    "--key-id",
    "--client-cert",
    "--client-key",
    "--ca-cert",
    "--issuer",
    "--token-url",
    "--auth-url",
    "--client-id",
    "--client-secret",
    "--client-auth",
    "--scope",
    "--resource",
];

/// The flags that take no value.
const SWITCHES: [&str; 4] = ["--diagnose", "--login", "--device", "--help"];

/// What `--help` prints.
const HELP: &str = "fetch_token: fetches one token and says what the server said, or why not.

Where the token comes from (or the OAUTH_* variable of the same name):
  --issuer URL           a standard server, by its issuer (RFC 8414 discovery)
  --token-url URL        a token endpoint
  --auth-url URL         the product-information API's token endpoint
  --resource-url URL     an API that names its server (RFC 9728, an MCP server)
  --trusted-issuer URL   a server --resource-url may name (repeatable)
The client:
  --client-id ID         the client id
  --client-secret S      its secret (prefer OAUTH_CLIENT_SECRET: command lines are visible)
  --client-auth M        basic, form, basic-unencoded, unencoded, client_secret_jwt, tls_client_auth
  --private-key PEM      private_key_jwt with this key (--key-alg, default ES256; --key-id)
  --client-cert PEM      mutual TLS with this certificate (--client-key PEM, --ca-cert PEM)
What the token is for:
  --scope \"A B\"          the scopes
  --resource URL         a resource (RFC 8707; repeatable)
A person's login, and refresh tokens:
  --login                sign a person in with the browser (authorization code, PKCE);
                         a browser elsewhere: paste the address it ended on
  --device               sign a person in with the device grant (RFC 8628)
  --refresh-token T      refresh with a login made elsewhere (prefer OAUTH_REFRESH_TOKEN)
  --store-file PATH      keep tokens and the login between runs (a FileStore)
Other:
  --diagnose             try every client authentication the server offers, and say what to set
  --help                 this text
Without any flag or variable, it runs against an embedded server.";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{HELP}");
        return Ok(());
    }
    let diagnosing = args.iter().any(|a| a == "--diagnose");
    let login = if args.iter().any(|a| a == "--device") {
        Some(tower_oauth::login::Login::device(|prompt| {
            eprintln!(
                "To sign in, open {} and enter the code {}",
                prompt.verification_uri(),
                prompt.user_code()
            );
            if let Some(complete) = prompt.verification_uri_complete() {
                eprintln!("(or open {complete}, which carries the code)");
            }
            eprintln!(
                "Waiting for the sign-in (the code lasts {} s) ...",
                prompt.expires_in().as_secs()
            );
        }))
    } else if args.iter().any(|a| a == "--login") {
        // A browser on another machine (over SSH, in a container) cannot
        // come back to the listener: its address, pasted, serves instead.
        Some(tower_oauth::login::Login::browser().paste_from_stdin())
    } else {
        None
    };
    let args: Vec<String> = args
        .into_iter()
        .filter(|a| !SWITCHES.contains(&a.as_str()))
        .collect();
    let configured = !args.is_empty()
        || [
            "OAUTH_ISSUER",
            "OAUTH_AUTH_URL",
            "OAUTH_TOKEN_URL",
            "OAUTH_CLIENT_ID",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !configured {
        return if diagnosing {
            diagnose::demonstration().await
        } else {
            demonstration().await
        };
    }
    let settings = match from_args(&args) {
        Ok(settings) => settings,
        Err(problem) => {
            eprintln!("command line problem: {problem}");
            std::process::exit(2);
        }
    };
    if diagnosing && settings.resource_url.is_some() {
        if !resource::run(settings).await {
            std::process::exit(1);
        }
        return Ok(());
    }
    if diagnosing {
        if !diagnose::run(settings).await {
            std::process::exit(1);
        }
        return Ok(());
    }
    let mut builder = settings.builder;
    if let Some(scope) = settings.scope {
        builder = builder.scope(scope);
    }
    if let Some(login) = login {
        builder = builder.login(login);
    }
    let oauth = match builder.build() {
        Ok(oauth) => oauth,
        Err(e) => {
            // A sentence and a hint, not a debug dump.
            eprintln!("configuration problem: {}", e.message());
            eprintln!("hint: {}", config_hint(&e));
            std::process::exit(2);
        }
    };
    let worked = check(&oauth).await;
    rotation_note(&settings.rotated, settings.store_file.as_deref());
    if !worked {
        std::process::exit(1);
    }
    Ok(())
}

/// What became of a refresh token the server rotated (never the token).
pub fn rotation_note(rotated: &std::sync::atomic::AtomicBool, store_file: Option<&str>) {
    if !rotated.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    match store_file {
        Some(path) => println!(
            "  refresh token:    rotated by the server; the new one is kept (sealed) in {path}: \
             run again with the same refresh token and --store-file to go on from it"
        ),
        None => println!(
            "  refresh token:    rotated by the server: the one given is retired now, and the new \
             one was not kept (give --store-file to keep the chain between runs)"
        ),
    }
}

/// What to do about a configuration problem.
fn config_hint(e: &ConfigError) -> &'static str {
    match e.kind() {
        ConfigErrorKind::MissingUrl | ConfigErrorKind::Conflicting => {
            "give one of --issuer / OAUTH_ISSUER (a standard server: its issuer URL), \
             --token-url / OAUTH_TOKEN_URL (its token endpoint), or --auth-url / OAUTH_AUTH_URL \
             (the product-information API's token endpoint)"
        }
        ConfigErrorKind::MissingClientId | ConfigErrorKind::MissingClientSecret => {
            "set OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET (or --client-id and --client-secret)"
        }
        ConfigErrorKind::InvalidClientId
        | ConfigErrorKind::InvalidClientSecret
        | ConfigErrorKind::InvalidParameter => {
            "the chosen client authentication cannot carry that value: try --client-auth basic \
             or --client-auth form (the product-information API's unencoded body carries no spaces or `&`)"
        }
        ConfigErrorKind::InvalidKey => {
            "check the PEM files: --private-key wants the private key (PKCS #8, PKCS #1 or SEC 1, \
             not encrypted) and --key-alg its algorithm; --client-cert the certificate chain and \
             --client-key its own key"
        }
        ConfigErrorKind::InvalidUrl | ConfigErrorKind::InsecureUrl => {
            "give an absolute https URL, without user name or password in it"
        }
        _ => "see the crate documentation of OAuthLayerBuilder",
    }
}

/// The `OAUTH_*` environment, overridden by flags; or what is wrong with
/// the command line.
fn from_args(args: &[String]) -> Result<Settings, String> {
    let flags: Vec<(&str, &str)> = args
        .chunks(2)
        .map(|pair| (pair[0].as_str(), pair.get(1).map_or("", String::as_str)))
        .collect();
    if let Some((unknown, _)) = flags.iter().find(|(name, _)| !FLAGS.contains(name)) {
        return Err(format!(
            "unknown flag {unknown} (known: {}, {}); --help says what each does",
            FLAGS.join(", "),
            SWITCHES.join(", ")
        ));
    }
    let flag = |name: &str| {
        flags
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    };
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let either = |f: &str, v: &str| flag(f).or_else(|| var(v));
    let mut b = OAuthLayer::builder();
    let issuer = either("--issuer", "OAUTH_ISSUER");
    if let Some(issuer) = &issuer {
        b = b.issuer(issuer);
    }
    let resource_url = flag("--resource-url");
    if let Some(url) = &resource_url {
        b = b.protected_resource(url);
    }
    let trusted: Vec<String> = flags
        .iter()
        .filter(|(n, _)| *n == "--trusted-issuer")
        .map(|(_, v)| v.to_string())
        .collect();
    if !trusted.is_empty() {
        b = b.trusted_issuers(&trusted);
    }
    if let Some(url) = either("--token-url", "OAUTH_TOKEN_URL") {
        b = b.token_url(url);
    }
    if let Some(url) = either("--auth-url", "OAUTH_AUTH_URL") {
        b = b.auth_url(url);
    }
    if let Some(id) = either("--client-id", "OAUTH_CLIENT_ID") {
        b = b.client_id(id);
    }
    if let Some(secret) = either("--client-secret", "OAUTH_CLIENT_SECRET") {
        b = b.client_secret(secret);
    }
    let rotated = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let refresh = either("--refresh-token", "OAUTH_REFRESH_TOKEN").map(|token| {
        let seen = std::sync::Arc::clone(&rotated);
        tower_oauth::grant::RefreshToken::new(token)
            .on_rotation(move |_| seen.store(true, std::sync::atomic::Ordering::SeqCst))
    });
    if let Some(refresh) = refresh {
        b = b.refresh_token(refresh);
    }
    let store_file = flag("--store-file");
    if let Some(path) = &store_file {
        let store = tower_oauth::store::FileStore::new(path).map_err(|e| e.message().to_owned())?;
        b = b.token_store(store);
    }
    let mut chosen = None;
    if let Some(auth) = either("--client-auth", "OAUTH_CLIENT_AUTH") {
        let auth: ClientAuth = auth
            .parse()
            .map_err(|e: ConfigError| e.message().to_owned())?;
        chosen = Some(auth.clone());
        b = b.client_auth(auth);
    }
    let scope = either("--scope", "OAUTH_SCOPE");
    let has_secret = either("--client-secret", "OAUTH_CLIENT_SECRET").is_some();
    let has_key = flag("--private-key").is_some() || flag("--client-cert").is_some();
    b = with_keys(b, &flag)?;
    let flagged: Vec<String> = flags
        .iter()
        .filter(|(n, _)| *n == "--resource")
        .map(|(_, v)| v.to_string())
        .collect();
    let resources = if flagged.is_empty() {
        var("OAUTH_RESOURCE")
            .map(|r| r.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    } else {
        flagged
    };
    for resource in resources {
        b = b.resource(resource);
    }
    Ok(Settings {
        builder: b,
        scope,
        chosen,
        has_secret: has_secret && !has_key,
        resource_url,
        issuer,
        trusted,
        rotated,
        store_file,
    })
}

/// What the command line and the environment say: the builder (without the
/// scope), and what a diagnosis varies.
pub struct Settings {
    pub builder: OAuthLayerBuilder,
    pub scope: Option<String>,
    /// The client authentication chosen with `--client-auth`.
    pub chosen: Option<ClientAuth>,
    /// Whether the client proves itself with a secret (not a key or a
    /// certificate).
    pub has_secret: bool,
    /// `--resource-url`: the API to diagnose (RFC 9728).
    pub resource_url: Option<String>,
    /// The issuer set, and the `--trusted-issuer`s.
    pub issuer: Option<String>,
    pub trusted: Vec<String>,
    /// Set when the server rotated the refresh token given.
    pub rotated: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// `--store-file`: where the chain is kept between runs.
    pub store_file: Option<String>,
}

/// Reads a file a flag names.
fn read_file(flag: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{flag} {path}: {e}"))
}

/// The key-based settings: `--private-key` and the client certificate.
fn with_keys(
    mut b: OAuthLayerBuilder,
    flag: &dyn Fn(&str) -> Option<String>,
) -> Result<OAuthLayerBuilder, String> {
    if let Some(path) = flag("--private-key") {
        {
            let algorithm: tower_oauth::client_auth::Algorithm = flag("--key-alg")
                .unwrap_or_else(|| "ES256".into())
                .parse()
                .map_err(|e: ConfigError| e.message().to_owned())?;
            let mut key = tower_oauth::client_auth::SigningKey::from_pem(
                read_file("--private-key", &path)?,
                algorithm,
            )
            .map_err(|e| format!("--private-key {path}: {}", e.message()))?;
            if let Some(kid) = flag("--key-id") {
                key = key.key_id(kid);
            }
            b = b.client_auth(ClientAuth::PrivateKeyJwt(key));
        }
    }
    if let (Some(cert), Some(key)) = (flag("--client-cert"), flag("--client-key")) {
        {
            b = b.client_identity(
                read_file("--client-cert", &cert)?,
                read_file("--client-key", &key)?,
            );
            if let Some(ca) = flag("--ca-cert") {
                b = b.root_certificates(read_file("--ca-cert", &ca)?);
            }
        }
    } else if flag("--client-cert").is_some() || flag("--client-key").is_some() {
        return Err("give --client-cert and --client-key together".into());
    }
    Ok(b)
}

/// Fetches one token with `oauth` and prints the outcome; whether it worked.
async fn check(oauth: &OAuthLayer) -> bool {
    if let Some(url) = oauth.token_url() {
        println!("token endpoint: {url}");
    }
    if let Some(issuer) = oauth.issuer() {
        println!("issuer: {issuer}");
    }
    let outcome = oauth.token().await;
    if let Some(found) = oauth.server_metadata() {
        println!("  discovered at:    {}", found.metadata_url);
        println!("  token endpoint:   {}", found.token_endpoint);
        let listed = if found.auth_methods.is_empty() {
            "(none listed: client_secret_basic)".to_owned()
        } else {
            found.auth_methods.join(", ")
        };
        println!("  auth methods:     {listed}");
        println!("  client auth used: {:?}", found.client_auth);
    }
    match outcome {
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
        None => println!(
            "  lifetime:         no expires_in; {}s used (a JWT's exp, else 60 minutes)",
            token.lifetime().as_secs()
        ),
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
        (TokenErrorKind::Status, Some(400 | 401 | 403)) => refusal_hint(e),
        (TokenErrorKind::Status, Some(429)) => {
            "rate-limited: wait (the endpoint's Retry-After, if any, is in the error) before trying again"
        }
        (TokenErrorKind::Status, Some(300..=399)) => {
            "the URL redirects; redirects are never followed with a secret: use the final URL"
        }
        (TokenErrorKind::Status, Some(404 | 405)) => {
            "no token endpoint at that URL: for a standard server give its issuer (--issuer) or its \
             token_endpoint (--token-url); --auth-url appends /v1/oauth/accesstoken"
        }
        (TokenErrorKind::Status, _) => "the endpoint is failing: try again later",
        (TokenErrorKind::Transport, _) => {
            "endpoint unreachable: check the URL's host and port, DNS, proxies and firewalls"
        }
        (TokenErrorKind::Timeout, _) => "no complete answer in time: the endpoint or the network is slow",
        (TokenErrorKind::LoginRequired, _) => {
            "the refresh token was refused (expired, revoked, or used before): log in again and \
             give the new refresh token"
        }
        (TokenErrorKind::LoginFailed, _) => {
            "the sign-in did not complete: run again to sign in anew (with --device where no \
             browser can open)"
        }
        (TokenErrorKind::InvalidResponse, _) => {
            "the answer is not a token response (not JSON, or a proxy's page): check that the URL \
             is the token endpoint itself"
        }
        _ => "unexpected failure",
    };
    println!("  hint:   {hint}");
}

/// What a refusal (400, 401, 403) says, and what it does not: by the
/// endpoint's error code when it sent one (RFC 6749 section 5.2), else
/// honestly unknown.
pub fn refusal_hint(e: &TokenError) -> &'static str {
    match e.error_code() {
        Some("invalid_client") => {
            "the endpoint did not accept the client's credentials: check the client id and \
             secret, and the client authentication it expects (--client-auth basic, form or \
             basic-unencoded)"
        }
        Some("invalid_scope") => {
            "the credentials were accepted but the scope was not: give a scope the server \
             grants this client (--scope), or none"
        }
        Some("unauthorized_client") => {
            "the client is known but may not use the client-credentials grant: enable it for \
             this client on the server"
        }
        Some("invalid_request") => {
            "the request lacks something the server requires or has something it refuses: \
             some servers require a scope (--scope), an audience or a resource (--resource)"
        }
        Some("invalid_grant" | "unsupported_grant_type") => {
            "the server does not offer the client-credentials grant at this endpoint, or not to \
             this client"
        }
        Some(_) => "the endpoint refused the request: its error code and text above say why",
        None => {
            "the endpoint refused without saying why (no error code): the credentials, the \
             client authentication (--client-auth), or a parameter it requires (some servers \
             refuse a request without --scope this way) may be the cause; this answer alone \
             does not tell which: try with a scope the server lists, and the other client \
             authentications"
        }
    }
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

    println!("\n6. refused with no reason given (403, empty body)");
    authority.push_faults([authority::Fault {
        status: 403,
        body: String::new(),
        headers: Vec::new(),
    }]);
    outcomes.push(!check(&base().build()?).await);

    println!("\n7. a standard server, found by its issuer (form-encoded client secret)");
    let issuer = format!("{}/realms/demo", authority.base_url());
    authority.publish(
        "/realms/demo/.well-known/openid-configuration",
        format!(
            r#"{{"issuer":"{issuer}","token_endpoint":"{}{}","token_endpoint_auth_methods_supported":["client_secret_post"]}}"#,
            authority.base_url(),
            authority::TOKEN_PATH
        ),
    );
    authority.expect(authority::Style::Form, &[("scope", "read write")]);
    let by_issuer = OAuthLayer::builder()
        .issuer(&issuer)
        .client_id("demo-client")
        .client_secret("demo-secret")
        .scope("read write")
        .build()?;
    outcomes.push(check(&by_issuer).await);

    if outcomes.iter().all(|ok| *ok) {
        Ok(())
    } else {
        Err("the demonstration did not go as expected".into())
    }
}
