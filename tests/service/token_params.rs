//! One layer, many tokens: requests select a token by their TokenParams
//! (an extension, or `params_for`), against a loopback token endpoint that
//! binds each token to the resource, audience and scope requested, and APIs
//! that accept only their own.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use support::resource_server::{Grant, ResourceServer, CLIENT_ID, CLIENT_SECRET};
use tower::retry::{Retry, RetryLayer};
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{
    BoxFuture, OAuthLayer, OAuthLayerBuilder, OAuthService, RetryUnauthorized, TokenError,
    TokenErrorKind, TokenParams,
};

const HOUR: Duration = Duration::from_secs(3600);

fn builder(server: &ResourceServer) -> OAuthLayerBuilder {
    support::with_transport(
        OAuthLayer::builder()
            .token_url(server.token_url())
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
}

type Client = Retry<RetryUnauthorized, OAuthService<support::HyperClient>>;

fn client(oauth: &OAuthLayer) -> Client {
    ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(support::hyper_client())
}

fn get(url: &str, params: Option<&TokenParams>) -> Request<Full<Bytes>> {
    let mut request = Request::get(url).body(Full::default()).unwrap();
    if let Some(params) = params {
        request.extensions_mut().insert(params.clone());
    }
    request
}

/// Waits for `tasks`, each of which sent requests, and checks every one was
/// answered 200.
async fn all_ok(tasks: Vec<tokio::task::JoinHandle<Vec<StatusCode>>>, server: &ResourceServer) {
    for task in tasks {
        let statuses = task.await.unwrap();
        assert!(
            statuses.iter().all(|s| *s == 200),
            "{:?}",
            server.refusals()
        );
    }
}

/// One request to each of the [`APIS`], each answered 200.
async fn each_api_answers(client: &Client, server: &ResourceServer) {
    for name in APIS {
        let answer = status(client, get(&server.api_url(name), None)).await;
        assert_eq!(answer.unwrap(), 200, "{name}: {:?}", server.refusals());
    }
}

async fn status(client: &Client, request: Request<Full<Bytes>>) -> Result<StatusCode, BoxError> {
    Ok(client.clone().oneshot(request).await?.status())
}

/// Requests to `/api/{name}` get the resource `urn:api:{name}`.
fn by_path(names: &[&str]) -> impl Fn(&http::request::Parts) -> Option<TokenParams> + Send + Sync {
    let params: Vec<(String, TokenParams)> = names
        .iter()
        .map(|n| {
            (
                format!("/api/{n}"),
                TokenParams::new().resource(ResourceServer::resource(n)),
            )
        })
        .collect();
    move |parts| {
        params
            .iter()
            .find(|(path, _)| parts.uri.path() == path)
            .map(|(_, p)| p.clone())
    }
}

const APIS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_apis_mixed_concurrently_each_get_their_own_token_once() {
    let server = ResourceServer::start(HOUR).await;
    server.set_delay(Duration::from_millis(100));
    let oauth = builder(&server).params_for(by_path(&APIS)).build().unwrap();
    let client = client(&oauth);
    let mut tasks = Vec::new();
    for worker in 0..16 {
        let (client, urls) = (
            client.clone(),
            APIS.iter().map(|n| server.api_url(n)).collect::<Vec<_>>(),
        );
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for n in 0..40 {
                let url = &urls[(worker * 7 + n * 3) % urls.len()];
                statuses.push(status(&client, get(url, None)).await.unwrap());
            }
            statuses
        }));
    }
    all_ok(tasks, &server).await;
    // One token request per slot on a cold start, never a token of another.
    for name in APIS {
        assert_eq!(server.requests_for(name), 1, "{name}");
    }
    assert_eq!(server.token_requests(), 8);
    assert_eq!(server.api_refused(), 0);
    assert_eq!(server.api_accepted(), 16 * 40);
    let slots = oauth.slot_stats();
    assert_eq!(slots.len(), 8);
    assert!(slots.iter().all(|(_, s)| s.token_requests == 1));
    assert_eq!(oauth.stats().token_requests, 8);
    // The default token was never needed.
    assert_eq!(oauth.stats().token_usable_for, None);
}

