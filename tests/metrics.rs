//! The `metrics` feature: a recorder installed by the program sees every
//! metric the layer reports, with the right counts, after a cold start, a
//! renewal ahead, a 401 and a failed fetch, and a protected resource's
//! metadata read. One test in its own binary: the
//! recorder is process-wide.
#![cfg(feature = "metrics")]

mod support;

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::*;
use tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt};
use tower_oauth::RetryUnauthorized;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorder_sees_every_metric() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    // Two-second tokens: renewed ahead after one.
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(2)).await;
    let oauth = builder(&authority).build().unwrap();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth.clone())
        .service(hyper_client());
    let url = authority.api_url("/data");

    // A cold start: five requests, one token request (slow enough that all
    // five find it under way), five waits.
    authority.set_delay(Duration::from_millis(200));
    let sends: Vec<_> = (0..5)
        .map(|_| tokio::spawn(client.clone().oneshot(get(&url))))
        .collect();
    for send in sends {
        assert_eq!(send.await.unwrap().unwrap().status(), 200);
    }
    authority.set_delay(Duration::ZERO);
    // Past the renewal point: renewed ahead, in the background.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        client.clone().oneshot(get(&url)).await.unwrap().status(),
        200
    );
    while oauth.stats().token_requests < 2 || oauth.stats().token_usable_for.is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    // A 401: the token is dropped (a renewal for a refusal), the request
    // sent again, and its token request fails.
    authority.revoke_all();
    authority.push_faults([fault(503, r#"{"error":"temporarily_unavailable"}"#)]);
    let _ = client.clone().oneshot(get(&url)).await;

    // A protected resource: its metadata, then its server's, both read once
    // (and one more token request).
    let other = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3600)).await;
    let resource = format!("{}/api", other.base_url());
    other.publish(
        "/.well-known/oauth-protected-resource/api",
        format!(
            r#"{{"resource":"{resource}","authorization_servers":["{}"]}}"#,
            other.base_url()
        ),
    );
    other.publish(
        "/.well-known/oauth-authorization-server",
        format!(
            r#"{{"issuer":"{}","token_endpoint":"{}"}}"#,
            other.base_url(),
            other.token_url()
        ),
    );
    other.expect(support::authority::Style::Basic, &[("resource", &resource)]);
    let resource_layer = with_transport(
        tower_oauth::OAuthLayer::builder()
            .protected_resource(&resource)
            .trusted_issuers([other.base_url()])
            .client_id(CLIENT_ID)
            .client_secret(CLIENT_SECRET),
    )
    .build()
    .unwrap();
    resource_layer.token().await.unwrap();

    let mut seen = std::collections::HashMap::new();
    for (key, unit, _, value) in snapshotter.snapshot().into_vec() {
        let (name, labels) = key.key().clone().into_parts();
        let mut labels: Vec<String> = labels
            .iter()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let count = match value {
            DebugValue::Counter(n) => n,
            DebugValue::Histogram(values) => {
                assert!(values.iter().all(|v| v.0 >= 0.0 && v.0 < 5.0), "{values:?}");
                values.len() as u64
            }
            DebugValue::Gauge(_) => panic!("no gauges"),
        };
        if name.as_str() == "oauth.client.token.request.duration" {
            assert_eq!(unit, Some(metrics::Unit::Seconds));
        }
        seen.insert(format!("{} {}", name.as_str(), labels.join(",")), count);
    }
    eprintln!("{seen:#?}");
    let get = |k: &str| seen.get(k).copied().unwrap_or(0);
    assert_eq!(get("oauth.client.token.requests outcome=success"), 3);
    assert_eq!(
        get("oauth.client.token.requests error.type=status,outcome=failure"),
        1
    );
    assert_eq!(
        get("oauth.client.token.request.duration outcome=success"),
        3
    );
    // Without a store every fetch is a token request.
    assert_eq!(get("oauth.client.token.fetches outcome=success"), 3);
    assert_eq!(
        get("oauth.client.token.fetches error.type=status,outcome=failure"),
        1
    );
    assert_eq!(
        get("oauth.client.token.request.duration outcome=failure"),
        1
    );
    assert_eq!(get("oauth.client.token.renewals reason=ahead"), 1);
    assert_eq!(get("oauth.client.token.renewals reason=refused"), 1);
    // The five of the cold start, the resent request, and the protected
    // resource's first token.
    assert_eq!(get("oauth.client.token.waits "), 7);
    assert_eq!(get("oauth.client.unauthorized.retries "), 1);
    assert_eq!(
        get("oauth.client.metadata.reads document=protected_resource,outcome=success"),
        1
    );
    assert_eq!(
        get("oauth.client.metadata.reads document=authorization_server,outcome=success"),
        1
    );
    // Nothing else, and no label but these.
    assert_eq!(seen.len(), 12, "{seen:#?}");
}
