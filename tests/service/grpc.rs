//! gRPC: a server refuses a token with HTTP 200 and `grpc-status: 16` in a
//! trailers-only response. The layer treats it like a 401, and
//! `RetryUnauthorized` resends a call whose body can be cloned.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use support::grpc::start_health_server;
use support::*;
use tonic::transport::Channel;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::RetryUnauthorized;

const HOUR: Duration = Duration::from_secs(3600);

/// An authority, a health server that takes its tokens, a channel to the
/// server, and a layer for the authority.
async fn health_service() -> (Authority, Channel, tower_oauth::OAuthLayer) {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let addr = start_health_server(&authority).await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let oauth = builder(&authority).build().unwrap();
    (authority, channel, oauth)
}

#[tokio::test]
async fn a_tonic_channel_gets_tokens_and_drops_a_refused_one() {
    let (authority, channel, oauth) = health_service().await;
    let mut client = HealthClient::new(
        ServiceBuilder::new()
            .layer(oauth.clone())
            .service(channel.clone()),
    );
    let req = || HealthCheckRequest {
        service: String::new(),
    };

    let ok = client.check(req()).await.unwrap().into_inner();
    assert_eq!(ok.status(), ServingStatus::Serving);

    // Without the layer the server refuses.
    let refused = HealthClient::new(channel).check(req()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);

    // A revoked token: UNAUTHENTICATED comes back unchanged, the token is
    // dropped, the next call gets a new one.
    authority.revoke_all();
    let err = client.check(req()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(oauth.stats().forced_renewals, 1);
    let ok = client.check(req()).await.unwrap().into_inner();
    assert_eq!(ok.status(), ServingStatus::Serving);
    assert_eq!(authority.token_requests(), 2);
}

/// A unary gRPC call made by hand over HTTP/2, with a body that can be
/// cloned: `grpc.health.v1.Health/Check` with an empty request message.
fn health_check(addr: std::net::SocketAddr) -> http::Request<Full<Bytes>> {
    http::Request::post(format!("http://{addr}/grpc.health.v1.Health/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        // One uncompressed frame of length 0: an empty HealthCheckRequest.
        .body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .unwrap()
}

#[tokio::test]
async fn retry_unauthorized_resends_a_cloneable_grpc_call() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let addr = start_health_server(&authority).await;
    let h2 = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let oauth = builder(&authority).build().unwrap();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(h2);

    let resp = client.clone().oneshot(health_check(addr)).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("grpc-status").is_none(), "not refused");

    authority.revoke_all();
    let resp = client.clone().oneshot(health_check(addr)).await.unwrap();
    // Resent with a new token: a normal response, status in the trailers.
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("grpc-status").is_none());
    assert_eq!(oauth.stats().forced_renewals, 1);
    assert_eq!(authority.token_requests(), 2);
}

/// Puts the layer's current token on a call without awaiting (the
/// synchronous accessor, for tonic's `Interceptor`).
#[derive(Clone)]
struct BearerToken(tower_oauth::OAuthLayer);

impl tonic::service::Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        let token = self
            .0
            .token_now()
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let value = token.header_value().as_bytes().try_into().unwrap();
        request.metadata_mut().insert("authorization", value);
        Ok(request)
    }
}

#[tokio::test]
async fn an_interceptor_gets_a_valid_token_without_awaiting() {
    let (authority, channel, oauth) = health_service().await;
    let mut client = HealthClient::with_interceptor(channel, BearerToken(oauth.clone()));
    let req = || HealthCheckRequest {
        service: String::new(),
    };
    // Cold: refused at once, and the fetch starts in the background.
    let cold = oauth.token_now().unwrap_err();
    assert_eq!(cold.kind(), tower_oauth::TokenErrorKind::NotReady);
    assert!(cold.is_retryable());
    let refused = client.check(req()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    // The background fetch lands without anyone awaiting it.
    let mut waited = Duration::ZERO;
    while oauth.token_now().is_err() {
        assert!(waited < Duration::from_secs(2), "no token after {waited:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
        waited += Duration::from_millis(5);
    }
    let now = oauth.token_now().unwrap();
    assert!(authority.accepts(now.token().expose_token()));
    assert!(now.usable_for() > Duration::from_secs(3500));
    assert!(!format!("{now:?}").contains(now.token().expose_token()));
    for _ in 0..5 {
        let ok = client.check(req()).await.unwrap().into_inner();
        assert_eq!(ok.status(), ServingStatus::Serving);
    }
    assert_eq!(authority.token_requests(), 1);
}
