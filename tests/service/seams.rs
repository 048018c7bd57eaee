//! Client authentication styles, extra parameters, token placement, and the
//! seams: token source, transport, environment, token handle, retry policy.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::Full;
use support::authority::Style;
use support::*;
use tower::retry::RetryLayer;
use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
use tower_oauth::{
    client_auth::ClientAuth, AccessToken, BoxFuture, ConfigErrorKind, OAuthLayer,
    OAuthLayerBuilder, RetryUnauthorized, TokenError, TokenErrorKind, TokenSource,
};

const HOUR: Duration = Duration::from_secs(3600);
/// Every character an unencoded body or a naive Basic header gets wrong.
const HARD_SECRET: &str = "p+a/s&s:w=o rd%25é";

async fn call_api(oauth: OAuthLayer, authority: &Authority) -> Result<u16, BoxError> {
    let client = ServiceBuilder::new().layer(oauth).service(hyper_client());
    let resp = client.oneshot(get(&authority.api_url("/p"))).await?;
    Ok(resp.status().as_u16())
}

#[tokio::test]
async fn form_body_carries_any_secret() {
    let authority = Authority::start("id:with+chars", HARD_SECRET, HOUR).await;
    authority.expect(Style::Form, &[("scope", "read write")]);
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id("id:with+chars")
            .client_secret(HARD_SECRET)
            .client_auth(ClientAuth::FormBody)
            .scope("read write"),
    )
    .build()
    .unwrap();
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn basic_auth_encodes_before_base64() {
    let authority = Authority::start("id:with+chars", HARD_SECRET, HOUR).await;
    authority.expect(
        Style::Basic,
        &[
            ("scope", "read:products"),
            ("audience", "https://api.example"),
        ],
    );
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id("id:with+chars")
            .client_secret(HARD_SECRET)
            .client_auth(ClientAuth::Basic)
            .scope("read:products")
            .audience("https://api.example"),
    )
    .build()
    .unwrap();
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn wrong_secret_with_basic_is_refused() {
    let authority = Authority::start("id", HARD_SECRET, HOUR).await;
    authority.expect(Style::Basic, &[]);
    let oauth = with_transport(
        OAuthLayer::builder()
            .auth_url(authority.base_url())
            .client_id("id")
            .client_secret("p+a/s&s:w=o rd%25") // one character short
            .client_auth(ClientAuth::Basic),
    )
    .build()
    .unwrap();
    let err = call_api(oauth, &authority).await.unwrap_err();
    let e = err.downcast_ref::<TokenError>().unwrap();
    assert_eq!(e.status(), Some(http::StatusCode::UNAUTHORIZED));
    assert_eq!(authority.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn unencoded_body_appends_extra_parameters_in_order() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    authority.expect(
        Style::Unencoded,
        &[
            ("scope", "read"),
            ("audience", "products"),
            ("resource", "urn:x"),
        ],
    );
    let oauth = builder(&authority)
        .scope("read")
        .audience("products")
        .param("resource", "urn:old")
        .param("resource", "urn:x")
        .build()
        .unwrap();
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
}

#[test]
fn parameters_and_styles_are_checked_at_build() {
    let base = || {
        with_transport(
            OAuthLayer::builder()
                .auth_url("https://auth.example.com")
                .client_id("id")
                .client_secret("secret"),
        )
    };
    let kind = |b: tower_oauth::OAuthLayerBuilder| b.build().unwrap_err().kind();
    for reserved in ["grant_type", "client_id", "client_secret"] {
        assert_eq!(
            kind(base().param(reserved, "x")),
            ConfigErrorKind::InvalidParameter
        );
    }
    assert_eq!(
        kind(base().param("", "x")),
        ConfigErrorKind::InvalidParameter
    );
    // The unencoded body cannot carry a space or `&`; the encoded styles can.
    assert_eq!(kind(base().scope("a b")), ConfigErrorKind::InvalidParameter);
    assert_eq!(
        kind(base().param("a", "b&c")),
        ConfigErrorKind::InvalidParameter
    );
    assert_eq!(
        kind(base().client_secret(HARD_SECRET)),
        ConfigErrorKind::InvalidClientSecret
    );
    for style in [ClientAuth::FormBody, ClientAuth::Basic] {
        assert!(base()
            .client_auth(style)
            .client_secret(HARD_SECRET)
            .scope("a b")
            .build()
            .is_ok());
    }
    assert_eq!(
        kind(base().auth_scheme("Two words")),
        ConfigErrorKind::InvalidSetting
    );
}

type Seen = Arc<Mutex<Vec<http::HeaderMap>>>;
type Inner = tower::util::BoxCloneService<Request<Full<Bytes>>, Response<Full<Bytes>>, BoxError>;

/// An inner service that records the headers it got and answers 200.
fn recorder() -> (Inner, Seen) {
    let seen = Seen::default();
    let record = Arc::clone(&seen);
    let svc = service_fn(move |req: Request<Full<Bytes>>| {
        record.lock().unwrap().push(req.headers().clone());
        async { Ok::<_, BoxError>(Response::new(Full::default())) }
    });
    (Inner::new(svc), seen)
}

#[tokio::test]
async fn the_token_goes_in_the_configured_header_and_scheme() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority)
        .header_name(HeaderName::from_static("x-access-token"))
        .auth_scheme("")
        .build()
        .unwrap();
    let (inner, seen) = recorder();
    let client = ServiceBuilder::new().layer(oauth).service(inner);
    client.oneshot(get("http://api.example/")).await.unwrap();
    let headers = seen.lock().unwrap()[0].clone();
    let token = headers["x-access-token"].to_str().unwrap();
    assert_eq!(authority.issued(), vec![token.to_owned()]);
    assert!(headers["x-access-token"].is_sensitive());
    assert!(!headers.contains_key(http::header::AUTHORIZATION));

    let oauth = builder(&authority).auth_scheme("Token").build().unwrap();
    let (inner, seen) = recorder();
    ServiceBuilder::new()
        .layer(oauth)
        .service(inner)
        .oneshot(get("http://api.example/"))
        .await
        .unwrap();
    let value = seen.lock().unwrap()[0][http::header::AUTHORIZATION].clone();
    assert!(value.to_str().unwrap().starts_with("Token tok"));
}

