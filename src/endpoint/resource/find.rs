//! Where a protected resource's metadata is: at its well-known URL, at the
//! origin's root (RFC 9728 section 3.1), or where the resource's own `401`
//! to a request without a token says (section 5.1); and the scope that
//! challenge asks for.

use http::Uri;
use serde_json::Value;

use super::{metadata_url, Resource};
use crate::endpoint::discovery::get_json;
use crate::error::TokenError;
use crate::token::params::is_scope_token;

/// What the resource's `401` to a request without a token said.
#[derive(Clone, Debug)]
pub(super) struct Challenged {
    /// Where the metadata is, on the resource's own origin.
    pub(super) metadata: Option<Uri>,
    /// The scope the resource wants (`scope`), checked as scope tokens.
    pub(super) scope: Option<String>,
}

impl Resource {
    /// Where the metadata is, and what it says: at the well-known URL with
    /// the resource's path, else at the origin's root (RFC 9728 section 3.1),
    /// else where the resource's own challenge to a request without a token
    /// says (section 5.1), on its own origin.
    pub(super) async fn find(
        &self,
        probed: Option<&Option<Challenged>>,
    ) -> Result<(Uri, serde_json::Map<String, Value>), TokenError> {
        let what = "protected-resource metadata";
        let transport = &*self.spec.transport;
        let mut places = vec![self.metadata_url.clone()];
        let root = metadata_url(
            &format!(
                "{}://{}",
                self.parsed.scheme_str().unwrap_or("https"),
                self.parsed.authority().map_or("", |a| a.as_str())
            )
            .parse()
            .expect("built from a valid URL"),
        );
        if root != self.metadata_url {
            places.push(root);
        }
        let mut first = None;
        for url in places {
            match get_json(transport, &url, what).await {
                Ok(doc) => return Ok((url, doc)),
                Err(e) if e.status() == Some(http::StatusCode::NOT_FOUND) => {
                    first.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        let first = first.expect("a place was tried");
        let challenged = match probed {
            Some(probed) => probed.clone(),
            None => self.challenged().await,
        };
        let Some(url) = challenged.and_then(|c| c.metadata) else {
            return self.no_metadata(first);
        };
        tracing::info!(resource = %self.url, metadata = %url, "the resource's challenge names its metadata");
        let doc = get_json(transport, &url, what).await?;
        Ok((url, doc))
    }

    /// No metadata anywhere: a person's login takes the resource's origin as
    /// its authorization server, as MCP's 2025-03-26 revision said (servers
    /// before RFC 9728). Anything else fails with `error`.
    fn no_metadata(
        &self,
        error: TokenError,
    ) -> Result<(Uri, serde_json::Map<String, Value>), TokenError> {
        if self.spec.login_chain().is_none() {
            return Err(error);
        }
        let origin = format!(
            "{}://{}",
            self.parsed.scheme_str().unwrap_or("https"),
            self.parsed.authority().map_or("", |a| a.as_str())
        );
        tracing::info!(
            resource = %self.url,
            issuer = %origin,
            "the resource publishes no metadata; its origin is taken as its authorization \
             server (MCP 2025-03-26)"
        );
        let mut doc = serde_json::Map::new();
        doc.insert("resource".into(), self.url.clone().into());
        doc.insert("authorization_servers".into(), vec![origin].into());
        Ok((self.metadata_url.clone(), doc))
    }

    /// What the resource's `401` says to a request without a token: where its
    /// metadata is, when that is on the resource's own origin, and the scope
    /// it wants. The request is a `GET`, and where the resource has no `GET`,
    /// a `POST` of an empty JSON object (an MCP server takes only `POST`).
    /// Nothing of the client is sent.
    pub(super) async fn challenged(&self) -> Option<Challenged> {
        let ask = |method: http::Method| {
            let body = match method {
                http::Method::POST => bytes::Bytes::from_static(b"{}"),
                _ => bytes::Bytes::new(),
            };
            let mut request = http::Request::new(body);
            *request.method_mut() = method;
            *request.uri_mut() = self.parsed.clone();
            let headers = request.headers_mut();
            headers.insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static("application/json, text/event-stream"),
            );
            headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            self.spec
                .transport
                .send(request, crate::transport::MAX_RESPONSE_BODY)
        };
        let mut response = ask(http::Method::GET).await.ok()?;
        let status = response.status();
        if status == http::StatusCode::NOT_FOUND || status == http::StatusCode::METHOD_NOT_ALLOWED {
            response = ask(http::Method::POST).await.ok()?;
        }
        if response.status() != http::StatusCode::UNAUTHORIZED {
            return None;
        }
        let challenges = crate::message::challenge::challenges(response.headers());
        let param = |name: &str| {
            challenges
                .iter()
                .find_map(|c| c.param(name).map(str::to_owned))
        };
        let metadata = param("resource_metadata")
            .and_then(|named| named.parse::<Uri>().ok())
            .filter(|url| {
                url.scheme() == self.metadata_url.scheme()
                    && url.authority() == self.metadata_url.authority()
            });
        let scope = param("scope").filter(|scope| {
            !scope.trim().is_empty() && scope.split_whitespace().all(is_scope_token)
        });
        Some(Challenged { metadata, scope })
    }
}

/// Whether the resource `outer` holds `inner`: the same scheme and
/// authority, and `inner`'s path is `outer`'s or below it.
pub(super) fn covers(outer: &str, inner: &str) -> bool {
    let (Ok(outer), Ok(inner)) = (outer.parse::<Uri>(), inner.parse::<Uri>()) else {
        return false;
    };
    if outer.scheme() != inner.scheme()
        || outer.authority() != inner.authority()
        || outer.query().is_some()
    {
        return false;
    }
    let base = outer.path().trim_end_matches('/');
    match inner.path().strip_prefix(base) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}
