//! A gRPC server for tests and examples: the standard health service behind
//! an interceptor that accepts only live tokens of `authority`.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;

use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::{Request, Status};

use super::authority::Authority;

/// Starts the server on 127.0.0.1; it stops with the runtime.
pub async fn start_health_server(authority: &Authority) -> SocketAddr {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("", tonic_health::ServingStatus::Serving)
        .await;
    let checker = authority.clone();
    let check = move |req: Request<()>| -> Result<Request<()>, Status> {
        let token = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match token {
            Some(t) if checker.accepts(t) => Ok(req),
            Some(_) => Err(Status::unauthenticated("invalid access token")),
            None => Err(Status::unauthenticated("missing bearer token")),
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .layer(tonic::service::InterceptorLayer::new(check))
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    addr
}
