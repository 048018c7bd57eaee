//! An agent host with many servers, a layer each, on one `FileStore` file:
//! logins that run only when asked (`Login::automatic(false)`), one at a
//! time in the process; a status that sends nothing; a logout that revokes
//! at its server and leaves the other servers signed in, here and in a
//! second process on the same file.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::login_server::{LoginServer, CLIENT};
use tower_oauth::login::{Login, LoginState};
use tower_oauth::store::FileStore;
use tower_oauth::{OAuthLayer, TokenErrorKind};

/// A host's layer for `server`, on the file `tokens`, with `login`.
fn layer(server: &LoginServer, tokens: &std::path::Path, login: Login) -> OAuthLayer {
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .client_id(CLIENT)
            .login(login)
            .token_store(FileStore::new(tokens).unwrap()),
    )
    .build()
    .unwrap()
}

/// What the server saw of logins: authorization requests, device
/// authorizations and token requests of any kind.
fn asked(server: &LoginServer) -> usize {
    server.authorizations().len() + server.device_logins() + server.token_forms().len()
}

#[tokio::test]
async fn a_login_that_is_not_automatic_runs_only_when_asked() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("host-not-automatic");
    let agent_calls = Arc::new(AtomicUsize::new(0));
    let calls = Arc::clone(&agent_calls);
    let agent = LoginServer::user_agent();
    let login = Login::user_agent(move |url| {
        calls.fetch_add(1, Ordering::SeqCst);
        agent(url)
    })
    .automatic(false);
    let oauth = layer(&server, &dir.join("tokens"), login);
    let status = oauth.login_status().await;
    assert_eq!(status.state(), LoginState::NeverSignedIn);
    assert!(!status.is_signed_in());
    // A request, and the layer's own accessors, fail at once and open
    // nothing, as many times as they are asked.
    for _ in 0..3 {
        let e = oauth.token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
        assert!(e.to_string().contains("OAuthLayer::login"), "{e}");
        let e = support::send(&oauth, &server.api_url()).await.unwrap_err();
        assert!(e.to_string().contains("sign in"), "{e}");
    }
    assert_eq!(agent_calls.load(Ordering::SeqCst), 0);
    assert_eq!(asked(&server), 0, "no request reached the server");
    // The host's `login` runs it; requests are served from then on.
    oauth.login().await.unwrap();
    assert_eq!(agent_calls.load(Ordering::SeqCst), 1);
    let status = oauth.login_status().await;
    assert!(status.is_signed_in(), "{status:?}");
    assert!(status.has_refresh_token());
    assert_eq!(
        status.scopes().collect::<Vec<_>>(),
        ["read", "offline_access"]
    );
    assert_eq!(status.issuer(), Some(server.issuer().as_str()));
    assert!(status.access_token_usable_for().is_some());
    let status_code = support::send(&oauth, &server.api_url())
        .await
        .unwrap()
        .status();
    assert_eq!(status_code, 200);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    // A refused refresh token ends the login: no new one opens by itself.
    server.revoke_all();
    assert!(oauth.force_renewal());
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    assert_eq!(agent_calls.load(Ordering::SeqCst), 1);
    let status = oauth.login_status().await;
    assert_eq!(status.state(), LoginState::Ended, "{status:?}");
    assert!(status.ended_because().is_some());
}

