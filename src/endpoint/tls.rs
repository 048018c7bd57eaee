//! TLS settings of the built-in reqwest transport: extra root certificates
//! and the client identity of mutual TLS (RFC 8705), read and checked at
//! `build()`.

use std::fmt;

use crate::error::{ConfigError, ConfigErrorKind};

/// What the built-in transport's TLS needs beyond its defaults.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// PEM bundles of certificate authorities trusted besides the web's.
    pub(crate) roots: Vec<Vec<u8>>,
    /// The client's certificate chain and private key, both PEM.
    #[cfg(feature = "mtls")]
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    /// Whether the transport presents a client certificate.
    pub(crate) fn presents_certificate(&self) -> bool {
        #[cfg(feature = "mtls")]
        return self.identity.is_some();
        #[cfg(not(feature = "mtls"))]
        false
    }

    /// The SHA-256 thumbprint (`x5t#S256`, base64url) of the certificate it
    /// presents: the first of the chain, the client's own. `None` without
    /// one, or when the PEM holds none (which `apply` refuses).
    pub(crate) fn certificate_thumbprint(&self) -> Option<String> {
        #[cfg(feature = "mtls")]
        {
            use base64::Engine;
            use rustls_pki_types::pem::PemObject;
            use rustls_pki_types::CertificateDer;
            let (chain, _) = self.identity.as_ref()?;
            let first = CertificateDer::pem_slice_iter(chain).next()?.ok()?;
            let digest = ring::digest::digest(&ring::digest::SHA256, first.as_ref());
            Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest))
        }
        #[cfg(not(feature = "mtls"))]
        None
    }

    /// The client's private key (PEM), if it presents a certificate.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn identity_key(&self) -> Option<&[u8]> {
        #[cfg(feature = "mtls")]
        return self.identity.as_ref().map(|(_, key)| key.as_slice());
        #[cfg(not(feature = "mtls"))]
        None
    }

    /// Whether anything differs from reqwest's defaults.
    pub(crate) fn is_default(&self) -> bool {
        self.roots.is_empty() && !self.presents_certificate()
    }

    /// `builder` with these settings, each checked.
    pub(crate) fn apply(
        &self,
        mut builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, ConfigError> {
        for pem in &self.roots {
            let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                invalid(format!(
                    "the root certificates cannot be read: {}",
                    e.without_url()
                ))
            })?;
            if certificates.is_empty() {
                return Err(invalid(
                    "root_certificates was given no certificate: expected PEM blocks BEGIN \
                     CERTIFICATE",
                ));
            }
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        #[cfg(feature = "mtls")]
        if let Some((chain, key)) = &self.identity {
            builder = builder.identity(identity(chain, key)?);
        }
        Ok(builder)
    }
}

/// The client identity from a certificate chain and a key, both PEM, each
/// checked for what it must hold.
#[cfg(feature = "mtls")]
fn identity(chain: &[u8], key: &[u8]) -> Result<reqwest::Identity, ConfigError> {
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
    if PrivateKeyDer::from_pem_slice(key).is_err() {
        let text = String::from_utf8_lossy(key);
        return Err(invalid(if text.contains("ENCRYPTED PRIVATE KEY") {
            "the client key is encrypted; give it decrypted (openssl pkcs8 -in key.pem \
             -nocrypt) from a secret store"
        } else if text.contains("-----BEGIN CERTIFICATE-----") {
            "a certificate without its key: the client key PEM holds a certificate, not a \
             private key"
        } else {
            "the client key PEM holds no private key: expected BEGIN PRIVATE KEY, BEGIN RSA \
             PRIVATE KEY or BEGIN EC PRIVATE KEY"
        }));
    }
    // The key first: reqwest reads the first key and every certificate.
    let mut pem = key.to_vec();
    pem.push(b'\n');
    pem.extend_from_slice(chain);
    reqwest::Identity::from_pem(&pem).map_err(|e| {
        invalid(format!(
            "the client certificate and key cannot be used: {}",
            e.without_url()
        ))
    })
}

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError::new(ConfigErrorKind::InvalidKey, message)
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("roots", &self.roots.len())
            .field("client_identity", &self.presents_certificate())
            .finish()
    }
}
