//! [`TokenIdentity`]: what makes two tokens interchangeable, in one place.
//!
//! Two layers may share a token through a [`TokenStore`](crate::store::TokenStore)
//! exactly when their identities are equal. They need the same origin: issuer,
//! token endpoint or token source. They need the same client, client
//! authentication and signing key, DPoP key and parameters. The identity is
//! built here from typed parts, never from `Debug` text. It is encoded in a
//! stable, versioned form, [`TokenIdentity::encoded`], that a test pins byte
//! for byte. So a refactor cannot silently change the key replicas agree on. A
//! change of what goes in is a new version: a clean miss rather than a wrong
//! token.
//!
//! The store key is the SHA-256 of the encoding. Two identities that differ
//! never share a key in practice, whoever chooses their parameters. A store
//! seals each value with the whole encoding as associated data. So a value
//! opens only for the identity it was stored for.

use std::fmt;
use std::sync::Arc;

use crate::support::encoding::sha256_hex;

/// The first bytes of every encoding: the format and its version.
const VERSION: &[u8] = b"tower-oauth/token-identity/2";

/// Where a token comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Origin<'a> {
    /// The token endpoint an issuer's metadata names.
    Issuer(&'a str),
    /// A token endpoint given by its URL.
    TokenUrl(&'a str),
    /// The authorization server a protected resource names, by the
    /// resource's identifier.
    Resource(&'a str),
    /// A [`TokenSource`](crate::TokenSource) of the user's, by the name
    /// the user gave it.
    Source(&'a str),
}

/// The parts of an identity besides the token request's parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parts<'a> {
    pub(crate) origin: Origin<'a>,
    pub(crate) client_id: &'a str,
    /// The client authentication's stable name
    /// ([`ClientAuth::identity_name`](crate::client_auth::ClientAuth)); `None`: chosen
    /// by discovery.
    pub(crate) client_auth: Option<&'a str>,
    /// What of the client's credential sets its tokens apart beyond the
    /// method (the signing key's algorithm and id), never a secret.
    pub(crate) credential: Option<&'a str>,
    /// The SHA-256 thumbprint of the TLS client certificate the token
    /// requests present (`x5t#S256`): a server that binds tokens to it
    /// (RFC 8705) makes them useless to a client with another.
    pub(crate) certificate: Option<&'a str>,
    /// The DPoP key's thumbprint: tokens bound to one key are of no use to
    /// a layer with another.
    pub(crate) dpop_thumbprint: Option<&'a str>,
    /// A grant other than client credentials, and what sets its tokens
    /// apart (its issuer, subject and key).
    pub(crate) grant: Option<&'a str>,
}

/// An identity without its parameters: what a layer's token slots share.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct IdentityBase {
    encoded: Vec<u8>,
}

impl IdentityBase {
    /// The encoding of `parts`: after [`VERSION`], each part as a tag byte,
    /// its length (4 bytes, big-endian) and its bytes; parts that are absent
    /// are left out.
    pub(crate) fn new(parts: Parts<'_>) -> Self {
        let mut encoded = VERSION.to_vec();
        let (kind, origin) = match parts.origin {
            Origin::Issuer(issuer) => ("issuer", issuer),
            Origin::TokenUrl(url) => ("token_url", url),
            Origin::Source(name) => ("token_source", name),
            Origin::Resource(url) => ("protected_resource", url),
        };
        field(&mut encoded, b'o', kind);
        field(&mut encoded, b'u', origin);
        field(&mut encoded, b'c', parts.client_id);
        field(
            &mut encoded,
            b'a',
            parts.client_auth.unwrap_or("discovered"),
        );
        if let Some(credential) = parts.credential {
            field(&mut encoded, b'k', credential);
        }
        if let Some(thumbprint) = parts.certificate {
            field(&mut encoded, b'x', thumbprint);
        }
        if let Some(thumbprint) = parts.dpop_thumbprint {
            field(&mut encoded, b'd', thumbprint);
        }
        if let Some(grant) = parts.grant {
            field(&mut encoded, b'g', grant);
        }
        IdentityBase { encoded }
    }

    /// The identity of the token requested with `params` (in any order: a
    /// request's parameters are a set).
    pub(crate) fn with_params(&self, params: &[(String, String)]) -> TokenIdentity {
        let mut encoded = self.encoded.clone();
        let mut sorted: Vec<&(String, String)> = params.iter().collect();
        sorted.sort();
        for (name, value) in sorted {
            field(&mut encoded, b'p', name);
            field(&mut encoded, b'v', value);
        }
        TokenIdentity::from_encoded(encoded)
    }
}

/// Who signed in, as an ID token or a logout token names them: the
/// person, or their session at the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SignedInBy {
    /// The person, by the token's `sub`.
    Subject,
    /// Their session, by the token's `sid`.
    Session,
}

