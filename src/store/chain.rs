//! One refresh through a store that keeps the chain of refresh tokens: the
//! stored chain read first, a refused refresh token checked against the
//! store once more, a rotated one written back (tried again when the
//! write fails) before the access token is handed out.

use std::future::Future;
use std::time::Duration;

use crate::endpoint::{
    account_login_required, login_required, person_login_required, Chain, ChainRecord, Ended, Lost,
    NoLogin,
};
use crate::error::{TokenError, TokenErrorKind};
use crate::store::{FetchContext, StoredToken};
use crate::support::boxed::BoxFuture;

/// How often a failed write of a rotated refresh token is tried again, and
/// the pauses before each try.
const SAVE_RETRIES: [Duration; 3] = [
    Duration::from_millis(50),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// Where a store keeps a chain: read and written under the store's lock
/// for the chain, already opened and sealed by the store.
pub(crate) trait ChainKeeper: Send + Sync {
    /// The stored record, `None` when there is none; an error when there is
    /// one that does not open (another sealing key, another format).
    fn load(&self) -> BoxFuture<'_, Result<Option<ChainRecord>, String>>;
    /// Stores `record` in place of the one there, unless the lock it is
    /// written under is no longer this process's ([`Saved::Fenced`]).
    fn save<'a>(&'a self, record: &'a ChainRecord) -> BoxFuture<'a, Result<Saved, String>>;
    /// Whether the replica hears the store's news of every chain write
    /// (and tells it with each of its own, and of each refresh it sends):
    /// then a copy read or written here is the newest the replica knows of
    /// until the news tells of a newer one, and may be written back to a
    /// store that lost it.
    ///
    /// Default: no news, and no copy written back.
    fn hears_news(&self) -> bool {
        false
    }

    /// Tells the other replicas, before a refresh token is sent, the
    /// generation the chain will have once its answer is stored: should the
    /// store lose its data while the answer is out, no replica takes its
    /// older copy for the newest. An error: nothing is sent.
    ///
    /// Default: nothing to tell.
    fn sending(&self, generation: u64) -> BoxFuture<'_, Result<(), String>> {
        let _ = generation;
        Box::pin(async { Ok(()) })
    }
}

/// What a chain's write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Saved {
    /// The record is stored.
    Stored,
    /// Nothing was written: the record is no longer the one this process
    /// read (it stalled past its lock), and another wrote since, such as a
    /// sign-out. (Only `RedisStore`, behind its feature, says so.)
    #[allow(dead_code)]
    Fenced,
}

impl FetchContext<'_> {
    /// A token fetched from the endpoint, with the chain of refresh tokens
    /// (if the layer refreshes) read from and written to `keeper` (`None`:
    /// kept in memory only). Call it under the store's lock for the chain.
    pub(crate) async fn fetch_kept(
        &self,
        keeper: Option<&dyn ChainKeeper>,
    ) -> Result<StoredToken, TokenError> {
        match self.chain {
            Some(kept) => refresh(kept.chain, keeper, || self.fetch_once()).await,
            None => self.fetch_once().await,
        }
    }
}

