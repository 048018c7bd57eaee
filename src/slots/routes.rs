//! [`Routes`]: which of a layer's protected resources
//! (`protected_resources`) a request's URL lies under: the same scheme, host
//! and port, and a path that is the resource's or below it. The longest
//! match wins. A request under none gets the layer's default token.

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
#[derive(Debug)]
struct Route {
    scheme: String,
    host: String,
    port: u16,
    /// Without a trailing `/`.
    path: String,
    params: TokenParams,
}

/// A layer's protected resources, by where they are.
#[derive(Debug, Default)]
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
    /// any.
    pub(crate) fn for_destination(&self, destination: &Destination<'_>) -> Option<&TokenParams> {
        self.0
            .iter()
            .filter(|r| {
                r.port == destination.port
                    && r.scheme.eq_ignore_ascii_case(destination.scheme)
                    && r.host.eq_ignore_ascii_case(destination.host)
                    && under(destination.path, &r.path)
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
    fn under_follows_path_segments() {
        assert!(under("/a", "/a"));
        assert!(under("/a/b", "/a"));
        assert!(!under("/ab", "/a"));
        assert!(under("/", ""));
        assert!(under("/x", ""));
    }
}
