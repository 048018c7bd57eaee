//! `--diagnose`: reads the server's metadata, then tries each client
//! authentication it offers, without a scope and with the scopes it lists
//! (and the one given), and prints what works, and for what fails the
//! server's answer and the setting to change. An `invalid_client` (or an
//! empty 403) alone rarely says which part of a setting is wrong; trying
//! the variants does.

use std::time::Duration;

use tower::BoxError;
use tower_oauth::{client_auth::ClientAuth, metadata::ServerMetadata, OAuthLayer, TokenError};

use super::{authority, refusal_hint, Settings};

/// One token request tried: how, and what came of it.
struct Trial {
    auth: Option<ClientAuth>,
    scope: Option<String>,
    outcome: Result<String, String>,
    /// The hint for a refusal.
    hint: Option<&'static str>,
}

/// Diagnoses the server `settings` name; whether some way works.
pub async fn run(settings: Settings) -> bool {
    let base = settings
        .builder
        .clone()
        .fetch_timeout(Duration::from_secs(10));
    // The metadata, when the server was given by its issuer.
    let metadata = match base.clone().build() {
        Ok(layer) if layer.issuer().is_some() => {
            let _ = layer.token().await;
            match layer.server_metadata() {
                Some(found) => Some(found),
                None => {
                    println!(
                        "no metadata: {}",
                        layer
                            .token()
                            .await
                            .err()
                            .map_or_else(String::new, |e| e.to_string())
                    );
                    return false;
                }
            }
        }
        Ok(_) => None,
        Err(e) => {
            println!("configuration problem: {}", e.message());
            return false;
        }
    };
    if let Some(found) = &metadata {
        print_metadata(found);
    }
    let auths = candidates(&settings, metadata.as_ref());
    let scopes = scopes(settings.scope.as_deref(), metadata.as_ref());
    println!(
        "\ntrying {} client authentication(s) x {} scope choice(s):",
        auths.len(),
        scopes.len()
    );
    let mut trials = Vec::new();
    for auth in &auths {
        for scope in &scopes {
            let mut builder = base.clone();
            if let Some(auth) = auth {
                builder = builder.client_auth(auth.clone());
            }
            if let Some(scope) = scope {
                builder = builder.scope(scope);
            }
            let (outcome, hint) = match builder.build() {
                Err(e) => (Err(format!("cannot be sent: {}", e.message())), None),
                Ok(layer) => match layer.token().await {
                    Ok(token) => (
                        Ok(format!(
                            "token issued (scope {}, {} s)",
                            token
                                .scope()
                                .filter(|s| !s.is_empty())
                                .map_or("not said".into(), |s| format!("`{s}`")),
                            token.lifetime().as_secs()
                        )),
                        None,
                    ),
                    Err(e) => (Err(refusal(&e)), Some(refusal_hint(&e))),
                },
            };
            let trial = Trial {
                auth: auth.clone(),
                scope: scope.clone(),
                outcome,
                hint,
            };
            println!(
                "  {:<40} {:<28} {}",
                auth_name(trial.auth.as_ref()),
                scope_name(trial.scope.as_deref()),
                match &trial.outcome {
                    Ok(what) => format!("ok: {what}"),
                    Err(why) => format!("refused: {why}"),
                }
            );
            trials.push(trial);
        }
    }
    let works = verdict(&trials);
    // The trials share one chain: a rotated refresh token went from each
    // to the next, never sent twice.
    super::rotation_note(&settings.rotated, settings.store_file.as_deref());
    works
}

fn print_metadata(found: &ServerMetadata) {
    let list = |v: &[String], none: &str| {
        if v.is_empty() {
            none.to_owned()
        } else {
            v.join(", ")
        }
    };
    println!("metadata at {}", found.metadata_url);
    println!("  token endpoint:   {}", found.token_endpoint);
    println!(
        "  auth methods:     {}",
        list(&found.auth_methods, "(none listed: client_secret_basic)")
    );
    println!(
        "  scopes:           {}",
        list(&found.scopes_supported, "(none listed)")
    );
    println!(
        "  grant types:      {}",
        list(&found.grant_types, "(none listed)")
    );
    if !found.grant_types.is_empty() && !found.grant_types.iter().any(|g| g == "client_credentials")
    {
        println!("  note: the server does not list client_credentials among its grants");
    }
}

