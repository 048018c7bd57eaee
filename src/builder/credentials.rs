//! The builder's settings of a client secret that rotates: read from a file
//! or a function at build, and read again when the token endpoint refuses
//! it.

use std::path::PathBuf;

use super::OAuthLayerBuilder;
use crate::boxed::BoxError;
use crate::endpoint::SecretSource;

impl OAuthLayerBuilder {
    /// The client secret is the content of this file (white space at its
    /// ends trimmed), read at [`build`](Self::build) and read again
    /// whenever the token endpoint refuses the client (401 or 403, or 400
    /// `invalid_client`): when the file then holds another secret, the
    /// token request is sent again at once with it, and the old secret is
    /// dropped. A secret rotated by a vault agent or a mounted Kubernetes
    /// secret is thus taken without a restart, after one refusal. In place
    /// of [`client_secret`](Self::client_secret), with the same
    /// restrictions for the chosen [`ClientAuth`](crate::ClientAuth).
    ///
    /// A file that cannot be read at build, or is empty, is a
    /// [`ConfigError`](crate::ConfigError) naming the file (never its
    /// content); one that cannot be read later keeps the secret in use, and
    /// a warning names the file. With a token store, tokens are sealed only
    /// under an [`encryption_key`](crate::RedisStore::encryption_key) of
    /// yours: a secret that changes cannot be the replicas' common key.
    ///
    /// Default: none.
    ///
    /// ```no_run
    /// use tower_oauth::OAuthLayer;
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/oauth2/token")
    ///     .client_id("orders-service")
    ///     .client_secret_file("/var/run/secrets/orders/client-secret")
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn client_secret_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.secret_source = Some(SecretSource::File(path.into()));
        self
    }

    /// The client secret is what `read` returns, called at
    /// [`build`](Self::build) and again whenever the token endpoint refuses
    /// the client, as for [`client_secret_file`](Self::client_secret_file):
    /// for a secret kept by your own code (a vault client's cache). `read`
    /// runs on a blocking thread, never on the runtime's; its error's text
    /// goes into messages, so keep the secret out of it.
    ///
    /// Default: none.
    ///
    /// ```
    /// use std::sync::{Arc, RwLock};
    /// use tower_oauth::OAuthLayer;
    ///
    /// let current = Arc::new(RwLock::new(String::from("s3cret")));
    /// let secret = Arc::clone(&current);
    /// let oauth = OAuthLayer::builder()
    ///     .token_url("https://idp.example.com/oauth2/token")
    ///     .client_id("orders-service")
    ///     .client_secret_fn(move || Ok(secret.read().unwrap().clone()))
    ///     .build()?;
    /// // Later, your vault watcher: *current.write().unwrap() = new_secret;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn client_secret_fn(
        mut self,
        read: impl Fn() -> Result<String, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.secret_source = Some(SecretSource::Fn(std::sync::Arc::new(read)));
        self
    }

    /// The client proves itself with `private_key_jwt`, its key the private
    /// key in this PEM file (PKCS #8, PKCS #1 or SEC 1, for `algorithm`;
    /// `key_id` its `kid`), read at [`build`](Self::build) and read again
    /// whenever the token endpoint refuses the client, as for
    /// [`client_secret_file`](Self::client_secret_file): a key rotated on
    /// disk (a new PEM, registered at the server) is taken after one
    /// refusal, without a restart. A file that then no longer holds a usable
    /// key keeps the key in use, and a warning names the file. In place of
    /// [`client_auth`](Self::client_auth)`(ClientAuth::PrivateKeyJwt(..))`.
    /// Feature `jwt`.
    ///
    /// Default: none.
    ///
    /// ```no_run
    /// use tower_oauth::{Algorithm, OAuthLayer};
    ///
    /// let oauth = OAuthLayer::builder()
    ///     .issuer("https://login.example.com")
    ///     .client_id("orders-service")
    ///     .private_key_file("/var/run/secrets/orders/client-key.pem", Algorithm::Es256, Some("key-2026"))
    ///     .build()?;
    /// # Ok::<_, tower_oauth::ConfigError>(())
    /// ```
    pub fn private_key_file(
        mut self,
        path: impl Into<PathBuf>,
        algorithm: crate::keys::Algorithm,
        key_id: Option<&str>,
    ) -> Self {
        self.secret_source = Some(SecretSource::File(path.into()));
        self.key_file = Some((algorithm, key_id.map(str::to_owned)));
        self
    }
}
