//! The assembly of enterprise-managed authorization (ID-JAG): a layer of
//! its own for the identity provider's token exchange, whose token slots
//! (one per authorization server, resource and scope) keep the ID-JAGs,
//! and the JWT-bearer grant that asks it for one at each token request.

use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::{
    Asking, ForRequest, Grant, IdentityAssertion, Idp, JwtBearer, SubjectToken, TokenExchange,
    ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE,
};
use crate::error::ConfigError;
use crate::layer::OAuthLayer;
use crate::token::params::TokenParams;
use crate::transport::Transport;

use super::super::OAuthLayerBuilder;

impl OAuthLayerBuilder {
    /// The JWT-bearer grant whose assertion is an ID-JAG from the identity
    /// provider `settings` name, exchanged there through `transport` (the
    /// layer's own) and kept in the layer's store, if any.
    pub(super) fn id_jag_grant(
        &self,
        settings: &IdentityAssertion,
        transport: &Arc<dyn Transport>,
        fetch_timeout: Duration,
    ) -> Result<Grant, ConfigError> {
        let mut idp = OAuthLayer::builder();
        idp = match &settings.idp {
            Idp::TokenUrl(url) => idp.token_url(url),
            Idp::Issuer(issuer) => idp.issuer(issuer),
        };
        if let Some(id) = &settings.client_id {
            idp = idp.client_id(id);
        }
        if let Some(secret) = &settings.client_secret {
            idp = idp.client_secret(secret);
        }
        if let Some(auth) = &settings.client_auth {
            idp = idp.client_auth(auth.clone());
        }
        idp.transport = Some(Arc::clone(transport));
        idp.store = self.store.clone();
        idp.allow_insecure_http = self.allow_insecure_http;
        let exchange = TokenExchange::new(settings.id_token.clone())
            .subject_token_type(ID_TOKEN_TYPE)
            .requested_token_type(ID_JAG_TOKEN_TYPE);
        let idp = idp
            .token_exchange(exchange)
            .fetch_timeout(fetch_timeout)
            .build()
            .map_err(|e| {
                ConfigError::new(
                    e.kind(),
                    format!(
                        "identity_assertion: the identity provider's settings: {}",
                        e.message()
                    ),
                )
            })?;
        let at = settings.idp().to_owned();
        let layer = idp.clone();
        let ask = move |asking: Asking| {
            let (layer, at) = (layer.clone(), at.clone());
            Box::pin(async move {
                let params = params(&asking);
                match layer.token_for(&params).await {
                    Ok(token) => Ok(token.expose_token().to_owned()),
                    Err(e) => {
                        let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
                        Err(e.with_message(format!(
                            "step 1 of 2, the token exchange at the identity provider `{at}` for \
                             an ID-JAG ({}), failed{detail}",
                            asked(&asking)
                        )))
                    }
                }
            }) as crate::support::boxed::BoxFuture<'static, _>
        };
        let refused = move |asking: Asking| {
            idp.cache_for(&params(&asking))
                .is_ok_and(|cache| cache.force_renewal(None))
        };
        let source = SubjectToken::for_request(
            format!("id-jag:{}", settings.idp()),
            ForRequest {
                ask: Arc::new(ask),
                refused: Arc::new(refused),
            },
        );
        Ok(Grant::JwtBearer(Arc::new(JwtBearer::assertion_from(
            source,
        ))))
    }
}

/// The identity provider's token slot for what a request asks.
fn params(asking: &Asking) -> TokenParams {
    let mut params = TokenParams::new();
    if let Some(audience) = &asking.audience {
        params = params.audience(audience);
    }
    if let Some(resource) = &asking.resource {
        params = params.resource(resource);
    }
    if let Some(scope) = &asking.scope {
        params = params.scope(scope);
    }
    params
}

/// What a request asked for, for messages (no token in it).
fn asked(asking: &Asking) -> String {
    let show = |v: &Option<String>| {
        v.as_deref().map_or("none".to_owned(), |v| {
            format!("`{}`", crate::error::clip(v))
        })
    };
    format!(
        "audience {}, resource {}, scope {}",
        show(&asking.audience),
        show(&asking.resource),
        show(&asking.scope)
    )
}
