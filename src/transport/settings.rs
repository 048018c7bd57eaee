//! Settings of the built-in reqwest transport: extra root certificates,
//! the client identity of mutual TLS (RFC 8705), read and checked at
//! `build()`, and the proxies it takes from the environment.

use std::fmt;

use crate::error::{ConfigError, ConfigErrorKind};

/// What the built-in transport needs beyond reqwest's defaults: its TLS
/// (extra roots, a client certificate) and where its proxies come from.
#[derive(Clone)]
pub(crate) struct TransportSettings {
    /// PEM bundles of certificate authorities trusted besides the web's.
    pub(crate) roots: Vec<Vec<u8>>,
    /// The client's certificate chain and private key, both PEM.
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Proxies are taken from the environment (`HTTPS_PROXY`, ...).
    pub(crate) env_proxy: bool,
}

impl Default for TransportSettings {
    fn default() -> Self {
        TransportSettings {
            roots: Vec::new(),
            identity: None,
            env_proxy: true,
        }
    }
}

impl TransportSettings {
    /// Whether the transport presents a client certificate.
    pub(crate) fn presents_certificate(&self) -> bool {
        self.identity.is_some()
    }

    /// The SHA-256 thumbprint (`x5t#S256`, base64url) of the certificate it
    /// presents: the first of the chain, the client's own. `None` without
    /// one, or when the PEM holds none (which `apply` refuses).
    pub(crate) fn certificate_thumbprint(&self) -> Option<String> {
        use base64::Engine;
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::CertificateDer;
        let (chain, _) = self.identity.as_ref()?;
        let first = CertificateDer::pem_slice_iter(chain).next()?.ok()?;
        let digest = ring::digest::digest(&ring::digest::SHA256, first.as_ref());
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest))
    }

    /// The client's private key (PEM), if it presents a certificate.
    pub(crate) fn identity_key(&self) -> Option<&[u8]> {
        self.identity.as_ref().map(|(_, key)| key.as_slice())
    }

    /// Whether anything differs from reqwest's defaults.
    pub(crate) fn is_default(&self) -> bool {
        self.roots.is_empty() && !self.presents_certificate() && self.env_proxy
    }

    /// `builder` with these settings, each checked: TLS through rustls with
    /// `ring` (the one crypto provider in the tree) and the web's roots
    /// (webpki-roots) plus the extra ones, the client identity if any, and
    /// the proxies.
    pub(crate) fn apply(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, ConfigError> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::CertificateDer;

        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        for pem in &self.roots {
            let certificates = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| invalid("the root certificates cannot be read: not valid PEM"))?;
            if certificates.is_empty() {
                return Err(invalid(
                    "root_certificates was given no certificate: expected PEM blocks BEGIN \
                     CERTIFICATE",
                ));
            }
            for certificate in certificates {
                roots
                    .add(certificate)
                    .map_err(|e| invalid(format!("a root certificate cannot be used: {e}")))?;
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS cannot be set up: {e}")))?
            .with_root_certificates(roots);
        let mut config = match &self.identity {
            Some((chain, key)) => {
                let (chain, key) = identity(chain, key)?;
                config.with_client_auth_cert(chain, key).map_err(|e| {
                    invalid(format!(
                        "the client certificate and key cannot be used (does the key belong \
                         to the certificate?): {e}"
                    ))
                })?
            }
            None => config.with_no_client_auth(),
        };
        // The token request speaks HTTP/1.1.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        // reqwest's own reading of the environment would send a token
        // request for a loopback endpoint (and its secret) to the proxy.
        let mut builder = builder.tls_backend_preconfigured(config).no_proxy();
        if self.env_proxy {
            for proxy in env_proxies(|name| std::env::var(name).ok())? {
                builder = builder.proxy(proxy);
            }
        }
        Ok(builder)
    }
}

/// What never goes through a proxy: loopback, whatever `NO_PROXY` says.
const LOOPBACK: &str = "localhost,127.0.0.0/8,::1";

/// The proxies the environment names, by the usual rules: `HTTPS_PROXY`
/// for `https` URLs, `HTTP_PROXY` for `http` ones (not its uppercase form
/// under CGI, where a request header can set it), `ALL_PROXY` for both,
/// each also in lowercase, and none for the hosts `NO_PROXY` lists (names
/// with their subdomains, IP addresses and ranges, `*` for all) or for
/// loopback. `var` reads one variable.
fn env_proxies(var: impl Fn(&str) -> Option<String>) -> Result<Vec<reqwest::Proxy>, ConfigError> {
    let read = |upper: &str| {
        let cgi = upper == "HTTP_PROXY" && var("REQUEST_METHOD").is_some();
        let upper_value = if cgi { None } else { var(upper) };
        upper_value
            .or_else(|| var(&upper.to_ascii_lowercase()))
            .filter(|v| !v.trim().is_empty())
    };
    let no_proxy = match read("NO_PROXY") {
        Some(list) => format!("{list},{LOOPBACK}"),
        None => LOOPBACK.to_owned(),
    };
    let mut proxies = Vec::new();
    for (name, make) in [
        (
            "HTTPS_PROXY",
            reqwest::Proxy::https::<String> as fn(String) -> reqwest::Result<reqwest::Proxy>,
        ),
        ("HTTP_PROXY", reqwest::Proxy::http::<String>),
        ("ALL_PROXY", reqwest::Proxy::all::<String>),
    ] {
        if let Some(url) = read(name) {
            // The URL may hold the proxy's password: never shown.
            let proxy = make(url.trim().to_owned()).map_err(|_| {
                ConfigError::new(
                    ConfigErrorKind::InvalidSetting,
                    format!(
                        "the proxy URL in {name} cannot be used; fix it, or give \
                         proxy_from_env(false)"
                    ),
                )
            })?;
            proxies.push(proxy.no_proxy(reqwest::NoProxy::from_string(&no_proxy)));
        }
    }
    Ok(proxies)
}

/// The client identity from a certificate chain and a key, both PEM, each
/// checked for what it must hold.
fn identity(
    chain: &[u8],
    key: &[u8],
) -> Result<
    (
        Vec<rustls_pki_types::CertificateDer<'static>>,
        rustls_pki_types::PrivateKeyDer<'static>,
    ),
    ConfigError,
> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    let certificates = CertificateDer::pem_slice_iter(chain)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid("the client certificate chain is not valid PEM"))?;
    if certificates.is_empty() {
        let holds_key = PrivateKeyDer::from_pem_slice(chain).is_ok();
        return Err(invalid(if holds_key {
            "the client certificate PEM holds a private key but no certificate; give the \
             certificate chain first and the key second"
        } else {
            "the client certificate PEM holds no certificate: expected PEM blocks BEGIN \
             CERTIFICATE"
        }));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| {
        let text = String::from_utf8_lossy(key);
        invalid(if text.contains("ENCRYPTED PRIVATE KEY") {
            "the client key is encrypted; give it decrypted (openssl pkcs8 -in key.pem \
             -nocrypt) from a secret store"
        } else if text.contains("-----BEGIN CERTIFICATE-----") {
            "a certificate without its key: the client key PEM holds a certificate, not a \
             private key"
        } else {
            "the client key PEM holds no private key: expected BEGIN PRIVATE KEY, BEGIN RSA \
             PRIVATE KEY or BEGIN EC PRIVATE KEY"
        })
    })?;
    Ok((certificates, key))
}

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::InvalidKey, message)
}

impl fmt::Debug for TransportSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransportSettings")
            .field("roots", &self.roots.len())
            .field("client_identity", &self.presents_certificate())
            .field("proxy_from_env", &self.env_proxy)
            .finish()
    }
}
