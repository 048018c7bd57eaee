//! Many people through one layer: each account's own login (begun and
//! finished by a web app's routes), its own tokens and chain, its sign-out
//! with revocation; and what an attacker would try: another account's
//! callback, a replayed or unknown one, ids chosen alike, and the store's
//! keys. Against the loopback authorization server, whose API answers with
//! the person each token was issued for.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::login_server::{LoginServer, WEB_CLIENT, WEB_SECRET};
use tower_oauth::{
    FileStore, OAuthLayer, OAuthLayerBuilder, TokenError, TokenErrorKind, TokenParams,
};

const CALLBACK: &str = "http://127.0.0.1:9/callback";

fn builder(server: &LoginServer) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .protected_resource(server.api_url())
            .trusted_issuers([server.issuer()])
            .client_id(WEB_CLIENT)
            .client_secret(WEB_SECRET),
    )
}

/// `user` signs in as `account` through `begin` and `finish` (two layers:
/// replicas, or the same one twice), with a browser that approves at once.
async fn sign_in(begin: &OAuthLayer, finish: &OAuthLayer, account: &str, user: &str) {
    let url = begin.begin_login(account, CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, user).await;
    finish.finish_login(account, &callback).await.unwrap();
}

/// One GET of the API as `account`: its status and the person the API saw,
/// or the layer's error.
async fn api_as(
    oauth: &OAuthLayer,
    server: &LoginServer,
    account: &str,
) -> Result<(u16, Option<String>), TokenError> {
    use tower::ServiceExt;
    let mut request = support::get(&server.api_url());
    request
        .extensions_mut()
        .insert(TokenParams::new().account(account));
    let response = match support::client(oauth).oneshot(request).await {
        Ok(response) => response,
        Err(e) => return Err(*e.downcast::<TokenError>().expect("a TokenError")),
    };
    let (status, body) = support::read(response).await;
    let user = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["user"].as_str().map(str::to_owned));
    Ok((status.as_u16(), user))
}

fn token_requests(server: &LoginServer) -> usize {
    server.token_forms().len()
}

#[tokio::test]
async fn two_people_through_one_layer_each_get_their_own_token() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    sign_in(&oauth, &oauth, "alice@example.com", "alice").await;
    sign_in(&oauth, &oauth, "bob@example.com", "bob").await;
    for _ in 0..3 {
        assert_eq!(
            api_as(&oauth, &server, "alice@example.com").await.unwrap(),
            (200, Some("alice".into()))
        );
        assert_eq!(
            api_as(&oauth, &server, "bob@example.com").await.unwrap(),
            (200, Some("bob".into()))
        );
    }
    // One code exchange each, no refresh: the login's token serves.
    assert_eq!(server.logins(), 2);
    assert_eq!(token_requests(&server), 2);
    // The authorization requests: PKCE S256, state, the resource, the
    // scope; the exchanges authenticated as the web app (Basic).
    for asked in server.authorizations() {
        assert_eq!(asked["client_id"], WEB_CLIENT);
        assert_eq!(asked["code_challenge_method"], "S256");
        assert_eq!(asked["resource"], server.api_url());
        assert_eq!(asked["redirect_uri"], CALLBACK);
        assert!(asked["state"].len() >= 43);
    }
    for form in server.token_forms() {
        assert!(!form.contains_key("client_secret"));
        assert_eq!(form["grant_type"], "authorization_code");
    }
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    // Without an account, the layer's own token: this layer has none
    // (no login of its own), and an account that never signed in sends
    // nothing.
    let before = token_requests(&server);
    let e = api_as(&oauth, &server, "carol@example.com")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert!(!e.to_string().contains("carol"), "{e}");
    assert_eq!(token_requests(&server), before);
}

#[tokio::test]
async fn callbacks_of_another_account_replayed_or_unknown_change_nothing() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    let alice_url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let _bob_url = oauth.begin_login("bob", CALLBACK).await.unwrap();
    let alice_callback = LoginServer::sign_in(&alice_url, "alice").await;
    // Bob's session presents Alice's callback: refused, nothing exchanged,
    // and Alice's pending login is still there.
    let e = oauth
        .finish_login("bob", &alice_callback)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert_eq!(server.logins(), 0);
    assert_eq!(
        api_as(&oauth, &server, "bob").await.unwrap_err().kind(),
        TokenErrorKind::LoginRequired
    );
    oauth.finish_login("alice", &alice_callback).await.unwrap();
    assert_eq!(server.logins(), 1);
    // Replayed: the pending login was taken, nothing is exchanged again.
    let e = oauth
        .finish_login("alice", &alice_callback)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    // Unknown, missing, and overlong states.
    for callback in [
        format!("{CALLBACK}?code=forged&state=forged"),
        format!("{CALLBACK}?code=forged"),
        format!("{CALLBACK}?code=x&state={}", "s".repeat(20_000)),
    ] {
        let e = oauth.finish_login("alice", &callback).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    }
    assert_eq!(server.logins(), 1);
    assert_eq!(token_requests(&server), 1);
    assert_eq!(
        api_as(&oauth, &server, "alice").await.unwrap(),
        (200, Some("alice".into()))
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn a_refused_login_and_a_wrong_iss_end_only_that_login() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    server.approve(support::login_server::Approve::Deny);
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    let e = oauth.finish_login("alice", &callback).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert!(e.to_string().contains("access_denied"), "{e}");
    server.approve(support::login_server::Approve::WrongIss);
    let url = oauth.begin_login("alice", CALLBACK).await.unwrap();
    let callback = LoginServer::sign_in(&url, "alice").await;
    let e = oauth.finish_login("alice", &callback).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginFailed);
    assert_eq!(token_requests(&server), 0);
    // A redirect URI a browser must not be sent to.
    for bad in [
        "javascript:alert(1)",
        "http://app.example/callback",
        "/callback",
    ] {
        let e = oauth.begin_login("alice", bad).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginFailed, "{bad}");
    }
}

