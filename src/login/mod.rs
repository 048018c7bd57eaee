//! A person's login ([`Login`], [`DevicePrompt`]), which begins a chain of
//! refresh tokens, and a web app's login for many people.
#![doc = ""]
#![doc = include_str!("../../docs/login.md")]

// Inside: a login is the authorization code grant with PKCE, in the system
// browser or a user agent of the caller's (RFC 6749 section 4.1, RFC 7636,
// RFC 8252), or the device authorization grant (RFC 8628). It runs inside a
// token fetch, when the layer's chain has no refresh token, so with the
// fetch's single flight and the store's lock: `person` is the token source
// of such a chain, around the layer's token requests.
//
// - `authorization`: the authorization request and the callback's checks;
// - `client`: which client the login is: given, a metadata document's URL,
//   or registered;
// - `listener`: the loopback listener the browser comes back to;
// - `paste`: the address a person pastes when the browser is elsewhere;
// - `device`: the device authorization grant, and the polls a backchannel
//   login shares;
// - `backchannel`: a backchannel login (CIBA), the person asked on their
//   own device;
// - `flow`: a login from the server's metadata to its token;
// - `web`: a web app's login for an account, and its sign-out's revocation;
// - `status`: whether a layer's person is signed in;
// - `oidc/`: who signed in (the ID token checked), and a logout token's
//   checks.

mod authorization;
mod backchannel;
mod client;
mod device;
mod flow;
mod listener;
mod oidc;
mod paste;
mod person;
mod status;
mod web;

pub use self::backchannel::Backchannel;
pub(crate) use self::backchannel::Parking;
pub(crate) use self::backchannel::{check_binding_message, check_hint};
pub use self::oidc::Identity;
pub(crate) use self::oidc::{logout_refused, session_digest, LogoutClaims, MAX_LOGOUT_VALID_FOR};
pub(crate) use self::oidc::{Checks, KeySets};
pub(crate) use self::person::Person;
pub use self::status::{LoginState, LoginStatus};
pub use crate::endpoint::PushedAuthorization;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::TokenRequest;
use crate::error::{ConfigError, ConfigErrorKind, TokenError, TokenErrorKind};
use crate::support::boxed::{BoxError, BoxFuture};
use crate::token::AccessToken;

/// One login's requests at one authorization server, made through the
/// layer's token request there, which gives the server's metadata
/// (`request.target.server`), the client and its authentication, and the
/// transport; ID tokens are checked with the layer's `keys`. What it does is
/// written where each part belongs:
///
/// - `flow`: a login from the server's metadata to its token
///   (`log_in`), and the login's own token requests;
/// - `device`: the device grant's polls, through it;
/// - `client`: which client the login is (`login_client`);
/// - `authorization/par`: where the browser goes (`authorization_url`);
/// - `web`: a web app's login (`begin_web_login`, `exchange_code`), a
///   sign-out's revocation (`sign_out`) and the end-session URL;
/// - `oidc`: the ID token's checks, through [`checks`](Self::checks).
#[derive(Clone, Copy)]
pub(crate) struct ServerLogin<'a> {
    pub(crate) request: &'a TokenRequest,
    pub(crate) keys: &'a KeySets,
}

impl<'a> ServerLogin<'a> {
    /// A login through `request`, whose ID tokens `keys` check.
    pub(crate) fn new(request: &'a TokenRequest, keys: &'a KeySets) -> Self {
        ServerLogin { request, keys }
    }

    /// The checks of the JWTs this login's server signs.
    pub(crate) fn checks(&self) -> oidc::Checks<'a> {
        oidc::Checks {
            request: self.request,
            keys: self.keys,
        }
    }
}

/// A login's token answer: the access token, the refresh token if any, the
/// ID token as it came, and the identity it names once checked.
pub(crate) struct Answered {
    pub(crate) token: AccessToken,
    pub(crate) refresh: Option<String>,
    pub(crate) id_token: Option<String>,
    pub(crate) identity: Option<Identity>,
}

