//! The loopback listener a browser login comes back to (RFC 8252 section
//! 7.3): `127.0.0.1` only (and `[::1]` too for a `localhost` redirect), one
//! request a connection, its head bounded in size and time, and done at the
//! first callback that carries the login's `state`, come to it or pasted.

use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::authorization::{
    callback_query, read_callback, refused_login, Callback, Came, Expect, MAX_CALLBACK_LEN,
};
use super::failed;
use super::paste::{pasted_query, Paste};
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

/// Where a browser login's listener listens: the host the redirect URI
/// names (`127.0.0.1`, or `localhost` for a server that registers only
/// that), its port (0: one the system picks) and its path.
pub(crate) struct Loopback {
    host: &'static str,
    port: u16,
    path: String,
}

/// The address and path `redirect_uri` names: `http://127.0.0.1[:port]/path`
/// or `http://localhost[:port]/path`. Otherwise, why it cannot be a browser
/// login's.
pub(crate) fn loopback_address(redirect_uri: &str) -> Result<Loopback, &'static str> {
    let uri: http::Uri = redirect_uri.parse().map_err(|_| "is not a URL")?;
    let host = match uri.host() {
        Some("127.0.0.1") => "127.0.0.1",
        Some(h) if h.eq_ignore_ascii_case("localhost") => "localhost",
        _ => "",
    };
    if uri.scheme_str() != Some("http") || host.is_empty() {
        return Err(
            "is neither http://127.0.0.1 (RFC 8252 section 7.3) nor http://localhost, which the \
             listener needs",
        );
    }
    if uri.query().is_some() || redirect_uri.contains('#') {
        return Err("has a query or a fragment");
    }
    Ok(Loopback {
        host,
        port: uri.port_u16().unwrap_or(0),
        path: uri.path().to_owned(),
    })
}

/// A listener bound for one login.
pub(crate) struct Listener {
    /// `127.0.0.1`, and `[::1]` for `localhost` where it binds.
    listeners: Vec<TcpListener>,
    path: String,
    /// The redirect URI, with the port bound.
    pub(crate) redirect_uri: String,
}

