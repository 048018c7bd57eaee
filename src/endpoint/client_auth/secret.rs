//! Credentials that change while a layer lives: a client secret read from a
//! file or a function (and read again when the token endpoint refuses it),
//! and a client assertion a platform writes to a file (read at each token
//! request). Reading is bounded in size and time, off the runtime's threads.
//! Errors name the file, never its content.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{TokenError, TokenErrorKind};
use crate::support::boxed::BoxError;

/// Where Kubernetes mounts a pod's service account token: what
/// `OAUTH_CLIENT_ASSERTION_FILE=kubernetes` stands for in
/// [`from_env`](crate::OAuthLayerBuilder::from_env). A token for another
/// audience (a projected volume) lives where the pod's spec puts it.
pub(crate) const KUBERNETES_TOKEN_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Whether `error` is a token endpoint's refusal of the client's
/// authentication: 401 or 403 (but for a scope or a DPoP proof), or 400 with
/// `invalid_client` or `unauthorized_client`.
pub(crate) fn refuses_client(error: &TokenError) -> bool {
    if error.kind() != TokenErrorKind::Status {
        return false;
    }
    let code = error.error_code().unwrap_or("");
    match error.status().map(|s| s.as_u16()) {
        Some(401 | 403) => !matches!(
            code,
            "invalid_scope" | "use_dpop_nonce" | "invalid_dpop_proof"
        ),
        Some(400) => matches!(code, "invalid_client" | "unauthorized_client"),
        _ => false,
    }
}

/// The most a credential file may hold: a secret, a key or a JWT is far
/// smaller.
const MAX_FILE: u64 = 64 * 1024;

/// How long a file that reads as empty or cut short (a writer that truncates
/// and then writes) is waited for, in steps, before it counts as bad.
const PARTIAL_WRITE_WAIT: [Duration; 3] = [
    Duration::from_millis(20),
    Duration::from_millis(60),
    Duration::from_millis(150),
];

/// The function a secret is read from.
pub(crate) type SecretFn = Arc<dyn Fn() -> Result<String, BoxError> + Send + Sync>;

/// Where a client secret that can change is read from.
#[derive(Clone)]
pub(crate) enum SecretSource {
    /// The file's content, white space at its ends trimmed.
    File(PathBuf),
    /// What the function returns.
    Fn(SecretFn),
}

impl SecretSource {
    /// Reads the secret now, on the calling thread (at build).
    pub(crate) fn read_now(&self) -> Result<String, String> {
        match self {
            SecretSource::File(path) => read_file(path).and_then(|text| non_empty(path, text)),
            SecretSource::Fn(f) => match f() {
                Ok(secret) if secret.trim().is_empty() => {
                    Err("the client secret function returned an empty secret".into())
                }
                Ok(secret) => Ok(secret),
                // The function's error is the user's: its text is theirs
                // to keep free of the secret.
                Err(e) => Err(format!("the client secret function failed: {e}")),
            },
        }
    }

    /// Where the secret comes from, for messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            SecretSource::File(path) => format!("the file `{}`", path.display()),
            SecretSource::Fn(_) => "the client secret function".into(),
        }
    }
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::File(path) => f.debug_tuple("File").field(path).finish(),
            SecretSource::Fn(_) => f.write_str("Fn"),
        }
    }
}

/// The client secret: given, or read from somewhere and read again when the
/// token endpoint refuses it.
#[derive(Clone)]
pub(crate) enum ClientSecret {
    Fixed(String),
    Rotating(Arc<RotatingSecret>),
}

impl ClientSecret {
    /// The secret in use, and its version (0 for a fixed one).
    pub(crate) fn current(&self) -> (u64, Arc<str>) {
        match self {
            ClientSecret::Fixed(secret) => (0, Arc::from(secret.as_str())),
            ClientSecret::Rotating(rotating) => rotating.current(),
        }
    }

    /// The version in use, without the secret.
    pub(crate) fn version(&self) -> u64 {
        match self {
            ClientSecret::Fixed(_) => 0,
            ClientSecret::Rotating(rotating) => rotating.version(),
        }
    }

    /// Whether there is no secret (the client proves itself otherwise).
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            ClientSecret::Fixed(secret) => secret.is_empty(),
            ClientSecret::Rotating(_) => false,
        }
    }
}

impl fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientSecret::Fixed(_) => f.write_str("Fixed([redacted])"),
            ClientSecret::Rotating(rotating) => rotating.fmt(f),
        }
    }
}

/// A client secret that is read again when the token endpoint refuses it:
/// shared by a layer's token requests, so that one reading serves them all.
pub(crate) struct RotatingSecret {
    source: SecretSource,
    /// The secret in use and how many times it changed.
    current: Mutex<(u64, Arc<str>)>,
}

impl RotatingSecret {
    /// `first` was read at build.
    pub(crate) fn new(source: SecretSource, first: String) -> Arc<Self> {
        Arc::new(RotatingSecret {
            source,
            current: Mutex::new((0, Arc::from(first))),
        })
    }