/// One refresh of `chain` with `fetch`: the chain read from `keeper` first
/// (`None`: kept in memory only); when the server refuses the refresh
/// token, the store read once more (another process or replica may have
/// rotated it meanwhile) before the chain is dead; the chain written back
/// if it changed.
pub(crate) async fn refresh<T, F>(
    chain: &Chain,
    keeper: Option<&dyn ChainKeeper>,
    fetch: impl Fn() -> F,
) -> Result<T, TokenError>
where
    F: Future<Output = Result<T, TokenError>>,
{
    let mut lost = false;
    if let Some(keeper) = keeper {
        match keeper.load().await.map_err(unreadable)? {
            // A record that does not read is not refreshed over, nor
            // written over: it may be another key's or format's, newer.
            Some(record) if !chain.adopt(&record) => {
                return Err(
                    unreadable("the stored chain is not one this version reads".into())
                        .marked_this_replica(),
                )
            }
            Some(_) => chain.synced(keeper.hears_news()),
            None => lost = chain.was_stored(),
        }
    }
    // Web logins' callbacks take their pending logins here, under the
    // store's lock: a callback another replica took first is found taken
    // only once that replica's login is stored (and a store's caller then
    // reads the token that login stored).
    if let Some(refused) = chain.take_callbacks().await {
        return Err(refused);
    }
    // The store lost the chain this copy came from: another replica may
    // hold a newer one, so this one's refresh token is never sent. A new
    // login or a sign-out begun here sends none of it.
    if let (true, false, Some(keeper)) = (lost, chain.needs_login(), keeper) {
        match chain.lost_by_store(keeper.hears_news()) {
            Lost::WriteBack => write_back(chain, keeper).await?,
            Lost::Wait => return Err(held_elsewhere()),
            Lost::Unknown => {
                if let Some(required) = chain.store_lost() {
                    return Err(required);
                }
            }
        }
    }
    // The generation the news was told a refresh's answer would have.
    let mut told = 0;
    // Another process's rotation is read again once, before the chain is
    // declared dead. A chain with a login logs in when it has no refresh
    // token, once a fetch at most.
    let outcome = async {
        let mut looked_again = false;
        let mut logged_in = false;
        loop {
            let sent = if chain.needs_login() {
                logged_in = true;
                String::new()
            } else {
                chain.to_send()?
            };
            if let (Some(keeper), false) = (keeper, sent.is_empty()) {
                let generation = chain.next_generation();
                told = told.max(generation);
                keeper.sending(generation).await.map_err(|why| {
                    TokenError::new(TokenErrorKind::Transport).with_message(format!(
                        "the other replicas could not be told that a refresh is under way \
                             ({why}); nothing was sent"
                    ))
                })?;
            }
            let mut client_gone = false;
            let error = match fetch().await {
                Ok(token) => return Ok(token),
                // A login's code refused: the login failed, no chain ended.
                Err(e) if sent.is_empty() => return Err(e),
                Err(e) if e.error_code() == Some("invalid_grant") => e,
                // The client a login registered, which the server no
                // longer knows (some delete idle ones): the chain is as
                // dead, and its next login registers anew.
                Err(e) if e.refuses_client() && chain.logs_in() && chain.forget_any_client() => {
                    tracing::warn!(
                        error = %e,
                        "the server no longer takes the client a login registered; the login \
                         has ended, and the next one registers a new client"
                    );
                    client_gone = true;
                    e
                }
                Err(e) => return Err(e),
            };
            // (A store's chain still names the client the server refused.)
            if let (Some(keeper), false) = (keeper, looked_again || client_gone) {
                looked_again = true;
                if let Ok(Some(record)) = keeper.load().await {
                    chain.adopt(&record);
                    if chain.current() != sent {
                        tracing::info!(
                            "the refresh token was refused, and the token store holds a newer \
                             one; refreshing with it"
                        );
                        continue;
                    }
                }
            }
            let why = match (error.error_code(), error.error_description()) {
                (Some(code), Some(text)) => format!("{code}: {text}"),
                (Some(code), None) => code.to_owned(),
                _ => error.to_string(),
            };
            chain.refused(&sent, &why);
            if chain.logs_in_by_itself() && !logged_in {
                tracing::warn!(
                    error = %error,
                    "the token endpoint refused the refresh token: the login has ended, and a \
                     new one begins"
                );
                continue;
            }
            tracing::error!(
                error = %error,
                "the token endpoint refused the refresh token: the login has ended, and a new \
                 one is needed (OAuthLayer::login, or OAuthLayer::replace_refresh_token)"
            );
            let ended = Ended::Refused(why.clone());
            if let Some(account) = chain.account() {
                return Err(account_login_required(account, NoLogin::Ended(&ended)));
            }
            if chain.logs_in() {
                return Err(person_login_required(NoLogin::Ended(&ended)));
            }
            // The server's words once: in the status part when it answered.
            let required = match error.status() {
                Some(status) => login_required(None).with_status(
                    status,
                    error.error_code().map(str::to_owned),
                    error.error_description().map(str::to_owned),
                    None,
                ),
                None => login_required(Some(&why)),
            };
            return Err(required);
        }
    }
    .await;
    if let Some(keeper) = keeper {
        chain.reach(told);
        save(chain, keeper).await?;
    }
    outcome
}

