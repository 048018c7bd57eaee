//! [`KeySets`]: the servers' signing keys, from each one's `jwks_uri`: read
//! when first needed, kept per issuer (bounded), read again for a key id they
//! do not hold (at most once a minute) or once a day; and a JWT the server
//! signed checked with them, or with the client's secret for an HMAC the
//! server lists.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::endpoint::{ServerMetadata, TokenRequest};
use crate::error::{clip, TokenError, TokenErrorKind};
use crate::keys::verify::{fits, is_hmac, Jws, CHECKED_ALGORITHMS, FAPI2_ALGORITHMS};
use crate::transport::Transport;

/// The most issuers whose keys one layer keeps.
const MAX_ISSUERS: usize = 32;
/// The most keys of one set kept; a server publishes a handful.
const MAX_KEYS: usize = 32;
/// The least time between two reads for a key id the set does not hold:
/// a server's key rotation costs one read, a stream of made-up key ids one
/// a minute.
const REREAD_AFTER: Duration = Duration::from_secs(60);
/// Keys are read again after this long, whatever they hold.
const KEEP_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest a read of the keys may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A layer's servers' key sets, by issuer: one for the layer, shared by its
/// accounts, made by the builder and held by the layer's slot factory.
#[derive(Default)]
pub(crate) struct KeySets {
    sets: Mutex<HashMap<String, Arc<KeySet>>>,
}

/// One server's keys, and when they were read.
#[derive(Default)]
struct KeySet {
    held: Mutex<Held>,
    /// One read at a time.
    reading: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Held {
    keys: Vec<Map<String, Value>>,
    /// From which `jwks_uri`, and when.
    read: Option<(String, Instant)>,
    /// The last read for an unknown key id.
    reread: Option<Instant>,
    /// How many reads were made (for the tests' counts, and logs).
    reads: u64,
}

impl KeySets {
    fn set(&self, issuer: &str) -> Arc<KeySet> {
        let mut sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        if sets.len() >= MAX_ISSUERS && !sets.contains_key(issuer) {
            sets.clear();
        }
        Arc::clone(sets.entry(issuer.to_owned()).or_default())
    }
}

impl KeySet {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The keys that fit `alg` and `kid` (any, without one), as held now;
    /// `None` when they must be read (first, from another URI, or stale).
    fn candidates(
        &self,
        uri: &str,
        alg: &str,
        kid: Option<&str>,
    ) -> Option<Vec<Map<String, Value>>> {
        let held = self.held();
        let (read_from, at) = held.read.as_ref()?;
        if read_from != uri || at.elapsed() > KEEP_FOR {
            return None;
        }
        Some(
            held.keys
                .iter()
                .filter(|k| fits(k, alg))
                .filter(|k| kid.is_none() || k.get("kid").and_then(Value::as_str) == kid)
                .cloned()
                .collect(),
        )
    }
}

/// What a JWT from the server is checked as, for messages and its rules.
#[derive(Clone, Copy)]
pub(crate) struct ServerJwt<'a> {
    /// `the ID token`, `the logout token`.
    pub(crate) what: &'a str,
    /// The algorithms the server lists for it (empty: RS256, as OpenID
    /// Connect Discovery makes the default).
    pub(crate) algorithms: &'a [String],
    /// The kind of the error that refuses it.
    pub(crate) kind: TokenErrorKind,
}