    /// The secret in use, and its version.
    pub(crate) fn current(&self) -> (u64, Arc<str>) {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many times the secret changed.
    fn version(&self) -> u64 {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// Reads the secret again, after the endpoint refused version `refused`:
    /// whether a new secret is in use now (read now, or by another request
    /// meanwhile). `check` refuses a value the token request cannot carry.
    pub(crate) async fn reread(
        &self,
        refused: u64,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Result<bool, String> {
        let source = self.source.clone();
        let read = tokio::task::spawn_blocking(move || source.read_now())
            .await
            .map_err(|e| format!("reading {} failed: {e}", self.source.describe()))??;
        check(&read)?;
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.0 != refused {
            return Ok(true);
        }
        if *current.1 == *read {
            return Ok(false);
        }
        // The old value is dropped here.
        *current = (current.0 + 1, Arc::from(read));
        Ok(true)
    }

    /// Where the secret comes from, for messages.
    pub(crate) fn describe(&self) -> String {
        self.source.describe()
    }
}

impl fmt::Debug for RotatingSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RotatingSecret")
            .field("source", &self.source)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// A JWT that a platform writes to a file and renews (a Kubernetes service
/// account token, Azure's `AZURE_FEDERATED_TOKEN_FILE`, a SPIFFE JWT-SVID),
/// sent as a client assertion, a grant's assertion or a subject token.
#[derive(Clone, Debug)]
pub(crate) struct AssertionFile {
    path: PathBuf,
    /// What the JWT is sent as, for messages.
    what: &'static str,
}

impl AssertionFile {
    /// A client assertion's or a grant's assertion's file.
    pub(crate) fn new(path: &Path) -> Self {
        AssertionFile {
            path: path.to_owned(),
            what: "client assertion",
        }
    }

    /// A token exchange's subject token's file.
    pub(crate) fn subject_token(path: &Path) -> Self {
        AssertionFile {
            path: path.to_owned(),
            what: "subject token",
        }
    }

    /// The assertion the file holds now: a JWT whose `exp`, if it has one,
    /// is still ahead. A file that reads empty or not as a JWT is read again
    /// a few times within about 230 ms, for a writer that truncates before
    /// it writes.
    pub(crate) async fn read(&self) -> Result<String, TokenError> {
        let mut waits = PARTIAL_WRITE_WAIT.iter();
        loop {
            let path = self.path.clone();
            let read = tokio::task::spawn_blocking(move || read_file(&path))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r);
            // Missing, empty or cut short: perhaps a write in progress.
            let checked = read
                .map_err(Problem::Shape)
                .and_then(|text| self.check(text));
            match (checked, waits.next()) {
                (Ok(jwt), _) => return Ok(jwt),
                (Err(Problem::Shape(_)), Some(wait)) => tokio::time::sleep(*wait).await,
                (Err(problem), _) => {
                    return Err(TokenError::new(TokenErrorKind::Credential)
                        .with_message(problem.to_string()))
                }
            }
        }
    }

    fn check(&self, text: String) -> Result<String, Problem> {
        let jwt = non_empty(&self.path, text).map_err(Problem::Shape)?;
        let exp = jwt_exp(&jwt).map_err(|why| {
            Problem::Shape(format!(
                "the {} file `{}` does not hold a JWT: {why}",
                self.what,
                self.path.display()
            ))
        })?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        match exp {
            Some(exp) if exp <= now => Err(Problem::Other(format!(
                "the {} in `{}` expired {} s ago (exp {exp}): whatever writes the \
                 file (the platform's token projection) has not renewed it",
                self.what,
                self.path.display(),
                now - exp
            ))),
            _ => Ok(jwt),
        }
    }

    /// The file, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Why a file's content cannot serve.
enum Problem {
    /// Missing, empty, or not a JWT: perhaps a write in progress.
    Shape(String),
    /// Expired.
    Other(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Shape(why) | Problem::Other(why) => f.write_str(why),
        }
    }
}

/// The file's text, at most [`MAX_FILE`] bytes. Errors name the path.
fn read_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let named = |why: String| format!("cannot read `{}`: {why}", path.display());
    let file = std::fs::File::open(path).map_err(|e| named(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| named(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(named(format!("it holds more than {MAX_FILE} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| named("it is not UTF-8 text".into()))
}

/// `text` without white space at its ends, or an error naming `path` when
/// nothing is left.
fn non_empty(path: &Path, text: String) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("`{}` is empty", path.display()));
    }
    Ok(trimmed.to_owned())
}

/// A JWT's `exp`, when it has one. An error saying why `jwt` is not a JWT
/// (never showing it).
fn jwt_exp(jwt: &str) -> Result<Option<u64>, &'static str> {
    if jwt.split('.').any(str::is_empty) {
        return Err("a JWT has three dot-separated parts");
    }
    let claims = crate::support::encoding::jwt_claims(jwt)?;
    Ok(claims.get("exp").and_then(serde_json::Value::as_u64))
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;

    #[test]
    fn a_jwt_s_exp_is_read_and_what_is_not_a_jwt_is_said_without_its_text() {
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let jwt = |claims: &str| format!("{}.{}.sig", b64(r#"{"alg":"RS256"}"#), b64(claims));
        assert_eq!(
            jwt_exp(&jwt(r#"{"exp":1700000000}"#)),
            Ok(Some(1_700_000_000))
        );
        assert_eq!(jwt_exp(&jwt(r#"{"sub":"x"}"#)), Ok(None));
        assert!(jwt_exp("secret-looking-text").is_err());
        assert!(jwt_exp("a..c").is_err());
        assert_eq!(
            jwt_exp(&format!("a.{}.c", b64("not json"))),
            Err("its payload is not JSON")
        );
    }
}
