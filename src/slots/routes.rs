//! [`Routes`]: which of a layer's protected resources
//! (`protected_resources`) a request's URL lies under: the same scheme, host
//! and port, and a path that is the resource's or below it once its dot
//! segments are removed. The longest match wins. A request under none gets
//! the layer's default token.

use crate::token::params::TokenParams;

/// Where a URL points, as compared: scheme and host lowercased, the port
/// made explicit, the path as it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Destination<'a> {
    pub(crate) scheme: &'a str,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) path: &'a str,
}

/// One protected resource: where it is, and the parameters of its slot.
#[derive(Clone, Debug)]
struct Route {
    scheme: String,
    host: String,
    port: u16,
    /// Without a trailing `/`.
    path: String,
    params: TokenParams,
}

/// A layer's protected resources, by where they are.
#[derive(Clone, Debug, Default)]
pub(crate) struct Routes(Vec<Route>);

impl Routes {
    /// The routes of `resources` (resource identifiers, already checked as
    /// absolute URLs).
    pub(crate) fn new(resources: &[(String, http::Uri)]) -> Self {
        Routes(
            resources
                .iter()
                .filter_map(|(url, parsed)| {
                    let destination = destination_of(parsed)?;
                    Some(Route {
                        scheme: destination.scheme.to_ascii_lowercase(),
                        host: destination.host.to_ascii_lowercase(),
                        port: destination.port,
                        path: destination.path.trim_end_matches('/').to_owned(),
                        params: TokenParams::new().resource(url.clone()),
                    })
                })
                .collect(),
        )
    }

    /// Whether there are any.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The parameters of the slot of the resource `destination` lies under, if
    /// any. Its path is compared with its dot segments removed, so that
    /// `{resource}/../admin` is not under `{resource}`. A path with an encoded
    /// slash or backslash lies under none: servers read it differently.
    pub(crate) fn for_destination(&self, destination: &Destination<'_>) -> Option<&TokenParams> {
        let path = normalized(destination.path)?;
        self.0
            .iter()
            .filter(|r| {
                r.port == destination.port
                    && r.scheme.eq_ignore_ascii_case(destination.scheme)
                    && r.host.eq_ignore_ascii_case(destination.host)
                    && under(&path, &r.path)
            })
            .max_by_key(|r| r.path.len())
            .map(|r| &r.params)
    }
}

/// Where `uri` points; `None` without a scheme or host.
pub(crate) fn destination_of(uri: &http::Uri) -> Option<Destination<'_>> {
    let scheme = uri.scheme_str()?;
    let host = uri.host()?;
    let port = uri.port_u16().or(default_port(scheme))?;
    Some(Destination {
        scheme,
        host,
        port,
        path: uri.path(),
    })
}

/// The port of `scheme` when none is given.
pub(crate) fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    }
}

/// `path` with its dot segments removed (RFC 3986 section 5.2.4), a `.`
/// written `%2e` or `%2E` counted as one. `None` for a path with an encoded
/// `/` or `\`, which some servers decode before they route.
fn normalized(path: &str) -> Option<std::borrow::Cow<'_, str>> {
    if !path.contains(['.', '%']) {
        return Some(std::borrow::Cow::Borrowed(path));
    }
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") {
        return None;
    }
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match segment.to_ascii_lowercase().replace("%2e", ".").as_str() {
            "." if last => kept.push(""),
            "." => {}
            ".." => {
                if kept.len() > 1 {
                    kept.pop();
                }
                if last {
                    kept.push("");
                }
            }
            _ => kept.push(segment),
        }
    }
    Some(std::borrow::Cow::Owned(kept.join("/")))
}

/// Whether `path` is `base` or below it (`base` without a trailing `/`).
fn under(path: &str, base: &str) -> bool {
    match path.strip_prefix(base) {
        Some(rest) => rest.is_empty() || rest.starts_with('/') || base.is_empty(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(urls: &[&str]) -> Routes {
        let parsed: Vec<(String, http::Uri)> = urls
            .iter()
            .map(|u| (u.to_string(), u.parse().unwrap()))
            .collect();
        Routes::new(&parsed)
    }

    #[test]
    fn a_url_under_a_resource_gets_its_slot_and_the_longest_match_wins() {
        let r = routes(&[
            "https://mcp.example.com/mcp",
            "https://mcp.example.com/mcp/admin",
            "https://api.example.com",
        ]);
        let is = |url: &str, expected: Option<usize>| {
            let want = expected.map(|i| &r.0[i].params);
            let uri: http::Uri = url.parse().unwrap();
            let chosen =
                destination_of(&uri).and_then(|destination| r.for_destination(&destination));
            assert_eq!(chosen, want, "{url}");
        };
        is("https://mcp.example.com/mcp", Some(0));
        is("https://MCP.example.com:443/mcp/tools?x=1", Some(0));
        is("https://mcp.example.com/mcp/admin/x", Some(1));
        is("https://mcp.example.com/mcp2", None);
        is("https://mcp.example.com/", None);
        is("http://mcp.example.com/mcp", None);
        is("https://mcp.example.com:8443/mcp", None);
        is("https://api.example.com/anything", Some(2));
        is("https://evil.example.com/mcp", None);
        is("/mcp", None);
    }

    #[test]
    fn dot_segments_plain_or_encoded_never_reach_another_resource_s_token() {
        let r = routes(&["https://mcp.example.com/mcp"]);
        let chosen = |url: &str| {
            let uri: http::Uri = url.parse().unwrap();
            destination_of(&uri).and_then(|d| r.for_destination(&d).cloned())
        };
        for outside in [
            "https://mcp.example.com/mcp/../admin",
            "https://mcp.example.com/mcp/%2e%2e/admin",
            "https://mcp.example.com/mcp/%2E%2E/admin",
            "https://mcp.example.com/mcp/.%2e/admin",
            "https://mcp.example.com/mcp/./../admin",
            "https://mcp.example.com/mcp/..",
            "https://mcp.example.com/mcp%2F..%2Fadmin",
            "https://mcp.example.com/mcp/x/../../admin",
        ] {
            assert_eq!(chosen(outside), None, "{outside}");
        }
        for inside in [
            "https://mcp.example.com/mcp/./tools",
            "https://mcp.example.com/mcp/x/../tools",
            "https://mcp.example.com/mcp/%2e",
            "https://mcp.example.com/other/../mcp/tools",
            "https://mcp.example.com/mcp/file.json",
        ] {
            assert!(chosen(inside).is_some(), "{inside}");
        }
        assert_eq!(normalized("/a/b/../../../c").unwrap(), "/c");
        assert_eq!(normalized("/a/./b/.").unwrap(), "/a/b/");
    }

    #[test]
    fn under_follows_path_segments() {
        assert!(under("/a", "/a"));
        assert!(under("/a/b", "/a"));
        assert!(!under("/ab", "/a"));
        assert!(under("/", ""));
        assert!(under("/x", ""));
    }
}
