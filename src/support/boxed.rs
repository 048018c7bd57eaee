//! The boxed types every seam of the crate returns: [`BoxFuture`] and
//! [`BoxError`].

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future, as [`TokenSource`](crate::TokenSource) returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The error type of [`OAuthService`](crate::OAuthService): the same type as `tower::BoxError`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