impl SignedInBy {
    /// The claim that names them.
    pub(crate) fn claim(self) -> &'static str {
        match self {
            SignedInBy::Subject => "sub",
            SignedInBy::Session => "sid",
        }
    }
}

impl IdentityBase {
    /// The identity of an account's tokens: this one, and the account's
    /// digest (never the id itself, which may be personal data). Two
    /// accounts share no key and no sealed value, whatever their ids.
    pub(crate) fn for_account(&self, account: &crate::token::params::AccountDigest) -> Self {
        let mut encoded = self.encoded.clone();
        field(&mut encoded, b'A', &account.0);
        IdentityBase { encoded }
    }

    /// What a pending web login is kept under in a store: the layer's
    /// identity and the login's `state`, which only the browser and the
    /// store know.
    pub(crate) fn pending_login(&self, state: &str) -> TokenIdentity {
        let mut encoded = self.encoded.clone();
        field(&mut encoded, b'l', state);
        TokenIdentity::from_encoded(encoded)
    }

    /// What a backchannel request the layer's person was asked is kept
    /// under until it ends: the layer's identity and what the request is
    /// for (its server, scope, resources and details).
    pub(crate) fn backchannel_request(&self, target: &str) -> TokenIdentity {
        let mut encoded = self.encoded.clone();
        field(&mut encoded, b'b', target);
        TokenIdentity::from_encoded(encoded)
    }

    /// What a layer links its accounts under, for logouts from the
    /// server's side: who signed in, `by` the person or the session, and
    /// `digest`, a digest of the issuer and that claim's value.
    pub(crate) fn signed_in(&self, by: SignedInBy, digest: &str) -> TokenIdentity {
        self.keyed(b's', by.claim(), digest)
    }

    /// The mark of a logout token used, under `digest`, a digest of the
    /// issuer and its `jti`: a replay of the token is known by it. Kept
    /// apart from [`signed_in`](Self::signed_in)'s links by its own name.
    pub(crate) fn replay_mark(&self, digest: &str) -> TokenIdentity {
        self.keyed(b's', "jti", digest)
    }

    /// The identity with `name` under the field `tag`, and `digest`.
    fn keyed(&self, tag: u8, name: &str, digest: &str) -> TokenIdentity {
        let mut encoded = self.encoded.clone();
        field(&mut encoded, tag, name);
        field(&mut encoded, b'S', digest);
        TokenIdentity::from_encoded(encoded)
    }

    /// What a layer's chain of refresh tokens is kept under in a store: the
    /// same for all its token slots, whatever their parameters.
    pub(crate) fn chain(&self) -> TokenIdentity {
        let mut encoded = self.encoded.clone();
        field(&mut encoded, b'r', "refresh token chain");
        TokenIdentity::from_encoded(encoded)
    }
}

/// Appends one part.
fn field(out: &mut Vec<u8>, tag: u8, value: &str) {
    out.push(tag);
    let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&value.as_bytes()[..len as usize]);
}

/// What a token is for. See the [module](self).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct TokenIdentity(Arc<Inner>);

#[derive(PartialEq, Eq)]
struct Inner {
    encoded: Vec<u8>,
    key: String,
}

impl TokenIdentity {
    fn from_encoded(encoded: Vec<u8>) -> Self {
        let key = sha256_hex(&encoded);
        TokenIdentity(Arc::new(Inner { encoded, key }))
    }

    /// The stable encoding of every part: what a store binds a sealed
    /// value to.
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.0.encoded
    }

    /// The name a store keeps the token under: SHA-256 of the encoding, 64
    /// hex digits (never a secret, and the same in every process and
    /// version of this encoding).
    pub(crate) fn key(&self) -> &str {
        &self.0.key
    }
}

