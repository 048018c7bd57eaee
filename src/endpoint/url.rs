//! The rules for a URL the token request may go to: absolute, with a host,
//! no user information or fragment, `https` unless the host is loopback;
//! and when two identifiers (an issuer's, a resource's) are the same.

use std::net::IpAddr;

use http::Uri;

use crate::error::{clip, ConfigError, ConfigErrorKind};

/// `raw` as the URL of `name`: absolute, with a host, no user information or
/// fragment, and `https` unless the host is loopback or `allow_insecure_http`.
pub(crate) fn checked_url(
    name: &str,
    raw: &str,
    allow_insecure_http: bool,
) -> Result<Uri, ConfigError> {
    // `raw` may come from a server's metadata: clipped and escaped.
    let shown = clip(raw);
    let bad = |why: &str| {
        ConfigError::new(
            ConfigErrorKind::InvalidUrl,
            format!("{name} `{shown}` {why}"),
        )
    };
    if raw.contains('@') {
        // Checked before parsing, so the message never echoes a password.
        return Err(ConfigError::new(
            ConfigErrorKind::InvalidUrl,
            format!("{name} carries user information (`user@` or `user:password@`); pass credentials with client_id and client_secret"),
        ));
    }
    if raw.contains('#') {
        return Err(bad("has a fragment (`#...`)"));
    }
    let uri: Uri = raw
        .parse()
        .map_err(|e| bad(&format!("is not a valid URL ({e})")))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(bad("is not an absolute URL (scheme and host are required)"));
    };
    let host = authority.host();
    if host.is_empty() {
        return Err(bad("has no host"));
    }
    match scheme {
        "https" => {}
        "http" if allow_insecure_http || is_loopback(host) => {}
        "http" => {
            return Err(ConfigError::new(
                ConfigErrorKind::InsecureUrl,
                format!(
                    "{name} `{raw}` is plain http to a host that is not loopback; the client \
                     secret would cross the network unencrypted (use https, or \
                     allow_insecure_http(true) on a network you trust)"
                ),
            ))
        }
        other => return Err(bad(&format!("has scheme `{other}`; use https"))),
    }
    Ok(uri)
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether the identifiers `a` and `b` (an issuer's, a resource's) are the
/// same: identical (RFC 8414 section 3.3, RFC 9728 section 3.3), or
/// identical but for the one path the two forms of an empty path (`""`
/// and `"/"`, equivalent by RFC 3986 section 6.2.3) give: many servers
/// write `https://as.example.com/` where their users write
/// `https://as.example.com`. Nothing else is normalized.
pub(crate) fn same_identifier(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (longer, shorter) = if a.len() > b.len() { (a, b) } else { (b, a) };
    longer.len() == shorter.len() + 1
        && longer.ends_with('/')
        && longer.starts_with(shorter)
        && has_empty_path(shorter)
}

/// Whether `url` (`scheme://authority...`) has no path, query or fragment.
fn has_empty_path(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(_, rest)| !rest.is_empty() && !rest.contains(['/', '?', '#']))
}
