//! The authorization request of a login (pushed first, RFC 9126, in `par`),
//! and the checks of the callback it comes back with: PKCE with S256 (RFC 7636), `state`, the OpenID Connect
//! `nonce`, the server's `iss` (RFC 9207), and where a browser may be sent.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use http::Uri;
use ring::rand::{SecureRandom, SystemRandom};

mod par;

use super::failed;
use crate::error::{clip, TokenError};
use crate::support::encoding::form_urlencode;

/// The longest callback URL read: far above a code and a state.
pub(crate) const MAX_CALLBACK_LEN: usize = 8 * 1024;

/// One login's secrets: the PKCE verifier, the `state` and the `nonce`
/// (sent where the scope holds `openid`; the ID token must carry it back).
pub(crate) struct Secrets {
    /// 32 random bytes, base64url: 43 characters (RFC 7636 section 4.1).
    pub(crate) verifier: String,
    pub(crate) state: String,
    pub(crate) nonce: String,
}

impl Secrets {
    /// Fresh ones from the system's random source.
    pub(crate) fn new() -> Result<Self, TokenError> {
        let random = || {
            let mut bytes = [0u8; 32];
            SystemRandom::new()
                .fill(&mut bytes)
                .map_err(|_| failed("the system's random source failed"))?;
            Ok::<_, TokenError>(URL_SAFE_NO_PAD.encode(bytes))
        };
        Ok(Secrets {
            verifier: random()?,
            state: random()?,
            nonce: random()?,
        })
    }

    /// The S256 challenge: base64url of the verifier's SHA-256.
    pub(crate) fn challenge(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, self.verifier.as_bytes());
        URL_SAFE_NO_PAD.encode(digest.as_ref())
    }
}

/// What the authorization request says.
pub(crate) struct Request<'a> {
    pub(crate) endpoint: &'a str,
    pub(crate) client_id: &'a str,
    pub(crate) redirect_uri: &'a str,
    pub(crate) scope: Option<&'a str>,
    pub(crate) resources: Vec<&'a str>,
    /// RFC 9396's, as the request's parameters hold it (checked).
    pub(crate) authorization_details: Option<&'a str>,
    pub(crate) dpop_jkt: Option<&'a str>,
    /// A sign-in an API asked for (RFC 9470): its `acr_values`.
    pub(crate) acr_values: Option<&'a str>,
    /// And its `max_age`, in seconds.
    pub(crate) max_age: Option<u64>,
}

impl Request<'_> {
    /// The authorization request's parameters: the login's, with `secrets`.
    pub(crate) fn pairs(&self, secrets: &Secrets) -> Vec<(&'static str, String)> {
        let mut pairs: Vec<(&str, String)> = vec![
            ("response_type", "code".into()),
            ("client_id", self.client_id.into()),
            ("redirect_uri", self.redirect_uri.into()),
            ("state", secrets.state.clone()),
            ("code_challenge", secrets.challenge()),
            ("code_challenge_method", "S256".into()),
        ];
        if let Some(scope) = self.scope {
            pairs.push(("scope", scope.into()));
            if asks_openid(Some(scope)) {
                pairs.push(("nonce", secrets.nonce.clone()));
                // OpenID Connect Core section 11: a request for
                // `offline_access` MUST carry `prompt=consent`; servers that
                // apply it (oidc-provider by default) drop `offline_access`
                // otherwise, and give no refresh token.
                if scope.split_whitespace().any(|s| s == "offline_access") {
                    pairs.push(("prompt", "consent".into()));
                }
            }
        }
        for resource in &self.resources {
            pairs.push(("resource", (*resource).into()));
        }
        if let Some(details) = self.authorization_details {
            pairs.push(("authorization_details", details.into()));
        }
        if let Some(jkt) = self.dpop_jkt {
            pairs.push(("dpop_jkt", jkt.into()));
        }
        if let Some(acr) = self.acr_values {
            pairs.push(("acr_values", acr.into()));
        }
        if let Some(max_age) = self.max_age {
            pairs.push(("max_age", max_age.to_string()));
        }
        pairs
    }
}

/// `endpoint` with `pairs` after its own query (RFC 6749 section 3.1), each
/// value form-encoded.
pub(crate) fn with_query(endpoint: &str, pairs: &[(&str, &str)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}={}", form_urlencode(value)))
        .collect();
    let joiner = if endpoint.contains('?') { '&' } else { '?' };
    format!("{endpoint}{joiner}{}", query.join("&"))
}

