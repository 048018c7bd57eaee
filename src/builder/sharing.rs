//! The builder's settings: where tokens are kept, and where else they come from.

use crate::source::TokenSource;
use crate::store::TokenStore;
use std::sync::Arc;

use super::OAuthLayerBuilder;

/// Sharing: a token store shared by replicas, or tokens from a source of
/// your own.
impl OAuthLayerBuilder {
    /// Shares tokens, and token requests, with other processes or replicas
    /// through `store`: [`FileStore`](crate::store::FileStore) for the processes
    /// of one machine, [`RedisStore`](crate::store::RedisStore) (feature `redis`)
    /// for a fleet. Both also keep a [refresh token](Self::refresh_token)'s
    /// chain, so that none of them sends a refresh token another rotated.
    /// Layers with the same token URL (or issuer), client id, client
    /// authentication (and its signing key), client certificate, DPoP key
    /// and parameters share one token. Layers built on a
    /// [`token_source`](Self::token_source) share by the
    /// [`token_source_name`](Self::token_source_name) they must be given.
    ///
    /// Default: none (each layer keeps its token in memory).
    pub fn token_store(mut self, store: impl TokenStore) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// Takes tokens from `source` instead of the client-credentials request:
    /// another grant, a vault, a sidecar. All caching, single flight,
    /// renewal, back-off and 401 handling stay. Do not set a URL, client id,
    /// secret, client authentication, parameters or transport with it.
    ///
    /// Default: none (the client-credentials request).
    pub fn token_source(mut self, source: impl TokenSource) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The name under which a [`token_store`](Self::token_store) shares the
    /// tokens of the [`token_source`](Self::token_source): layers whose
    /// sources have the same name share one token, so give each source
    /// (each grant, audience or account it fetches for) a name of its own,
    /// the same on every replica. Required with a token store, which cannot
    /// tell sources apart by themselves.
    ///
    /// Default: none.
    pub fn token_source_name(mut self, name: impl Into<String>) -> Self {
        self.source_name = Some(name.into());
        self
    }
}