#[tokio::test]
async fn an_existing_header_is_replaced_unless_kept() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let mine = || {
        Request::get("http://api.example/")
            .header(http::header::AUTHORIZATION, "Bearer mine")
            .body(Full::default())
            .unwrap()
    };

    let (inner, seen) = recorder();
    let client = ServiceBuilder::new()
        .layer(builder(&authority).build().unwrap())
        .service(inner);
    client.oneshot(mine()).await.unwrap();
    assert_ne!(
        seen.lock().unwrap()[0][http::header::AUTHORIZATION],
        "Bearer mine"
    );
    assert_eq!(authority.token_requests(), 1);

    let (inner, seen) = recorder();
    let client = ServiceBuilder::new()
        .layer(
            builder(&authority)
                .keep_existing_header(true)
                .build()
                .unwrap(),
        )
        .service(inner);
    client.clone().oneshot(mine()).await.unwrap();
    assert_eq!(
        seen.lock().unwrap()[0][http::header::AUTHORIZATION],
        "Bearer mine"
    );
    // Kept, and no token was needed for it.
    assert_eq!(authority.token_requests(), 1);
    // A request without the header still gets the layer's token.
    client.oneshot(get("http://api.example/")).await.unwrap();
    assert_ne!(
        seen.lock().unwrap()[1][http::header::AUTHORIZATION],
        "Bearer mine"
    );
}

/// A token source that counts its calls and can be told to fail.
#[derive(Clone, Default)]
struct Counting {
    calls: Arc<AtomicUsize>,
    fail: Arc<std::sync::atomic::AtomicBool>,
}

impl TokenSource for Counting {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            if self.fail.load(Ordering::SeqCst) {
                return Err(TokenError::custom(
                    TokenErrorKind::Transport,
                    "vault sealed",
                ));
            }
            Ok(AccessToken::new(format!("vault-{n}")).with_expires_in(Duration::from_secs(2)))
        })
    }
}

