//! [`Challenge`]: an API's `WWW-Authenticate` challenges, read by the
//! `auth-param` grammar of RFC 9110 section 11.
//!
//! It reads several challenges in one header and in several headers. It reads
//! parameters with token or quoted-string values, with escapes undone, and a
//! `token68` alone. It runs only on a refusal, off the warm path. Anything from
//! the network is hostile here. So the input is capped, and malformed syntax
//! ends the reading, keeping what came before it. Nothing panics.

use http::HeaderMap;

/// The bytes of `WWW-Authenticate` read, over all its headers. The rest is
/// ignored.
const MAX_BYTES: usize = 8 * 1024;
/// Challenges kept. More are ignored.
const MAX_CHALLENGES: usize = 16;
/// Parameters kept per challenge. More are ignored.
const MAX_PARAMS: usize = 32;

/// One challenge of an API's `WWW-Authenticate` headers: its scheme, and its
/// parameters or `token68`, as the layer reads them by RFC 9110 section 11. The
/// layer reads at most 8 KiB of headers, 16 challenges, and 32 parameters each.
/// Malformed syntax ends the reading, and what came before it is kept.
///
/// The layer reads them itself on a `401` or `403`: a refused token, a DPoP
/// nonce, `insufficient_scope`, or `resource_metadata`. This is the same
/// reading, for code that handles an API's answer on its own.
///
/// ```
/// use http::HeaderMap;
/// use tower_oauth::metadata::Challenge;
///
/// let mut headers = HeaderMap::new();
/// headers.insert(
///     "www-authenticate",
///     r#"Bearer error="insufficient_scope", scope="files:write", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource""#
///         .parse()
///         .unwrap(),
/// );
/// let challenges = Challenge::parse(&headers);
/// assert!(challenges[0].is("bearer"));
/// assert_eq!(challenges[0].param("scope"), Some("files:write"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    scheme: String,
    token68: Option<String>,
    params: Vec<(String, String)>,
}

impl Challenge {
    /// Every challenge of the `WWW-Authenticate` headers of `headers`, in
    /// order, within the caps.
    pub fn parse(headers: &HeaderMap) -> Vec<Challenge> {
        challenges(headers)
    }

    /// The scheme as sent (compare with [`is`](Self::is)).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The `token68` of a challenge that carries one instead of parameters.
    pub fn token68(&self) -> Option<&str> {
        self.token68.as_deref()
    }

    /// The parameters, names lowercased, values unescaped, in order.
    pub fn params(&self) -> &[(String, String)] {
        &self.params
    }

    /// Whether this is a challenge of `scheme` (case-insensitive).
    pub fn is(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
    }

