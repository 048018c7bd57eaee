//! A client secret that changes while the layer serves: read from a file or
//! a function, and taken after one refusal, with no failed request. Every
//! failure's text, as a user sees it. (An assertion file:
//! `tests/endpoint/assertion_file.rs`.)

use crate::support;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use support::authority::{Authority, Style};
use support::{replace, scratch};
use tower_oauth::{client_auth::ClientAuth, ConfigErrorKind, OAuthLayer, TokenErrorKind};

const CLIENT: &str = "rotating-client";

/// The token requests the authority refused (it issues one token per
/// accepted request).
fn refused(authority: &Authority) -> usize {
    authority.token_requests() - authority.issued().len()
}

/// A layer whose secret is `file`'s, sent with Basic to `authority`.
fn secret_file_layer(authority: &Authority, file: &Path) -> OAuthLayer {
    authority.expect(Style::Basic, &[]);
    support::with_transport(
        OAuthLayer::builder()
            .token_url(authority.token_url())
            .client_id(CLIENT)
            .client_secret_file(file),
    )
    .build()
    .unwrap()
}

#[tokio::test]
async fn a_secret_file_rotated_with_the_server_is_taken_after_one_refusal_and_no_failed_request() {
    let dir = scratch("secret-file");
    let file = dir.join("client-secret");
    std::fs::write(&file, "secret-one\n").unwrap();
    let authority = Authority::start(CLIENT, "secret-one", Duration::from_secs(1)).await;
    let oauth = secret_file_layer(&authority, &file);
    assert!(!format!("{oauth:?}").contains("secret-one"));

    let url = authority.api_url("/orders");
    let senders = support::Senders::start(
        std::slice::from_ref(&oauth),
        &url,
        Instant::now() + Duration::from_millis(3_500),
    );
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // The secret rotates: the server takes only the new one, and the file
    // holds it.
    authority.set_secret("secret-two");
    replace(&file, "secret-two\n");
    let (ok, failed) = senders.finish().await;
    assert_eq!(failed, 0, "{ok} succeeded");
    assert!(ok > 50, "{ok}");
    assert_eq!(refused(&authority), 1, "one refusal, then the new secret");
    assert!(authority.issued().len() >= 3);
    assert_eq!(authority.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_secret_function_is_called_again_after_a_refusal() {
    let authority = Authority::start(CLIENT, "first", Duration::from_secs(1)).await;
    authority.expect(Style::Form, &[]);
    let current = Arc::new(RwLock::new(String::from("first")));
    let calls = Arc::new(AtomicUsize::new(0));
    let oauth = {
        let (current, calls) = (Arc::clone(&current), Arc::clone(&calls));
        support::with_transport(
            OAuthLayer::builder()
                .token_url(authority.token_url())
                .client_id(CLIENT)
                .client_auth(ClientAuth::FormBody)
                .client_secret_fn(move || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok(current.read().unwrap().clone())
                }),
        )
        .build()
        .unwrap()
    };
    // Read once, at build.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let first = oauth.token().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    authority.set_secret("second");
    *current.write().unwrap() = "second".into();
    // The first token runs out.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let second = oauth.token().await.unwrap();
    assert_ne!(first.expose_token(), second.expose_token());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "called again after the refusal"
    );
    assert_eq!(refused(&authority), 1);
}

#[tokio::test]
async fn a_refused_secret_that_has_not_changed_is_not_sent_again() {
    let dir = scratch("secret-unchanged");
    let file = dir.join("client-secret");
    std::fs::write(&file, "stale").unwrap();
    let authority = Authority::start(CLIENT, "the-real-one", Duration::from_secs(3600)).await;
    let oauth = secret_file_layer(&authority, &file);
    let err = oauth.token().await.unwrap_err();
    assert_eq!(err.kind(), TokenErrorKind::Status);
    assert_eq!(err.error_code(), Some("invalid_client"));
    assert_eq!(authority.token_requests(), 1);
    assert!(!err.to_string().contains("stale"));
}

#[test]
fn secret_settings_name_the_file_never_its_content() {
    let dir = scratch("secret-settings");
    let base = || {
        OAuthLayer::builder()
            .token_url("https://idp.example/token")
            .client_id(CLIENT)
    };
    let missing = dir.join("nothing-here");
    let err = base().client_secret_file(&missing).build().unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::MissingClientSecret);
    assert!(
        err.message().starts_with(&format!(
            "cannot read `{}`: No such file or directory",
            missing.display()
        )),
        "{err}"
    );
    let empty = dir.join("empty");
    std::fs::write(&empty, " \n").unwrap();
    let err = base().client_secret_file(&empty).build().unwrap_err();
    assert_eq!(err.message(), format!("`{}` is empty", empty.display()));

    let err = base()
        .client_secret_fn(|| Err("vault sealed".into()))
        .build()
        .unwrap_err();
    assert_eq!(
        err.message(),
        "the client secret function failed: vault sealed"
    );
    let file = dir.join("secret");
    std::fs::write(&file, "hush").unwrap();
    let err = base()
        .client_secret("other")
        .client_secret_file(&file)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    let err = base()
        .client_auth(ClientAuth::AssertionFile(file.clone()))
        .client_secret_file(&file)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
    let builder = base().client_secret_file(&file);
    assert!(!format!("{builder:?}").contains("hush"));
}
