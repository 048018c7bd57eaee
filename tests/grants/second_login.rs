//! The login after the first, with a client the layer registered: on a
//! server that matches redirect URIs exactly, the next browser login
//! listens where the client was registered; where that port is taken, or
//! where the server forgot the client, the layer registers once more, and
//! never loops. The system browser's way runs in a child process with
//! `$BROWSER` set to a script that follows the login as a browser does.

use crate::support;

use std::net::TcpListener;
use std::time::Duration;

use support::login_server::LoginServer;
use tower_oauth::{login::Login, OAuthLayer, TokenErrorKind};

/// The script `$BROWSER` names: it follows the authorization URL and its
/// redirect to the listener, as a browser does.
const FOLLOWING_BROWSER: &str = r#"#!/usr/bin/env python3
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
except urllib.error.URLError as e:
    print("browser: %s" % e, file=sys.stderr)
    sys.exit(1)
"#;

#[tokio::test]
async fn a_registered_client_s_next_login_listens_where_it_was_registered() {
    let dir = support::scratch("second-login");
    let Some(script) = support::stand_in_browser(&dir, FOLLOWING_BROWSER) else {
        return;
    };
    support::child_test(
        "second_login::second_login_child",
        &[("BROWSER", script.as_os_str())],
    )
    .await;
}

/// The redirect URI of the `n`-th authorization request.
fn redirect_of(server: &LoginServer, n: usize) -> String {
    server.authorizations()[n]["redirect_uri"].clone()
}

/// The child of the test above.
#[tokio::test]
#[ignore = "run by a_registered_client_s_next_login_listens_where_it_was_registered"]
async fn second_login_child() {
    assert!(
        std::env::var_os("BROWSER").is_some(),
        "run by the parent test"
    );
    let server = LoginServer::start(Duration::from_secs(60)).await;
    server
        .state
        .exact_redirects
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // No client id: the first login registers one.
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .forced_renewal_interval(Duration::ZERO)
            .login(Login::browser().timeout(Duration::from_secs(30))),
    )
    .build()
    .unwrap();
    oauth.token().await.unwrap();
    assert_eq!(server.registrations().len(), 1);
    let registered = redirect_of(&server, 0);
    assert_eq!(
        server.registrations()[0]["redirect_uris"],
        serde_json::json!([registered])
    );

    // The chain dies: the next login listens at the registered URI, and
    // the server, which matches exactly, takes it.
    server.revoke_all();
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(server.registrations().len(), 1, "no second registration");
    assert_eq!(redirect_of(&server, 1), registered);

    // Its port taken by another program: a new client, registered once.
    let port: u16 = registered
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    let squatter = TcpListener::bind(("127.0.0.1", port)).unwrap();
    server.revoke_all();
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    drop(squatter);
    assert_eq!(server.registrations().len(), 2);
    let second = redirect_of(&server, 2);
    assert_ne!(second, registered);
    assert_eq!(
        server.registrations()[1]["redirect_uris"],
        serde_json::json!([second])
    );

    // The server forgets its clients: the refresh gets invalid_client,
    // and the login that follows registers once more.
    server.forget_clients();
    assert!(oauth.force_renewal());
    oauth.token().await.unwrap();
    assert_eq!(server.registrations().len(), 3);
    assert_eq!(server.authorizations().len(), 4);
    // Nothing but the refresh token each revoke_all retired, sent once
    // each before the login that followed.
    assert_eq!(
        server.violations(),
        ["a retired refresh token was sent"; 2],
        "no redirect URI the client was not registered with"
    );

    // A server that refuses every client it registers gets one more
    // registration per login, never a loop: the login fails.
    server.forget_clients();
    *server.state.registration_answer.lock().unwrap() =
        Some((400, r#"{"error":"invalid_client_metadata"}"#.into()));
    assert!(oauth.force_renewal());
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert_eq!(server.registrations().len(), 4);
}