#[tokio::test]
async fn an_extension_selects_its_token_and_a_bare_request_the_default() {
    let server = ResourceServer::start(HOUR).await;
    let oauth = builder(&server).scope("base").build().unwrap();
    let client = client(&oauth);
    let orders = TokenParams::new()
        .resource(ResourceServer::resource("orders"))
        .audience("orders-api")
        .scope("orders:read");
    for _ in 0..3 {
        let s = status(&client, get(&server.api_url("orders"), Some(&orders))).await;
        assert_eq!(s.unwrap(), 200, "{:?}", server.refusals());
        assert_eq!(
            status(&client, get(&server.api_url("default"), None))
                .await
                .unwrap(),
            200
        );
    }
    let grants: HashSet<Grant> = server.requests().into_keys().collect();
    let expected: HashSet<Grant> = [
        Grant {
            resource: vec![ResourceServer::resource("orders")],
            audience: Some("orders-api".into()),
            // The request's scope replaces the layer's.
            scope: Some("orders:read".into()),
        },
        Grant {
            resource: vec![],
            audience: None,
            scope: Some("base".into()),
        },
    ]
    .into();
    assert_eq!(grants, expected);
    assert_eq!(server.token_requests(), 2);
    // Empty parameters are the default token.
    let token = oauth.token_for(&TokenParams::new()).await.unwrap();
    assert_eq!(
        token.expose_token(),
        oauth.token().await.unwrap().expose_token()
    );
    let orders_token = oauth.token_for(&orders).await.unwrap();
    assert_ne!(orders_token.expose_token(), token.expose_token());
    assert_eq!(server.token_requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_renew_on_their_own_under_load() {
    let server = ResourceServer::start(Duration::from_secs(2)).await;
    let names = ["a", "b", "c", "d"];
    let oauth = builder(&server)
        .params_for(by_path(&names))
        .build()
        .unwrap();
    let client = client(&oauth);
    let mut tasks = Vec::new();
    for name in names {
        let (client, url) = (client.clone(), server.api_url(name));
        tasks.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            let mut statuses = Vec::new();
            while tokio::time::Instant::now() < deadline {
                statuses.push(status(&client, get(&url, None)).await.unwrap());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            statuses
        }));
    }
    all_ok(tasks, &server).await;
    for name in names {
        let n = server.requests_for(name);
        // Renewed ahead (about every second for 2 s tokens), never per request.
        assert!(
            (3..=7).contains(&n),
            "{name}: {n} token requests in 5 s of 2 s tokens"
        );
    }
    assert!(oauth
        .slot_stats()
        .iter()
        .all(|(_, s)| s.renewals_ahead >= 1));
    assert_eq!(oauth.stats().forced_renewals, 0);
}

#[tokio::test]
async fn a_401_on_one_slot_renews_that_slot_alone() {
    let server = ResourceServer::start(HOUR).await;
    let oauth = builder(&server).params_for(by_path(&APIS)).build().unwrap();
    let client = client(&oauth);
    each_api_answers(&client, &server).await;
    server.revoke_for("c");
    // Refused once, the slot's token dropped, resent with a new one.
    assert_eq!(
        status(&client, get(&server.api_url("c"), None))
            .await
            .unwrap(),
        200
    );
    for name in APIS {
        assert_eq!(
            status(&client, get(&server.api_url(name), None))
                .await
                .unwrap(),
            200
        );
        let expected = if name == "c" { 2 } else { 1 };
        assert_eq!(server.requests_for(name), expected, "{name}");
    }
    let stats = oauth.slot_stats();
    let forced: u64 = stats.iter().map(|(_, s)| s.forced_renewals).sum();
    assert_eq!(forced, 1);
    assert_eq!(oauth.stats().forced_renewals, 1);
}