/// Whether `scope` asks for OpenID Connect (`openid`): the login then sends
/// a `nonce`, and checks the ID token that comes back.
pub(crate) fn asks_openid(scope: Option<&str>) -> bool {
    scope.is_some_and(|s| s.split_whitespace().any(|s| s == "openid"))
}

/// The error of a login the server refused at its callback, `why` being
/// its `error` (and description): that code is the error's
/// [`error_code`](TokenError::error_code).
pub(crate) fn refused_login(why: &str) -> TokenError {
    let code = why.split(':').next().unwrap_or_default();
    failed(format!("the authorization server refused the login: {why}")).with_error_code(code)
}

/// Whether a browser may be sent to `endpoint`: an absolute `https` URL, or
/// `http` on loopback, without a fragment. Never `javascript:`, `data:`,
/// `file:` or plain `http` elsewhere, whatever `allow_insecure_http` says: a
/// person's credentials would travel in the clear, or a page would run.
pub(crate) fn check_endpoint(name: &str, endpoint: &str) -> Result<(), TokenError> {
    let refuse = |why: &str| {
        Err(failed(format!(
            "the server's {name} `{}` {why}; no browser is sent there",
            clip(endpoint)
        )))
    };
    if endpoint.contains('#') {
        return refuse("has a fragment");
    }
    let Ok(uri) = endpoint.parse::<Uri>() else {
        return refuse("is not a URL");
    };
    let Some(host) = uri.host() else {
        return refuse("has no host");
    };
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return refuse("carries user information");
    }
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if is_loopback(host) => Ok(()),
        Some("http") => refuse("is plain http to a host that is not loopback"),
        _ => refuse("is neither https nor http on loopback"),
    }
}

/// Whether `host` is a loopback host: `localhost`, 127.0.0.0/8 or `[::1]`.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether `uri` may be a user agent's redirect URI: absolute, no fragment,
/// no control character or space. Otherwise, why not.
pub(crate) fn check_redirect_uri(uri: &str) -> Result<(), &'static str> {
    if uri.chars().any(|c| c.is_control() || c == ' ') {
        return Err("holds a control character or a space");
    }
    if uri.contains('#') {
        return Err("has a fragment");
    }
    match uri.split_once(':') {
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            Ok(())
        }
        _ => Err("is not an absolute URI"),
    }
}

/// What a callback must carry, beside the `state`.
pub(crate) struct Expect<'a> {
    pub(crate) state: &'a str,
    /// The issuer, as its metadata names it.
    pub(crate) issuer: &'a str,
    /// The server says it sends `iss` (RFC 9207 section 3).
    pub(crate) iss_required: bool,
}

/// What a callback said.
#[derive(Debug, PartialEq)]
pub(crate) enum Callback {
    /// The login's code: exchange it.
    Code(String),
    /// The login's `state` and an error the server sent: the login ends.
    Refused(String),
    /// Not the login's `state` (or none): ignore it, it changes nothing.
    Foreign,
}

/// Where a callback came from, which says what its address must be.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Came<'a> {
    /// To the loopback listener at this path: a request's target, which
    /// must be the path itself (`/callback?...`), no other form.
    Listener(&'a str),
    /// Pasted by the person: the address the browser ended on, for this
    /// path (absolute, or `/callback?...`), or its query alone.
    Pasted(&'a str),
    /// Returned by a user agent, or handed to a web app's route: any
    /// address (an app's own scheme too), or its query alone.
    Returned,
}

/// The query of a callback, `text`, as it `came`: after the first `?` of
/// its address, or the text itself when it is a query alone (no `?`, a
/// `=`); its fragment dropped. Why it is none, in a few words a person
/// reads at the terminal. Every way a callback comes (the listener, a
/// pasted address, a user agent's URL, a web app's route) reads it here.
pub(crate) fn callback_query<'a>(text: &'a str, came: Came<'_>) -> Result<&'a str, &'static str> {
    if text.len() > MAX_CALLBACK_LEN {
        return Err("it is too long to be the sign-in's address");
    }
    let text = text.split('#').next().unwrap_or_default();
    let (address, query) = match text.split_once('?') {
        Some(parts) => parts,
        None if text.contains('=') => ("", text),
        None => (text, ""),
    };
    let another = "it is not this sign-in's address (another path)";
    match came {
        Came::Returned => Ok(query),
        Came::Listener(path) if address == path => Ok(query),
        Came::Listener(_) => Err(another),
        Came::Pasted(_) if address.is_empty() => Ok(query),
        Came::Pasted(path) if address.starts_with('/') => match address == path {
            true => Ok(query),
            false => Err(another),
        },
        Came::Pasted(path) if address.contains("://") => {
            let uri: http::Uri = text.parse().map_err(|_| "it is not an address")?;
            match uri.path() == path {
                true => Ok(query),
                false => Err(another),
            }
        }
        Came::Pasted(_) => Err("it is not an address"),
    }
}

