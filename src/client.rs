//! The client-credentials token request, and the [`TokenSource`] seam the
//! cache fetches through.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Uri};

use crate::encoding::{base64, form_urlencode, percent_encode};
use crate::error::TokenError;
use crate::token::AccessToken;
use crate::transport::{BoxFuture, Transport, MAX_RESPONSE_BODY};

/// Anything that can produce an access token: the seam for another grant, a
/// vault, a sidecar, or a test double.
///
/// An [`OAuthLayer`](crate::OAuthLayer) built with
/// [`OAuthLayerBuilder::token_source`](crate::OAuthLayerBuilder::token_source)
/// keeps all its caching, single flight, renewal ahead, back-off and 401
/// handling for the source; the source only fetches. The layer calls it at
/// most once at a time, on a task of its own, under
/// [`fetch_timeout`](crate::OAuthLayerBuilder::fetch_timeout).
///
/// ```
/// use std::time::Duration;
/// use tower_oauth::{AccessToken, BoxFuture, OAuthLayer, TokenError, TokenErrorKind, TokenSource};
///
/// /// Tokens from a file a sidecar keeps fresh.
/// struct FromFile(std::path::PathBuf);
///
/// impl TokenSource for FromFile {
///     fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
///         Box::pin(async move {
///             let token = tokio::fs::read_to_string(&self.0)
///                 .await
///                 .map_err(|e| TokenError::custom(TokenErrorKind::Transport, e))?;
///             Ok(AccessToken::new(token.trim()).with_expires_in(Duration::from_secs(300)))
///         })
///     }
/// }
///
/// let oauth = OAuthLayer::builder()
///     .token_source(FromFile("/run/secrets/token".into()))
///     .build()
///     .unwrap();
/// ```
pub trait TokenSource: Send + Sync + 'static {
    /// Fetches a new token.
    ///
    /// # Errors
    ///
    /// A [`TokenError`] saying what went wrong; its
    /// [`retry_after`](TokenError::retry_after) sets the back-off.
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>>;
}

/// How the client authenticates to the token endpoint.
///
/// Without a choice, the layer picks by how the endpoint was given:
///
/// | endpoint given with | default | why |
/// |---|---|---|
/// | [`auth_url`](crate::OAuthLayerBuilder::auth_url) | [`UnencodedBody`](ClientAuth::UnencodedBody) | the specification's endpoint takes exactly its own request body |
/// | [`token_url`](crate::OAuthLayerBuilder::token_url) | [`Basic`](ClientAuth::Basic) | RFC 6749 section 2.3.1: every server must support HTTP Basic for clients with a secret |
/// | [`issuer`](crate::OAuthLayerBuilder::issuer) | what the server lists in `token_endpoint_auth_methods_supported`: [`Basic`](ClientAuth::Basic) if it lists `client_secret_basic` or nothing, else [`FormBody`](ClientAuth::FormBody) for `client_secret_post` | the server says what it takes (RFC 8414 section 2) |
///
/// It also parses from the names used in configuration (`basic` or
/// `client_secret_basic`, `form` or `client_secret_post`, `basic-unencoded`,
/// `unencoded`), as `OAUTH_CLIENT_AUTH` does for
/// [`from_env`](crate::OAuthLayerBuilder::from_env):
///
/// ```
/// use tower_oauth::ClientAuth;
///
/// assert_eq!("client_secret_post".parse::<ClientAuth>().unwrap(), ClientAuth::FormBody);
/// assert!("magic".parse::<ClientAuth>().is_err());
/// ```
///
/// ```
/// use tower_oauth::{ClientAuth, OAuthLayer};
///
/// let oauth = OAuthLayer::builder()
///     .token_url("https://idp.example.com/oauth2/token")
///     .client_id("my-client")
///     .client_secret("a secret with + / & = and spaces")
///     .client_auth(ClientAuth::Basic)
///     .scope("read:products write:orders")
///     .build()
///     .unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientAuth {
    /// The specification's request: id and secret in the body, values sent
    /// as they are, without encoding. Values with `&`, whitespace or control
    /// characters cannot be carried (a [`ConfigError`](crate::ConfigError)).
    #[default]
    UnencodedBody,
    /// Id and secret in the body, every name and value form-urlencoded
    /// (RFC 6749 section 2.3.1 and appendix B, `client_secret_post`):
    /// carries any value.
    FormBody,
    /// HTTP Basic authentication (RFC 6749 section 2.3.1,
    /// `client_secret_basic`): id and secret percent-encoded (RFC 3986's
    /// unreserved characters stay, a space is `%20`, a `+` is `%2B`), joined
    /// with `:`, base64-encoded in the `Authorization` header; the body holds
    /// `grant_type` and any extra parameters, form-urlencoded. Servers that
    /// form-decode the credentials (as RFC 6749 says) and servers that only
    /// percent-decode them both read any secret back exactly; servers that
    /// decode nothing read secrets of letters, digits and `-._~` exactly.
    Basic,
    /// HTTP Basic authentication with id and secret as they are, not
    /// encoded: for servers that do not decode the credentials at all. A
    /// client id containing `:` cannot be carried (a
    /// [`ConfigError`](crate::ConfigError)).
    BasicUnencoded,
}