impl fmt::Debug for TokenIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> IdentityBase {
        IdentityBase::new(parts_of_base())
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_encoding_is_pinned_byte_for_byte() {
        let identity = base().with_params(&pairs(&[("scope", "read")]));
        let mut expected = b"tower-oauth/token-identity/2".to_vec();
        for (tag, value) in [
            (b'o', "token_url"),
            (b'u', "https://idp.example/token"),
            (b'c', "svc"),
            (b'a', "client_secret_basic"),
            (b'x', "x5t"),
            (b'd', "jkt"),
            (b'p', "scope"),
            (b'v', "read"),
        ] {
            expected.push(tag);
            expected.extend_from_slice(&(value.len() as u32).to_be_bytes());
            expected.extend_from_slice(value.as_bytes());
        }
        assert_eq!(identity.encoded(), &expected[..]);
        // The key replicas agree on: fixed for this version of the encoding
        // (SHA-256 of the bytes above, as `sha256sum` gives it).
        assert_eq!(
            identity.key(),
            "ef7f804be8976643bcc2d9290b2e28dd79afc8d45080019b28817d1e571e15d1"
        );
    }

    #[test]
    fn links_and_replay_marks_keep_their_encoding_and_never_meet() {
        // What stores already hold stays found: `s` names what a key is
        // for (`sub`, `sid`, `jti`) and `S` carries the digest.
        let base_bytes = base().with_params(&[]).encoded().to_vec();
        let keyed = |name: &str, digest: &str| {
            let mut expected = base_bytes.clone();
            for (tag, value) in [(b's', name), (b'S', digest)] {
                expected.push(tag);
                expected.extend_from_slice(&(value.len() as u32).to_be_bytes());
                expected.extend_from_slice(value.as_bytes());
            }
            expected
        };
        let (sub, sid, mark) = (
            base().signed_in(SignedInBy::Subject, "d"),
            base().signed_in(SignedInBy::Session, "d"),
            base().replay_mark("d"),
        );
        assert_eq!(sub.encoded(), &keyed("sub", "d")[..]);
        assert_eq!(sid.encoded(), &keyed("sid", "d")[..]);
        assert_eq!(mark.encoded(), &keyed("jti", "d")[..]);
        assert_ne!(mark.key(), sub.key());
        assert_ne!(mark.key(), sid.key());
    }

    #[test]
    fn parameters_are_a_set_and_parts_do_not_run_together() {
        let one = base().with_params(&pairs(&[("a", "1"), ("b", "2")]));
        let other = base().with_params(&pairs(&[("b", "2"), ("a", "1")]));
        assert_eq!(one, other);
        assert_ne!(
            base().with_params(&pairs(&[("ab", "")])).key(),
            base().with_params(&pairs(&[("a", "b")])).key()
        );
        let issuer = IdentityBase::new(Parts {
            origin: Origin::Issuer("https://idp.example/token"),
            ..parts_of_base()
        });
        assert_ne!(issuer.with_params(&[]), base().with_params(&[]));
        let no_dpop = IdentityBase::new(Parts {
            dpop_thumbprint: None,
            ..parts_of_base()
        });
        assert_ne!(no_dpop.with_params(&[]), base().with_params(&[]));
        let other_certificate = IdentityBase::new(Parts {
            certificate: Some("another"),
            ..parts_of_base()
        });
        assert_ne!(
            other_certificate.with_params(&[]).key(),
            base().with_params(&[]).key()
        );
        let source = |name| {
            IdentityBase::new(Parts {
                origin: Origin::Source(name),
                ..parts_of_base()
            })
            .with_params(&[])
        };
        assert_ne!(source("billing").key(), source("ledger").key());
        let grant = IdentityBase::new(Parts {
            grant: Some("jwt_bearer;iss=a"),
            ..parts_of_base()
        });
        assert_ne!(grant.with_params(&[]).key(), base().with_params(&[]).key());
    }

    fn parts_of_base() -> Parts<'static> {
        Parts {
            origin: Origin::TokenUrl("https://idp.example/token"),
            client_id: "svc",
            client_auth: Some("client_secret_basic"),
            credential: None,
            certificate: Some("x5t"),
            dpop_thumbprint: Some("jkt"),
            grant: None,
        }
    }
}
