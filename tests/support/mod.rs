#![allow(dead_code, unreachable_pub)]

pub mod authority;
pub mod grpc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tower_oauth::OAuthLayerBuilder;

pub use authority::{Authority, Fault};

pub const CLIENT_ID: &str = "quick-client";
pub const CLIENT_SECRET: &str = "s3cr3t+/=value";

pub type HyperClient = Client<HttpConnector, Full<Bytes>>;

/// A plain hyper-util client: the inner service of the layer.
pub fn hyper_client() -> HyperClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A builder pointed at `authority` with the right credentials. Without the
/// `reqwest` feature the token request goes over a hyper-util client.
pub fn builder(authority: &Authority) -> OAuthLayerBuilder {
    with_transport(
        tower_oauth::OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
}

/// The builder with a transport when the crate has no default one.
pub fn with_transport(builder: OAuthLayerBuilder) -> OAuthLayerBuilder {
    if cfg!(feature = "reqwest") {
        builder
    } else {
        builder.transport(hyper_client())
    }
}

pub fn get(url: &str) -> http::Request<Full<Bytes>> {
    http::Request::get(url).body(Full::default()).unwrap()
}

/// A response's status and body as text.
pub async fn read<B>(resp: http::Response<B>) -> (http::StatusCode, String)
where
    B: hyper::body::Body,
    B::Error: std::fmt::Debug,
{
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub fn fault(status: u16, body: &str) -> Fault {
    Fault {
        status,
        body: body.into(),
        headers: vec![("content-type".into(), "application/json".into())],
    }
}