impl std::str::FromStr for ClientAuth {
    type Err = crate::ConfigError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "basic" | "client-secret-basic" => Ok(ClientAuth::Basic),
            "form" | "post" | "client-secret-post" => Ok(ClientAuth::FormBody),
            "basic-unencoded" => Ok(ClientAuth::BasicUnencoded),
            "unencoded" => Ok(ClientAuth::UnencodedBody),
            _ => Err(crate::ConfigError::new(
                crate::ConfigErrorKind::InvalidSetting,
                format!(
                    "unknown client authentication `{name}`: use basic (client_secret_basic), \
                     form (client_secret_post), basic-unencoded or unencoded"
                ),
            )),
        }
    }
}

impl ClientAuth {
    /// Whether the id and secret go in an `Authorization: Basic` header.
    fn is_basic(self) -> bool {
        matches!(self, ClientAuth::Basic | ClientAuth::BasicUnencoded)
    }
}

/// The token request of the specification (section 4) and its variants.
pub(crate) struct ClientCredentials {
    url: Uri,
    client_secret: String,
    body: Bytes,
    basic: Option<HeaderValue>,
    transport: Arc<dyn Transport>,
    /// What to suggest when the URL turns out not to be a token endpoint.
    hint: &'static str,
    /// The scopes requested, to notice a narrower grant.
    scope: Option<String>,
}

/// The hint for a URL given with `token_url` that is not a token endpoint.
const TOKEN_URL_HINT: &str = "check the URL given to token_url: a server names its token \
     endpoint `token_endpoint` in its metadata (/.well-known/oauth-authorization-server or \
     /.well-known/openid-configuration)";

/// The hint for a token endpoint named by an issuer's metadata.
const DISCOVERED_HINT: &str = "it is the `token_endpoint` of the issuer's metadata, which will \
     be read again at the next attempt";

/// The hint for a URL built from `auth_url` that is not a token endpoint.
const AUTH_URL_HINT: &str = "auth_url appends /v1/oauth/accesstoken, which suits the \
     specification's endpoint only; for another server give its token endpoint with token_url \
     (`token_endpoint` in its metadata at /.well-known/openid-configuration)";

