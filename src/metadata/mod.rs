//! What servers say about themselves: an authorization server's metadata
//! ([`ServerMetadata`], RFC 8414), a protected resource's
//! ([`ResourceMetadata`], RFC 9728), and an API's `WWW-Authenticate`
//! challenge ([`Challenge`]). The guide:
//! [`docs::resources`](crate::docs::resources).

pub use crate::endpoint::{ResourceMetadata, ServerMetadata};
pub use crate::message::challenge::Challenge;