/// How long a login may take by default: a person reads, types and approves.
pub(crate) const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The redirect URI of [`Login::user_agent`] unless one is set.
const DEFAULT_USER_AGENT_REDIRECT: &str = "http://127.0.0.1/callback";

/// What a user agent of the caller's is: given the authorization URL, it
/// returns the URL the server redirected to.
type UserAgent = Arc<dyn Fn(String) -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync>;

/// What shows a person the device login's code.
type Prompt = Arc<dyn Fn(&DevicePrompt) + Send + Sync>;

/// How a person logs in, for a layer that acts for a person: a CLI, a
/// desktop agent, a headless box. Give it with
/// [`OAuthLayerBuilder::login`](crate::OAuthLayerBuilder::login).
///
/// The login runs when the layer has no refresh token: at the first request
/// that needs a token, or at [`OAuthLayer::login`](crate::OAuthLayer::login).
/// Every request that waits meanwhile shares that one login. Its refresh token
/// then begins the layer's chain, in memory or in the layer's token store. So
/// each later token is a refresh, and a second process on the same store does
/// not log in again. When the chain ends, because the server refused its
/// refresh token, the next token request logs in once more.
///
/// The authorization server comes from the layer's issuer or protected
/// resource, and its metadata names the endpoints. The authorization request
/// carries PKCE with S256, a fresh `state`, the `resource`, the scope, and with
/// DPoP the key's thumbprint. The callback must carry that `state`, and the
/// server's `iss` where it says it sends one (RFC 9207). The authorization code,
/// the PKCE verifier and the refresh token never appear in errors, `Debug` or
/// logs.
///
/// ```no_run
/// use tower_oauth::{OAuthLayer, login::Login, store::FileStore};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let oauth = OAuthLayer::builder()
///     .protected_resource("https://mcp.example.com/mcp")
///     .client_id("my-cli")
///     .login(Login::browser())
///     .token_store(FileStore::new("/home/me/.config/my-cli/tokens")?)
///     .build()?;
/// // Logs in now if the store holds no login yet.
/// let token = oauth.token().await?;
/// # let _ = token;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Login {
    pub(crate) way: Way,
    pub(crate) timeout: Duration,
    /// A token request that needs the login runs it; `false`: only
    /// `OAuthLayer::login` does.
    pub(crate) automatic: bool,
    /// Where a person whose browser runs elsewhere pastes the address it
    /// ended on, read while the listener waits.
    pub(crate) paste: Option<paste::Paste>,
    pub(crate) redirect_uri: Option<String>,
    /// From `OAuthLayerBuilder::client_metadata_url`.
    pub(crate) client_metadata_url: Option<String>,
}

/// The ways a person logs in.
#[derive(Clone)]
pub(crate) enum Way {
    /// The system browser, back to a loopback listener.
    Browser,
    /// A user agent of the caller's.
    UserAgent(UserAgent),
    /// The device authorization grant.
    Device(Prompt),
    /// A backchannel login (CIBA), the person asked on their own device.
    Backchannel(Backchannel),
}

impl Login {
    /// The authorization code grant with PKCE in the system browser.
    ///
    /// The layer listens on `127.0.0.1` at a port the system picks (RFC 8252
    /// section 7.3), and opens the authorization URL with the `webbrowser`
    /// crate, which honours `$BROWSER`. It also prints the URL to stderr, for a
    /// session over SSH. The listener takes the one callback that carries the
    /// login's `state`, answers it with a short page that says the tab can be
    /// closed, and closes. Any other request to it gets an error page and
    /// changes nothing.
    pub fn browser() -> Self {
        Login {
            way: Way::Browser,
            timeout: DEFAULT_LOGIN_TIMEOUT,
            automatic: true,
            paste: None,
            redirect_uri: None,
            client_metadata_url: None,
        }
    }

