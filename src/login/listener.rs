//! The loopback listener a browser login comes back to (RFC 8252 section
//! 7.3): `127.0.0.1` only, one request a connection, its head bounded in
//! size and time, and done at the first callback that carries the login's
//! `state`.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::authorization::{read_callback, Callback, Expect, MAX_CALLBACK_LEN};
use super::failed;
use crate::error::TokenError;

/// How long one connection may take to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections read at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 16;

/// The page of a login that came back.
const DONE_PAGE: &str = "<!doctype html><meta charset=utf-8><title>Signed in</title>\
    <p>You are signed in. You can close this tab.</p>";

/// The page of a login that came back refused.
const REFUSED_PAGE: &str = "<!doctype html><meta charset=utf-8><title>Sign-in failed</title>\
    <p>The sign-in did not complete. You can close this tab; the program says why.</p>";

/// The page of anything else.
const FOREIGN_PAGE: &str = "<!doctype html><meta charset=utf-8><title>Not found</title>\
    <p>This is not the sign-in this program started.</p>";

/// The address and path `redirect_uri` names: `http://127.0.0.1[:port]/path`.
/// Otherwise, why it cannot be a browser login's.
pub(crate) fn loopback_address(redirect_uri: &str) -> Result<(u16, String), &'static str> {
    let uri: http::Uri = redirect_uri.parse().map_err(|_| "is not a URL")?;
    if uri.scheme_str() != Some("http") || uri.host() != Some("127.0.0.1") {
        return Err("is not http://127.0.0.1 (RFC 8252 section 7.3), which the listener needs");
    }
    if uri.query().is_some() || redirect_uri.contains('#') {
        return Err("has a query or a fragment");
    }
    Ok((uri.port_u16().unwrap_or(0), uri.path().to_owned()))
}

/// A listener bound for one login.
pub(crate) struct Listener {
    listener: TcpListener,
    path: String,
    /// The redirect URI, with the port bound.
    pub(crate) redirect_uri: String,
}

impl Listener {
    /// Binds `127.0.0.1` at the port `redirect_uri` names, or at one the
    /// system picks, and the path `/callback`.
    pub(crate) async fn bind(redirect_uri: Option<&str>) -> Result<Self, TokenError> {
        let (port, path) = match redirect_uri {
            Some(uri) => loopback_address(uri).map_err(|why| failed(why.to_owned()))?,
            None => (0, "/callback".to_owned()),
        };
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .map_err(|e| {
                failed(format!(
                    "the login's listener could not bind 127.0.0.1:{port}: {e}"
                ))
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| failed(format!("the login's listener has no address: {e}")))?
            .port();
        Ok(Listener {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}{path}"),
            path,
        })
    }

    /// The code of the first callback that carries the login's `state`,
    /// waited for until `deadline`. Requests without it get an error page
    /// and change nothing; the server's refusal, or a callback that fails
    /// a check, ends the login.
    pub(crate) async fn code(
        self,
        expect: &Expect<'_>,
        deadline: Instant,
    ) -> Result<String, TokenError> {
        let (heads, mut read) = mpsc::channel::<(TcpStream, Option<String>)>(MAX_CONNECTIONS);
        // Accepting on a task of its own, ended when this login is.
        let accepting = Accepting(tokio::spawn(accept(self.listener, heads)));
        let outcome = loop {
            let Ok(next) = tokio::time::timeout_at(deadline, read.recv()).await else {
                break Err(failed(
                    "the browser did not come back before the login's timeout; run the login \
                     again (the URL is printed to stderr when no browser opens)",
                ));
            };
            let Some((stream, target)) = next else {
                break Err(failed("the login's listener stopped"));
            };
            let query = target.as_deref().and_then(|t| {
                let (path, query) = t.split_once('?').unwrap_or((t, ""));
                (path == self.path).then_some(query)
            });
            let checked = match query {
                Some(query) => read_callback(query, expect),
                None => Ok(Callback::Foreign),
            };
            match checked {
                Ok(Callback::Code(code)) => {
                    answer(stream, 200, DONE_PAGE).await;
                    break Ok(code);
                }
                Ok(Callback::Refused(why)) => {
                    answer(stream, 200, REFUSED_PAGE).await;
                    break Err(failed(format!(
                        "the authorization server refused the login: {why}"
                    )));
                }
                Ok(Callback::Foreign) => {
                    tracing::warn!(
                        "the login's listener got a request without the login's state; ignored"
                    );
                    // On its own task, which ends within READ_TIMEOUT: a
                    // client that does not read holds up nothing.
                    tokio::spawn(answer(stream, 404, FOREIGN_PAGE));
                }
                Err(e) => {
                    answer(stream, 400, REFUSED_PAGE).await;
                    break Err(e);
                }
            }
        };
        drop(accepting);
        outcome
    }
}

/// The accepting task, aborted when dropped: the port closes with the login.
struct Accepting(tokio::task::JoinHandle<()>);

impl Drop for Accepting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Accepts connections on `listener`, at most `MAX_CONNECTIONS` read at
/// once, each read on a task of its own within `READ_TIMEOUT`, and sends
/// each with its request target to `heads`.
async fn accept(listener: TcpListener, heads: mpsc::Sender<(TcpStream, Option<String>)>) {
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            // Out of descriptors, say: not a busy loop.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(permit) = std::sync::Arc::clone(&permits).try_acquire_owned() else {
            continue;
        };
        let heads = heads.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let target = tokio::time::timeout(READ_TIMEOUT, request_target(&mut stream))
                .await
                .ok()
                .flatten();
            let _ = heads.send((stream, target)).await;
        });
    }
}

/// The request target of the `GET` a connection sends, read up to the end
/// of its head; `None` for anything else or anything too long.
async fn request_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_CALLBACK_LEN + 1024 {
            return None;
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(target), Some(version), None) if version.starts_with("HTTP/1.") => {
            Some(target.to_owned())
        }
        _ => None,
    }
}

/// Answers a connection with `page` and closes it.
async fn answer(mut stream: TcpStream, status: u16, page: &str) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Not Found",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\n\
         content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{page}",
        page.len()
    );
    let _ = tokio::time::timeout(READ_TIMEOUT, async {
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}
