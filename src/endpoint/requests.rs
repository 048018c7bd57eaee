//! [`Requests`]: where a layer's token requests come from, one configured
//! or one an issuer's or a protected resource's metadata makes, and how one
//! is sent through each.

use std::sync::Arc;

use crate::endpoint::discovery::Discovery;
use crate::endpoint::request::TokenRequest;
use crate::endpoint::resource::ResourceSource;
use crate::error::TokenError;
use crate::support::boxed::BoxFuture;
use crate::token::AccessToken;

/// Where a layer's token requests come from: one configured, or the one an
/// issuer's or a protected resource's metadata makes (read when first
/// needed, and again when it moved).
#[derive(Clone, Debug)]
pub(crate) enum Requests {
    Direct(Arc<TokenRequest>),
    Discovered(Arc<Discovery>),
    Resource(Arc<ResourceSource>),
}

impl Requests {
    /// The token request as it stands now, its metadata read if need be.
    pub(crate) async fn token_request(&self) -> Result<Arc<TokenRequest>, TokenError> {
        match self {
            Requests::Direct(request) => Ok(Arc::clone(request)),
            Requests::Discovered(discovery) => discovery.token_request().await,
            Requests::Resource(source) => source.token_request().await,
        }
    }

    /// One token request of the grant, with what each way does when it
    /// fails (the metadata read again).
    pub(crate) fn fetch(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        match self {
            Requests::Direct(request) => request.fetch(),
            Requests::Discovered(discovery) => discovery.fetch(),
            Requests::Resource(source) => source.fetch(),
        }
    }
}
