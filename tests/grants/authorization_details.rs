//! Authorization details (RFC 9396) on a real server, panva's oidc-provider
//! with Rich Authorization Requests (`tests/servers/oidc_provider.mjs`,
//! `RAR=1`): the layer's details and a request's each get a token of their
//! own, which the server itself says it granted for them; equal details in
//! another order share one; a token granted for other details is refused and
//! nothing of it kept; a web app's login in Chromium asks for the details
//! (pushed, as the provider offers PAR), and its token and the refreshed one
//! carry them. And on the crate's own loopback server: details that
//! are not RFC 9396's refused before anything is sent, and an answer whose
//! details do not read refused.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::net::TcpListener;
use tower_oauth::{OAuthLayer, TokenErrorKind, TokenParams};

use super::real_browser::{browser_comes_back, callback_route, node_provider, stats, Provider};
use support::serve::{answer, serve_state};

fn payment(creditor: &str, amount: &str) -> Value {
    json!([{ "type": "payment_initiation", "creditorName": creditor, "amount": amount }])
}

async fn post(url: &str) {
    let request = http::Request::post(url)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    support::hyper_client().request(request).await.unwrap();
}

/// What the server says it granted `token` for.
async fn granted(base: &str, token: &str) -> Value {
    let resp = support::hyper_client()
        .request(support::get(&format!("{base}/admin/rar?token={token}")))
        .await
        .unwrap();
    let body: Value = serde_json::from_str(&support::read(resp).await.1).unwrap();
    body["rar"].clone()
}

/// The provider with Rich Authorization Requests, and the `agent` client's
/// layer on it asking for a payment to Merchant A; `None` where the provider
/// is not installed.
fn agent_paying_merchant_a() -> Option<(Provider, String, OAuthLayer)> {
    let provider = node_provider("oidc_provider.mjs", &[("RAR", "1")])?;
    let base = provider.base.clone();
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(&base)
            .client_id("agent")
            .client_secret("agent-secret")
            .resource(format!("{base}/api"))
            .authorization_details(payment("Merchant A", "25.00")),
    )
    .build()
    .unwrap();
    Some((provider, base, oauth))
}

#[tokio::test]
async fn each_set_of_details_gets_a_token_the_server_granted_for_them() {
    let Some((_provider, base, oauth)) = agent_paying_merchant_a() else {
        return;
    };
    let layer_token = oauth.token().await.unwrap();
    let readable = layer_token.authorization_details().unwrap();
    assert_eq!(readable[0]["creditorName"], "Merchant A");
    assert_eq!(
        granted(&base, layer_token.expose_token()).await,
        payment("Merchant A", "25.00")
    );

    // A request's own details: a token of their own, never the layer's.
    let other = TokenParams::new().authorization_details(payment("Merchant B", "40.00"));
    let other_token = oauth.token_for(&other).await.unwrap();
    assert_ne!(other_token.expose_token(), layer_token.expose_token());
    assert_eq!(
        granted(&base, other_token.expose_token()).await,
        payment("Merchant B", "40.00")
    );
    assert_eq!(stats(&base).await["client_credentials"], 2);

    // The same details, their members in another order: the same token,
    // no token request.
    let reordered: Value = serde_json::from_str(
        r#"[{"amount":"40.00","creditorName":"Merchant B","type":"payment_initiation"}]"#,
    )
    .unwrap();
    let again = oauth
        .token_for(&TokenParams::new().authorization_details(reordered))
        .await
        .unwrap();
    assert_eq!(again.expose_token(), other_token.expose_token());
    assert_eq!(oauth.token().await.unwrap(), layer_token);
    assert_eq!(stats(&base).await["client_credentials"], 2);
}