#[tokio::test]
async fn three_servers_log_in_one_at_a_time_and_a_logout_leaves_the_others_signed_in() {
    let servers = [
        LoginServer::start(Duration::from_secs(60)).await,
        LoginServer::start(Duration::from_secs(60)).await,
        LoginServer::start(Duration::from_secs(60)).await,
    ];
    let servers = Arc::new(servers);
    let dir = support::scratch("host-three-servers");
    let tokens = dir.join("tokens");
    // At each prompt, how many device logins the three servers had
    // finished: with one login at a time, the n-th prompt sees n.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let device = |servers: &Arc<[LoginServer; 3]>| {
        let (servers, seen) = (Arc::clone(servers), Arc::clone(&seen));
        Login::device(move |_| {
            let done: usize = servers.iter().map(LoginServer::device_logins).sum();
            seen.lock().unwrap().push(done);
        })
        .automatic(false)
    };
    let host: Vec<OAuthLayer> = servers
        .iter()
        .map(|server| layer(server, &tokens, device(&servers)))
        .collect();
    for (oauth, server) in host.iter().zip(servers.iter()) {
        assert!(support::send(oauth, &server.api_url()).await.is_err());
        assert_eq!(
            oauth.login_status().await.state(),
            LoginState::NeverSignedIn
        );
    }
    assert_eq!(servers.iter().map(asked).sum::<usize>(), 0);
    // The three logins asked for at once take turns.
    let logins: Vec<_> = host
        .iter()
        .map(|oauth| {
            let oauth = oauth.clone();
            tokio::spawn(async move { oauth.login().await.map(|_| ()) })
        })
        .collect();
    for login in logins {
        login.await.unwrap().unwrap();
    }
    assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
    for (oauth, server) in host.iter().zip(servers.iter()) {
        assert!(oauth.login_status().await.is_signed_in());
        let status = support::send(oauth, &server.api_url()).await.unwrap();
        assert_eq!(status.status(), 200);
    }
    // The second server's logout: revoked there, ended in the file.
    host[1].logout().await.unwrap();
    assert_eq!(servers[1].revoked().len(), 1);
    assert!(servers[0].revoked().is_empty() && servers[2].revoked().is_empty());
    assert_eq!(host[1].login_status().await.state(), LoginState::SignedOut);
    let before = asked(&servers[1]);
    let e = host[1].token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    assert_eq!(asked(&servers[1]), before, "nothing sent after the logout");
    for i in [0, 2] {
        assert!(host[i].login_status().await.is_signed_in());
        let status = support::send(&host[i], &servers[i].api_url())
            .await
            .unwrap();
        assert_eq!(status.status(), 200);
    }
    // A second process on the same file: the same three standings, with
    // no token request.
    let forms: Vec<usize> = servers.iter().map(|s| s.token_forms().len()).collect();
    for (i, server) in servers.iter().enumerate() {
        let other = layer(server, &tokens, device(&servers));
        let status = other.login_status().await;
        match i {
            1 => assert_eq!(status.state(), LoginState::SignedOut, "{status:?}"),
            _ => assert!(status.is_signed_in(), "{status:?}"),
        }
        assert_eq!(server.token_forms().len(), forms[i]);
    }
    for server in servers.iter() {
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }
}

#[tokio::test]
async fn logins_that_share_nothing_but_the_process_take_turns() {
    // No store: nothing but the process's turn keeps them apart.
    let servers = Arc::new([
        LoginServer::start(Duration::from_secs(60)).await,
        LoginServer::start(Duration::from_secs(60)).await,
        LoginServer::start(Duration::from_secs(60)).await,
    ]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let host: Vec<OAuthLayer> = servers
        .iter()
        .map(|server| {
            let (all, seen) = (Arc::clone(&servers), Arc::clone(&seen));
            let login = Login::device(move |_| {
                let done: usize = all.iter().map(LoginServer::device_logins).sum();
                seen.lock().unwrap().push(done);
            });
            support::with_transport(
                OAuthLayer::builder()
                    .protected_resource(server.api_url())
                    .client_id(CLIENT)
                    .login(login),
            )
            .build()
            .unwrap()
        })
        .collect();
    // Three requests that each need a login, at once.
    let requests: Vec<_> = host
        .iter()
        .zip(servers.iter())
        .map(|(oauth, server)| {
            let (oauth, url) = (oauth.clone(), server.api_url());
            tokio::spawn(async move { support::send(&oauth, &url).await.unwrap().status() })
        })
        .collect();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    assert_eq!(*seen.lock().unwrap(), [0, 1, 2]);
}

#[tokio::test]
async fn a_logout_in_another_process_shows_in_this_one_s_status_and_drops_its_token() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("host-logout-elsewhere");
    let tokens = dir.join("tokens");
    let login = || Login::user_agent(LoginServer::user_agent()).automatic(false);
    let here = layer(&server, &tokens, login());
    here.login().await.unwrap();
    let there = layer(&server, &tokens, login());
    assert!(there.login_status().await.is_signed_in());
    assert_eq!(
        support::send(&there, &server.api_url())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        server.logins(),
        1,
        "the second process took the stored login"
    );
    there.logout().await.unwrap();
    assert_eq!(server.revoked().len(), 1);
    // This process held a token of that login: its status reads the file.
    let status = here.login_status().await;
    assert_eq!(status.state(), LoginState::SignedOut, "{status:?}");
    assert!(status.access_token_usable_for().is_none());
    let e = here.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    assert_eq!(server.logins(), 1);
}

