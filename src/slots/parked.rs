//! [`Parked`]: where a layer keeps the backchannel requests its person was
//! asked, until each ends: the layer's store, sealed, when it keeps pending
//! logins (so that another replica or a restarted process continues one),
//! else the layer's memory.

use std::sync::Arc;
use std::time::Duration;

use crate::login::Parking;
use crate::store::{PendingLogins, TokenStore};
use crate::support::boxed::BoxFuture;
use crate::token::identity::IdentityBase;

/// A layer's pending backchannel requests: under its identity and what
/// each is for, sealed with its sealing key.
pub(crate) struct Parked {
    pub(crate) store: Option<Arc<dyn TokenStore>>,
    pub(crate) identity: IdentityBase,
    pub(crate) sealing_key: Option<[u8; 32]>,
    /// Where they are kept without a store that keeps them.
    pub(crate) memory: Arc<PendingLogins>,
}

impl Parking for Parked {
    fn keep<'a>(
        &'a self,
        target: &'a str,
        record: Vec<u8>,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let key = self.identity.backchannel_request(target);
            let sealing_key = self.sealing_key.as_ref();
            let kept = (self.memory)
                .keep(self.store.as_deref(), &key, sealing_key, &record, ttl)
                .await;
            // The person was asked already: a store that fails leaves the
            // request in this layer's memory (read first), not lost.
            match kept {
                Err(why) if self.store.is_some() => {
                    tracing::warn!(
                        %why,
                        "the token store could not keep a backchannel request; this replica \
                         keeps it"
                    );
                    self.memory
                        .keep(None, &key, sealing_key, &record, ttl)
                        .await
                }
                kept => kept,
            }
        })
    }

    fn take<'a>(&'a self, target: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>> {
        Box::pin(async move {
            let key = self.identity.backchannel_request(target);
            let sealing_key = self.sealing_key.as_ref();
            self.memory
                .take(self.store.as_deref(), &key, sealing_key)
                .await
        })
    }
}