impl KeySets {
    /// The claims of `token`, a JWT `server` signed for `request`'s client, once its signature is
    /// checked: by an algorithm the server lists (`none` never; an HMAC only
    /// with the client's own secret), with one of the server's keys from its
    /// `jwks_uri` (read again, at most once a minute, for a key id not
    /// held). An error of `signed.kind` saying why for anything else; a
    /// read of the keys that failed is its error.
    pub(crate) async fn server_signed(
        &self,
        request: &TokenRequest,
        server: &ServerMetadata,
        token: &str,
        signed: ServerJwt<'_>,
    ) -> Result<Map<String, Value>, TokenError> {
        let what = signed.what;
        let refused =
            |why: String| TokenError::new(signed.kind).with_message(format!("{what} {why}"));
        let jws = Jws::parse(token).map_err(|why| refused(format!("does not read: {why}")))?;
        let alg = jws.alg().to_owned();
        let listed = match signed.algorithms {
            [] => alg == "RS256",
            algorithms => algorithms.contains(&alg),
        };
        if alg == "none" || !CHECKED_ALGORITHMS.contains(&alg.as_str()) {
            return Err(refused(format!(
                "is signed with `{}`, which is not taken (unsigned tokens never are)",
                clip(&alg)
            )));
        }
        if request.spec.fapi2 && !FAPI2_ALGORITHMS.contains(&alg.as_str()) {
            return Err(refused(format!(
                "is signed with {alg}; the FAPI 2.0 profile (fapi2) takes PS256, ES256 and \
                 EdDSA only"
            )));
        }
        if !listed {
            return Err(refused(format!(
                "is signed with {alg}, which the server does not list in \
                 id_token_signing_alg_values_supported"
            )));
        }
        if jws.has("crit") || jws.has("jku") || jws.has("x5u") || jws.has("jwk") {
            return Err(refused(
                "names its own key or critical extensions (`jwk`, `jku`, `x5u`, `crit`); only \
                 the server's published keys are taken"
                    .into(),
            ));
        }
        if is_hmac(&alg) {
            let Some(secret) = request.id_token_secret() else {
                return Err(refused(format!(
                    "is signed with {alg}, an HMAC, which only the secret of a client that \
                     authenticates with one checks; this client has none"
                )));
            };
            if !jws.verifies_with_secret(secret.as_bytes()) {
                return Err(refused(format!(
                    "has an {alg} signature that does not verify"
                )));
            }
            return Ok(jws.into_claims());
        }
        let Some(uri) = server.jwks_uri.as_deref() else {
            return Err(refused(format!(
                "cannot be checked: the metadata of `{}` names no jwks_uri",
                server.issuer
            )));
        };
        let kid = jws.text("kid").map(str::to_owned);
        let set = self.set(&server.issuer);
        let read = |reread| read_keys(request, &set, uri, reread);
        let mut keys = match set.candidates(uri, &alg, kid.as_deref()) {
            Some(keys) => keys,
            None => {
                read(false).await?;
                set.candidates(uri, &alg, kid.as_deref())
                    .unwrap_or_default()
            }
        };
        if keys.is_empty() {
            // A key rotated at the server, or made up: read once more (or
            // another check just did).
            read(true).await?;
            keys = set
                .candidates(uri, &alg, kid.as_deref())
                .unwrap_or_default();
        }
        if keys.is_empty() {
            return Err(refused(match &kid {
                Some(kid) => format!(
                    "names the key `{}`, which the server's keys (jwks_uri) do not hold for {alg}",
                    clip(kid)
                ),
                None => format!("names no key, and the server's keys hold none for {alg}"),
            }));
        }
        if keys.iter().take(8).any(|key| jws.verifies_with(key)) {
            return Ok(jws.into_claims());
        }
        Err(refused(format!(
            "has an {alg} signature that does not verify with the server's key"
        )))
    }
}

/// Reads the server's keys at `uri` into `set`, through `request`'s
/// transport; for an unknown key id (`reread`), only if none was for the last
/// minute. Whether it read them.
async fn read_keys(
    request: &TokenRequest,
    set: &KeySet,
    uri: &str,
    reread: bool,
) -> Result<bool, TokenError> {
    let _reading = set.reading.lock().await;
    {
        let held = set.held();
        if reread && held.reread.is_some_and(|at| at.elapsed() < REREAD_AFTER) {
            return Ok(false);
        }
        // Read meanwhile by another check, which waited first.
        let fresh = held
            .read
            .as_ref()
            .is_some_and(|(from, at)| from == uri && at.elapsed() <= KEEP_FOR);
        if fresh && !reread {
            return Ok(true);
        }
    }
    let url = crate::endpoint::checked_url("jwks_uri", uri, request.spec.allow_insecure_http)
        .map_err(|e| {
            TokenError::new(TokenErrorKind::InvalidResponse)
                .with_message(format!("the server's jwks_uri: {e}"))
        })?;
    let transport: &dyn Transport = &*request.spec.transport;
    let doc = tokio::time::timeout(
        READ_TIMEOUT,
        crate::endpoint::get_json(transport, &url, "the server's keys"),
    )
    .await
    .map_err(|_| {
        TokenError::new(TokenErrorKind::Transport).with_message(format!(
            "the server's keys at `{url}` did not come within {} s",
            READ_TIMEOUT.as_secs()
        ))
    })??;
    let keys: Vec<Map<String, Value>> = doc
        .get("keys")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(|k| k.as_object().cloned())
                .filter(|k| !k.contains_key("d") && !k.contains_key("k"))
                .take(MAX_KEYS)
                .collect()
        })
        .unwrap_or_default();
    let now = Instant::now();
    let mut held = set.held();
    held.reads += 1;
    tracing::info!(
        jwks_uri = %clip(uri),
        keys = keys.len(),
        reads = held.reads,
        reread,
        "read the server's signing keys"
    );
    held.keys = keys;
    held.read = Some((uri.to_owned(), now));
    if reread {
        held.reread = Some(now);
    }
    Ok(true)
}