/// The client authentications to try: the one chosen first, then those the
/// server offers for a secret (Basic both encoded and as it is); a key or a
/// certificate is tried as given.
fn candidates(settings: &Settings, metadata: Option<&ServerMetadata>) -> Vec<Option<ClientAuth>> {
    if !settings.has_secret {
        return vec![settings.chosen.clone()];
    }
    let offered = |m: &str| {
        metadata.is_none_or(|found| {
            found.auth_methods.is_empty() && m == "client_secret_basic"
                || found.auth_methods.iter().any(|x| x == m)
        })
    };
    let mut auths: Vec<Option<ClientAuth>> = settings.chosen.iter().cloned().map(Some).collect();
    let mut add = |auth: ClientAuth| {
        if !auths.contains(&Some(auth.clone())) {
            auths.push(Some(auth));
        }
    };
    if offered("client_secret_basic") {
        add(ClientAuth::Basic);
        add(ClientAuth::BasicUnencoded);
    }
    if offered("client_secret_post") {
        add(ClientAuth::FormBody);
    }
    if metadata.is_some() && offered("client_secret_jwt") {
        add(ClientAuth::ClientSecretJwt);
    }
    auths
}

/// The scopes to try: none, the one given, and up to three the server lists
/// (one at a time).
fn scopes(given: Option<&str>, metadata: Option<&ServerMetadata>) -> Vec<Option<String>> {
    let mut scopes = vec![None];
    if let Some(given) = given {
        scopes.push(Some(given.to_owned()));
    }
    for listed in metadata
        .map(|m| m.scopes_supported.clone())
        .unwrap_or_default()
    {
        if scopes.len() >= 5 {
            break;
        }
        if !scopes.contains(&Some(listed.clone())) {
            scopes.push(Some(listed));
        }
    }
    scopes
}

fn refusal(e: &TokenError) -> String {
    match (e.status(), e.error_code()) {
        (Some(_), Some(_)) => e.to_string(),
        (Some(status), None) => format!("HTTP {status}, no error code (an empty or foreign body)"),
        _ => e.to_string(),
    }
}

fn auth_name(auth: Option<&ClientAuth>) -> String {
    match auth {
        None => "as configured".into(),
        Some(ClientAuth::Basic) => "client_secret_basic (encoded)".into(),
        Some(ClientAuth::BasicUnencoded) => "client_secret_basic (as it is)".into(),
        Some(ClientAuth::FormBody) => "client_secret_post".into(),
        Some(ClientAuth::UnencodedBody) => "the product-information API's body".into(),
        Some(other) => format!("{other:?}"),
    }
}

fn scope_name(scope: Option<&str>) -> String {
    scope.map_or("no scope".into(), |s| format!("scope `{s}`"))
}

/// How to ask for `auth` on the command line, in the environment, and in
/// code.
fn setting(auth: Option<&ClientAuth>) -> Option<(&'static str, &'static str)> {
    match auth? {
        ClientAuth::Basic => Some(("basic", "ClientAuth::Basic")),
        ClientAuth::BasicUnencoded => Some(("basic-unencoded", "ClientAuth::BasicUnencoded")),
        ClientAuth::FormBody => Some(("form", "ClientAuth::FormBody")),
        ClientAuth::UnencodedBody => Some(("unencoded", "ClientAuth::UnencodedBody")),
        ClientAuth::ClientSecretJwt => Some(("client_secret_jwt", "ClientAuth::ClientSecretJwt")),
        _ => None,
    }
}

