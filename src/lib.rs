//! OAuth 2.0 tokens for any Tower HTTP client: for machines (client
//! credentials, keys, platform identity, token exchange) and for people (a
//! login in the browser or on another device, and a web app's many users).
//!
//! Add one [`OAuthLayer`] to a client stack (hyper, tonic, anything that is a
//! `tower::Service<http::Request<B>>`) and every request carries
//! `Authorization: Bearer <token>`. The layer obtains the token from the
//! token endpoint and reuses it while it is valid. It renews the token in
//! the background before it runs out. Every clone of the layer, and every
//! service built from them, shares it.
//!
//! A standard OAuth 2.0 or OpenID Connect server (Keycloak, Entra ID, Okta,
//! Auth0, ...) needs only its issuer. The layer reads the token endpoint and
//! the client authentication it accepts from the server's metadata:
//!
//! ```
//! use tower::{service_fn, BoxError, ServiceBuilder, ServiceExt};
//! use tower_oauth::OAuthLayer;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! # let issuer = doc_support::authorization_server().await;
//! let oauth = OAuthLayer::builder()
//!     .issuer(issuer) // or .token_url(".../token")
//!     .client_id("my-client")
//!     .client_secret("my-secret")
//!     .scope("orders:read")
//!     .resource("https://api.example.com/") // RFC 8707; repeatable
//!     .build()?;
//!
//! // Any HTTP client service: here one that answers with the header it got.
//! let api = service_fn(|req: http::Request<String>| async move {
//!     let auth = req.headers()[http::header::AUTHORIZATION].to_str()?.to_owned();
//!     Ok::<_, BoxError>(http::Response::new(auth))
//! });
//! let client = ServiceBuilder::new().layer(oauth).service(api);
//!
//! let response = client
//!     .oneshot(http::Request::new(String::from("GET /orders")))
//!     .await?;
//! assert_eq!(response.body(), "Bearer token-from-the-server");
//! # Ok(()) }
//! # mod doc_support {
//! #     use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! #     /// An authorization server on 127.0.0.1: its metadata, and a token
//! #     /// endpoint that answers every request with one token.
//! #     pub async fn authorization_server() -> String {
//! #         let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! #         let issuer = format!("http://{}", listener.local_addr().unwrap());
//! #         let metadata = format!(
//! #             r#"{{"issuer":"{issuer}","token_endpoint":"{issuer}/token","token_endpoint_auth_methods_supported":["client_secret_basic"]}}"#
//! #         );
//! #         tokio::spawn(async move {
//! #             loop {
//! #                 let (mut stream, _) = listener.accept().await.unwrap();
//! #                 let mut request = Vec::new();
//! #                 let mut buf = [0u8; 4096];
//! #                 // The head, then the body its content-length announces.
//! #                 let body_len = loop {
//! #                     let n = stream.read(&mut buf).await.unwrap();
//! #                     if n == 0 { break None; }
//! #                     request.extend_from_slice(&buf[..n]);
//! #                     let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
//! #                     if let Some(end) = text.find("\r\n\r\n") {
//! #                         let length = text.lines()
//! #                             .find_map(|l| l.strip_prefix("content-length:"))
//! #                             .map_or(0, |v| v.trim().parse::<usize>().unwrap());
//! #                         if request.len() >= end + 4 + length { break Some(length); }
//! #                     }
//! #                 };
//! #                 if body_len.is_none() { continue; }
//! #                 let body = if request.starts_with(b"GET /.well-known/oauth-authorization-server") {
//! #                     metadata.clone()
//! #                 } else {
//! #                     r#"{"access_token":"token-from-the-server","token_type":"Bearer","expires_in":3600}"#.to_owned()
//! #                 };
//! #                 let response = format!(
//! #                     "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
//! #                     body.len()
//! #                 );
//! #                 stream.write_all(response.as_bytes()).await.unwrap();
//! #             }
//! #         });
//! #         issuer
//! #     }
//! # }
//! ```
//!
//! # Set-ups
//!
//! The same five as the README, in the same order. Each guide is a page of
//! [`docs`].
//!
//! 1. **A standard server, by its issuer**: the example above.
//!    [`token_url`](OAuthLayerBuilder::token_url) names the token endpoint
//!    instead of discovering it.
//! 2. **The product-information API's token endpoint**:
//!    [`auth_url`](OAuthLayerBuilder::auth_url) gives its base URL. Its
//!    authentication interface is the first server this crate was written
//!    for. The request it takes is [below](#the-product-information-apis-token-endpoint).
//! 3. **reqwest**: with feature `reqwest-middleware`, `oauth.middleware()`
//!    is an [`OAuthMiddleware`](middleware::OAuthMiddleware) for reqwest-middleware ([`docs::reqwest`]).
//! 4. **MCP servers, and APIs that name their server**:
//!    [`protected_resource`](OAuthLayerBuilder::protected_resource) takes the
//!    API's URL and reads which authorization server its metadata names
//!    (RFC 9728). With feature `mcp`, `oauth.mcp_client(..)` serves rmcp
//!    ([`docs::resources`]).
//! 5. **A person's login, and refresh tokens that rotate**:
//!    [`login`](OAuthLayerBuilder::login) signs a person in, in the browser
//!    or with the device grant ([`login`]), and
//!    [`refresh_token`](crate::OAuthLayerBuilder::refresh_token) takes a login made
//!    elsewhere. A rotated refresh token is kept, in a [`FileStore`](store::FileStore) or a
//!    Redis store when processes share it ([`docs::refresh_tokens`]).
//!
//! # How a request flows
//!
//! Top to bottom, each step in one module. The repository's
//! `ARCHITECTURE.md` is the map.
//!
//! 1. [`OAuthService::call`](tower::Service::call), in `service`. A request
//!    that brings its own credential goes on untouched. One that carries
//!    [`TokenParams`], or that `params_for` chooses parameters for, takes
//!    its token slot's cache from `slots`. Any other takes the layer's
//!    default cache.
//! 2. The cache's current token is checked against the clock, in `cache`.
//!    A usable token goes on at once. Past its renewal point, a renewal
//!    also starts in the background. Without a usable token, the request
//!    waits in its [`ResponseFuture`] for the one fetch under way.
//! 3. `service::authorize` places the token on the request, with a DPoP
//!    proof when the token is bound. It is the one place a token goes on a
//!    request. The inner service is then called, and the API's answer tells
//!    the cache whether the token was refused.
//! 4. A fetch runs on its own task, bounded by the fetch timeout. It goes
//!    through the [`TokenStore`](store::TokenStore) when there is one, keyed by the token's
//!    identity. Otherwise it asks the [`TokenSource`]. The built-in source
//!    is the token request of `endpoint`: client authentication, discovery,
//!    the answer read, the transport. Keys, JWKs and DPoP sit below it, in
//!    `keys` and `dpop`.
//!
//! [`OAuthLayer::token`] and [`OAuthLayer::token_for`] take the same way
//! from step 2, without a request.
//!
//! # The product-information API's token endpoint
//!
//! With [`auth_url`](OAuthLayerBuilder::auth_url), the token request is
//! exactly what the product-information API's authentication interface
//! specifies:
//!
//! - `POST {auth_url}/v1/oauth/accesstoken`, with no query parameters;
//! - `Content-Type: application/x-www-form-urlencoded`;
//! - the body `grant_type=client_credentials&client_id=<id>&client_secret=<secret>`,
//!   the values as they are, without percent-encoding;
//! - no redirect followed.
//!
//! The answer is read leniently. `expires_in` may be a number or a string,
//! and a missing one means 60 minutes. Any spelling of `token_type` is
//! taken, and unknown fields are ignored. Only a non-empty `access_token`
//! that can be sent in a header is required. See [`AccessToken`].
//!
//! # A token's life
//!
//! ```text
//!   sent_at        refresh_at                usable_until  expires_at
//!      |----- used ----|-- used; one request ----|-- never ---|
//!      |               |   starts a renewal in   |   used     |
//!      |               |   the background        |            |
//!                      <------ refresh_margin (+ jitter) ----->
//!                                                <-expiry_skew->
//! ```
//!
//! - Every instant is reckoned on the local monotonic clock, from the
//!   moment the token request was sent. `issued_at` is informational only.
//! - Before each use, the token's expiry is checked against the clock,
//!   `tokio::time::Instant`. That is the system's monotonic clock, or
//!   Tokio's paused clock in tests. Past `usable_until` a token is never
//!   presented, and requests wait for the one shared fetch. No timer or
//!   flag stands in for the clock. So this holds on every runtime and with
//!   any timing, including a `current_thread` runtime that only runs now
//!   and then. A token already past `usable_until` when its answer arrives
//!   counts as a failed fetch.
//! - [`refresh_margin`](OAuthLayerBuilder::refresh_margin), 5 minutes by
//!   default, is honoured up to half the lifetime.
//!   [`expiry_skew`](OAuthLayerBuilder::expiry_skew), 10 seconds by
//!   default, is honoured up to a tenth. Even a token of a few seconds
//!   serves most of its life.
//! - A renewal that fails leaves the current token serving until
//!   `usable_until`. It is tried again after the back-off.
//!
//! # Concurrency and failures
//!
//! - **One fetch at a time.** However many requests need a token at once,
//!   one token request is made, and all of them wait for its result. The
//!   fetch runs on its own task. Dropping or timing out the request that
//!   started it neither cancels it nor loses its result.
//! - **Back-off.** After a failed token request, no new one is made before
//!   the endpoint's `Retry-After`, up to an hour. Without one:
//!   - while no usable token serves, and the failure can heal by itself
//!     (5xx, 429, time-outs, transport errors), one request is made a
//!     little before each [`min_backoff`](OAuthLayerBuilder::min_backoff).
//!     That is every 0.8 to 0.95 s by default, so requests recover within a
//!     second of the endpoint's return;
//!   - for refused credentials, such as a 400 or 401, and for renewals while
//!     a token still serves, the delay is exponential. It starts at
//!     `min_backoff` and doubles up to
//!     [`max_backoff`](OAuthLayerBuilder::max_backoff), 60 s by default. A
//!     renewal's back-off ends when the token does.
//!
//!   Every delay is jittered, the first one included, so replicas that fail
//!   together do not retry together. An exponential delay falls between
//!   itself and half as much again, within the two bounds. Meanwhile, a
//!   request that needs a token fails at once with the last error. See
//!   [`TokenError::backing_off`]. A token source, transport or store that
//!   panics is a failure like any other, of kind
//!   [`TokenErrorKind::Panic`].
//! - **401 from the API.** The response goes back to the caller unchanged.
//!   The token that was sent is dropped if it is still the current one, and
//!   a new one is fetched. At most one such forced renewal is made per
//!   [`forced_renewal_interval`](OAuthLayerBuilder::forced_renewal_interval),
//!   10 s by default. An API that refuses every token causes no storm of
//!   token requests.
//! - **Bounded.** [`fetch_timeout`](OAuthLayerBuilder::fetch_timeout), 10 s
//!   by default, covers the whole token request. Its response body is
//!   capped at 64 KiB. The runtime needs its time driver, from
//!   `enable_time()` or `enable_all()`. Without it, a fetch fails at once
//!   with a [`TokenErrorKind::Runtime`] error that says so.
//! - **Nothing outlives the layer.** The only task the layer spawns is a
//!   fetch under way. When the last clone of the layer and every service
//!   built from it are dropped, that fetch is stopped and all memory is
//!   returned. A fetch cut off by its runtime's shutdown starts again on
//!   whichever runtime is used next. A layer kept in a `static` and used
//!   from one runtime after another keeps renewing ahead of expiry.
//!
//! # Clocks
//!
//! - **A suspended machine.** The monotonic clock stands still while a
//!   machine sleeps, and so does a token's remaining time on it, while its
//!   real lifetime runs out. The layer does not read the wall clock on each
//!   request. A second clock read would add about a tenth to the cost of a
//!   request, and the wall clock can be stepped back. After a resume, the
//!   first request may carry a token the API refuses. The `401` drops that
//!   token, the next request gets a new one, and [`RetryUnauthorized`]
//!   resends the refused request.
//! - **Tests with paused time.** With `#[tokio::test(start_paused = true)]`,
//!   Tokio moves its clock forward by itself whenever the runtime has
//!   nothing to do but wait, including while it waits for real I/O. A token
//!   request to a real server, even on loopback, then sees its
//!   `fetch_timeout` pass at once and fails with a spurious `Timeout`. Test
//!   expiry and renewal with paused time against a [`TokenSource`] test
//!   double, which does no I/O and makes the layer's timings exact to the
//!   instant, as below. Use real time, with short token lifetimes, in tests
//!   that talk to a server.
//!
//! ```
//! use std::time::Duration;
//! use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenSource};
//!
//! /// Ten-minute tokens, numbered, without any I/O.
//! #[derive(Default)]
//! struct Numbered(std::sync::atomic::AtomicU32);
//!
//! impl TokenSource for Numbered {
//!     fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
//!         let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!         Box::pin(async move {
//!             Ok(AccessToken::new(format!("token-{n}")).with_expires_in(Duration::from_secs(600)))
//!         })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // In a `#[tokio::test(start_paused = true)]`:
//! let oauth = OAuthLayer::builder().token_source(Numbered::default()).build().unwrap();
//! assert_eq!(oauth.token().await.unwrap().expose_token(), "token-0");
//! // Nine minutes on: past the renewal point, before the end.
//! tokio::time::advance(Duration::from_secs(540)).await;
//! assert_eq!(oauth.token().await.unwrap().expose_token(), "token-0");
//! tokio::task::yield_now().await; // the renewal runs
//! assert_eq!(oauth.token().await.unwrap().expose_token(), "token-1");
//! # }
//! ```
//!
//! # Errors
//!
//! [`OAuthService`]'s error type is `tower::BoxError`. The inner service's
//! errors pass through unchanged. A failure to get a token is a
//! [`TokenError`], found by downcasting, which tells its
//! [kind](TokenErrorKind), the endpoint's status and error code, and whether
//! a retry can help.
//!
//! # Where it goes in a stack
//!
//! ```text
//! ServiceBuilder::new()
//!     .layer(RetryLayer::new(RetryUnauthorized::default()))
//!                             // outermost: each attempt gets a fresh look at the token
//!     .timeout(total)         // bounds the whole call, token wait included
//!     .layer(oauth)           // sets Authorization
//!     .concurrency_limit(n)   // limits what reaches the API, not token waits
//!     .service(http_client)
//! ```
//!
//! - **Retry outside.** A retried request passes the layer again and gets the
//!   current token. [`RetryUnauthorized`] relies on this: the layer drops a
//!   refused token before the retry sees the 401.
//! - **Timeout outside or inside.** Outside, it bounds waiting for a token as
//!   well as the call. Inside, only the API call. The token request has its
//!   own [`fetch_timeout`](OAuthLayerBuilder::fetch_timeout) either way, and
//!   a request that times out while waiting does not cancel the fetch.
//! - **Buffer and concurrency limits.** Inside the layer they limit API
//!   calls: a request waiting for a token lets go of the capacity its
//!   `poll_ready` reserved, and is made ready again once the token is here.
//!   Outside, requests waiting for a token hold their slot while they wait.
//!   Readiness is the inner service's: requests that wait for a token wait
//!   in the layer, each until the fetch's bound at most, so put a limit
//!   outside the layer to bound how many may wait.
//! - **gRPC.** Wrap a tonic `Channel` directly: `UNAUTHENTICATED` in a
//!   trailers-only response counts as a 401.
//!
//! # Observability
//!
//! [`OAuthLayer::stats`] gives counters and the token's state for health
//! checks. Events go through [`tracing`](https://docs.rs/tracing):
//!
//! - a token fetched, and a renewal ahead, at `debug`;
//! - a failed token request, with its back-off delay, at `warn`;
//! - a refused token at `warn`.
//!
//! Each token request runs in an `oauth_token_fetch` span, under the span
//! of the request that started it. A renewal ahead runs in an
//! `oauth_token_renewal` span of its own. Both spans name the token slot,
//! never a parameter's value. No secret or token is ever logged.
//!
//! # Secrets
//!
//! The client secret and tokens never appear in `Debug` or `Display` of any
//! type of this crate, nor in its logs. Error text from the token endpoint
//! has the secret scrubbed out in every form the crate sent it: raw,
//! percent- and form-encoded, inside the Basic credential, JSON-escaped. Its
//! control characters are escaped, and it is cut to a bounded length. The
//! `Authorization` header value is marked
//! [sensitive](http::HeaderValue::set_sensitive). Every token is checked
//! before it is cached or shared: it fits a header as it is, is at most
//! 16 KiB, and is not an expired JWT. SECURITY.md in the repository says
//! what replicas share, and what an attacker at the token endpoint or in
//! Redis can and cannot do.
//!
//! # Beyond the product-information API
//!
//! - **Standard servers by their issuer.** [`issuer`](OAuthLayerBuilder::issuer)
//!   reads the token endpoint and the client authentication from the
//!   server's metadata, by RFC 8414 or OpenID Connect Discovery.
//!   [`resource`](OAuthLayerBuilder::resource) asks for a token for an API,
//!   by RFC 8707. A JWT access token without `expires_in` lives until its
//!   `exp`, and `refresh_in` is honoured. See [`AccessToken::lifetime`].
//! - **Standard servers by their token endpoint.** With
//!   [`token_url`](OAuthLayerBuilder::token_url), the client authenticates
//!   with HTTP Basic, which every server must support, encoded so that any
//!   secret reads back exactly. [`ClientAuth`](client_auth::ClientAuth) chooses another method: a
//!   form-urlencoded body, Basic without encoding, or the
//!   product-information API's unencoded body, the default with `auth_url`.
//!   [`scope`](OAuthLayerBuilder::scope),
//!   [`audience`](OAuthLayerBuilder::audience) and
//!   [`param`](OAuthLayerBuilder::param) add parameters.
//! - **Where the token goes.** [`header_name`](OAuthLayerBuilder::header_name),
//!   [`auth_scheme`](OAuthLayerBuilder::auth_scheme) and
//!   [`keep_existing_header`](OAuthLayerBuilder::keep_existing_header).
//! - **Seams.** A [`TokenSource`] replaces the client-credentials request.
//!   A [`transport`](OAuthLayerBuilder::transport), any HTTP
//!   `tower::Service`, replaces reqwest. [`OAuthLayer::from_env`] reads the
//!   settings from the environment. [`OAuthLayer::token`] and
//!   [`OAuthLayer::force_renewal`] serve code outside a Tower stack.
//!   [`RetryUnauthorized`] resends a request refused with 401.
//! - **Fleets.** A [`TokenStore`](store::TokenStore), set with
//!   [`token_store`](OAuthLayerBuilder::token_store), is shared by replicas.
//!   With feature `redis`, `RedisStore` makes one token request per lifetime
//!   for a whole fleet. It works on one server, on a Redis Cluster with
//!   feature `redis-cluster`, or on the master Redis Sentinel names with
//!   feature `redis-sentinel`.
//!
//! # Cargo features
//!
//! Client authentication with keys (`private_key_jwt`, `client_secret_jwt`),
//! DPoP, mutual TLS, refresh tokens and [`FileStore`](store::FileStore) are always built. The
//! table is `Cargo.toml`'s features, each with its `##` comment's meaning (a
//! test keeps the two alike).
//!
//! | feature | default | what it does |
//! |---|---|---|
//! | `reqwest` | yes | carries the token request with reqwest (rustls, webpki roots), and mutual TLS for it (`client_identity`). Without it, give a [`transport`](OAuthLayerBuilder::transport). |
//! | `redis` | no | `RedisStore`: replicas share one token, and one token request, through Redis (see [`TokenStore`](store::TokenStore)) |
//! | `redis-cluster` | no | `RedisStore::cluster`: the same through a Redis Cluster; implies `redis` |
//! | `redis-sentinel` | no | `RedisStore::sentinel`: the same through the master Redis Sentinel names; implies `redis` |
//! | `reqwest-middleware` | no | [`OAuthMiddleware`](middleware::OAuthMiddleware): the layer's tokens for reqwest through reqwest-middleware 0.5; implies `reqwest` |
//! | `mcp` | no | `tower_oauth::mcp::OAuthMcpClient`: the layer's tokens for MCP clients on rmcp's Streamable HTTP transport; implies `reqwest` |
//! | `keyring` | no | `FileStore::key_in_keyring`: the token file's sealing key in the OS credential store (Keychain, Credential Manager, the Secret Service over zbus) |
//! | `metrics` | no | metrics through the [`metrics`](https://docs.rs/metrics) facade, to whichever recorder the program installs: `oauth.client.token.requests` (counter; `outcome`, and `error.type` on failure), `oauth.client.token.request.duration` (histogram, seconds; `outcome`), `oauth.client.token.renewals` (counter; `reason`: `ahead` or `refused`), `oauth.client.token.waits` and `oauth.client.unauthorized.retries` (counters). Labels take a few fixed values, never a token, secret or request value. |
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms,
    clippy::await_holding_lock,
    clippy::dbg_macro,
    clippy::todo
)]

mod builder;
mod cache;
pub mod client_auth;
pub mod docs;
pub mod dpop;
mod endpoint;
mod error;
pub mod grant;
mod keys;
mod layer;
pub mod login;
#[cfg(feature = "mcp")]
pub mod mcp;
mod message;
pub mod metadata;
#[cfg(feature = "reqwest-middleware")]
pub mod middleware;
mod policy;
mod retry;
mod service;
mod slots;
mod source;
pub mod store;
mod support;
mod telemetry;
mod token;
mod transport;

pub use builder::OAuthLayerBuilder;
pub use error::{ConfigError, ConfigErrorKind, TokenError, TokenErrorKind};
pub use layer::OAuthLayer;
pub use retry::RetryUnauthorized;
pub use service::{OAuthService, ResponseFuture};
pub use source::TokenSource;
pub use support::boxed::{BoxError, BoxFuture};
pub use telemetry::stats::Stats;
pub use token::params::TokenParams;
pub use token::{AccessToken, UsableToken};

/// The README's examples, compiled as doctests so that they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
