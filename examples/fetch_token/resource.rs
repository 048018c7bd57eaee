//! `--diagnose --resource-url <api>`: reads what the API says of itself,
//! its protected-resource metadata (RFC 9728), at the well-known URL or
//! where its `401` challenge points; prints the authorization servers,
//! scopes and binding it names, and for each server whether this client's
//! credential would be sent there and why; then asks the layer for one
//! token the way a program would.

use std::time::Duration;

use serde_json::Value;
use tower_oauth::{metadata::Challenge, OAuthLayer};

use super::Settings;

/// Diagnoses the API `settings` name; whether a token came.
pub async fn run(settings: Settings) -> bool {
    let Some(url) = settings.resource_url.clone() else {
        return false;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            println!("no HTTP client: {e}");
            return false;
        }
    };
    println!("protected resource: {url}");
    let Some((read_at, doc)) = metadata(&client, &url).await else {
        return false;
    };
    println!("metadata read at:   {read_at}");
    let text = |key: &str| doc.get(key).and_then(Value::as_str).unwrap_or("");
    let list = |key: &str| -> Vec<String> {
        doc.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let flag = |key: &str| doc.get(key).and_then(Value::as_bool).unwrap_or(false);
    let resource = text("resource");
    let identical = resource == url || resource.trim_end_matches('/') == url.trim_end_matches('/');
    println!(
        "resource:           {resource} ({})",
        if identical {
            "the URL given: the layer takes it"
        } else {
            "NOT the URL given: the layer refuses this metadata"
        }
    );
    let servers = list("authorization_servers");
    println!("scopes:             {}", list("scopes_supported").join(" "));
    println!(
        "bearer methods:     {}",
        list("bearer_methods_supported").join(", ")
    );
    println!(
        "binding:            DPoP-bound tokens {}, certificate-bound tokens {}",
        if flag("dpop_bound_access_tokens_required") {
            "required"
        } else {
            "not required"
        },
        if flag("tls_client_certificate_bound_access_tokens") {
            "required"
        } else {
            "not required"
        },
    );
    println!("\nauthorization servers it names, and whether this client's credential goes there:");
    if servers.is_empty() {
        println!("  none: no token can be had for it");
    }
    for (i, server) in servers.iter().enumerate() {
        println!("  {server}: {}", verdict(&settings, server, i == 0));
    }
    println!("\nasking the layer for a token (it applies the same rule):");
    let layer = match settings.builder.clone().build() {
        Ok(layer) => layer,
        Err(e) => {
            println!("  the layer refuses the settings: {}", e.message());
            return false;
        }
    };
    report(&layer).await
}

/// The metadata, from the well-known URL or, failing that, from where the
/// API's `401` challenge points (`resource_metadata`); printed failures.
async fn metadata(client: &reqwest::Client, url: &str) -> Option<(String, Value)> {
    let well_known = well_known(url)?;
    match get_json(client, &well_known).await {
        Ok(doc) => return Some((well_known, doc)),
        Err(e) => println!("no metadata at {well_known}: {e}"),
    }
    let answer = match client.get(url).send().await {
        Ok(answer) => answer,
        Err(e) => {
            println!("the API did not answer: {e}");
            return None;
        }
    };
    let challenges = Challenge::parse(answer.headers());
    let Some(hint) = challenges.iter().find_map(|c| c.param("resource_metadata")) else {
        println!(
            "the API answered {} without a challenge naming its metadata",
            answer.status()
        );
        return None;
    };
    println!("the API's challenge names its metadata: {hint}");
    match get_json(client, hint).await {
        Ok(doc) => Some((hint.to_owned(), doc)),
        Err(e) => {
            println!("no metadata there either: {e}");
            None
        }
    }
}

/// `{origin}/.well-known/oauth-protected-resource{path}`.
fn well_known(url: &str) -> Option<String> {
    let parsed: http::Uri = url.parse().ok()?;
    let path = parsed.path().trim_end_matches('/');
    Some(format!(
        "{}://{}/.well-known/oauth-protected-resource{path}",
        parsed.scheme_str()?,
        parsed.authority()?
    ))
}

async fn get_json(client: &reqwest::Client, url: &str) -> Result<Value, String> {
    let answer = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    let body = answer.bytes().await.map_err(|e| e.to_string())?;
    if body.len() > 256 * 1024 {
        return Err("the document is over 256 KiB".into());
    }
    serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
}

/// Whether the client's credential would go to `server`, and why (the
/// crate's trust rule, in words; see SECURITY.md).
fn verdict(settings: &Settings, server: &str, first: bool) -> String {
    let same = |a: &str| a.trim_end_matches('/') == server.trim_end_matches('/');
    if let Some(issuer) = &settings.issuer {
        return if same(issuer) {
            "yes: it is the issuer you set".into()
        } else {
            format!("no: only the issuer you set ({issuer}) gets it")
        };
    }
    if !settings.trusted.is_empty() {
        return if settings.trusted.iter().any(|t| same(t)) {
            "yes, if no server listed before it is trusted: it is among --trusted-issuer".into()
        } else {
            "no: it is not among --trusted-issuer".into()
        };
    }
    if settings.has_secret {
        return "no: a client secret goes only to a server you name (--issuer or \
                --trusted-issuer); a server the API picked could use it"
            .into();
    }
    if first {
        "yes: the first one listed, and your credential (a private key or a client \
         certificate) proves the client to it alone; an assertion's `aud` is that server"
            .into()
    } else {
        "no: the first server listed is taken".into()
    }
}

/// Asks `layer` for a token and prints what came; whether one did.
async fn report(layer: &OAuthLayer) -> bool {
    let outcome = layer.token().await;
    if let Some(found) = layer.resource_metadata() {
        println!("  server taken: {}", found.issuer);
    }
    if let Some(server) = layer.server_metadata() {
        println!(
            "  token endpoint: {} ({:?})",
            server.token_endpoint, server.client_auth
        );
    }
    match outcome {
        Ok(token) => {
            println!(
                "  token issued: {} s, scope {}",
                token.lifetime().as_secs(),
                token
                    .scope()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("(none said)")
            );
            true
        }
        Err(e) => {
            println!("  no token: {e}");
            false
        }
    }
}