#[tokio::test]
async fn logout_needs_a_person_and_status_says_a_machine_has_none() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let machine = support::with_transport(
        OAuthLayer::builder()
            .token_url(format!("{}/token", server.issuer()))
            .client_id("machine")
            .client_secret("secret"),
    )
    .build()
    .unwrap();
    let e = machine.logout().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Configuration, "{e}");
    assert_eq!(machine.login_status().await.state(), LoginState::NoPerson);
    assert_eq!(asked(&server), 0);
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logout_on_one_replica_shows_on_the_other_s_status_from_redis() {
    use support::redis_server::{missing, RedisServer};
    use tower_oauth::store::RedisStore;
    if missing() {
        return;
    }
    let redis = RedisServer::start();
    let server = LoginServer::start(Duration::from_secs(60)).await;
    // A public client's login is shared under a key the replicas share.
    let replica = || {
        let store = RedisStore::new(redis.url())
            .unwrap()
            .encryption_key([7u8; 32]);
        support::with_transport(
            OAuthLayer::builder()
                .protected_resource(server.api_url())
                .client_id(CLIENT)
                .login(Login::user_agent(LoginServer::user_agent()).automatic(false))
                .token_store(store),
        )
        .build()
        .unwrap()
    };
    let (a, b) = (replica(), replica());
    assert_eq!(b.login_status().await.state(), LoginState::NeverSignedIn);
    a.login().await.unwrap();
    // The other replica reads the login from Redis, sending nothing.
    let forms = server.token_forms().len();
    assert!(b.login_status().await.is_signed_in());
    assert_eq!(server.token_forms().len(), forms);
    b.token().await.unwrap();
    assert_eq!(server.logins(), 1);
    a.logout().await.unwrap();
    assert_eq!(server.revoked().len(), 1);
    let status = b.login_status().await;
    assert_eq!(status.state(), LoginState::SignedOut, "{status:?}");
    let e = b.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired, "{e}");
    assert_eq!(server.logins(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_in_progress_holds_up_no_other_server_s_refresh_on_the_same_file() {
    let (first, second) = (
        LoginServer::start(Duration::from_secs(60)).await,
        LoginServer::start(Duration::from_secs(60)).await,
    );
    let dir = support::scratch("host-login-in-progress");
    let tokens = dir.join("tokens");
    let agent = || Login::user_agent(LoginServer::user_agent());
    let a = layer(&first, &tokens, agent());
    a.token().await.unwrap();
    // The second server's login waits for the person, who is slow.
    let person = Arc::new(tokio::sync::Notify::new());
    let began = Arc::new(tokio::sync::Notify::new());
    let approve = Arc::new(LoginServer::user_agent());
    let (waiting, told) = (Arc::clone(&person), Arc::clone(&began));
    let slow = Login::user_agent(move |url| {
        let (waiting, told, approve) = (
            Arc::clone(&waiting),
            Arc::clone(&told),
            Arc::clone(&approve),
        );
        Box::pin(async move {
            told.notify_one();
            waiting.notified().await;
            approve(url).await
        })
    });
    let b = layer(&second, &tokens, slow);
    let login = tokio::spawn({
        let b = b.clone();
        async move { b.token().await.map(|_| ()) }
    });
    // The login is under way: its browser shows the server's page.
    began.notified().await;
    // Meanwhile the first server's token is renewed through the same file,
    // while the second's login still waits (a hang guard bounds the wait,
    // not a speed verdict).
    assert!(a.force_renewal());
    let renewed = tokio::time::timeout(Duration::from_secs(60), a.token()).await;
    assert!(renewed
        .expect("the refresh waited for the other login")
        .is_ok());
    assert_eq!(first.refreshes(), 1);
    assert!(
        !login.is_finished(),
        "the second login still waits for its person"
    );
    person.notify_one();
    login.await.unwrap().unwrap();
    assert_eq!(second.logins(), 1);
}

#[tokio::test]
async fn a_login_whose_turn_does_not_come_before_its_timeout_says_so() {
    let (first, second) = (
        LoginServer::start(Duration::from_secs(60)).await,
        LoginServer::start(Duration::from_secs(60)).await,
    );
    // The first server's person never approves: its login holds the turn.
    first
        .state
        .polls_before_approval
        .store(1000, Ordering::SeqCst);
    let prompted = Arc::new(tokio::sync::Notify::new());
    let told = Arc::clone(&prompted);
    let holding = Login::device(move |_| told.notify_one()).timeout(Duration::from_secs(60));
    let build = |server: &LoginServer, login: Login| {
        support::with_transport(
            OAuthLayer::builder()
                .protected_resource(server.api_url())
                .client_id(CLIENT)
                .login(login),
        )
        .build()
        .unwrap()
    };
    let a = build(&first, holding);
    let held = tokio::spawn(async move { a.token().await.map(|_| ()) });
    prompted.notified().await;
    let b = build(
        &second,
        Login::device(|_| {}).timeout(Duration::from_secs(1)),
    );
    let e = b.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{e}");
    assert!(
        e.to_string()
            .contains("another login of this process was under way until this login's timeout (Login::timeout)"),
        "{e}"
    );
    assert_eq!(
        second.device_logins() + second.token_forms().len(),
        0,
        "it never began"
    );
    held.abort();
}
