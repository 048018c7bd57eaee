//! An MCP agent that logs a person in: given an MCP server's URL and a client
//! id, it finds the server's authorization server (RFC 9728, RFC 8414), signs
//! the person in (the authorization code with PKCE), keeps the login, and
//! calls a tool with the person's token.
//!
//! ```text
//! cargo run --example mcp_login --features mcp
//! ```
//!
//! Offline, it starts on 127.0.0.1 an MCP server (rmcp's, one tool: `sum`)
//! and its authorization server, which approves every login at once; a user
//! agent of the example's own follows the login's URL, as a browser would.
//! The example checks that one login served several calls, and that the
//! next token came from the login's refresh token, not a second login. It
//! exits 0 only then.
//!
//! For any MCP server, give its URL and the client id registered for this
//! program (a public client). The system browser opens, or with
//! `OAUTH_LOGIN=device` the device grant prompts; `OAUTH_STORE_FILE` keeps the
//! login between runs:
//!
//! ```text
//! MCP_SERVER_URL=https://mcp.example.com/mcp OAUTH_CLIENT_ID=my-agent \
//!   OAUTH_STORE_FILE=$HOME/.config/my-agent/tokens cargo run --example mcp_login --features mcp
//! ```

#[path = "../tests/support/mcp_server.rs"]
mod mcp_server;

use std::error::Error;

use rmcp::model::ClientConfig;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use tower_oauth::{login::Login, store::FileStore, OAuthLayer};

type BoxError = Box<dyn Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Ok(server_url) = std::env::var("MCP_SERVER_URL") {
        return real_server(&server_url).await;
    }
    // The servers' other client signs with a key; this one is a person's.
    let key = rcgen::KeyPair::generate()?;
    let servers = mcp_server::McpServers::start(&key.public_key_pem()).await;
    let server_url = servers.mcp_url();
    println!("MCP server:           {server_url}");

    // All the agent knows: the MCP server's URL and its client id.
    let oauth = OAuthLayer::builder()
        .protected_resource(&server_url)
        .client_id(mcp_server::LOGIN_CLIENT_ID)
        // A browser that approves at once: it follows the URL to the
        // redirect, whose URL (with the code) goes back to the layer.
        .login(Login::user_agent(mcp_server::follow_redirect))
        .build()?;
    let transport = StreamableHttpClientTransport::with_client(
        oauth.mcp_client(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(server_url.as_str()),
    );
    let client = ClientConfig::default().serve(transport).await?;
    let sum = mcp_server::call_sum(&client, 2, 3).await?;
    println!("sum(2, 3):            {sum} (after one login)");
    let again = mcp_server::call_sum(&client, 40, 2).await?;
    println!("sum(40, 2):           {again} (the same login)");
    let metadata = oauth.resource_metadata().ok_or("no resource metadata")?;
    println!(
        "authorization server: {} (named by the MCP server)",
        metadata.issuer
    );

    // The next token comes from the login's refresh token.
    oauth.force_renewal();
    let after = mcp_server::call_sum(&client, 1, 1).await?;
    println!("sum(1, 1):            {after} (a token from the refresh token)");
    println!(
        "logins: {}, refreshes: {}, refused token requests: {}",
        servers.logins(),
        servers.refreshes(),
        servers.refusals().len()
    );
    client.cancel().await?;
    if sum != "5"
        || again != "42"
        || after != "2"
        || servers.logins() != 1
        || servers.refreshes() != 1
    {
        return Err("the calls did not go as expected".into());
    }
    println!("ok");
    Ok(())
}

/// A person's login at a real MCP server, then its tools.
async fn real_server(server_url: &str) -> Result<(), BoxError> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let login = match var("OAUTH_LOGIN").as_deref() {
        Some("device") => Login::device(|prompt| {
            eprintln!(
                "To sign in, open {} and enter the code {}",
                prompt.verification_uri(),
                prompt.user_code()
            );
        }),
        _ => Login::browser(),
    };
    let mut builder = OAuthLayer::builder()
        .protected_resource(server_url)
        .client_id(var("OAUTH_CLIENT_ID").ok_or("set OAUTH_CLIENT_ID")?)
        .login(login);
    if let Some(path) = var("OAUTH_STORE_FILE") {
        builder = builder.token_store(FileStore::new(path)?);
    }
    let oauth = builder.build()?;
    let transport = StreamableHttpClientTransport::with_client(
        oauth.mcp_client(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(server_url),
    );
    let client = ClientConfig::default().serve(transport).await?;
    let tools = client.list_tools(None).await?;
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    println!("signed in; tools: {names:?}");
    client.cancel().await?;
    Ok(())
}
