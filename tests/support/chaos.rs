//! A token endpoint that misbehaves on command, down to the socket: stalls,
//! resets, oversized and endless bodies, as well as any status and body.
//! Raw HTTP/1.1 over 127.0.0.1, one request per connection.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the endpoint answers the next requests.
#[derive(Clone, Debug)]
pub enum Mode {
    /// A valid token living `lifetime` seconds.
    Healthy { lifetime: u64 },
    /// 200 with this exact body (for odd token responses).
    Ok(String),
    /// Any status, headers and body.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Headers announcing a body, part of it, then nothing, forever.
    StallAfterHeaders,
    /// Part of a response, then a TCP reset.
    ResetMidResponse,
    /// Accepts the connection, reads the request, never answers.
    NeverAnswer,
    /// A body of `len` bytes, with a declared length or chunked.
    Huge { len: usize, declared: bool },
}

#[derive(Debug)]
struct State {
    mode: Mutex<Mode>,
    requests: AtomicUsize,
    issued: Mutex<Vec<String>>,
    /// Request bodies and headers that carried the secret.
    saw_secret: AtomicUsize,
    secret: String,
}

/// A running chaos endpoint; stops with its runtime.
#[derive(Clone, Debug)]
pub struct Chaos {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl Chaos {
    pub async fn start(secret: &str, mode: Mode) -> Chaos {
        Self::start_on(0, secret, mode).await
    }

    /// On a given port of 127.0.0.1 (0: any free one).
    pub async fn start_on(port: u16, secret: &str, mode: Mode) -> Chaos {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            mode: Mutex::new(mode),
            requests: AtomicUsize::new(0),
            issued: Mutex::new(Vec::new()),
            saw_secret: AtomicUsize::new(0),
            secret: secret.to_owned(),
        });
        let s = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(Arc::clone(&s), stream));
            }
        });
        Chaos { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    pub fn set(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Requests that carried the secret (in the body or a header).
    pub fn saw_secret(&self) -> usize {
        self.state.saw_secret.load(Ordering::SeqCst)
    }

    /// Every token issued in `Healthy` mode.
    pub fn issued(&self) -> Vec<String> {
        self.state.issued.lock().unwrap().clone()
    }
}

/// Reads one request: headers, then a body of its content-length.
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(buf);
        }
    }
}

fn response(status: u16, headers: &[(String, String)], body: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

async fn serve(state: Arc<State>, mut stream: TcpStream) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let n = state.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if String::from_utf8_lossy(&request).contains(&state.secret) {
        state.saw_secret.fetch_add(1, Ordering::SeqCst);
    }
    let mode = state.mode.lock().unwrap().clone();
    match mode {
        Mode::Healthy { lifetime } => {
            let token = format!("chaos{n}tok");
            state.issued.lock().unwrap().push(token.clone());
            let body = format!(
                r#"{{"access_token":"{token}","token_type":"bearer","expires_in":{lifetime}}}"#
            );
            let _ = stream.write_all(&response(200, &[], &body)).await;
        }
        Mode::Ok(body) => {
            let _ = stream.write_all(&response(200, &[], &body)).await;
        }
        Mode::Status {
            status,
            headers,
            body,
        } => {
            let _ = stream.write_all(&response(status, &headers, &body)).await;
        }
        Mode::StallAfterHeaders => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n{\"access_token\":")
                .await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Mode::ResetMidResponse => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n{\"access_token\":")
                .await;
            let _ = stream.flush().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            // Linger zero: closing sends a reset, not a clean end (and does
            // not block, which is what the deprecation warns about).
            #[allow(deprecated)]
            let _ = stream.set_linger(Some(Duration::ZERO));
            drop(stream);
        }
        Mode::NeverAnswer => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            drop(stream);
        }
        Mode::Huge { len, declared } => {
            let head = if declared {
                format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n")
            } else {
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_owned()
            };
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let block = vec![b'a'; 64 * 1024];
            let mut sent = 0;
            while sent < len {
                let piece = &block[..block.len().min(len - sent)];
                let write = if declared {
                    stream.write_all(piece).await
                } else {
                    let framed =
                        [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat();
                    stream.write_all(&framed).await
                };
                if write.is_err() {
                    return; // the client stopped reading: good
                }
                sent += piece.len();
            }
            if !declared {
                let _ = stream.write_all(b"0\r\n\r\n").await;
            }
        }
    }
}