impl Listener {
    /// Binds `127.0.0.1` at the port `redirect_uri` names, or at one the
    /// system picks, and the path `/callback`. For `localhost`, `[::1]` at
    /// the same port too where it binds: a browser may try either.
    pub(crate) async fn bind(redirect_uri: Option<&str>) -> Result<Self, TokenError> {
        let at = match redirect_uri {
            Some(uri) => loopback_address(uri).map_err(|why| failed(why.to_owned()))?,
            None => Loopback {
                host: "127.0.0.1",
                port: 0,
                path: "/callback".to_owned(),
            },
        };
        let port = at.port;
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
        let mut listeners = vec![listener];
        if at.host == "localhost" {
            match TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port))).await {
                Ok(v6) => listeners.push(v6),
                Err(e) => tracing::debug!(error = %e, "the login's listener has no [::1]"),
            }
        }
        Ok(Listener {
            listeners,
            redirect_uri: format!("http://{}:{port}{}", at.host, at.path),
            path: at.path,
        })
    }

    /// The code of the first callback that carries the login's `state`,
    /// waited for until `deadline`, come to the listener or pasted from
    /// `paste`. Requests without it get an error page and change nothing,
    /// and a pasted line without it is refused with a short reason at the
    /// terminal; the server's refusal, or a callback that fails a check,
    /// ends the login.
    pub(crate) async fn code(
        mut self,
        expect: &Expect<'_>,
        deadline: Instant,
        paste: Option<&Paste>,
    ) -> Result<String, TokenError> {
        let (heads, mut read) = mpsc::channel::<(TcpStream, Option<String>)>(MAX_CONNECTIONS);
        // Accepting on tasks of their own, ended when this login is.
        let listeners = std::mem::take(&mut self.listeners);
        let accepting: Vec<Accepting> = listeners
            .into_iter()
            .map(|listener| Accepting(tokio::spawn(accept(listener, heads.clone()))))
            .collect();
        drop(heads);
        let mut pasted = paste.map(|p| p());
        let outcome = loop {
            let next = {
                let mut connection = pin!(tokio::time::timeout_at(deadline, read.recv()));
                std::future::poll_fn(|cx| {
                    if let Some(line) = pasted.as_mut() {
                        if let Poll::Ready(line) = line.as_mut().poll(cx) {
                            return Poll::Ready(Next::Pasted(line));
                        }
                    }
                    connection.as_mut().poll(cx).map(Next::Connection)
                })
                .await
            };
            let (stream, target) = match next {
                Next::Pasted(None) => {
                    pasted = None;
                    continue;
                }
                Next::Pasted(Some(line)) => {
                    pasted = paste.map(|p| p());
                    match self.read_pasted(&line, expect) {
                        Some(outcome) => break outcome,
                        None => continue,
                    }
                }
                Next::Connection(Err(_)) => {
                    break Err(failed(
                        "the browser did not come back before the login's timeout; run the \
                         login again (the URL is printed to stderr when no browser opens)",
                    ))
                }
                Next::Connection(Ok(None)) => break Err(failed("the login's listener stopped")),
                Next::Connection(Ok(Some(next))) => next,
            };
            let query = target
                .as_deref()
                .and_then(|t| callback_query(t, Came::Listener(&self.path)).ok());
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
                    break Err(refused_login(&why));
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

    /// A pasted `line`, checked as a callback: the login's outcome, or
    /// `None` (said at the terminal) for a line that is not this login's.
    fn read_pasted(&self, line: &str, expect: &Expect<'_>) -> Option<Result<String, TokenError>> {
        let refused = |why: &str| {
            tracing::warn!(why, "a pasted line is not the login's callback; ignored");
            eprintln!(
                "That is not the address of this sign-in: {why}. Paste the whole address the \
                 browser ended on, or finish in the browser."
            );
            None
        };
        if line.trim().is_empty() {
            return None;
        }
        let query = match pasted_query(line, &self.path) {
            Ok(query) => query,
            Err(why) => return refused(why),
        };
        match read_callback(query, expect) {
            Ok(Callback::Code(code)) => Some(Ok(code)),
            Ok(Callback::Refused(why)) => Some(Err(refused_login(&why))),
            Ok(Callback::Foreign) => refused("it carries another sign-in's state, or none"),
            Err(e) => Some(Err(e)),
        }
    }
}

/// What came first while the listener waits.
enum Next {
    Pasted(Option<String>),
    Connection(Result<Option<(TcpStream, Option<String>)>, tokio::time::error::Elapsed>),
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
/// each with its request target to `heads`. A connection beyond those
/// waits in the system's queue, in the order it came, until a reading slot
/// frees: it is never closed unread, so a local process holding slow
/// connections delays the browser's callback by `READ_TIMEOUT` at most.
async fn accept(listener: TcpListener, heads: mpsc::Sender<(TcpStream, Option<String>)>) {
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = std::sync::Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let Ok((mut stream, _)) = listener.accept().await else {
            // Out of descriptors, say: not a busy loop.
            tokio::time::sleep(Duration::from_millis(50)).await;
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    const STATE: &str = "the-login-s-state";

    fn expect() -> Expect<'static> {
        Expect {
            state: STATE,
            issuer: "https://as.example.com",
            iss_required: true,
        }
    }

    /// A source that gives `lines` in order, then nothing more (pending).
    fn lines(lines: Vec<String>) -> (Paste, Arc<Mutex<usize>>) {
        let left = Arc::new(Mutex::new(lines.into_iter()));
        let asked = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&asked);
        let paste: Paste = Arc::new(move || {
            *counted.lock().unwrap() += 1;
            let next = left.lock().unwrap().next();
            Box::pin(async move {
                match next {
                    Some(line) => Some(line),
                    None => std::future::pending().await,
                }
            })
        });
        (paste, asked)
    }

    /// A browser's GET of `url`: the page it got.
    async fn browser_get(url: String) -> String {
        let uri: http::Uri = url.parse().unwrap();
        let mut stream = TcpStream::connect(uri.authority().unwrap().as_str())
            .await
            .unwrap();
        let request = format!(
            "GET {} HTTP/1.1\r\nhost: x\r\n\r\n",
            uri.path_and_query().unwrap()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut page = String::new();
        stream.read_to_string(&mut page).await.unwrap();
        page
    }

    fn callback(listener: &Listener, query: &str) -> String {
        format!("{}?{query}", listener.redirect_uri)
    }

    #[tokio::test]
    async fn a_pasted_address_ends_the_wait_after_every_line_that_is_not_the_login_s() {
        let listener = Listener::bind(None).await.unwrap();
        let iss = "iss=https%3A%2F%2Fas.example.com";
        let (paste, asked) = lines(vec![
            "\n".into(),
            callback(&listener, &format!("code=theirs&state=another-login&{iss}")),
            format!("http://127.0.0.1:1/other?code=c&state={STATE}&{iss}"),
            format!("{}?code=a\u{1b}[2J&state={STATE}", listener.redirect_uri),
            callback(
                &listener,
                &format!("code={}&state={STATE}", "a".repeat(9000)),
            ),
            "not an address at all".into(),
            callback(&listener, &format!("code=ours&state={STATE}&{iss}")),
            callback(&listener, &format!("code=twice&state={STATE}&{iss}")),
        ]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let code = listener.code(&expect(), deadline, Some(&paste)).await;
        assert_eq!(code.unwrap(), "ours");
        // Asked once for each line up to the login's, and once more: the
        // line after it is never read.
        assert_eq!(*asked.lock().unwrap(), 8);
    }

    #[tokio::test]
    async fn a_pasted_refusal_or_wrong_issuer_of_the_login_ends_it() {
        for (query, says) in [
            (
                format!("error=access_denied&state={STATE}&iss=https%3A%2F%2Fas.example.com"),
                "refused",
            ),
            (
                format!("code=c&state={STATE}&iss=https%3A%2F%2Fevil.example"),
                "mix-up",
            ),
            (format!("code=c&state={STATE}"), "carries no `iss`"),
        ] {
            let listener = Listener::bind(None).await.unwrap();
            let (paste, _) = lines(vec![callback(&listener, &query)]);
            let deadline = Instant::now() + Duration::from_secs(10);
            let e = listener
                .code(&expect(), deadline, Some(&paste))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), crate::error::TokenErrorKind::LoginFailed);
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[tokio::test]
    async fn the_browser_at_the_listener_ends_the_wait_while_nothing_is_pasted() {
        let listener = Listener::bind(Some("http://localhost:0/cb")).await.unwrap();
        assert!(listener.redirect_uri.starts_with("http://localhost:"));
        let url = callback(
            &listener,
            &format!("code=ours&state={STATE}&iss=https%3A%2F%2Fas.example.com"),
        )
        .replace("localhost", "127.0.0.1");
        let (paste, _) = lines(Vec::new());
        let browser = tokio::spawn(browser_get(url));
        let deadline = Instant::now() + Duration::from_secs(10);
        let code = listener.code(&expect(), deadline, Some(&paste)).await;
        assert_eq!(code.unwrap(), "ours");
        assert!(browser.await.unwrap().contains("You are signed in"));
    }

    /// A local process holds more slow connections than the listener
    /// reads at once; the browser's callback waits its turn in the queue
    /// and is read once the slow ones time out: never closed unread.
    #[tokio::test]
    async fn slow_connections_delay_the_browser_s_callback_but_never_drop_it() {
        let listener = Listener::bind(None).await.unwrap();
        let url = callback(
            &listener,
            &format!("code=ours&state={STATE}&iss=https%3A%2F%2Fas.example.com"),
        );
        let uri: http::Uri = url.parse().unwrap();
        let address = uri.authority().unwrap().as_str().to_owned();
        let mut slow = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 4 {
            slow.push(TcpStream::connect(&address).await.unwrap());
        }
        let (paste, _) = lines(Vec::new());
        let browser = tokio::spawn(browser_get(url));
        let deadline = Instant::now() + READ_TIMEOUT * 3;
        let code = listener.code(&expect(), deadline, Some(&paste)).await;
        assert_eq!(code.unwrap(), "ours");
        assert!(browser.await.unwrap().contains("You are signed in"));
        drop(slow);
    }

    #[test]
    fn redirect_uris_a_listener_takes() {
        for ok in [
            "http://127.0.0.1:8400/callback",
            "http://localhost:8400/cb",
            "http://LOCALHOST/cb",
        ] {
            assert!(loopback_address(ok).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1:8400/callback",
            "http://[::1]:8400/callback",
            "http://example.com/callback",
            "http://localhost:8400/callback?x=1",
        ] {
            assert!(loopback_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pasted_address_gives_its_query_for_the_listener_s_path_only() {
        let path = "/callback";
        for (text, query) in [
            (
                "http://127.0.0.1:8400/callback?code=a&state=s",
                "code=a&state=s",
            ),
            (
                "  http://localhost:8400/callback?code=a&state=s\n",
                "code=a&state=s",
            ),
            (
                "http://127.0.0.1/callback?code=a&state=s#frag",
                "code=a&state=s",
            ),
            ("?code=a&state=s", "code=a&state=s"),
            ("code=a&state=s", "code=a&state=s"),
        ] {
            assert_eq!(pasted_query(text, path), Ok(query), "{text:?}");
        }
        for bad in [
            "http://127.0.0.1:8400/other?code=a&state=s",
            "http://127.0.0.1:8400/callback",
            "hello",
            "http://127.0.0.1/callback?code=a\u{1b}[2J&state=s",
            "code=a state=s",
        ] {
            assert!(pasted_query(bad, path).is_err(), "{bad:?}");
        }
        let huge = format!(
            "code={}&state=s",
            "a".repeat(crate::login::authorization::MAX_CALLBACK_LEN)
        );
        assert!(pasted_query(&huge, path).is_err());
    }
}
