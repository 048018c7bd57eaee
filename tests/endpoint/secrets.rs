//! Neither the client secret nor any token shows in logs (every level), in
//! `Debug` or in `Display`, across success and failure paths.

use crate::support;

use std::time::Duration;

use support::*;
use tower::{ServiceBuilder, ServiceExt};

#[tokio::test]
async fn no_secret_or_token_in_any_output() {
    let (_guard, captured) = capture_logs();

    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(3600)).await;
    // A failure whose body echoes the secret, then a rate limit, then tokens.
    authority.push_faults([
        fault(
            401,
            &format!(
                r#"{{"error":"invalid_client","error_description":"secret {CLIENT_SECRET} is not valid"}}"#
            ),
        ),
        fault(
            429,
            r#"{"fault":{"faultstring":"Spike arrest violation","detail":{"errorcode":"policies.ratelimit.SpikeArrestViolation"}}}"#,
        ),
    ]);
    let builder = builder(&authority)
        .min_backoff(Duration::from_millis(20))
        .max_backoff(Duration::from_millis(20));
    let mut shown = vec![format!("{builder:?}")];
    let oauth = builder.build().unwrap();
    shown.push(format!("{oauth:?}"));
    let client = ServiceBuilder::new().layer(oauth).service(hyper_client());

    let mut outcomes = Vec::new();
    for round in 0..40 {
        if round == 10 {
            // Refuse the token in use; its successors live one second, so
            // they are renewed ahead in the rounds that follow.
            authority.set_lifetime(Duration::from_secs(1));
            authority.revoke_all();
        }
        let resp = client.clone().oneshot(get(&authority.api_url("/p"))).await;
        match resp {
            Ok(r) => outcomes.push(r.status().as_u16()),
            Err(e) => {
                shown.push(format!("{e} {e:?}"));
                outcomes.push(0);
            }
        }
        shown.push(format!("{client:?}"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The paths were taken: failures, successes, a refusal, renewals.
    assert!(outcomes.contains(&0), "{outcomes:?}");
    assert!(outcomes.contains(&200), "{outcomes:?}");
    assert!(outcomes.contains(&401), "{outcomes:?}");
    assert!(authority.issued().len() >= 2);

    let logs = captured.text();
    assert!(logs.contains("access token fetched"), "{logs}");
    assert!(logs.contains("access token request failed"), "{logs}");
    assert!(logs.contains("access token was refused"), "{logs}");
    assert!(logs.contains("renewing the access token ahead"), "{logs}");
    let everything = format!("{logs}\n{}", shown.join("\n"));
    assert!(!everything.contains(CLIENT_SECRET), "secret leaked");
    for token in authority.issued() {
        assert!(!everything.contains(&token), "token leaked");
    }
    // The echoed secret was scrubbed, not dropped with the rest of the text.
    assert!(
        everything.contains("secret [redacted] is not valid"),
        "{everything}"
    );
}