/// Writes the chain to `keeper` if it changed, trying again a few times: a
/// rotated refresh token that is not stored may be lost. An error when the
/// write was fenced off: what was fetched under a lock that ran out is not
/// handed out, since the store may hold a sign-out made meanwhile.
async fn save(chain: &Chain, keeper: &dyn ChainKeeper) -> Result<(), TokenError> {
    let mut pauses = SAVE_RETRIES.iter();
    while chain.unsaved() {
        let record = chain.record();
        match keeper.save(&record).await {
            Ok(Saved::Stored) => {
                chain.saved(&record);
                chain.synced(keeper.hears_news());
                return Ok(());
            }
            Ok(Saved::Fenced) => {
                // A sign-out is not done until it is stored: it runs again,
                // unless a newer login stands there.
                if let Ok(stored) = keeper.load().await {
                    chain.sign_out_again(stored.as_ref());
                }
                tracing::error!(
                    "the store's lock on the refresh-token chain ran out while this process \
                     refreshed (it stalled, or the store did not answer): nothing is written \
                     over what came after; the next token request reads the stored chain"
                );
                return Err(TokenError::new(TokenErrorKind::Transport)
                    .with_message(
                        "the token store's lock on the refresh-token chain ran out before the \
                         refresh's answer was stored; nothing was written over what another \
                         replica stored meanwhile, and the next token request reads it",
                    )
                    .marked_this_replica());
            }
            Err(why) => match pauses.next() {
                Some(pause) => {
                    tracing::warn!(error = %why, "storing the refresh token failed; trying again");
                    tokio::time::sleep(*pause).await;
                }
                None => {
                    tracing::error!(
                        error = %why,
                        "the rotated refresh token could not be stored: it is kept in this \
                         process only, so another process or replica (or this one after a \
                         restart) would send the old one, which the server may take for a \
                         replay and end the login"
                    );
                    return Ok(());
                }
            },
        }
    }
    Ok(())
}

/// Writes this replica's copy of the chain back to a store that lost it,
/// the copy being the newest the store's news told of, before anything is
/// sent: the record lands only where there is none, so that a chain
/// written meanwhile (another replica's sign-out, or its own write-back)
/// is read instead.
async fn write_back(chain: &Chain, keeper: &dyn ChainKeeper) -> Result<(), TokenError> {
    let record = chain.record();
    let why = match keeper.save(&record).await {
        Ok(Saved::Stored) => {
            chain.saved(&record);
            chain.synced(true);
            tracing::warn!(
                "the token store had lost the refresh-token chain; this replica's copy, the \
                 newest its news told of, is written back"
            );
            return Ok(());
        }
        Ok(Saved::Fenced) => match keeper.load().await {
            Ok(Some(stored)) if chain.adopt(&stored) => {
                chain.synced(keeper.hears_news());
                return Ok(());
            }
            Ok(_) => "another replica wrote a chain that does not read".to_owned(),
            Err(why) => why,
        },
        Err(why) => why,
    };
    Err(
        TokenError::new(TokenErrorKind::Transport).with_message(format!(
            "the token store lost the refresh-token chain, and writing this replica's copy (the \
         newest there is) back failed ({why}); nothing was sent; try again"
        )),
    )
}

/// The error of a replica whose copy of a chain the store lost may not be
/// the newest: another replica's is (or it has none), or it does not hear
/// the store's news now. This replica's own: the replica that holds the
/// newest copy does not hold back for it.
pub(crate) fn held_elsewhere() -> TokenError {
    TokenError::new(TokenErrorKind::Transport)
        .with_message(
            "the token store lost the refresh-token chain; the replica that holds the newest \
             copy writes it back (another one, or this one once it hears the store's news \
             again); nothing was sent; try again",
        )
        .marked_this_replica()
}