#[tokio::test]
async fn sign_out_revokes_and_ends_that_account_only() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    sign_in(&oauth, &oauth, "alice", "alice").await;
    sign_in(&oauth, &oauth, "bob", "bob").await;
    assert_eq!(api_as(&oauth, &server, "alice").await.unwrap().0, 200);
    oauth.sign_out("alice").await.unwrap();
    assert_eq!(server.revoked(), ["alice"]);
    let before = token_requests(&server);
    let e = api_as(&oauth, &server, "alice").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert_eq!(token_requests(&server), before, "no token request");
    assert_eq!(
        api_as(&oauth, &server, "bob").await.unwrap(),
        (200, Some("bob".into()))
    );
    // Alice signs in again.
    sign_in(&oauth, &oauth, "alice", "alice").await;
    assert_eq!(
        api_as(&oauth, &server, "alice").await.unwrap(),
        (200, Some("alice".into()))
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn a_refused_refresh_token_ends_that_account_only() {
    let server = LoginServer::start(Duration::from_millis(1200)).await;
    let oauth = builder(&server)
        .refresh_margin(Duration::from_millis(200))
        .build()
        .unwrap();
    sign_in(&oauth, &oauth, "alice", "alice").await;
    sign_in(&oauth, &oauth, "bob", "bob").await;
    server.retire_refresh_of("alice");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let e = api_as(&oauth, &server, "alice").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
    assert_eq!(
        api_as(&oauth, &server, "bob").await.unwrap(),
        (200, Some("bob".into()))
    );
    assert_eq!(server.refreshes_of("bob"), 1);
}

#[tokio::test]
async fn ids_chosen_alike_never_share_a_token() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let oauth = builder(&server).build().unwrap();
    // Ids that differ in a byte, a prefix, case, a separator, Unicode
    // normalization, or that are empty.
    let ids = [
        "a", "a\0", "A", "a ", "ab", "", "é", "e\u{301}", "a:b", "a\nb",
    ];
    for (i, id) in ids.iter().enumerate() {
        sign_in(&oauth, &oauth, id, &format!("user{i}")).await;
    }
    for _ in 0..2 {
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                api_as(&oauth, &server, id).await.unwrap(),
                (200, Some(format!("user{i}"))),
                "{id:?}"
            );
        }
    }
}

#[tokio::test]
async fn idle_accounts_leave_memory_and_come_back_from_the_store() {
    let server = LoginServer::start(Duration::from_secs(60)).await;
    let dir = support::scratch("accounts-evicted");
    let oauth = builder(&server)
        .token_store(FileStore::new(dir.join("tokens")).unwrap())
        .max_accounts(2)
        .build()
        .unwrap();
    let accounts: Vec<String> = (0..6).map(|i| format!("person-{i}@example.com")).collect();
    for (i, account) in accounts.iter().enumerate() {
        sign_in(&oauth, &oauth, account, &format!("user{i}")).await;
    }
    let before = token_requests(&server);
    for _ in 0..3 {
        for (i, account) in accounts.iter().enumerate() {
            assert_eq!(
                api_as(&oauth, &server, account).await.unwrap(),
                (200, Some(format!("user{i}")))
            );
        }
    }
    assert_eq!(
        token_requests(&server),
        before,
        "each came back from the store"
    );
    // The file holds neither the ids nor any token in clear.
    let file = std::fs::read_to_string(dir.join("tokens")).unwrap();
    for account in &accounts {
        assert!(!file.contains(account.as_str()));
    }
    assert!(!file.contains("at-") && !file.contains("rt-"));
    // Without a store, an account that leaves memory loses its login.
    let alone = builder(&server).max_accounts(1).build().unwrap();
    sign_in(&alone, &alone, "x", "x").await;
    sign_in(&alone, &alone, "y", "y").await;
    let e = api_as(&alone, &server, "x").await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
}
