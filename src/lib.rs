//! OAuth 2.0 client-credentials authentication for any Tower HTTP client.
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
mod client;
mod error;
mod future;
mod layer;
mod service;
mod token;
mod transport;

pub use builder::{
    OAuthLayerBuilder, DEFAULT_EXPIRY_SKEW, DEFAULT_FETCH_TIMEOUT, DEFAULT_FORCED_RENEWAL_INTERVAL,
    DEFAULT_MAX_BACKOFF, DEFAULT_MIN_BACKOFF, DEFAULT_REFRESH_MARGIN,
};
pub use error::{ConfigError, ConfigErrorKind, TokenError, TokenErrorKind};
pub use future::ResponseFuture;
pub use layer::OAuthLayer;
pub use service::OAuthService;
pub use token::{AccessToken, DEFAULT_LIFETIME};

/// The error type of [`OAuthService`]: the same type as `tower::BoxError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
