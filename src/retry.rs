//! [`RetryUnauthorized`]: resend a request once after the API refused its
//! token.

use std::future::{ready, Ready};

use http::{Request, Response};
use tower::retry::Policy;

use crate::message::{is_unauthorized, may_be_grpc, NoNewToken, SteppedUp};

/// A [`tower::retry::Policy`] that resends a request after a
/// `401 Unauthorized` (or a gRPC `UNAUTHENTICATED` status in a trailers-only
/// response), once by default.
///
/// Put it *outside* the [`OAuthLayer`](crate::OAuthLayer): the layer drops the
/// refused token when the 401 comes back, so the resent request waits for a
/// new one. A revoked or prematurely expired token then costs the caller one
/// extra round trip instead of an error. Forced renewals stay rate-limited
/// (see [`forced_renewal_interval`](crate::OAuthLayerBuilder::forced_renewal_interval)):
/// if the API refuses the new token too, that 401 is returned; and a 401 for
/// a token the layer cannot replace yet (its renewal rate-limited) is
/// returned at once, not resent with the very token refused.
///
/// It also resends a `403` whose `insufficient_scope` challenge the layer
/// answered by asking for a token with more scope
/// ([`step_up_scopes`](crate::OAuthLayerBuilder::step_up_scopes)); a `403`
/// it did not is returned as it is. A `401` that asks for a stronger or
/// more recent sign-in of the person (`insufficient_user_authentication`,
/// RFC 9470) is resent once the person's login ran again asking for it
/// (see [`login`](crate::login)); where the layer has no such login, or
/// just ran one for the same challenge, it is returned at once with its
/// challenge, and the token stays.
///
/// Only requests whose body can be cloned (`B: Clone`, such as
/// `http_body_util::Full<Bytes>` or `String`) can be resent.
///
/// ```
/// use tower::ServiceBuilder;
/// use tower::retry::RetryLayer;
/// use tower_oauth::{OAuthLayer, RetryUnauthorized};
/// # fn stack(oauth: OAuthLayer, client: tower::util::BoxCloneService<http::Request<String>, http::Response<String>, tower::BoxError>) {
/// let client = ServiceBuilder::new()
///     .layer(RetryLayer::new(RetryUnauthorized::default()))
///     .layer(oauth)
///     .service(client);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RetryUnauthorized {
    remaining: usize,
}

impl RetryUnauthorized {
    /// Resends a refused request up to `attempts` times (`0` never resends).
    pub fn new(attempts: usize) -> Self {
        RetryUnauthorized {
            remaining: attempts,
        }
    }
}

impl Default for RetryUnauthorized {
    /// Resends a refused request once.
    fn default() -> Self {
        RetryUnauthorized::new(1)
    }
}

impl<B: Clone, ResB, E> Policy<Request<B>, Response<ResB>, E> for RetryUnauthorized {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        req: &mut Request<B>,
        result: &mut Result<Response<ResB>, E>,
    ) -> Option<Self::Future> {
        match result {
            Ok(response)
                if self.remaining > 0
                    && is_unauthorized(response, may_be_grpc(req.method()))
                    && response.extensions().get::<NoNewToken>().is_none() =>
            {
                self.remaining -= 1;
                tracing::debug!("the API refused the token; resending the request");
                crate::telemetry::unauthorized_retry();
                Some(ready(()))
            }
            Ok(response)
                if self.remaining > 0 && response.extensions().get::<SteppedUp>().is_some() =>
            {
                self.remaining -= 1;
                tracing::debug!("the API asked for more scope; resending the request");
                Some(ready(()))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, req: &Request<B>) -> Option<Request<B>> {
        if self.remaining == 0 {
            return None;
        }
        let mut clone = Request::new(req.body().clone());
        *clone.method_mut() = req.method().clone();
        *clone.uri_mut() = req.uri().clone();
        *clone.version_mut() = req.version();
        *clone.headers_mut() = req.headers().clone();
        *clone.extensions_mut() = req.extensions().clone();
        Some(clone)
    }
}
