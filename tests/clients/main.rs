//! The layer's tokens for other clients: reqwest through reqwest-middleware,
//! MCP clients on rmcp, and APIs that name their server (RFC 9728).

#[path = "../support/mod.rs"]
mod support;

mod mcp;
mod protected_resource;
mod reqwest_middleware;