#[tokio::test]
async fn a_token_granted_for_other_details_is_refused_and_nothing_kept() {
    let Some((_provider, base, oauth)) = agent_paying_merchant_a() else {
        return;
    };
    post(&format!("{base}/admin/rar-tamper")).await;
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{e}");
    assert!(e.to_string().contains("authorization_details"), "{e}");
    assert!(oauth.token_now().is_err());
    // The server grants what is asked again: the next fetch brings a token
    // for these details (none of the refused one was kept).
    post(&format!("{base}/admin/rar-honest")).await;
    oauth.force_renewal();
    // (Within the back-off the refusal left: at most 30 s.)
    let mut tries = 0;
    let token = loop {
        match oauth.token().await {
            Ok(token) => break token,
            Err(e) if e.kind() == TokenErrorKind::InvalidResponse && tries < 300 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(
        granted(&base, token.expose_token()).await,
        payment("Merchant A", "25.00")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_login_asks_for_the_details_and_its_tokens_carry_them() {
    let (callback, seen) = callback_route().await;
    let Some(provider) = node_provider(
        "oidc_provider.mjs",
        &[("RAR", "1"), ("WEB_REDIRECT_URI", &callback)],
    ) else {
        return;
    };
    let base = provider.base.clone();
    let asked = payment("Merchant A", "25.00");
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(&base)
            .scope("openid read offline_access")
            .resource(format!("{base}/api"))
            .client_id("web-app")
            .client_secret("web-app-secret")
            .authorization_details(asked.clone()),
    )
    .build()
    .unwrap();
    let person = "alice@example.com";
    let url = oauth.begin_login(person, &callback).await.unwrap();
    // Pushed: the browser's URL carries a request_uri, not the details.
    assert!(url.contains("request_uri="), "{url}");
    assert!(!url.contains("authorization_details"), "{url}");
    let back = browser_comes_back(&url, person, &seen).await;
    oauth.finish_login(person, back).await.unwrap();
    let params = TokenParams::new().account(person);
    let token = oauth.token_for(&params).await.unwrap();
    assert_eq!(token.authorization_details(), Some(&asked));
    assert_eq!(granted(&base, token.expose_token()).await, asked);
    // A refresh asks for them again, and gets them.
    let alice = oauth.for_account(person).unwrap();
    alice.force_renewal();
    let renewed = alice.token().await.unwrap();
    assert_ne!(renewed.expose_token(), token.expose_token());
    assert_eq!(stats(&base).await["refreshes"], 1);
    assert_eq!(granted(&base, renewed.expose_token()).await, asked);
    assert_eq!(renewed.authorization_details(), Some(&asked));
}

/// A layer on the token endpoint at `url`, asking for `details` if any.
fn on(url: &str, details: Option<Value>) -> OAuthLayer {
    let mut builder = OAuthLayer::builder()
        .token_url(url)
        .client_id("c")
        .client_secret("s");
    if let Some(details) = details {
        builder = builder.authorization_details(details);
    }
    support::with_transport(builder).build().unwrap()
}

/// A token endpoint that answers each request with `body`, counting them.
async fn endpoint(body: Value) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    serve_state(listener, Arc::new(body), move |body, _req| {
        seen.fetch_add(1, Ordering::SeqCst);
        let body = (*body).clone();
        async move { answer(200, body) }
    });
    (url, count)
}

#[tokio::test]
async fn details_that_are_not_rfc_9396_s_are_refused_before_anything_is_sent() {
    let (url, count) = endpoint(json!({"access_token": "t", "expires_in": 60})).await;
    for bad in [
        json!({"type": "payment_initiation"}),
        json!([]),
        json!(["payment_initiation"]),
        json!([{"creditorName": "no type"}]),
    ] {
        let built = support::with_transport(
            OAuthLayer::builder()
                .token_url(&url)
                .client_id("c")
                .client_secret("s")
                .authorization_details(bad.clone()),
        )
        .build();
        let e = built.err().unwrap_or_else(|| panic!("{bad} was taken"));
        assert!(e.to_string().contains("authorization_details"), "{e}");
        let e = on(&url, None)
            .token_for(&TokenParams::new().authorization_details(bad.clone()))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidRequest, "{bad}: {e}");
    }
    // Given twice (add_param): one array holds every object.
    let oauth = on(&url, None);
    let twice = TokenParams::new()
        .add_param("authorization_details", r#"[{"type":"a"}]"#)
        .add_param("authorization_details", r#"[{"type":"b"}]"#);
    let e = oauth.token_for(&twice).await.unwrap_err();
    assert!(e.to_string().contains("more than once"), "{e}");
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_answer_whose_details_do_not_read_or_differ_is_refused() {
    let asked = payment("Merchant A", "25.00");
    for (answered, says) in [
        (json!("payment_initiation"), "not a JSON array"),
        (json!([{"creditorName": "Merchant A"}]), "without a `type`"),
        (
            payment("Merchant A", "9999.00"),
            "other authorization_details",
        ),
        (
            payment("Merchant A", "25.00")[0].clone(),
            "not a JSON array",
        ),
    ] {
        let (url, _) = endpoint(json!({
            "access_token": "t", "expires_in": 60, "authorization_details": answered,
        }))
        .await;
        let e = on(&url, Some(asked.clone())).token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{e}");
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    // Details asked and none answered, or none asked and some answered:
    // refused as well.
    for (asked, answered, says) in [
        (
            Some(asked.clone()),
            None,
            "without the authorization_details",
        ),
        (None, Some(asked.clone()), "did not ask for"),
    ] {
        let mut body = json!({"access_token": "t", "expires_in": 60});
        if let Some(answered) = answered {
            body["authorization_details"] = answered;
        }
        let (url, _) = endpoint(body).await;
        let e = on(&url, asked).token().await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::InvalidResponse, "{e}");
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    // Granted as asked, members in another order, a number written
    // otherwise: taken, and readable.
    let (url, _) = endpoint(json!({
        "access_token": "t", "expires_in": 60,
        "authorization_details": [{"amount": "25.00", "type": "payment_initiation",
                                   "creditorName": "Merchant A", "n": 2}],
    }))
    .await;
    let asked_otherwise = json!([{"type": "payment_initiation", "amount": "25.00",
                                  "creditorName": "Merchant A", "n": 2.0}]);
    let token = on(&url, Some(asked_otherwise)).token().await.unwrap();
    assert_eq!(token.authorization_details().unwrap()[0]["amount"], "25.00");
}