    /// The authorization code grant with PKCE through a user agent of yours:
    /// `f` gets the authorization URL and returns the URL the server
    /// redirected to, with its query. It serves embedded web views, headless
    /// clients and tests.
    ///
    /// The redirect URI is `http://127.0.0.1/callback` unless
    /// [`redirect_uri`](Self::redirect_uri) sets another. Nothing listens
    /// there: `f` stops at the redirect.
    pub fn user_agent<F>(f: F) -> Self
    where
        F: Fn(String) -> BoxFuture<'static, Result<String, BoxError>> + Send + Sync + 'static,
    {
        Login {
            way: Way::UserAgent(Arc::new(f)),
            timeout: DEFAULT_LOGIN_TIMEOUT,
            automatic: true,
            paste: None,
            redirect_uri: None,
            client_metadata_url: None,
        }
    }

    /// The device authorization grant (RFC 8628), for a box without a browser.
    ///
    /// `prompt` is called once per login with the code the person types and
    /// where they type it. The layer then asks the token endpoint at the
    /// interval the server set. `slow_down` adds 5 seconds to it, and
    /// `authorization_pending` goes on. `access_denied` and `expired_token` end
    /// the login, and so does the end of the code's `expires_in`. A code or URI
    /// holding a control character is refused before `prompt` sees it, so
    /// nothing the server sends can drive a terminal.
    ///
    /// ```
    /// use tower_oauth::login::Login;
    ///
    /// let login = Login::device(|prompt| {
    ///     eprintln!(
    ///         "To sign in, open {} and enter the code {}",
    ///         prompt.verification_uri(),
    ///         prompt.user_code()
    ///     );
    /// });
    /// # let _ = login;
    /// ```
    pub fn device(prompt: impl Fn(&DevicePrompt) + Send + Sync + 'static) -> Self {
        Login {
            way: Way::Device(Arc::new(prompt)),
            timeout: DEFAULT_LOGIN_TIMEOUT,
            automatic: true,
            paste: None,
            redirect_uri: None,
            client_metadata_url: None,
        }
    }

    /// A backchannel login (OpenID Connect CIBA Core 1.0), for
    /// an agent or a back-end service acting for a person who is not at
    /// its keyboard: the server asks the person `ask` names on their own
    /// device (its app, a push message), showing the binding message, and
    /// the layer asks the token endpoint at the server's interval until
    /// they approve. `slow_down` adds 5 seconds to the interval; the
    /// request's `expires_in` and the login's [`timeout`](Self::timeout)
    /// bound the wait.
    ///
    /// Each end that is no token is a
    /// [`LoginFailed`](crate::TokenErrorKind::LoginFailed) whose
    /// [`error_code`](crate::TokenError::error_code) says which:
    /// `access_denied` (the person refused), `expired_token` (the request
    /// ran out, at the server or here) and `unknown_user_id` (the server
    /// knows nobody by the hint). The answer's ID token is checked as any
    /// login's, and its `acr` against the `acr_values` asked for. Nothing
    /// of a login that failed is kept, and the next request waits out the
    /// layer's back-off first: a person who refused is not asked again at
    /// once.
    ///
    /// (In ping mode, [`Backchannel::ping`], the server's notification wakes
    /// the login instead; with [`Backchannel::wait`]`(false)`, the request
    /// fails at once and a later one gets the token.)
    ///
    /// The client must be registered for CIBA's poll or ping mode at the server
    /// (none registers itself here): give its
    /// [`client_id`](crate::OAuthLayerBuilder::client_id) and its
    /// authentication (a secret, `private_key_jwt` or mTLS), with which
    /// both the request and the polls are made. The scope asks for
    /// `openid`, which CIBA requires.
    ///
    /// ```
    /// use tower_oauth::{OAuthLayer, login::{Backchannel, Login}};
    ///
    /// # fn main() -> Result<(), tower_oauth::ConfigError> {
    /// let oauth = OAuthLayer::builder()
    ///     .issuer("https://login.example.com")
    ///     .client_id("payments-agent")
    ///     .client_secret("...")
    ///     .scope("openid payments")
    ///     .login(Login::backchannel(
    ///         Backchannel::login_hint("alice@example.com")
    ///             .binding_message("Pay 25 EUR to ACME, order 4711"),
    ///     ))
    ///     .build()?;
    /// # let _ = oauth;
    /// # Ok(()) }
    /// ```
    pub fn backchannel(ask: Backchannel) -> Self {
        Login {
            way: Way::Backchannel(ask),
            timeout: DEFAULT_LOGIN_TIMEOUT,
            automatic: true,
            paste: None,
            redirect_uri: None,
            client_metadata_url: None,
        }
    }