impl ClientCredentials {
    /// The values must already be checked to fit `auth` (see the builder).
    pub(crate) fn new(
        url: Uri,
        client_id: &str,
        client_secret: String,
        auth: ClientAuth,
        params: &[(String, String)],
        transport: Arc<dyn Transport>,
    ) -> Self {
        let encode = |v: &str| match auth {
            ClientAuth::UnencodedBody => v.to_owned(),
            _ => form_urlencode(v),
        };
        let mut body = String::from("grant_type=client_credentials");
        let mut basic = None;
        if auth.is_basic() {
            let credentials = match auth {
                ClientAuth::BasicUnencoded => format!("{client_id}:{client_secret}"),
                _ => format!(
                    "{}:{}",
                    percent_encode(client_id),
                    percent_encode(&client_secret)
                ),
            };
            let mut value =
                HeaderValue::try_from(format!("Basic {}", base64(credentials.as_bytes())))
                    .expect("base64 is a valid header value");
            value.set_sensitive(true);
            basic = Some(value);
        } else {
            body.push_str(&format!(
                "&client_id={}&client_secret={}",
                encode(client_id),
                encode(&client_secret)
            ));
        }
        for (name, value) in params {
            body.push_str(&format!("&{}={}", encode(name), encode(value)));
        }
        ClientCredentials {
            url,
            client_secret,
            body: Bytes::from(body),
            basic,
            transport,
            hint: TOKEN_URL_HINT,
            scope: params
                .iter()
                .find(|(name, _)| name == "scope")
                .map(|(_, scope)| scope.clone()),
        }
    }

    /// The URL is the `token_endpoint` of an issuer's metadata: say so when
    /// it is not a token endpoint.
    pub(crate) fn built_from_discovery(mut self) -> Self {
        self.hint = DISCOVERED_HINT;
        self
    }

    /// The URL was built from `auth_url`: say so when it is not a token
    /// endpoint.
    pub(crate) fn built_from_auth_url(mut self) -> Self {
        self.hint = AUTH_URL_HINT;
        self
    }

    /// The message for an answer that shows the URL is no token endpoint.
    fn not_a_token_endpoint(&self, status: http::StatusCode) -> String {
        // The URL holds no credentials (the builder refuses them); its query
        // is left out all the same.
        let url = match (self.url.scheme_str(), self.url.authority()) {
            (Some(scheme), Some(authority)) => {
                format!("{scheme}://{authority}{}", self.url.path())
            }
            _ => self.url.path().to_owned(),
        };
        let answer = if status.is_redirection() {
            "answered with a redirect (redirects are not followed for token requests: the \
             secret must go nowhere else), so it"
        } else {
            "answered that"
        };
        format!("`{url}` {answer} is not a token endpoint; {}", self.hint)
    }

    /// Warns when the token grants fewer scopes than were requested.
    fn check_scope(&self, token: &AccessToken) {
        let (Some(requested), Some(granted)) = (&self.scope, token.scope()) else {
            return;
        };
        let held: Vec<&str> = granted.split_whitespace().collect();
        let missing: Vec<&str> = requested
            .split_whitespace()
            .filter(|s| !held.contains(s))
            .collect();
        if !missing.is_empty() {
            tracing::warn!(
                requested = %requested,
                granted = %granted,
                missing = %missing.join(" "),
                "the token endpoint granted fewer scopes than requested"
            );
        }
    }

    fn request(&self) -> http::Request<Bytes> {
        let mut request = http::Request::new(self.body.clone());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.url.clone();
        let headers = request.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(basic) = &self.basic {
            headers.insert(AUTHORIZATION, basic.clone());
        }
        request
    }
}

impl TokenSource for ClientCredentials {
    fn fetch_token(&self) -> BoxFuture<'_, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            let response = self
                .transport
                .send(self.request(), MAX_RESPONSE_BODY)
                .await?;
            let status = response.status();
            match crate::answer::read(&response, &self.client_secret) {
                Ok(token) => {
                    self.check_scope(&token);
                    Ok(token)
                }
                Err(e) if crate::answer::not_a_token_endpoint(status) => {
                    Err(e.with_message(self.not_a_token_endpoint(status)))
                }
                Err(e) => Err(e),
            }
        })
    }
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("url", &self.url)
            .field("client_secret", &"[redacted]")
            .finish_non_exhaustive()
    }
}
