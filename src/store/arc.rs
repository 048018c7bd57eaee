//! A store behind an `Arc` is a store: every method of [`TokenStore`]
//! forwarded, so that one instance can serve several layers.

use std::time::Duration;

use super::{AccountWatcher, FetchContext, StoredToken, TokenStore};
use crate::error::TokenError;
use crate::support::boxed::BoxFuture;
use crate::token::AccessToken;

/// A store behind an `Arc` is a store: one instance can serve several
/// layers.
impl<T: TokenStore> TokenStore for std::sync::Arc<T> {
    fn get_or_fetch<'a>(
        &'a self,
        ctx: &'a FetchContext<'a>,
    ) -> BoxFuture<'a, Result<StoredToken, TokenError>> {
        (**self).get_or_fetch(ctx)
    }

    fn refused<'a>(&'a self, identity: &'a str, token: &'a AccessToken) -> BoxFuture<'a, ()> {
        (**self).refused(identity, token)
    }

    fn keep_pending_login<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        (**self).keep_pending_login(key, value, ttl)
    }

    fn take_pending_login<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        (**self).take_pending_login(key)
    }

    fn signed_out<'a>(
        &'a self,
        account: &'a str,
        identities: &'a [String],
    ) -> BoxFuture<'a, Result<(), String>> {
        (**self).signed_out(account, identities)
    }

    fn logged_in<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()> {
        (**self).logged_in(account)
    }

    fn read_chain<'a>(&'a self, ctx: &'a FetchContext<'a>) -> BoxFuture<'a, Result<(), String>> {
        (**self).read_chain(ctx)
    }

    fn link_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
        value: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, String>> {
        (**self).link_account(key, member, value, ttl)
    }

    fn linked_accounts<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<String>>, String>> {
        (**self).linked_accounts(key)
    }

    fn use_once<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Option<bool>, String>> {
        (**self).use_once(key, ttl)
    }

    fn unlink_account<'a>(
        &'a self,
        key: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<bool, String>> {
        (**self).unlink_account(key, member)
    }

    fn used_before<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<bool>, String>> {
        (**self).used_before(key)
    }

    fn watch_accounts(&self, watcher: AccountWatcher) {
        (**self).watch_accounts(watcher)
    }
}
