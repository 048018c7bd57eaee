//! The `mcp` adapter with rmcp's own client and server (Streamable HTTP, in
//! axum) on 127.0.0.1: configured with the MCP server's URL, a client id and
//! a private key; the token asked for the server (`resource`), checked by
//! the authorization server with jsonwebtoken; a refused token dropped and
//! the call made once more; a server that refuses every token answered
//! with its refusal, not a loop.
#![cfg(feature = "mcp")]

use crate::support;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use support::mcp_server::{McpServers, CLIENT_ID, SCOPE};
use tower_oauth::{
    client_auth::{Algorithm, ClientAuth, SigningKey},
    OAuthLayer,
};

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

/// A backchannel login that does not wait, through the MCP client: the
/// call fails at once, and the error rmcp gives holds the layer's
/// `ApprovalPending` (its message naming what the person was asked, its
/// `retry_after` the server's interval), as the adapter's docs say.
#[tokio::test]
async fn an_approval_still_to_come_reaches_the_mcp_caller_as_approval_pending() {
    use tower_oauth::login::{Backchannel, Login};
    use tower_oauth::{TokenError, TokenErrorKind};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let key = rcgen::KeyPair::generate().unwrap();
    let servers = McpServers::start(&key.public_key_pem()).await;
    let ask = Backchannel::login_hint("alice")
        .binding_message("Let the agent add numbers")
        .wait(false);
    let oauth = OAuthLayer::builder()
        .protected_resource(servers.mcp_url())
        .client_id(CLIENT_ID)
        .client_auth(ClientAuth::PrivateKeyJwt(
            SigningKey::from_pem(key.serialize_pem(), Algorithm::Es256).unwrap(),
        ))
        .login(Login::backchannel(ask))
        .build()
        .unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        oauth.mcp_client(reqwest::Client::new()),
        StreamableHttpClientTransportConfig::with_uri(servers.mcp_url()),
    );
    let e = ClientConfig::default()
        .serve(transport)
        .await
        .expect_err("no token yet");
    // Down rmcp's error to the transport's io::Error, and the TokenError in it.
    let rmcp::service::ClientInitializeError::TransportError { error, .. } = &e else {
        panic!("not the transport's error: {e:?}");
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut found = None;
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            found = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<TokenError>());
            break;
        }
        source = error.source();
    }
    let token_error = found.unwrap_or_else(|| panic!("no TokenError in {e:?}"));
    assert_eq!(
        token_error.kind(),
        TokenErrorKind::ApprovalPending,
        "{token_error}"
    );
    assert!(
        token_error
            .to_string()
            .contains("Let the agent add numbers"),
        "{token_error}"
    );
    assert_eq!(
        token_error.retry_after(),
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(
        servers.api_calls(),
        0,
        "nothing reached the MCP server without a token"
    );
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

/// The MCP project's conformance suite (`@modelcontextprotocol/conformance`
/// 0.2.0-alpha.12, installed by `.ci/run` under `tests/servers`) against a
/// client built on `mcp_client`: the client-credentials scenarios of its
/// auth family (`client_secret_basic`, `private_key_jwt`, the
/// enterprise-managed flow, workload identity with the JWT-bearer grant),
/// and a person's login in every scenario that passes (discovery variants,
/// client metadata documents, registration, scopes, `iss`, DPoP), with
/// `Login::user_agent`: the suite's authorization server approves at once.
/// The suite starts its own servers on localhost and runs the client (this
/// test binary, re-entered at `conformance_client`) with the server's URL
/// and a context of credentials.
mod conformance {
    use super::*;
    use std::process::Command;

    const SCENARIOS: &[&str] = &[
        "auth/metadata-default",
        "auth/metadata-var1",
        "auth/metadata-var2",
        "auth/metadata-var3",
        "auth/basic-cimd",
        "auth/scope-from-www-authenticate",
        "auth/scope-from-scopes-supported",
        "auth/scope-step-up",
        "auth/scope-omitted-when-undefined",
        "auth/scope-retry-limit",
        "auth/token-endpoint-auth-none",
        "auth/pre-registration",
        "auth/resource-mismatch",
        "auth/iss-supported-missing",
        "auth/iss-wrong-issuer",
        "auth/iss-unexpected",
        "auth/iss-normalized",
        "auth/metadata-issuer-mismatch",
        "auth/2025-03-26-oauth-metadata-backcompat",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/token-endpoint-auth-basic",
        "auth/token-endpoint-auth-post",
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/authorization-server-migration",
        "auth/iss-supported",
        "auth/iss-not-advertised",
        "auth/client-credentials-jwt",
        "auth/client-credentials-basic",
        "auth/enterprise-managed-authorization",
        "auth/dpop",
        "auth/dpop-nonce",
        "auth/wif-jwt-bearer",
        "tools_call",
    ];

    #[test]
    fn the_suite_passes() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let runner = root.join("tests/servers/conformance.mjs");
        if !root
            .join("tests/servers/node_modules/@modelcontextprotocol/conformance")
            .exists()
        {
            assert!(
                std::env::var_os("TOWER_OAUTH_REQUIRE_THIRD_PARTY").is_none(),
                "the MCP conformance suite is not installed (npm ci --prefix tests/servers)"
            );
            eprintln!("note: skipped, the MCP conformance suite is not installed (see .ci/run)");
            return;
        }
        let client = format!(
            "{} --exact mcp::conformance::conformance_client --nocapture --test-threads=1",
            std::env::current_exe().unwrap().display()
        );
        let results = std::env::temp_dir().join(format!("mcp-conformance-{}", std::process::id()));
        for &scenario in SCENARIOS {
            let output = Command::new("node")
                .arg(&runner)
                .args(["client", "--command", &client, "--scenario", scenario])
                .arg("--output-dir")
                .arg(&results)
                .output()
                .expect("node runs");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(output.status.success(), "{scenario}:\n{text}");
            assert!(!text.contains("FAILURE"), "{scenario}:\n{text}");
            assert!(text.contains("OVERALL: PASSED"), "{scenario}:\n{text}");
        }
    }

    /// The client the suite runs: its scenario and context from the
    /// environment, the server's URL last on the command line.
    #[test]
    fn conformance_client() {
        let Ok(scenario) = std::env::var("MCP_CONFORMANCE_SCENARIO") else {
            return;
        };
        let server = std::env::args().next_back().unwrap();
        let context: serde_json::Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
            .ok()
            .map(|c| serde_json::from_str(&c).unwrap())
            .unwrap_or_default();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = match scenario.as_str() {
                "tools_call" => {
                    let transport = StreamableHttpClientTransport::from_uri(server.as_str());
                    ClientConfig::default().serve(transport).await.unwrap()
                }
                _ => {
                    let oauth = layer(&scenario, &server, &context).await;
                    let transport = StreamableHttpClientTransport::with_client(
                        oauth.mcp_client(reqwest::Client::new()),
                        StreamableHttpClientTransportConfig::with_uri(server.as_str()),
                    );
                    if NEWEST.contains(&scenario.as_str()) {
                        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
                        let modern = ClientLifecycleMode::Discover {
                            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                        };
                        ClientConfig::default()
                            .serve_with_lifecycle(transport, modern)
                            .await
                            .unwrap()
                    } else {
                        ClientConfig::default().serve(transport).await.unwrap()
                    }
                }
            };
            let tools = client.list_tools(None).await.unwrap();
            if tools.tools.iter().any(|t| t.name == "add_numbers") {
                let arguments = serde_json::json!({"a": 2, "b": 40});
                let params = CallToolRequestParams::new("add_numbers")
                    .with_arguments(arguments.as_object().cloned().unwrap());
                let result = client.call_tool(params).await.unwrap();
                println!("{}", result.content[0].as_text().unwrap().text);
            } else if let Some(tool) = tools.tools.first() {
                // A scenario's own tool (a step-up asks for more scope).
                let params = CallToolRequestParams::new(tool.name.clone());
                client.call_tool(params).await.unwrap();
            }
            client.cancel().await.unwrap();
        });
    }

    /// The layer for an auth scenario, from its context. The suite's
    /// servers are made for this run on localhost: the client trusts the
    /// authorization server the MCP server names (a real client names its
    /// servers itself).
    async fn layer(scenario: &str, server: &str, context: &serde_json::Value) -> OAuthLayer {
        let s = |k: &str| context[k].as_str().unwrap_or_default().to_owned();
        let builder = OAuthLayer::builder()
            .protected_resource(server)
            .client_id(s("client_id"));
        let builder = match scenario {
            "auth/client-credentials-jwt" => builder.client_auth(ClientAuth::PrivateKeyJwt(
                SigningKey::from_pem(s("private_key_pem"), Algorithm::Es256).unwrap(),
            )),
            "auth/enterprise-managed-authorization" => {
                let id_token = s("idp_id_token");
                let id_token =
                    tower_oauth::grant::SubjectToken::from_fn("conformance-id-token", move || {
                        let id_token = id_token.clone();
                        Box::pin(async move { Ok(id_token) })
                    });
                builder
                    .trusted_issuers([named_server(server).await])
                    .client_secret(s("client_secret"))
                    .client_auth(ClientAuth::Basic)
                    .identity_assertion(
                        tower_oauth::grant::IdentityAssertion::token_url(
                            s("idp_token_endpoint"),
                            id_token,
                        )
                        .client_id(s("idp_client_id")),
                    )
            }
            "auth/client-credentials-basic" => builder
                .trusted_issuers([named_server(server).await])
                .client_secret(s("client_secret"))
                .client_auth(ClientAuth::Basic),
            // Workload identity: the platform's JWT, presented with the
            // JWT-bearer grant.
            "auth/wif-jwt-bearer" => {
                let jwt = s("valid_jwt");
                builder
                    .trusted_issuers([named_server(server).await])
                    .jwt_bearer(tower_oauth::grant::JwtBearer::assertion_from(
                        tower_oauth::grant::SubjectToken::from_fn(
                            "conformance-workload",
                            move || {
                                let jwt = jwt.clone();
                                Box::pin(async move { Ok(jwt) })
                            },
                        ),
                    ))
            }

            // Every other scenario is a person's login, which the suite's
            // authorization server approves at once.
            _ => {
                // The client metadata document the suite's servers know.
                let mut builder = OAuthLayer::builder()
                    .protected_resource(server)
                    .client_metadata_url("https://conformance-test.local/client-metadata.json")
                    .login(tower_oauth::login::Login::user_agent(
                        support::mcp_server::follow_redirect,
                    ));
                if !s("client_id").is_empty() {
                    builder = builder.client_id(s("client_id"));
                }
                if !s("client_secret").is_empty() {
                    builder = builder
                        .client_secret(s("client_secret"))
                        .trusted_issuers([named_server(server).await]);
                }
                // No scope is named for any scenario, as a generic host
                // names none: a step-up asks the person for what the
                // server's challenge names.
                if scenario.starts_with("auth/dpop") {
                    builder = builder
                        .dpop(tower_oauth::dpop::DpopKey::generate(Algorithm::Es256).unwrap());
                }
                builder
            }
        };
        builder.build().unwrap()
    }

    /// The scenarios whose MCP server speaks the 2026-07-28 protocol only:
    /// the client discovers it (no `initialize`).
    const NEWEST: [&str; 5] = [
        "auth/offline-access-scope",
        "auth/offline-access-not-supported",
        "auth/authorization-server-migration",
        "auth/iss-supported",
        "auth/iss-not-advertised",
    ];

    /// The first authorization server `server`'s RFC 9728 metadata names.
    async fn named_server(server: &str) -> String {
        let url = url::Url::parse(server).unwrap();
        let metadata = format!(
            "{}://{}/.well-known/oauth-protected-resource{}",
            url.scheme(),
            url.host_str().unwrap().to_owned()
                + &url.port().map(|p| format!(":{p}")).unwrap_or_default(),
            url.path()
        );
        let doc: serde_json::Value = reqwest::get(metadata).await.unwrap().json().await.unwrap();
        doc["authorization_servers"][0].as_str().unwrap().to_owned()
    }
}