#[tokio::test]
async fn a_flood_of_distinct_params_stays_bounded_and_is_reported_once() {
    let server = ResourceServer::start(HOUR).await;
    let oauth = builder(&server).max_token_slots(4).build().unwrap();
    let client = client(&oauth);
    let (_guard, logs) = support::capture_logs();
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let mut tasks_early = 0;
    for n in 0..100 {
        if n == 10 {
            // The clients' pooled connections are up by now.
            tasks_early = alive();
        }
        // A caller that puts a request id into the scope.
        let params = TokenParams::new()
            .resource(ResourceServer::resource("flood"))
            .scope(format!("read request-{n}"));
        let s = status(&client, get(&server.api_url("flood"), Some(&params))).await;
        assert_eq!(s.unwrap(), 200);
        assert!(oauth.slot_stats().len() <= 4);
    }
    assert_eq!(server.token_requests(), 100);
    assert_eq!(oauth.slot_stats().len(), 4);
    assert_eq!(
        oauth.stats().token_requests,
        100,
        "evicted slots still count"
    );
    let warnings = logs
        .text()
        .matches("more distinct TokenParams than max_token_slots")
        .count();
    assert_eq!(warnings, 1, "{}", logs.text());
    // 90 more slots made and evicted left no task behind.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let tasks_late = alive();
    assert!(
        tasks_late <= tasks_early,
        "{tasks_early} tasks after 10 slots, {tasks_late} after 100"
    );
}

#[tokio::test]
async fn with_an_issuer_the_metadata_is_read_once_for_every_slot() {
    let server = ResourceServer::start(HOUR).await;
    let oauth = support::with_transport(
        OAuthLayer::builder()
            .issuer(server.issuer())
            .allow_insecure_http(true)
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET)
            .params_for(by_path(&APIS)),
    )
    .build()
    .unwrap();
    let client = client(&oauth);
    each_api_answers(&client, &server).await;
    assert_eq!(server.token_requests(), 8);
    assert_eq!(server.metadata_reads(), 1);
}

#[tokio::test]
async fn invalid_params_fail_their_request_alone() {
    let server = ResourceServer::start(HOUR).await;
    let oauth = builder(&server).build().unwrap();
    let client = client(&oauth);
    let bad = TokenParams::new().param("client_secret", "guess");
    let e = client
        .clone()
        .oneshot(get(&server.api_url("a"), Some(&bad)))
        .await
        .unwrap_err();
    let e = e.downcast_ref::<TokenError>().unwrap();
    assert_eq!(e.kind(), TokenErrorKind::InvalidRequest);
    assert!(e.to_string().contains("client_secret"), "{e}");
    assert_eq!(server.token_requests(), 0);
    assert!(oauth.slot_stats().is_empty());
    let good = TokenParams::new().resource(ResourceServer::resource("a"));
    assert_eq!(
        status(&client, get(&server.api_url("a"), Some(&good)))
            .await
            .unwrap(),
        200
    );
}

#[tokio::test]
async fn a_token_source_layer_has_one_token() {
    struct Fixed;
    impl tower_oauth::TokenSource for Fixed {
        fn fetch_token(&self) -> BoxFuture<'_, Result<tower_oauth::AccessToken, TokenError>> {
            Box::pin(async { Ok(tower_oauth::AccessToken::new("fixed")) })
        }
    }
    let oauth = OAuthLayer::builder().token_source(Fixed).build().unwrap();
    let params = TokenParams::new().resource("urn:api:a");
    let e = oauth.token_for(&params).await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::InvalidRequest);
    let e = OAuthLayer::builder()
        .token_source(Fixed)
        .params_for(|_| None)
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), tower_oauth::ConfigErrorKind::Conflicting);
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_shares_each_slots_token_through_redis() {
    if support::redis_server::missing() {
        return;
    }
    let redis = support::redis_server::RedisServer::start();
    let server = ResourceServer::start(HOUR).await;
    server.set_delay(Duration::from_millis(100));
    let names = ["a", "b", "c"];
    let replicas: Vec<OAuthLayer> = (0..4)
        .map(|_| {
            builder(&server)
                .params_for(by_path(&names))
                .token_store(
                    tower_oauth::store::RedisStore::new(redis.url())
                        .unwrap()
                        .prefix("slots:"),
                )
                .build()
                .unwrap()
        })
        .collect();
    let mut tasks = Vec::new();
    for replica in &replicas {
        for name in names {
            let (client, url) = (client(replica), server.api_url(name));
            tasks.push(tokio::spawn(async move {
                status(&client, get(&url, None)).await
            }));
        }
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), 200, "{:?}", server.refusals());
    }
    // One token request per slot for the whole fleet.
    for name in names {
        assert_eq!(server.requests_for(name), 1, "{name}");
    }
    assert_eq!(server.token_requests(), 3);
}