    /// Whether the person is asked on their own device (a backchannel
    /// login).
    pub(crate) fn asks_backchannel(&self) -> bool {
        matches!(self.way, Way::Backchannel(_))
    }

    /// This login, whose backchannel request (if it is one) asks the
    /// person `login_hint` names and shows them `message`, where given
    /// (both checked already).
    pub(crate) fn asking(&self, login_hint: Option<&str>, message: Option<&str>) -> Login {
        let mut login = self.clone();
        if let Way::Backchannel(ask) = &mut login.way {
            if let Some(hint) = login_hint {
                *ask = ask.for_person(hint);
            }
            if let Some(message) = message {
                *ask = ask.clone().binding_message(message);
            }
        }
        login
    }

    /// The longest a login may take, from its start to the token. It bounds the
    /// wait for the browser's callback, a user agent, and the device grant's
    /// polls. A request waiting for a token waits this long more than the fetch
    /// timeout.
    ///
    /// Default: 5 minutes.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Also takes the address the browser ended on from standard input,
    /// pasted by a person whose browser runs on another machine (a session
    /// over SSH, a container, a remote IDE), which cannot reach the
    /// listener on `127.0.0.1`. The layer then says so where it prints the
    /// URL. Whichever comes first ends the wait: the browser at the
    /// listener, or a pasted line. A pasted address is checked exactly as
    /// a callback (`state`, `iss`, one use); anything else is refused with
    /// a short reason on stderr, and the login goes on waiting.
    ///
    /// Standard input is read by one thread of the process, from the first
    /// login that waits on it: a program that reads standard input itself
    /// gives its own source with [`paste_from`](Self::paste_from).
    ///
    /// Default: off; the browser login waits for its listener alone.
    pub fn paste_from_stdin(mut self) -> Self {
        self.paste = Some(paste::stdin_lines());
        self
    }

    /// As [`paste_from_stdin`](Self::paste_from_stdin), from a source of
    /// yours: `next_line` gives the next line the person pasted (a text
    /// field, a chat message), or `None` when there are no more. It is
    /// asked again after each line, and dropped when the login ends.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tokio::sync::{mpsc, Mutex};
    /// use tower_oauth::login::Login;
    ///
    /// let (_send, lines) = mpsc::channel::<String>(4);
    /// let lines = Arc::new(Mutex::new(lines));
    /// let login = Login::browser().paste_from(move || {
    ///     let lines = Arc::clone(&lines);
    ///     Box::pin(async move { lines.lock().await.recv().await })
    /// });
    /// # let _ = login;
    /// ```
    ///
    /// Default: off.
    pub fn paste_from<F>(mut self, next_line: F) -> Self
    where
        F: Fn() -> BoxFuture<'static, Option<String>> + Send + Sync + 'static,
    {
        self.paste = Some(Arc::new(next_line));
        self
    }

    /// Whether a request that needs a login runs it. With `false`, such a
    /// request fails at once with
    /// [`LoginRequired`](crate::TokenErrorKind::LoginRequired), sends no
    /// token request and opens nothing; only
    /// [`OAuthLayer::login`](crate::OAuthLayer::login) runs the login. It
    /// serves an agent host with many servers, one layer each, which signs
    /// a person in to each server when asked (its `login` command), never
    /// in the middle of a request. A step-up to more scope needs a login
    /// too, and waits for `login` the same way. A chain already signed in
    /// refreshes as usual.
    ///
    /// ```
    /// use tower_oauth::login::Login;
    ///
    /// let login = Login::browser().automatic(false);
    /// # let _ = login;
    /// ```
    ///
    /// Default: `true`.
    pub fn automatic(mut self, automatic: bool) -> Self {
        self.automatic = automatic;
        self
    }