    /// The value of the first parameter named `name` (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The challenges of every `WWW-Authenticate` header of `headers`, in
/// order, within the caps.
pub(crate) fn challenges(headers: &HeaderMap) -> Vec<Challenge> {
    let mut out = Vec::new();
    let mut budget = MAX_BYTES;
    for value in headers.get_all(http::header::WWW_AUTHENTICATE) {
        let bytes = value.as_bytes();
        let bytes = &bytes[..bytes.len().min(budget)];
        budget -= bytes.len();
        Parser { s: bytes, at: 0 }.challenges(&mut out);
        if budget == 0 || out.len() >= MAX_CHALLENGES {
            break;
        }
    }
    out.truncate(MAX_CHALLENGES);
    out
}

/// The scopes a `Bearer` or `DPoP` challenge with `error="insufficient_scope"`
/// asks for, if any. RFC 6750 section 3.1 puts them in its `scope`.
pub(crate) fn insufficient_scope(headers: &HeaderMap) -> Option<String> {
    insufficient(headers).flatten()
}

/// Whether a `Bearer` or `DPoP` challenge says `error="insufficient_scope"`,
/// and the scopes it asks for, if any.
pub(crate) fn insufficient(headers: &HeaderMap) -> Option<Option<String>> {
    let found: Vec<Challenge> = challenges(headers)
        .into_iter()
        .filter(|c| c.is("Bearer") || c.is("DPoP"))
        .filter(|c| c.param("error") == Some("insufficient_scope"))
        .collect();
    if found.is_empty() {
        return None;
    }
    Some(
        found
            .iter()
            .find_map(|c| c.param("scope").map(str::to_owned))
            .filter(|scope| !scope.trim().is_empty()),
    )
}

/// What a `Bearer` or `DPoP` challenge with
/// `error="insufficient_user_authentication"` (RFC 9470) asks of the
/// person's sign-in, as the API wrote it: its `acr_values` and `max_age`,
/// each if any; `None` for any other answer.
pub(crate) fn insufficient_user_authentication(
    headers: &HeaderMap,
) -> Option<(Option<String>, Option<String>)> {
    challenges(headers)
        .into_iter()
        .filter(|c| c.is("Bearer") || c.is("DPoP"))
        .find(|c| c.param("error") == Some("insufficient_user_authentication"))
        .map(|c| {
            let text = |name| c.param(name).map(crate::error::clip);
            (text("acr_values"), text("max_age"))
        })
}

/// A reading position in one header value.
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.at += 1;
        }
    }

    /// A token (RFC 9110 section 5.6.2). Empty when none starts here.
    fn token(&mut self) -> &str {
        let start = self.at;
        while self.peek().is_some_and(is_tchar) {
            self.at += 1;
        }
        // tchar is ASCII: always UTF-8.
        std::str::from_utf8(&self.s[start..self.at]).unwrap_or_default()
    }

    /// A quoted-string, its escapes undone; `None` when unterminated or
    /// holding a byte it may not.
    fn quoted(&mut self) -> Option<String> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        self.at += 1;
        let mut value = Vec::new();
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(String::from_utf8_lossy(&value).into_owned());
                }
                b'\\' => {
                    let escaped = *self.s.get(self.at + 1)?;
                    if !(escaped == b'\t' || escaped >= b' ') || escaped == 0x7f {
                        return None;
                    }
                    value.push(escaped);
                    self.at += 2;
                }
                b if b == b'\t' || (b >= b' ' && b != 0x7f) => {
                    value.push(b);
                    self.at += 1;
                }
                _ => return None,
            }
        }
    }

    /// Whether an `auth-param` (`token BWS "=" BWS (token / quoted-string)`)
    /// starts here, without moving: what tells a challenge's next parameter
    /// from the next challenge after a comma, and a parameter from a
    /// `token68` with padding (`abc==`).
    fn at_param(&self) -> bool {
        let mut p = Parser {
            s: self.s,
            at: self.at,
        };
        if p.token().is_empty() {
            return false;
        }
        p.skip_ows();
        if p.peek() != Some(b'=') {
            return false;
        }
        p.at += 1;
        p.skip_ows();
        p.peek().is_some_and(|b| b == b'"' || is_tchar(b))
    }

    /// Every challenge from here to the end (or to malformed syntax).
    fn challenges(&mut self, out: &mut Vec<Challenge>) {
        loop {
            self.skip_separators();
            if self.peek().is_none() || out.len() >= MAX_CHALLENGES {
                return;
            }
            let scheme = self.token().to_owned();
            if scheme.is_empty() {
                return;
            }
            let mut challenge = Challenge {
                scheme,
                ..Challenge::default()
            };
            let ended = match self.peek() {
                Some(b' ') => {
                    self.skip_ows();
                    self.rest_of_challenge(&mut challenge)
                }
                None | Some(b',') => false,
                Some(_) => true,
            };
            out.push(challenge);
            if ended {
                return;
            }
        }
    }

    /// A challenge's `token68` or parameters, up to the next challenge;
    /// `true` when the reading ends here (malformed syntax).
    fn rest_of_challenge(&mut self, challenge: &mut Challenge) -> bool {
        if !self.at_param() {
            return self.token68(challenge);
        }
        loop {
            let name = self.token().to_ascii_lowercase();
            self.skip_ows();
            self.at += 1; // the '=' at_param saw
            self.skip_ows();
            let value = match self.peek() {
                Some(b'"') => match self.quoted() {
                    Some(value) => value,
                    None => return true,
                },
                _ => self.token().to_owned(),
            };
            if challenge.params.len() < MAX_PARAMS {
                challenge.params.push((name, value));
            }
            self.skip_ows();
            match self.peek() {
                None => return false,
                Some(b',') => {
                    self.skip_separators();
                    if !self.at_param() {
                        // The next challenge, or the end.
                        return false;
                    }
                }
                Some(_) => return true,
            }
        }
    }

    /// A `token68` alone; `true` when the reading ends here.
    fn token68(&mut self, challenge: &mut Challenge) -> bool {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
        {
            self.at += 1;
        }
        if self.at == start {
            // Nothing after the scheme but spaces: a bare scheme, unless
            // something other than the next challenge follows.
            return !matches!(self.peek(), None | Some(b','));
        }
        while self.peek() == Some(b'=') {
            self.at += 1;
        }
        challenge.token68 = Some(String::from_utf8_lossy(&self.s[start..self.at]).into_owned());
        self.skip_ows();
        !matches!(self.peek(), None | Some(b','))
    }
}