/// Prints what works and what to set, or what the failures say; whether
/// something works.
fn verdict(trials: &[Trial]) -> bool {
    println!();
    if let Some(works) = trials.iter().find(|t| t.outcome.is_ok()) {
        println!(
            "works: {}, {}",
            auth_name(works.auth.as_ref()),
            scope_name(works.scope.as_deref())
        );
        let mut flags = Vec::new();
        let mut code = Vec::new();
        if let Some((flag, variant)) = setting(works.auth.as_ref()) {
            flags.push(format!("--client-auth {flag} (OAUTH_CLIENT_AUTH={flag})"));
            code.push(format!(".client_auth({variant})"));
        }
        if let Some(scope) = &works.scope {
            flags.push(format!("--scope \"{scope}\" (OAUTH_SCOPE=\"{scope}\")"));
            code.push(format!(".scope(\"{scope}\")"));
        }
        if flags.is_empty() {
            println!("set:   nothing more: the configuration as given works");
        } else {
            println!("set:   {}", flags.join(" "));
            println!("       in code: OAuthLayer::builder(){}", code.join(""));
        }
        let unscoped_failed = trials
            .iter()
            .any(|t| t.scope.is_none() && t.auth == works.auth && t.outcome.is_err());
        if works.scope.is_some() && unscoped_failed {
            println!("note:  this server refuses a token request without a scope");
        }
        return true;
    }
    println!("nothing worked. What the server said, and what to change:");
    let mut seen = Vec::new();
    for trial in trials {
        if let (Err(why), Some(hint)) = (&trial.outcome, trial.hint) {
            if !seen.contains(&hint) {
                seen.push(hint);
                println!("  - {why}\n    {hint}");
            }
        }
    }
    false
}

/// `--diagnose` without a server: an embedded one that takes only a
/// form-encoded secret and refuses a request without the scope `read`, as
/// some servers do; the diagnosis must find that.
pub async fn demonstration() -> Result<(), BoxError> {
    let authority =
        authority::Authority::start("demo-client", "demo-secret", Duration::from_secs(3599)).await;
    let issuer = format!("{}/realms/demo", authority.base_url());
    authority.publish(
        "/realms/demo/.well-known/openid-configuration",
        format!(
            r#"{{"issuer":"{issuer}","token_endpoint":"{}{}","token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post"],"scopes_supported":["openid","read"],"grant_types_supported":["client_credentials"]}}"#,
            authority.base_url(),
            authority::TOKEN_PATH
        ),
    );
    authority.expect(authority::Style::Form, &[("scope", "read")]);
    println!("no server given: diagnosing an embedded one at {issuer}\n");
    let settings = Settings {
        builder: OAuthLayer::builder()
            .issuer(&issuer)
            .client_id("demo-client")
            .client_secret("demo-secret"),
        scope: None,
        chosen: None,
        has_secret: true,
        resource_url: None,
        issuer: None,
        trusted: Vec::new(),
        rotated: Default::default(),
        store_file: None,
    };
    if !run(settings).await {
        return Err("the diagnosis did not find the way that works".into());
    }
    // An API that names this server in its RFC 9728 metadata.
    let resource = format!("{}/api", authority.base_url());
    authority.publish(
        "/.well-known/oauth-protected-resource/api",
        format!(
            r#"{{"resource":"{resource}","authorization_servers":["{issuer}"],"scopes_supported":["read"],"bearer_methods_supported":["header"]}}"#
        ),
    );
    authority.expect(
        authority::Style::Basic,
        &[("scope", "read"), ("resource", resource.as_str())],
    );
    println!(
        "
and an API on it that names its server (--resource-url):
"
    );
    let settings = Settings {
        builder: OAuthLayer::builder()
            .protected_resource(&resource)
            .trusted_issuers([&issuer])
            .client_id("demo-client")
            .client_secret("demo-secret"),
        scope: None,
        chosen: None,
        has_secret: true,
        resource_url: Some(resource),
        issuer: None,
        trusted: vec![issuer],
        rotated: Default::default(),
        store_file: None,
    };
    if super::resource::run(settings).await {
        Ok(())
    } else {
        Err("the resource diagnosis found no token".into())
    }
}
