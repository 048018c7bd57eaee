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

#[path = "../tests/support/mcp_server.rs"]
mod mcp_server;

use std::error::Error;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;
use tower_oauth::{Algorithm, ClientAuth, OAuthLayer, SigningKey};

type BoxError = Box<dyn Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
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
    let sum = call_sum(&client, 2, 3).await?;
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
    let after = call_sum(&client, 40, 2).await?;
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

/// Calls the `sum` tool and returns its text.
async fn call_sum(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    a: i64,
    b: i64,
) -> Result<String, BoxError> {
    let arguments = json!({"a": a, "b": b});
    let params = CallToolRequestParams::new("sum")
        .with_arguments(arguments.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(params).await?;
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .ok_or("the tool answered no text")?;
    Ok(text)
}