    /// The redirect URI, for a client registered with a fixed one. For
    /// [`browser`](Self::browser) it must be `http://127.0.0.1` or
    /// `http://localhost`, with a port and a path, such as
    /// `http://127.0.0.1:8400/callback`: the listener takes that port (on
    /// `127.0.0.1`, and on `[::1]` too for `localhost`, where it can). Some
    /// servers register only `http://localhost:PORT/callback`. For [`user_agent`](Self::user_agent) it may be any
    /// absolute URI without a fragment, such as an app's own scheme. The
    /// device grant has none.
    ///
    /// Default: for the browser, `http://127.0.0.1:<a free port>/callback`;
    /// for a user agent, `http://127.0.0.1/callback`.
    pub fn redirect_uri(mut self, uri: impl Into<String>) -> Self {
        self.redirect_uri = Some(uri.into());
        self
    }

    /// Checks the settings, for the builder.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| ConfigError::new(ConfigErrorKind::InvalidSetting, m);
        if self.timeout.is_zero() {
            return Err(invalid("Login::timeout must be more than zero".into()));
        }
        if self.paste.is_some() && !matches!(self.way, Way::Browser) {
            return Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                "Login::paste_from_stdin (or paste_from) was given for a login without a \
                 listener; it serves Login::browser",
            ));
        }
        if let Way::Backchannel(ask) = &self.way {
            ask.check().map_err(invalid)?;
        }
        let Some(uri) = &self.redirect_uri else {
            return Ok(());
        };
        match &self.way {
            Way::Browser => listener::loopback_address(uri)
                .map(|_| ())
                .map_err(|why| invalid(format!("Login::redirect_uri `{uri}` {why}"))),
            Way::UserAgent(_) => authorization::check_redirect_uri(uri)
                .map_err(|why| invalid(format!("Login::redirect_uri `{uri}` {why}"))),
            Way::Device(_) | Way::Backchannel(_) => Err(ConfigError::new(
                ConfigErrorKind::Conflicting,
                format!(
                    "Login::redirect_uri was given for a {}, which has no redirect",
                    self.name()
                ),
            )),
        }
    }

    /// Whether the login can ask for the sign-in an API's challenge asks
    /// for (`acr_values`, `max_age`): every way but the device grant.
    pub(crate) fn reauthenticates(&self) -> bool {
        !matches!(self.way, Way::Device(_))
    }

    /// What the login is called in logs and errors.
    pub(crate) fn name(&self) -> &'static str {
        match self.way {
            Way::Browser => "browser login",
            Way::UserAgent(_) => "user-agent login",
            Way::Device(_) => "device login",
            Way::Backchannel(_) => "backchannel login",
        }
    }
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("way", &self.name())
            .field("timeout", &self.timeout)
            .field("automatic", &self.automatic)
            .field("paste", &self.paste.is_some())
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

/// What a person needs for a device login: the code to type, and where.
/// [`Login::device`]'s prompt gets it. Every text in it was checked: no
/// control character, and URIs that are `https` (or `http` on loopback).
#[derive(Clone, Debug)]
pub struct DevicePrompt {
    pub(crate) user_code: String,
    pub(crate) verification_uri: String,
    pub(crate) verification_uri_complete: Option<String>,
    pub(crate) expires_in: Duration,
}

impl DevicePrompt {
    /// The code the person types, `user_code`.
    pub fn user_code(&self) -> &str {
        &self.user_code
    }

    /// Where the person types it, `verification_uri`.
    pub fn verification_uri(&self) -> &str {
        &self.verification_uri
    }

    /// A URI that carries the code already, `verification_uri_complete`, for
    /// a QR code or a link. `None` when the server sent none.
    pub fn verification_uri_complete(&self) -> Option<&str> {
        self.verification_uri_complete.as_deref()
    }

    /// How long the code is good for, `expires_in`, cut to the login's
    /// timeout.
    pub fn expires_in(&self) -> Duration {
        self.expires_in
    }
}

/// The error of a login that did not end with a token.
pub(crate) fn failed(message: impl Into<String>) -> TokenError {
    TokenError::new(TokenErrorKind::LoginFailed).with_message(message)
}

pub(crate) use self::web::{
    finish as finish_web_login, foreign as foreign_callback, state_of, Pending, PENDING_LOGIN_TTL,
};