/// The parameters of a callback's query a login reads, each as it came;
/// `twice` when one of them came again. Every reader of a callback's
/// parameters reads them here.
#[derive(Default)]
pub(crate) struct CallbackParams {
    pub(crate) state: Option<String>,
    code: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    description: Option<String>,
    twice: bool,
}

impl CallbackParams {
    /// The parameters of `query` (a callback's, as [`callback_query`]
    /// took it out of its address).
    pub(crate) fn read(query: &str) -> Self {
        let mut params = CallbackParams::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            let slot = match &*name {
                "state" => &mut params.state,
                "code" => &mut params.code,
                "iss" => &mut params.iss,
                "error" => &mut params.error,
                "error_description" => &mut params.description,
                _ => continue,
            };
            params.twice |= slot.is_some();
            *slot = Some(value.into_owned());
        }
        params
    }
}

/// Reads a callback's `query`, checked against `expect`. A wrong `iss`
/// with the right `state` ends the login: the code may be another server's
/// (a mix-up attack, RFC 9207).
pub(crate) fn read_callback(query: &str, expect: &Expect<'_>) -> Result<Callback, TokenError> {
    if query.len() > MAX_CALLBACK_LEN {
        return Ok(Callback::Foreign);
    }
    let CallbackParams {
        state,
        code,
        iss,
        error,
        description,
        twice,
    } = CallbackParams::read(query);
    // A state compared in constant time: it is the login's secret.
    let ours = state.as_deref().is_some_and(|s| {
        s.len() == expect.state.len()
            && s.bytes()
                .zip(expect.state.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    if !ours {
        return Ok(Callback::Foreign);
    }
    if twice {
        return Err(failed(
            "the callback repeats a parameter (state, code, iss or error); the login is refused",
        ));
    }
    match &iss {
        Some(iss) if iss != expect.issuer => {
            return Err(failed(format!(
                "the callback names the issuer `{}`, not `{}` that the login went to: the code \
                 may be another server's (a mix-up attack, RFC 9207); the login is refused",
                clip(iss),
                expect.issuer
            )))
        }
        None if expect.iss_required => {
            return Err(failed(format!(
                "the callback carries no `iss`, which `{}` says it sends \
                 (authorization_response_iss_parameter_supported); the login is refused",
                expect.issuer
            )))
        }
        _ => {}
    }
    if let Some(error) = error {
        let description = description
            .map(|d| format!(": {}", clip(&d)))
            .unwrap_or_default();
        return Ok(Callback::Refused(format!("{}{description}", clip(&error))));
    }
    match code {
        Some(code) if !code.is_empty() && code.bytes().all(|b| (0x20..=0x7e).contains(&b)) => {
            Ok(Callback::Code(code))
        }
        _ => Err(failed(
            "the callback carries no usable `code`; the login is refused",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(iss_required: bool) -> Expect<'static> {
        Expect {
            state: "the-state",
            issuer: "https://as.example.com",
            iss_required,
        }
    }

    #[test]
    fn a_callback_counts_only_with_the_login_s_state() {
        let read = |q: &str| read_callback(q, &expect(false));
        assert_eq!(read("code=abc").unwrap(), Callback::Foreign);
        assert_eq!(read("code=abc&state=other").unwrap(), Callback::Foreign);
        assert_eq!(
            read("code=abc&state=the-state").unwrap(),
            Callback::Code("abc".into())
        );
        assert!(read("code=abc&state=the-state&iss=https%3A%2F%2Fevil.example").is_err());
        assert!(read("code=a&code=b&state=the-state").is_err());
        assert_eq!(
            read("error=access_denied&state=the-state").unwrap(),
            Callback::Refused("access_denied".into())
        );
        let required = |q: &str| read_callback(q, &expect(true));
        assert!(required("code=abc&state=the-state").is_err());
        assert_eq!(
            required("code=abc&state=the-state&iss=https%3A%2F%2Fas.example.com").unwrap(),
            Callback::Code("abc".into())
        );
    }

    #[test]
    fn endpoints_a_browser_may_open() {
        for ok in [
            "https://as.example.com/authorize",
            "https://as.example.com/authorize?tenant=1",
            "http://127.0.0.1:8080/authorize",
            "http://localhost/authorize",
            "http://[::1]:9/a",
        ] {
            assert!(check_endpoint("authorization_endpoint", ok).is_ok(), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "http://as.example.com/authorize",
            "file:///etc/passwd",
            "data:text/html,hi",
            "https://as.example.com/authorize#x",
            "https://user@as.example.com/authorize",
            "/authorize",
        ] {
            let e = check_endpoint("authorization_endpoint", bad).unwrap_err();
            assert_eq!(e.kind(), crate::error::TokenErrorKind::LoginFailed, "{bad}");
        }
    }

    #[test]
    fn a_callback_s_query_is_read_one_way_from_every_form_it_comes_in() {
        let (listener, pasted) = (Came::Listener("/callback"), Came::Pasted("/callback"));
        let another = Err("it is not this sign-in's address (another path)");
        for (text, came, query) in [
            // Returned: any address, an app's own scheme too, or a query
            // alone whose values hold `://` unencoded.
            (
                "https://app.example/cb?code=a&state=s#f",
                Came::Returned,
                Ok("code=a&state=s"),
            ),
            ("https://app.example/cb", Came::Returned, Ok("")),
            (
                "com.example.app:/cb?code=a&state=s",
                Came::Returned,
                Ok("code=a&state=s"),
            ),
            ("?code=a&state=s", Came::Returned, Ok("code=a&state=s")),
            (
                "code=a&state=s&iss=https://idp.example",
                Came::Returned,
                Ok("code=a&state=s&iss=https://idp.example"),
            ),
            // The listener: its own path as a request's target, nothing else.
            ("/callback?code=a&state=s", listener, Ok("code=a&state=s")),
            ("/callback", listener, Ok("")),
            ("/other?code=a", listener, another),
            ("http://evil.example/callback?code=a", listener, another),
            ("code=a&state=s", listener, another),
            ("?code=a&state=s", listener, another),
            // Pasted: the address for the path (any host), or a query alone.
            (
                "http://127.0.0.1:8400/callback?code=a",
                pasted,
                Ok("code=a"),
            ),
            ("/callback?code=a", pasted, Ok("code=a")),
            ("code=a&state=s", pasted, Ok("code=a&state=s")),
            ("http://127.0.0.1:8400/other?code=a", pasted, another),
            (
                "http://bad host/callback?code=a",
                pasted,
                Err("it is not an address"),
            ),
            ("hello", pasted, Err("it is not an address")),
        ] {
            assert_eq!(
                super::callback_query(text, came),
                query,
                "{text:?} {came:?}"
            );
        }
        let huge = "a".repeat(MAX_CALLBACK_LEN + 1);
        assert!(super::callback_query(&huge, Came::Returned).is_err());
    }

    #[test]
    fn an_authorization_request_carries_the_details_and_resources_asked_for() {
        let secrets = Secrets::new().unwrap();
        let details = r#"[{"type":"payment_initiation"}]"#;
        let request = Request {
            endpoint: "https://as.example/authorize",
            client_id: "c",
            redirect_uri: "http://127.0.0.1/callback",
            scope: Some("read"),
            resources: vec!["https://api.example"],
            authorization_details: Some(details),
            dpop_jkt: None,
            acr_values: None,
            max_age: None,
        };
        let pairs = request.pairs(&secrets);
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("authorization_details"), Some(details));
        assert_eq!(get("resource"), Some("https://api.example"));
        let url = with_query(request.endpoint, &[("authorization_details", details)]);
        let query = url.split_once('?').unwrap().1;
        let read: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        assert_eq!(read, [("authorization_details".into(), details.into())]);
    }
}
