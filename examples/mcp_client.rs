//! An MCP client on rmcp whose calls carry tokens from `tower-oauth`,
//! configured with the MCP server's URL, a client id and a private key only.
//!
//! ```text
//! cargo run --example mcp_client --features mcp
//! ```
//!
//! It starts, on 127.0.0.1, an MCP server (rmcp's Streamable HTTP server in
//! axum, one tool: `sum`) that publishes its protected-resource metadata
//! (RFC 9728) and takes only tokens issued for it, and an authorization
//! server that takes `private_key_jwt`. The client reads the MCP server's
//! metadata, discovers its authorization server, asks for a token with
//! `resource` = the MCP server's URL, and calls the tool. Then the MCP
//! server revokes every token: the next call is refused, the refused token
//! dropped, and the call made once more with a new one. It exits 0 only if
//! every call got its answer.
//!
//! To call a real MCP server instead, set `MCP_SERVER_URL` and the client's
//! credential: `OAUTH_CLIENT_ID` and `OAUTH_PRIVATE_KEY_FILE` (a PEM key
//! registered at the server's authorization server; `OAUTH_KEY_ALG`,
//! default `ES256`), or `OAUTH_CLIENT_SECRET` with `OAUTH_TRUSTED_ISSUERS`
//! (space-separated: a secret goes only to a server you name). It lists the
//! server's tools, and calls `MCP_TOOL` with the JSON object
//! `MCP_TOOL_ARGS` if set; `OAUTH_STEP_UP_SCOPES` (space-separated) lets a
//! tool that answers `insufficient_scope` get more scope.
//!
//! ```text
//! MCP_SERVER_URL=https://mcp.example.com/mcp OAUTH_CLIENT_ID=reporting-agent \
//!   OAUTH_PRIVATE_KEY_FILE=agent-key.pem MCP_TOOL=sum MCP_TOOL_ARGS='{"a":2,"b":3}' \
//!   cargo run --example mcp_client --features mcp
//! ```

#[path = "../tests/support/mcp_server.rs"]
mod mcp_server;

use std::error::Error;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use tower_oauth::{
    client_auth::{Algorithm, ClientAuth, SigningKey},
    OAuthLayer,
};

type BoxError = Box<dyn Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Ok(server_url) = std::env::var("MCP_SERVER_URL") {
        return real_server(&server_url).await;
    }
    // The client's key pair, registered at the authorization server.
    let key = rcgen::KeyPair::generate()?;
    let servers = mcp_server::McpServers::start(&key.public_key_pem()).await;
    let server_url = servers.mcp_url();
    println!("MCP server:           {server_url}");

    // All the client knows: the MCP server's URL, its id and its key.
    let oauth = OAuthLayer::builder()
        .protected_resource(&server_url)
        .client_id(mcp_server::CLIENT_ID)
        .client_auth(ClientAuth::PrivateKeyJwt(SigningKey::from_pem(
            key.serialize_pem(),
            Algorithm::Es256,
        )?))
        .build()?;
    let transport = StreamableHttpClientTransport::with_client(
        oauth.mcp_client(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(server_url.as_str()),
    );
    let client = ClientConfig::default().serve(transport).await?;

    let tools = client.list_tools(None).await?;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    println!("tools:                {names:?}");
    let sum = mcp_server::call_sum(&client, 2, 3).await?;
    println!("sum(2, 3):            {sum}");

    let metadata = oauth.resource_metadata().ok_or("no resource metadata")?;
    println!(
        "authorization server: {} (named by the MCP server)",
        metadata.issuer
    );
    let form = servers.forms().remove(0);
    println!(
        "token request:        resource={} scope={}",
        form["resource"], form["scope"]
    );

    servers.revoke_all();
    let after = mcp_server::call_sum(&client, 40, 2).await?;
    println!("sum(40, 2):           {after} (after a revocation: refused once, new token)");
    println!(
        "token requests:       {} accepted, {} refused; MCP calls refused: {}",
        servers.issued(),
        servers.refusals().len(),
        servers.api_refusals()
    );
    client.cancel().await?;

    if sum != "5" || after != "42" || servers.issued() != 2 || !servers.refusals().is_empty() {
        return Err("the calls did not go as expected".into());
    }
    println!("ok");
    Ok(())
}

/// Lists a real server's tools, and calls `MCP_TOOL` if set.
async fn real_server(server_url: &str) -> Result<(), BoxError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let words = |name: &str| -> Vec<String> {
        var(name)
            .map(|v| v.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut builder = OAuthLayer::builder()
        .protected_resource(server_url)
        .client_id(var("OAUTH_CLIENT_ID").ok_or("set OAUTH_CLIENT_ID")?);
    if let Some(path) = var("OAUTH_PRIVATE_KEY_FILE") {
        let algorithm: Algorithm = var("OAUTH_KEY_ALG").unwrap_or("ES256".into()).parse()?;
        builder = builder.client_auth(ClientAuth::PrivateKeyJwt(SigningKey::from_pem(
            std::fs::read(&path)?,
            algorithm,
        )?));
    } else if let Some(secret) = var("OAUTH_CLIENT_SECRET") {
        builder = builder.client_secret(secret);
    }
    let trusted = words("OAUTH_TRUSTED_ISSUERS");
    if !trusted.is_empty() {
        builder = builder.trusted_issuers(trusted);
    }
    let step_up = words("OAUTH_STEP_UP_SCOPES");
    if !step_up.is_empty() {
        builder = builder.step_up_scopes(step_up);
    }
    let oauth = builder.build()?;
    let transport = StreamableHttpClientTransport::with_client(
        oauth.mcp_client(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(server_url),
    );
    let client = ClientConfig::default().serve(transport).await?;
    if let Some(metadata) = oauth.resource_metadata() {
        println!("authorization server: {}", metadata.issuer);
    }
    let tools = client.list_tools(None).await?;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    println!("tools: {names:?}");
    if let Some(tool) = var("MCP_TOOL") {
        let arguments: serde_json::Value =
            serde_json::from_str(&var("MCP_TOOL_ARGS").unwrap_or("{}".into()))?;
        let params = CallToolRequestParams::new(tool.clone())
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let result = client.call_tool(params).await?;
        for content in &result.content {
            match content.as_text() {
                Some(text) => println!("{tool}: {}", text.text),
                None => println!("{tool}: (content that is not text)"),
            }
        }
    }
    client.cancel().await?;
    Ok(())
}
