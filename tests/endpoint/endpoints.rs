//! Errors that say what to fix: a URL that is not a token endpoint is named,
//! with a hint for the setter that fits; a token with fewer scopes than
//! requested is reported. Against the loopback authority.

use crate::support;

use std::time::Duration;

use support::authority::TOKEN_PATH;
use support::*;
use tower_oauth::{OAuthLayer, TokenError, TokenErrorKind};

const HOUR: Duration = Duration::from_secs(3600);

fn layer_for_token_url(url: &str) -> OAuthLayer {
    with_transport(
        OAuthLayer::builder()
            .token_url(url)
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap()
}

async fn failure(oauth: &OAuthLayer) -> TokenError {
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Status, "{e}");
    e
}

#[tokio::test]
async fn a_token_url_that_is_not_a_token_endpoint_is_named() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let tried = format!("{}/oauth2/token", authority.base_url());
    let e = failure(&layer_for_token_url(&format!("{tried}?tenant=x"))).await;
    let text = e.to_string();
    assert!(
        text.contains(&format!("`{tried}` answered that is not a token endpoint")),
        "{text}"
    );
    assert!(!text.contains("tenant=x"), "the query is left out: {text}");
    assert!(
        text.contains("token_url") && text.contains("token_endpoint"),
        "{text}"
    );
}

#[tokio::test]
async fn an_auth_url_of_another_server_gets_the_hint_to_use_token_url() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(format!("{}/realms/main", authority.base_url()))
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    let text = failure(&oauth).await.to_string();
    let tried = format!("{}/realms/main{TOKEN_PATH}", authority.base_url());
    assert!(text.contains(&format!("`{tried}`")), "{text}");
    assert!(
        text.contains("auth_url appends /v1/oauth/accesstoken"),
        "{text}"
    );
    assert!(
        text.contains("give its token endpoint with token_url"),
        "{text}"
    );
}

#[tokio::test]
async fn a_redirect_or_a_refused_method_says_it_is_not_a_token_endpoint() {
    for (status, location) in [(302, Some("https://login.example.com/")), (405, None)] {
        let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
        authority.expect(authority::Style::Basic, &[]);
        let mut fault = fault(status, "");
        if let Some(location) = location {
            fault.headers.push(("location".into(), location.into()));
        }
        authority.push_faults([fault]);
        let url = authority.token_url();
        let e = failure(&layer_for_token_url(&url)).await;
        assert_eq!(e.status().map(|s| s.as_u16()), Some(status));
        let text = e.to_string();
        assert!(text.contains(&format!("`{url}`")), "{text}");
        assert!(text.contains("is not a token endpoint"), "{text}");
        if status == 302 {
            assert!(text.contains("redirects are not followed"), "{text}");
            assert!(!text.contains("login.example.com"), "{text}");
        }
    }
}

#[tokio::test]
async fn a_narrower_scope_than_requested_is_reported() {
    // The authority grants `"scope": ""` whatever is asked.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.expect(
        authority::Style::Form,
        &[("scope", "read:orders write:orders")],
    );
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .client_auth(tower_oauth::client_auth::ClientAuth::FormBody)
            .scope("read:orders write:orders"),
    )
    .build()
    .unwrap();
    let (_guard, logs) = capture_logs();
    let token = oauth.token().await.unwrap();
    assert_eq!(token.scope(), Some(""));
    let text = logs.text();
    assert!(text.contains("WARN"), "{text}");
    assert!(
        text.contains("granted fewer scopes than requested"),
        "{text}"
    );
    assert!(text.contains("missing=read:orders write:orders"), "{text}");
    assert!(!text.contains(CLIENT_SECRET), "{text}");
    // Once per token: the same token again says nothing more.
    oauth.token().await.unwrap();
    assert_eq!(logs.text().matches("granted fewer scopes").count(), 1);
}

#[tokio::test]
async fn a_jwt_access_token_without_expires_in_lives_until_its_exp() {
    use base64::Engine;
    let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    // A server whose clock is 40 minutes behind ours issues a token for 10.
    let server_now = std::time::SystemTime::now() - Duration::from_secs(2400);
    let exp = server_now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let token = format!(
        "{}.{}.c2ln",
        enc(r#"{"alg":"RS256","typ":"at+jwt"}"#),
        enc(&format!(r#"{{"iss":"https://idp.example","exp":{exp}}}"#))
    );
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.expect(authority::Style::Basic, &[]);
    authority.push_faults([Fault {
        status: 200,
        body: format!(r#"{{"access_token":"{token}","token_type":"Bearer"}}"#),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("date".into(), httpdate::fmt_http_date(server_now)),
        ],
    }]);
    let oauth = layer_for_token_url(&authority.token_url());
    let got = oauth.token().await.unwrap();
    assert_eq!(got.expose_token(), token);
    let lifetime = got.lifetime().as_secs();
    assert!((598..=600).contains(&lifetime), "{lifetime}");
    // Usable for the lifetime less the skew (10 s): not 60 minutes, and not
    // already expired by our own clock's reading of `exp`.
    let usable = oauth.stats().token_usable_for.unwrap().as_secs();
    assert!((585..=590).contains(&usable), "{usable}");
}

#[tokio::test]
async fn a_servers_refresh_in_advice_reaches_the_token() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.expect(authority::Style::Basic, &[]);
    authority.push_faults([Fault {
        status: 200,
        body: r#"{"access_token":"advised","token_type":"Bearer","expires_in":3600,"refresh_in":1800}"#
            .into(),
        headers: vec![("content-type".into(), "application/json".into())],
    }]);
    let oauth = layer_for_token_url(&authority.token_url());
    let token = oauth.token().await.unwrap();
    assert_eq!(token.refresh_in(), Some(Duration::from_secs(1800)));
    assert_eq!(token.lifetime(), HOUR);
}
