//! The `mcp` adapter with rmcp's own client and server (Streamable HTTP, in
//! axum) on 127.0.0.1: configured with the MCP server's URL, a client id and
//! a private key; the token asked for the server (`resource`), checked by
//! the authorization server with jsonwebtoken; a refused token dropped and
//! the call made once more; a server that refuses every token answered
//! with its refusal, not a loop.
#![cfg(feature = "mcp")]

mod support;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use support::mcp_server::{McpServers, CLIENT_ID, SCOPE};
use tower_oauth::{Algorithm, ClientAuth, OAuthLayer, SigningKey};

type Client = RunningService<RoleClient, ClientConfig>;

async fn start() -> (McpServers, OAuthLayer, Client) {
    start_with(&[]).await
}

/// The servers, a layer that may add `step_up` scopes, and a client.
async fn start_with(step_up: &[&str]) -> (McpServers, OAuthLayer, Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let key = rcgen::KeyPair::generate().unwrap();
    let servers = McpServers::start(&key.public_key_pem()).await;
    let oauth = OAuthLayer::builder()
        .protected_resource(servers.mcp_url())
        .client_id(CLIENT_ID)
        .client_auth(ClientAuth::PrivateKeyJwt(
            SigningKey::from_pem(key.serialize_pem(), Algorithm::Es256).unwrap(),
        ))
        .step_up_scopes(step_up)
        .build()
        .unwrap();
    let mut config = StreamableHttpClientTransportConfig::with_uri(servers.mcp_url());
    // rmcp's own bearer setting is replaced by the layer's token.
    config.auth_header = Some("not-a-token".into());
    let transport = StreamableHttpClientTransport::with_client(
        oauth.mcp_client(reqwest::Client::new()),
        config,
    );
    let client = ClientConfig::default().serve(transport).await.unwrap();
    (servers, oauth, client)
}

async fn sum(client: &Client, a: i64, b: i64) -> Result<String, rmcp::ServiceError> {
    let arguments = serde_json::json!({"a": a, "b": b});
    let params =
        CallToolRequestParams::new("sum").with_arguments(arguments.as_object().cloned().unwrap());
    let result = client.call_tool(params).await?;
    Ok(result.content[0].as_text().unwrap().text.clone())
}

#[tokio::test]
async fn a_tool_is_called_with_a_token_for_the_server_from_its_url_alone() {
    let (servers, oauth, client) = start().await;
    assert_eq!(sum(&client, 2, 3).await.unwrap(), "5");
    assert_eq!(sum(&client, 4, 5).await.unwrap(), "9");
    assert_eq!(servers.refusals(), Vec::<String>::new());
    assert_eq!(servers.issued(), 1, "one token for every call");
    assert_eq!(servers.api_refusals(), 0);
    let form = &servers.forms()[0];
    assert_eq!(form["resource"], servers.mcp_url());
    assert_eq!(form["scope"], SCOPE);
    let metadata = oauth.resource_metadata().unwrap();
    assert_eq!(metadata.resource, servers.mcp_url());
    assert_eq!(metadata.issuer, servers.issuer());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_refused_token_is_dropped_and_the_call_made_once_more() {
    let (servers, _oauth, client) = start().await;
    assert_eq!(sum(&client, 1, 1).await.unwrap(), "2");
    servers.revoke_all();
    assert_eq!(sum(&client, 20, 22).await.unwrap(), "42");
    assert_eq!(servers.issued(), 2);
    assert_eq!(servers.api_refusals(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_server_that_refuses_every_token_gets_one_more_try_not_a_loop() {
    let (servers, _oauth, client) = start().await;
    assert_eq!(sum(&client, 1, 1).await.unwrap(), "2");
    servers.refuse_all(true);
    let refusals = servers.api_refusals();
    let e = sum(&client, 1, 2).await.unwrap_err();
    assert!(e.to_string().to_lowercase().contains("auth"), "{e}");
    assert_eq!(
        servers.api_refusals() - refusals,
        2,
        "the call and one more"
    );
    assert!(servers.issued() <= 2, "{} token requests", servers.issued());
}

#[tokio::test]
async fn a_tool_that_needs_more_scope_gets_it_when_the_layer_may_add_it() {
    let (servers, _oauth, client) = start_with(&["tools:admin"]).await;
    assert_eq!(sum(&client, 1, 1).await.unwrap(), "2");
    servers.require_scope("tools:admin");
    assert_eq!(sum(&client, 2, 2).await.unwrap(), "4");
    let scopes: Vec<String> = servers.forms().iter().map(|f| f["scope"].clone()).collect();
    assert_eq!(scopes, ["tools:call", "tools:call tools:admin"]);
    assert_eq!(
        servers.api_refusals(),
        1,
        "the call once, then with the scope"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_scope_the_layer_may_not_add_is_not_asked_for() {
    let (servers, _oauth, client) = start().await;
    assert_eq!(sum(&client, 1, 1).await.unwrap(), "2");
    servers.require_scope("tools:admin");
    let e = sum(&client, 2, 2).await.unwrap_err();
    assert!(e.to_string().to_lowercase().contains("scope"), "{e}");
    assert_eq!(servers.issued(), 1, "no token asked for with tools:admin");
}
