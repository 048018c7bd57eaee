//! The built-in transport and the proxies the environment names: a token
//! request to a loopback endpoint never goes through one (its secret stays
//! on the machine); one to another host does, unless told otherwise. One
//! test in its own binary: it sets process-wide environment variables.
#![cfg(feature = "reqwest")]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tower_oauth::OAuthLayer;

/// A forward proxy on 127.0.0.1 that answers every request itself with a
/// token, and keeps each request line.
async fn proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = Arc::clone(&kept);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                kept.lock()
                    .unwrap()
                    .push(head.lines().next().unwrap_or_default().to_owned());
                let body = r#"{"access_token":"via-proxy","expires_in":3600}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (url, seen)
}

#[tokio::test]
async fn loopback_never_goes_through_a_proxy_other_hosts_do() {
    let (proxy_url, seen) = proxy().await;
    for name in [
        "NO_PROXY",
        "no_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        std::env::remove_var(name);
    }
    std::env::set_var("HTTP_PROXY", &proxy_url);
    std::env::set_var("http_proxy", &proxy_url);

    // A loopback token endpoint: straight there, the proxy sees nothing.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3600)).await;
    for host in ["127.0.0.1", "localhost"] {
        let oauth = builder(&authority)
            .auth_url(authority.base_url().replace("127.0.0.1", host))
            .build()
            .unwrap();
        let token = oauth.token().await.unwrap();
        assert!(authority.accepts(token.expose_token()), "{host}");
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );

    // Another host: through the proxy, which answers for it here (nothing
    // leaves the machine).
    let remote = "http://tokens.example.test/v1/oauth/accesstoken";
    let oauth = OAuthLayer::builder()
        .token_url(remote)
        .allow_insecure_http(true)
        .client_id("id")
        .client_secret("secret")
        .build()
        .unwrap();
    assert_eq!(oauth.token().await.unwrap().expose_token(), "via-proxy");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![format!("POST {remote} HTTP/1.1")]
    );

    // A proxy URL that cannot be used is a build error that does not show it.
    std::env::set_var("HTTP_PROXY", "http://user:pa55word@[::1");
    let e = OAuthLayer::builder()
        .token_url(remote)
        .allow_insecure_http(true)
        .client_id("id")
        .client_secret("secret")
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("HTTP_PROXY"), "{e}");
    assert!(!e.to_string().contains("pa55word"), "{e}");
    // Unless proxies from the environment are off.
    let _off = OAuthLayer::builder()
        .token_url(remote)
        .allow_insecure_http(true)
        .client_id("id")
        .client_secret("secret")
        .proxy_from_env(false)
        .build()
        .unwrap();
}