#[tokio::test]
async fn a_token_source_keeps_caching_single_flight_renewal_and_backoff() {
    let source = Counting::default();
    let oauth = OAuthLayer::builder()
        .token_source(source.clone())
        .min_backoff(Duration::from_millis(300))
        .build()
        .unwrap();
    assert!(oauth.token_url().is_none());
    let (inner, seen) = recorder();
    let client = ServiceBuilder::new().layer(oauth).service(inner);

    // Single flight.
    let tasks: Vec<_> = (0..50)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://api.example/"))))
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(source.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        seen.lock().unwrap()[49][http::header::AUTHORIZATION],
        "Bearer vault-0"
    );

    // Renewal ahead: a 2 s token renews after about 1 s, without a wait.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client
        .clone()
        .oneshot(get("http://api.example/"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    client
        .clone()
        .oneshot(get("http://api.example/"))
        .await
        .unwrap();
    assert_eq!(source.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        seen.lock().unwrap().last().unwrap()[http::header::AUTHORIZATION],
        "Bearer vault-1"
    );

    // Failures back off, with the source's error kind.
    source.fail.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let err = client
        .clone()
        .oneshot(get("http://api.example/"))
        .await
        .unwrap_err();
    let e = err.downcast_ref::<TokenError>().unwrap();
    assert_eq!(e.kind(), TokenErrorKind::Transport);
    assert!(e.to_string().contains("vault sealed"));
    let calls = source.calls.load(Ordering::SeqCst);
    let err = client
        .clone()
        .oneshot(get("http://api.example/"))
        .await
        .unwrap_err();
    assert!(err
        .downcast_ref::<TokenError>()
        .unwrap()
        .backing_off()
        .is_some());
    assert_eq!(source.calls.load(Ordering::SeqCst), calls);
}

#[test]
fn a_token_source_excludes_endpoint_settings() {
    let err = OAuthLayer::builder()
        .token_source(Counting::default())
        .auth_url("https://auth.example.com")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::Conflicting);
}

#[tokio::test]
async fn a_hyper_client_can_carry_the_token_request() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        .transport(hyper_client())
        .build()
        .unwrap();
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
    assert_eq!(authority.token_requests(), 1);
}

#[tokio::test]
async fn a_custom_transport_is_bounded_too() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let huge = format!(r#"{{"access_token":"{}"}}"#, "a".repeat(100 * 1024));
    authority.push_faults([fault(200, &huge)]);
    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        .transport(hyper_client())
        .build()
        .unwrap();
    let err = call_api(oauth.clone(), &authority).await.unwrap_err();
    let e = err.downcast_ref::<TokenError>().unwrap();
    assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);

    // A transport that fails is a transport error.
    let broken = service_fn(|_: Request<Full<Bytes>>| async {
        Err::<Response<Full<Bytes>>, BoxError>("no route".into())
    });
    let oauth = OAuthLayer::builder()
        .auth_url(authority.base_url())
        .client_id(CLIENT_ID)
        .client_secret(CLIENT_SECRET)
        .transport(broken)
        .build()
        .unwrap();
    let e = oauth.token().await.unwrap_err();
    assert_eq!(e.kind(), TokenErrorKind::Transport);
    assert!(e.to_string().contains("no route"));
}

#[tokio::test]
async fn the_token_handle_shares_the_cache_and_forces_renewal() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let first = oauth.token().await.unwrap();
    assert_eq!(first.application_name(), Some("quickstart-app"));
    // The layer's requests use the same token.
    let client = client(&oauth);
    client
        .clone()
        .oneshot(get(&authority.api_url("/p")))
        .await
        .unwrap();
    assert_eq!(authority.presented(), vec![first.expose_token().to_owned()]);
    assert_eq!(authority.token_requests(), 1);

    assert!(oauth.force_renewal());
    let second = oauth.token().await.unwrap();
    assert_ne!(first, second);
    assert_eq!(authority.token_requests(), 2);
    // Rate-limited.
    assert!(!oauth.force_renewal());
    assert_eq!(oauth.token().await.unwrap(), second);
}

#[tokio::test]
async fn retry_unauthorized_turns_a_revoked_token_into_a_renewal() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let oauth = builder(&authority).build().unwrap();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(oauth)
        .service(hyper_client());
    let post = || {
        Request::post(authority.api_url("/orders"))
            .header("x-echo", "resent")
            .body(Full::new(Bytes::from_static(b"{\"qty\":1}")))
            .unwrap()
    };
    assert_eq!(client.clone().oneshot(post()).await.unwrap().status(), 200);
    authority.revoke_all();
    let (status, body) = read(client.clone().oneshot(post()).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    // The resent request was the same request.
    assert!(body.contains(r#""method":"POST""#) && body.contains(r#""echo":"resent""#));
    assert!(body.contains(r#""body_len":9"#), "{body}");
    assert_eq!(authority.api_refused(), 1);
    assert_eq!(authority.token_requests(), 2);

    // An API that refuses every token: one resend, then the 401 is returned.
    let refusing = service_fn(|_: Request<Full<Bytes>>| async {
        let mut r = Response::new(Full::<Bytes>::default());
        *r.status_mut() = http::StatusCode::UNAUTHORIZED;
        Ok::<_, BoxError>(r)
    });
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let calls = Arc::clone(&calls);
        tower::util::MapRequestLayer::new(move |r: Request<Full<Bytes>>| {
            calls.fetch_add(1, Ordering::SeqCst);
            r
        })
    };
    let refused_layer = builder(&authority).build().unwrap();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryUnauthorized::default()))
        .layer(refused_layer.clone())
        .layer(counted)
        .service(refusing);
    let call = || client.clone().oneshot(get("http://api.example/"));
    let resp = call().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // While the renewal is rate-limited a resend would carry the very token
    // refused: each call reaches the API once, and its 401 comes back.
    for n in 1..=4 {
        let resp = call().await.unwrap();
        assert_eq!(resp.status(), 401);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2 + n,
            "call {n} was sent again"
        );
    }
    assert_eq!(refused_layer.stats().token_requests, 2);
    assert_eq!(refused_layer.stats().forced_renewals, 1);
}

