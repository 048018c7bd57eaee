//! Serving a handler over HTTP/1 on a listener of 127.0.0.1, plain or with
//! TLS, for the test servers; and their JSON answers.
#![allow(dead_code, unreachable_pub)]

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

pub type Response = http::Response<Full<Bytes>>;

/// A JSON answer.
pub fn answer(status: u16, body: Value) -> Response {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// Serves every connection `listener` accepts, on tasks of its own: `open`
/// turns the TCP stream into the connection (a TLS handshake, say) and the
/// context its requests see; `handle` answers each request.
pub fn serve<S, C, O, OF, H, HF>(listener: TcpListener, open: O, handle: H)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    C: Clone + Send + Sync + 'static,
    O: Fn(TcpStream) -> OF + Send + Sync + 'static,
    OF: Future<Output = Option<(S, C)>> + Send,
    H: Fn(C, http::Request<hyper::body::Incoming>) -> HF + Send + Sync + 'static,
    HF: Future<Output = Response> + Send,
{
    let (open, handle) = (Arc::new(open), Arc::new(handle));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (open, handle) = (Arc::clone(&open), Arc::clone(&handle));
            tokio::spawn(async move {
                let Some((stream, context)) = open(stream).await else {
                    return;
                };
                let svc = service_fn(move |req| {
                    let (handle, context) = (Arc::clone(&handle), context.clone());
                    async move { Ok::<_, Infallible>(handle(context, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
}

/// Serves plain HTTP on `listener`, every request answered by `handle` with
/// the server's shared `state`.
pub fn serve_state<T, H, HF>(listener: TcpListener, state: Arc<T>, handle: H)
where
    T: Send + Sync + 'static,
    H: Fn(Arc<T>, http::Request<hyper::body::Incoming>) -> HF + Send + Sync + 'static,
    HF: Future<Output = Response> + Send,
{
    serve(
        listener,
        |stream| async move { Some((stream, ())) },
        move |(), req| handle(Arc::clone(&state), req),
    );
}

/// The bearer token `headers` carry in `Authorization` (empty if none).
pub fn bearer(headers: &http::HeaderMap) -> &str {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
}

/// Whether `req` carries HTTP Basic credentials of `id` and `secret`
/// (neither needing encoding).
pub fn has_basic<B>(req: &http::Request<B>, id: &str, secret: &str) -> bool {
    use base64::Engine;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    );
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(expected.as_str())
}