/// `tchar` of RFC 9110 section 5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn read(values: &[&[u8]]) -> Vec<Challenge> {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        challenges(&headers)
    }

    fn one(value: &str) -> Vec<Challenge> {
        read(&[value.as_bytes()])
    }

    #[test]
    fn a_sign_in_challenge_gives_its_acr_values_and_max_age() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "www-authenticate",
            r#"Bearer error="insufficient_user_authentication", acr_values="phr phrh", max_age="5""#
                .parse()
                .unwrap(),
        );
        assert_eq!(
            insufficient_user_authentication(&headers),
            Some((Some("phr phrh".into()), Some("5".into())))
        );
        headers.insert(
            "www-authenticate",
            r#"DPoP error="insufficient_user_authentication""#.parse().unwrap(),
        );
        assert_eq!(
            insufficient_user_authentication(&headers),
            Some((None, None))
        );
        headers.insert(
            "www-authenticate",
            r#"Bearer error="insufficient_scope", scope="a""#.parse().unwrap(),
        );
        assert_eq!(insufficient_user_authentication(&headers), None);
    }

    #[test]
    fn bearer_with_an_error_and_escapes() {
        let c = one(
            r#"Bearer realm="api", error="insufficient_scope", scope="read write", error_description="need \"write\"""#,
        );
        assert_eq!(c.len(), 1);
        assert!(c[0].is("bearer"));
        assert_eq!(c[0].param("REALM"), Some("api"));
        assert_eq!(c[0].param("error"), Some("insufficient_scope"));
        assert_eq!(c[0].param("scope"), Some("read write"));
        assert_eq!(c[0].param("error_description"), Some(r#"need "write""#));
    }

    #[test]
    fn several_challenges_in_one_header_and_in_several() {
        // RFC 9110 section 11.6.1's example, and a second header.
        let c = read(&[
            br#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#,
            b"DPoP algs=\"ES256 PS256\", Bearer resource_metadata=\"https://api.example/.well-known/oauth-protected-resource\"",
        ]);
        let schemes: Vec<&str> = c.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Newauth", "Basic", "DPoP", "Bearer"]);
        assert_eq!(c[0].param("type"), Some("1"));
        assert_eq!(c[0].param("title"), Some(r#"Login to "apps""#));
        assert_eq!(c[1].param("realm"), Some("simple"));
        assert_eq!(c[2].param("algs"), Some("ES256 PS256"));
        assert_eq!(
            c[3].param("resource_metadata"),
            Some("https://api.example/.well-known/oauth-protected-resource")
        );
    }

    #[test]
    fn a_token68_a_bare_scheme_and_spaces_around_equals() {
        let c = one("Basic YWxhZGRpbjpvcGVuc2VzYW1l==, Bearer, Negotiate  a = b ,c= \"d\"");
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].token68.as_deref(), Some("YWxhZGRpbjpvcGVuc2VzYW1l=="));
        assert!(c[1].is("Bearer") && c[1].params.is_empty() && c[1].token68.is_none());
        // Spaces after a bare scheme, then the next challenge.
        let spaced = one("Bearer  , Basic realm=x");
        assert_eq!(spaced.len(), 2);
        assert_eq!(spaced[1].param("realm"), Some("x"));
        assert_eq!(c[2].param("a"), Some("b"));
        assert_eq!(c[2].param("c"), Some("d"));
    }

    #[test]
    fn malformed_syntax_keeps_what_came_before() {
        let c = one(r#"Bearer error="invalid_token", scope="unterminated"#);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].param("error"), Some("invalid_token"));
        assert_eq!(c[0].param("scope"), None);
        assert!(one("=oops").is_empty());
        assert!(one(",,, ,").is_empty());
        let c = one("Bearer error=invalid_token ; junk");
        assert_eq!(c[0].param("error"), Some("invalid_token"));
    }

    #[test]
    fn the_caps_hold() {
        let many = vec!["Bearer a=b"; 100].join(", ");
        assert_eq!(one(&many).len(), MAX_CHALLENGES);
        let params: Vec<String> = (0..100).map(|i| format!("p{i}=v")).collect();
        let c = one(&format!("Bearer {}", params.join(", ")));
        assert_eq!(c[0].params.len(), MAX_PARAMS);
        let huge = format!("Bearer error=\"{}\"", "x".repeat(100_000));
        // Past the byte cap the quoted string is unterminated: dropped.
        assert_eq!(one(&huge)[0].param("error"), None);
    }

    proptest! {
        /// Any bytes a header value may hold: no panic, and the caps hold.
        #[test]
        fn any_header_value_is_read_without_panic(
            values in proptest::collection::vec(
                proptest::collection::vec(
                    prop_oneof![
                        Just(b' '), Just(b','), Just(b'='), Just(b'"'), Just(b'\\'),
                        Just(b'\t'), b'!'..=b'~', 0x80u8..=0xff
                    ],
                    0..200,
                ),
                0..4,
            )
        ) {
            let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            let c = read(&values);
            prop_assert!(c.len() <= MAX_CHALLENGES);
            for challenge in &c {
                prop_assert!(!challenge.scheme.is_empty());
                prop_assert!(challenge.params.len() <= MAX_PARAMS);
            }
        }

        /// Parameters written by the grammar are read back as written.
        #[test]
        fn written_params_are_read_back(
            scheme in "[A-Za-z][A-Za-z0-9]{0,8}",
            params in proptest::collection::vec(
                ("[a-z_]{1,10}", "[ -~]{0,20}"),
                1..6,
            )
        ) {
            let written: Vec<String> = params
                .iter()
                .map(|(n, v)| {
                    let escaped = v.replace('\\', "\\\\").replace('"', "\\\"");
                    format!("{n}=\"{escaped}\"")
                })
                .collect();
            let value = format!("{scheme} {}", written.join(", "));
            let c = one(&value);
            prop_assert_eq!(c.len(), 1);
            prop_assert_eq!(&c[0].scheme, &scheme);
            let read: Vec<(String, String)> = c[0].params.clone();
            let expected: Vec<(String, String)> = params.clone();
            prop_assert_eq!(read, expected);
        }
    }
}