#[test]
fn retry_unauthorized_needs_no_token_for_other_answers() {
    use tower::retry::Policy;
    let mut policy = RetryUnauthorized::default();
    let mut req = Request::new(String::from("body"));
    req.headers_mut()
        .insert("x-a", HeaderValue::from_static("1"));
    let clone = Policy::<_, Response<()>, ()>::clone_request(&mut policy, &req).unwrap();
    assert_eq!(clone.headers()["x-a"], "1");
    assert_eq!(clone.body(), "body");
    let mut ok: Result<Response<()>, ()> = Ok(Response::new(()));
    assert!(policy.retry(&mut req, &mut ok).is_none());
    let mut err: Result<Response<()>, ()> = Err(());
    assert!(policy.retry(&mut req, &mut err).is_none());
    let mut refused: Result<Response<()>, ()> =
        Ok(Response::builder().status(401).body(()).unwrap());
    assert!(policy.retry(&mut req, &mut refused).is_some());
    assert!(policy.retry(&mut req, &mut refused).is_none());
}

/// A store shared by layers of one process: the seam, without Redis.
#[derive(Default)]
struct InProcess {
    held: Mutex<Option<(AccessToken, std::time::Instant)>>,
    fetches: AtomicUsize,
}

impl tower_oauth::store::TokenStore for InProcess {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a tower_oauth::store::FetchContext<'a>,
    ) -> BoxFuture<'a, Result<tower_oauth::store::StoredToken, TokenError>> {
        Box::pin(async move {
            let held = self.held.lock().unwrap().clone();
            if let Some((token, until)) = held {
                let shared = tower_oauth::store::StoredToken {
                    token,
                    usable_for: until.saturating_duration_since(std::time::Instant::now()),
                };
                if ctx.is_fresh(&shared) {
                    return Ok(shared);
                }
            }
            self.fetches.fetch_add(1, Ordering::SeqCst);
            let fetched = ctx.fetch().await?;
            let until = std::time::Instant::now() + fetched.usable_for;
            *self.held.lock().unwrap() = Some((fetched.token.clone(), until));
            Ok(fetched)
        })
    }

    fn refused<'a>(&'a self, _identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()> {
        let mut held = self.held.lock().unwrap();
        if held.as_ref().is_some_and(|(t, _)| t == token) {
            *held = None;
        }
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_custom_token_store_shares_one_token_between_layers() {
    let authority = Authority::start(CLIENT_ID, CLIENT_SECRET, HOUR).await;
    let store = Arc::new(InProcess::default());
    let a = builder(&authority)
        .token_store(Arc::clone(&store))
        .build()
        .unwrap();
    let b = builder(&authority)
        .token_store(Arc::clone(&store))
        .build()
        .unwrap();
    assert_eq!(a.token().await.unwrap(), b.token().await.unwrap());
    assert_eq!(authority.token_requests(), 1);

    // Refused on one layer: the store forgets it, one renewal serves both.
    authority.revoke_all();
    assert_eq!(
        send(&a, &authority.api_url("/p")).await.unwrap().status(),
        401
    );
    let renewed = a.token().await.unwrap();
    assert_eq!(
        send(&b, &authority.api_url("/p")).await.unwrap().status(),
        401
    );
    assert_eq!(b.token().await.unwrap(), renewed);
    assert_eq!(authority.token_requests(), 2);
    assert_eq!(store.fetches.load(Ordering::SeqCst), 2);
}

/// Every character the issue names, the ones decoders disagree on (`+`,
/// space, `%`, `~`), and a multi-byte one.
const EVERY_HARD: &str = "p+a/s=s&w%o:r~d sé";

#[tokio::test]
async fn basic_reads_back_exactly_through_a_form_decoder_and_a_percent_decoder() {
    for style in [Style::Basic, Style::BasicPercent] {
        let authority = Authority::start("id:with+chars ~", EVERY_HARD, HOUR).await;
        authority.expect(style, &[("scope", "read write")]);
        // With token_url and no choice, the client authentication is Basic.
        let oauth = with_transport(
            OAuthLayer::builder()
                .token_url(authority.token_url())
                .client_id("id:with+chars ~")
                .client_secret(EVERY_HARD)
                .scope("read write"),
        )
        .build()
        .unwrap();
        assert_eq!(call_api(oauth, &authority).await.unwrap(), 200, "{style:?}");
        assert_eq!(authority.violations(), Vec::<String>::new());
    }
}

#[tokio::test]
async fn basic_suits_a_server_that_decodes_nothing_when_the_secret_is_plain() {
    let authority = Authority::start("client-1", "Abc123-._~xyz", HOUR).await;
    authority.expect(Style::BasicRaw, &[]);
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(authority.token_url())
            .client_id("client-1")
            .client_secret("Abc123-._~xyz"),
    )
    .build()
    .unwrap();
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
}