/// The error when a store's chain cannot be read: a refresh token is not
/// sent without it.
fn unreadable(why: String) -> TokenError {
    TokenError::new(TokenErrorKind::Transport).with_message(format!(
        "the token store's refresh-token chain could not be read ({why}); no refresh token is \
         sent without it, since another process or replica may have rotated it"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use http::StatusCode;

    use super::*;
    use crate::endpoint::RefreshToken;

    /// A store's chain in memory, whose writes fail `failing` times first,
    /// and are fenced off `fenced` times.
    #[derive(Default)]
    struct Kept {
        record: Mutex<Option<Vec<u8>>>,
        failing: AtomicUsize,
        fenced: AtomicUsize,
        saves: AtomicUsize,
    }

    impl ChainKeeper for Kept {
        fn load(&self) -> BoxFuture<'_, Result<Option<ChainRecord>, String>> {
            let record = self.record.lock().unwrap().clone();
            Box::pin(async move { Ok(record.map(ChainRecord::from_bytes)) })
        }

        fn save<'a>(&'a self, record: &'a ChainRecord) -> BoxFuture<'a, Result<Saved, String>> {
            self.saves.fetch_add(1, Ordering::SeqCst);
            let fenced = self
                .fenced
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if fenced {
                return Box::pin(async { Ok(Saved::Fenced) });
            }
            let failed = self
                .failing
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if !failed {
                *self.record.lock().unwrap() = Some(record.as_bytes().to_vec());
            }
            Box::pin(async move {
                if failed {
                    Err("the disk is full".to_owned())
                } else {
                    Ok(Saved::Stored)
                }
            })
        }
    }

    fn refused() -> TokenError {
        TokenError::new(TokenErrorKind::Status).with_status(
            StatusCode::BAD_REQUEST,
            Some("invalid_grant".into()),
            Some("refresh token reused".into()),
            None,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_is_tried_again_and_then_named_as_a_risk() {
        let chain = RefreshToken::new("first-refresh").chain;
        let kept = Kept::default();
        kept.failing.store(2, Ordering::SeqCst);
        let fetch = || async {
            chain.rotated("first-refresh", "second-refresh".into());
            Ok::<_, TokenError>(())
        };
        refresh(&chain, Some(&kept), fetch).await.unwrap();
        assert_eq!(kept.saves.load(Ordering::SeqCst), 3);
        assert!(!chain.unsaved());
        let other = RefreshToken::new("first-refresh").chain;
        other.adopt(&kept.load().await.unwrap().unwrap());
        assert_eq!(other.current(), "second-refresh");
        // Four failures: given up, the new token kept in memory.
        let kept = Kept::default();
        kept.failing.store(10, Ordering::SeqCst);
        let chain = RefreshToken::new("first-refresh").chain;
        let fetch = || async {
            chain.rotated("first-refresh", "second-refresh".into());
            Ok::<_, TokenError>(())
        };
        refresh(&chain, Some(&kept), fetch).await.unwrap();
        assert_eq!(kept.saves.load(Ordering::SeqCst), 4);
        assert!(chain.unsaved());
        assert_eq!(chain.to_send().unwrap(), "second-refresh");
    }

    /// A sign-out whose write was fenced off (another replica rotated the
    /// chain meanwhile) is not done: it runs again, on the stored chain,
    /// whose refresh token is the one it revokes.
    #[tokio::test(start_paused = true)]
    async fn a_fenced_off_sign_out_runs_again_on_the_stored_chain() {
        let chain = RefreshToken::new("rt-1").chain;
        let kept = Kept::default();
        let elsewhere = RefreshToken::new("rt-1").chain;
        elsewhere.rotated("rt-1", "rt-2".into());
        let revoked = Mutex::new(Vec::new());
        let sign_out = || async {
            if chain.take_sign_out() {
                revoked.lock().unwrap().extend(chain.sign_out());
            }
            Err::<(), _>(TokenError::new(TokenErrorKind::LoginRequired))
        };
        chain.begin_sign_out();
        kept.fenced.store(1, Ordering::SeqCst);
        // Another replica's rotation lands while this one signs out.
        let first = refresh(&chain, Some(&kept), || async {
            *kept.record.lock().unwrap() = Some(elsewhere.record().as_bytes().to_vec());
            sign_out().await
        })
        .await
        .unwrap_err();
        assert_eq!(first.kind(), TokenErrorKind::Transport, "{first}");
        assert!(chain.is_signing_out(), "the sign-out runs again");
        refresh(&chain, Some(&kept), sign_out).await.unwrap_err();
        assert!(!chain.is_signing_out());
        assert_eq!(*revoked.lock().unwrap(), ["rt-1", "rt-2"]);
        let stored = RefreshToken::new("rt-1").chain;
        stored.adopt(&kept.load().await.unwrap().unwrap());
        assert!(stored.is_signed_out());
    }

    /// A sign-out fenced off by a newer login stored meanwhile does not run
    /// again: that login stands.
    #[tokio::test(start_paused = true)]
    async fn a_fenced_off_sign_out_leaves_a_newer_login_standing() {
        let chain = RefreshToken::new("rt-1").chain;
        let kept = Kept::default();
        let elsewhere = RefreshToken::new("rt-1").chain;
        elsewhere.replace("a-new-login");
        chain.begin_sign_out();
        kept.fenced.store(1, Ordering::SeqCst);
        let outcome = refresh(&chain, Some(&kept), || async {
            *kept.record.lock().unwrap() = Some(elsewhere.record().as_bytes().to_vec());
            if chain.take_sign_out() {
                chain.sign_out();
            }
            Err::<(), _>(TokenError::new(TokenErrorKind::LoginRequired))
        })
        .await;
        assert!(outcome.is_err());
        assert!(!chain.is_signing_out(), "the newer login stands");
        let stored = RefreshToken::new("rt-1").chain;
        stored.adopt(&kept.load().await.unwrap().unwrap());
        assert_eq!(stored.current(), "a-new-login");
    }

    /// A refresh whose answer the news was told to expect (its generation)
    /// reaches it in the store, even when it brought nothing new: the
    /// store never stays behind what the replicas heard.
    #[tokio::test(start_paused = true)]
    async fn a_refresh_that_failed_still_stores_the_generation_it_told() {
        let chain = RefreshToken::new("rt-1").chain;
        let kept = Kept::default();
        let first = chain.record();
        chain.saved(&first);
        *kept.record.lock().unwrap() = Some(first.as_bytes().to_vec());
        let told = chain.next_generation();
        let unavailable = || async {
            chain.to_send()?;
            Err::<(), _>(TokenError::new(TokenErrorKind::Status))
        };
        refresh(&chain, Some(&kept), unavailable).await.unwrap_err();
        let stored = kept.load().await.unwrap().unwrap();
        assert_eq!(stored.generation(), told);
        assert_eq!(chain.to_send().unwrap(), "rt-1", "the same refresh token");
        assert!(!chain.unsaved());
    }

    #[tokio::test]
    async fn a_refusal_reads_the_store_again_then_ends_the_chain() {
        // Another process rotated the token meanwhile: the store's is used.
        let chain = RefreshToken::new("first-refresh").chain;
        let elsewhere = RefreshToken::new("first-refresh").chain;
        elsewhere.rotated("first-refresh", "rotated-elsewhere".into());
        let kept = Kept::default();
        let sent = Mutex::new(Vec::new());
        let fetch = || async {
            let token = chain.to_send()?;
            sent.lock().unwrap().push(token.clone());
            if token == "first-refresh" {
                // The other process's write lands while this one refreshes.
                *kept.record.lock().unwrap() = Some(elsewhere.record().as_bytes().to_vec());
                return Err(refused());
            }
            Ok(())
        };
        refresh(&chain, Some(&kept), fetch).await.unwrap();
        assert_eq!(
            *sent.lock().unwrap(),
            ["first-refresh", "rotated-elsewhere"]
        );
        // Nothing newer: the chain is dead, stored so, and sends nothing.
        let calls = AtomicUsize::new(0);
        let fetch = || async {
            calls.fetch_add(1, Ordering::SeqCst);
            chain.to_send()?;
            Err::<(), _>(refused())
        };
        let e = refresh(&chain, Some(&kept), fetch).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
        assert_eq!(e.error_code(), Some("invalid_grant"));
        assert!(e.to_string().contains("refresh token reused"), "{e}");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let e = refresh(&chain, Some(&kept), fetch).await.unwrap_err();
        assert_eq!(e.kind(), TokenErrorKind::LoginRequired);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "a dead chain sends nothing"
        );
        let replica = RefreshToken::new("first-refresh").chain;
        replica.adopt(&kept.load().await.unwrap().unwrap());
        assert!(replica.to_send().is_err(), "the store says it is dead");
    }
}
