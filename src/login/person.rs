//! [`Person`]: the token source of a chain a person's login begins. Before
//! the grant's token request, it makes the login's own: a web login's code
//! exchanged, a sign-out's revocation, or a login when the chain has no
//! refresh token (or one for another server, or too narrow a scope).

use std::sync::Arc;

use super::{KeySets, Login, Parking, ServerLogin};
use crate::endpoint::{Chain, NoLogin, Requests};
use crate::error::TokenError;
use crate::source::TokenSource;
use crate::support::boxed::BoxFuture;
use crate::token::AccessToken;

/// A person's chain around the layer's token requests.
pub(crate) struct Person {
    requests: Requests,
    chain: Arc<Chain>,
    /// How the person logs in; none for an account, whose web login the
    /// app's routes run.
    login: Option<Arc<Login>>,
    /// The layer's servers' keys, for the login's ID tokens.
    keys: Arc<KeySets>,
    /// Where a backchannel login keeps the requests the person was asked.
    parking: Arc<dyn Parking>,
}

impl Person {
    pub(crate) fn new(
        requests: Requests,
        chain: Arc<Chain>,
        login: Option<Arc<Login>>,
        (keys, parking): (Arc<KeySets>, Arc<dyn Parking>),
    ) -> Self {
        Person {
            requests,
            chain,
            login,
            keys,
            parking,
        }
    }

    /// The login's own request when the chain needs one, else the grant's.
    pub(crate) async fn fetch(&self) -> Result<AccessToken, TokenError> {
        let chain = &self.chain;
        let request = self.requests.token_request().await?;
        let at_server = ServerLogin::new(&request, &self.keys);
        // A web login's callback came: its code is exchanged. An account
        // signs out: its refresh token is revoked.
        if let Some(code) = chain.take_code() {
            return at_server.exchange_code(chain, code).await;
        }
        if chain.take_sign_out() {
            return Err(at_server.sign_out(chain).await);
        }
        if let Some(login) = &self.login {
            // A refresh token goes only to the server its login was made
            // at; a scope the login did not ask for (a step-up) needs a new
            // login with it.
            let elsewhere = chain.issued_elsewhere(request.target.issuer.as_deref());
            let narrow = !chain.covers(request.target.scope());
            let unlisted = match (narrow, request.target.server.as_deref()) {
                (true, Some(server)) => at_server.unlisted_scopes(server),
                _ => Vec::new(),
            };
            if !unlisted.is_empty() {
                return Err(super::failed(format!(
                    "the API asked for the scope(s) `{}`, which the authorization server does \
                     not list in scopes_supported; no login asks for them",
                    crate::error::clip(&unlisted.join(" "))
                )));
            }
            if elsewhere || narrow || chain.needs_login() {
                // Asked for (`OAuthLayer::login`), or a login that runs
                // when a request needs it; else no login, and nothing
                // opened.
                if !chain.take_login_asked() && !login.automatic {
                    let why = match (elsewhere, narrow) {
                        (true, _) => {
                            NoLogin::Needed("the login was made at another authorization server")
                        }
                        (_, true) => {
                            NoLogin::Needed("the request needs scopes the login did not ask for")
                        }
                        _ if chain.reauthentication_asked() => NoLogin::Needed(
                            "the API asks for a stronger or more recent sign-in \
                             (insufficient_user_authentication)",
                        ),
                        _ => NoLogin::Yet,
                    };
                    return Err(crate::endpoint::person_login_required(why));
                }
                return at_server.log_in(chain, (login, &*self.parking)).await;
            }
        }
        // An ID token of an earlier answer that did not count is not this one's.
        chain.take_refreshed_id_token();
        let token = self.requests.fetch().await?;
        // A refresh that renewed the login's ID token: checked against the
        // login's (the same `iss` and `sub`) before the token counts.
        if let Some(id_token) = chain.take_refreshed_id_token() {
            let earlier = chain
                .id_token()
                .and_then(|raw| super::Identity::from_id_token(&raw));
            if let (Some(earlier), Some(server)) = (earlier, request.target.server.as_deref()) {
                let client_id = request.client_id_in_use();
                let expected = super::oidc::Expected {
                    client_id: &client_id,
                    occasion: super::oidc::Occasion::Refresh { earlier: &earlier },
                };
                let renewed = at_server
                    .checks()
                    .verified_id_token(server, Some(&id_token), expected)
                    .await?;
                // A renewed ID token without `sid` (servers seldom repeat
                // it) would lose the session a back-channel logout names:
                // the login's stays.
                let keeps_session = |renewed: &super::Identity| {
                    renewed.session_id().is_some() || earlier.session_id().is_none()
                };
                if let Some(renewed) = renewed.filter(keeps_session) {
                    chain.set_id_token(renewed.id_token());
                }
            }
        }
        Ok(token)
    }
}

impl TokenSource for Person {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(self.fetch())
    }
}