#[tokio::test]
async fn basic_unencoded_carries_any_secret_to_a_server_that_decodes_nothing() {
    let layer = |authority: &Authority, auth| {
        with_transport(
            OAuthLayer::builder()
                .token_url(authority.token_url())
                .client_id("client-1")
                .client_secret(EVERY_HARD)
                .client_auth(auth),
        )
        .build()
        .unwrap()
    };
    let authority = Authority::start("client-1", EVERY_HARD, HOUR).await;
    authority.expect(Style::BasicRaw, &[]);
    let oauth = layer(&authority, ClientAuth::BasicUnencoded);
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
    // Percent-encoded, the same secret is not what such a server expects.
    let oauth = layer(&authority, ClientAuth::Basic);
    let err = call_api(oauth, &authority).await.unwrap_err();
    let e = err.downcast_ref::<TokenError>().unwrap();
    assert_eq!(e.status(), Some(http::StatusCode::UNAUTHORIZED));
}

#[test]
fn basic_unencoded_cannot_carry_an_id_with_a_colon() {
    let err = OAuthLayer::builder()
        .token_url("https://idp.example.com/token")
        .client_id("tenant:client")
        .client_secret("secret")
        .client_auth(ClientAuth::BasicUnencoded)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidClientId);
    assert!(err.to_string().contains("ClientAuth::Basic"), "{err}");
}

#[test]
fn the_default_client_authentication_follows_the_endpoint_setter() {
    let with = |b: OAuthLayerBuilder| {
        with_transport(
            b.client_id("id")
                .client_secret("secret")
                .scope("read write"),
        )
        .build()
    };
    // A standard server: Basic, which carries a scope with a space.
    let layer = with(OAuthLayer::builder().token_url("https://idp.example.com/token")).unwrap();
    assert_eq!(layer.token_url().unwrap(), "https://idp.example.com/token");
    // The specification's endpoint: its exact unencoded body, which cannot.
    let err = with(OAuthLayer::builder().auth_url("https://auth.example.com")).unwrap_err();
    assert_eq!(err.kind(), ConfigErrorKind::InvalidParameter);
}

#[tokio::test]
async fn several_resources_are_each_sent() {
    let authority = Authority::start(CLIENT_ID, EVERY_HARD, HOUR).await;
    authority.expect(
        Style::Basic,
        &[
            ("resource", "https://orders.example.com/"),
            ("resource", "https://billing.example.com/v1?x=1&y=2"),
            ("audience", "orders"),
            ("tenant", "a"),
            ("tenant", "b"),
        ],
    );
    let oauth = with_transport(
        OAuthLayer::builder()
            .token_url(authority.token_url())
            .client_id(CLIENT_ID)
            .client_secret(EVERY_HARD)
            .resource("https://orders.example.com/")
            .resource("https://billing.example.com/v1?x=1&y=2")
            .audience("old")
            .audience("orders")
            .add_param("tenant", "a")
            .add_param("tenant", "b"),
    )
    .build()
    .unwrap();
    assert_eq!(call_api(oauth, &authority).await.unwrap(), 200);
    assert_eq!(authority.violations(), Vec::<String>::new());
}
