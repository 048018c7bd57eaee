//! Mutual TLS on 127.0.0.1 (RFC 8705): a throwaway certificate authority
//! made in process, a token endpoint that authenticates clients by their
//! certificate (`tls_client_auth`) and binds the tokens it issues to it
//! (`cnf.x5t#S256`), and an API that accepts a token only from the client
//! holding that certificate.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use http_body_util::BodyExt;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::serve::{answer, serve, Response};
use super::tally::Tally;

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Identity {
    /// `x5t#S256`: base64url(SHA-256(certificate DER)).
    pub fn thumbprint(&self) -> String {
        let der = CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap();
        thumbprint(&der)
    }
}

fn thumbprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// A certificate authority for one test run.
pub struct Pki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new() -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "tower-oauth throwaway CA");
        let key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        Pki {
            ca_pem: ca.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (DNS names or IP addresses), signed by the
    /// CA.
    pub fn issue(&self, common_name: &str, names: &[&str]) -> Identity {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    }

    /// A client TLS configuration trusting the CA and presenting `identity`:
    /// what an API client needs to be accepted with certificate-bound tokens.
    pub fn client_config(&self, identity: &Identity) -> rustls::ClientConfig {
        let chain = CertificateDer::pem_slice_iter(identity.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap();
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(self.roots())
        .with_client_auth_cert(chain, key)
        .unwrap()
    }

    /// A server TLS configuration for `identity` that asks for client
    /// certificates signed by the CA (and lets clients without one in, for
    /// the handlers to refuse).
    fn server_config(&self, identity: &Identity) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(self.roots()),
            Arc::clone(&provider),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let chain = CertificateDer::pem_slice_iter(identity.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key =
            rustls::pki_types::PrivateKeyDer::from_pem_slice(identity.key_pem.as_bytes()).unwrap();
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap()
    }
}

struct State {
    tally: Tally,
    /// Client certificate thumbprints and the client ids they authenticate.
    clients: Mutex<HashMap<String, String>>,
    /// Issued tokens and the thumbprint each is bound to.
    tokens: Mutex<HashMap<String, String>>,
    metadata: Mutex<Option<Value>>,
}

/// The token endpoint and API, one TLS server on 127.0.0.1.
pub struct MtlsAuthority {
    pub addr: SocketAddr,
    state: Arc<State>,
}

impl MtlsAuthority {
    pub async fn start(pki: &Pki) -> MtlsAuthority {
        let server = pki.issue("127.0.0.1", &["127.0.0.1", "localhost"]);
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(pki.server_config(&server)));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            tally: Tally::default(),
            clients: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
            metadata: Mutex::new(None),
        });
        let served = Arc::clone(&state);
        serve(
            listener,
            move |stream| {
                let acceptor = acceptor.clone();
                async move {
                    let tls = acceptor.accept(stream).await.ok()?;
                    // The thumbprint of the client's certificate, if any.
                    let presented = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .map(|cert| thumbprint(cert));
                    Some((tls, presented))
                }
            },
            move |presented, req| {
                let state = Arc::clone(&served);
                async move { handle(&state, presented, req).await }
            },
        );
        MtlsAuthority { addr, state }
    }

    /// Registers `identity`'s certificate as `client_id`'s
    /// (`tls_client_auth` with the certificate pinned).
    pub fn register(&self, client_id: &str, identity: &Identity) {
        self.state
            .clients
            .lock()
            .unwrap()
            .insert(identity.thumbprint(), client_id.into());
    }

    pub fn issuer(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The endpoint that authenticates by certificate.
    pub fn token_url(&self) -> String {
        format!("https://{}/mtls/token", self.addr)
    }

    pub fn api_url(&self) -> String {
        format!("https://{}/api", self.addr)
    }

    /// Publishes RFC 8414 metadata whose `token_endpoint` takes only
    /// secrets and whose mutual TLS alias takes certificates.
    pub fn publish_metadata(&self) {
        *self.state.metadata.lock().unwrap() = Some(json!({
            "issuer": self.issuer(),
            "token_endpoint": format!("https://{}/token", self.addr),
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "tls_client_auth"],
            "mtls_endpoint_aliases": { "token_endpoint": self.token_url() },
            "tls_client_certificate_bound_access_tokens": true,
        }));
    }

    /// The thumbprints the issued tokens are bound to.
    pub fn bindings(&self) -> Vec<String> {
        self.state
            .tokens
            .lock()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }
}

async fn handle(
    state: &State,
    presented: Option<String>,
    req: http::Request<hyper::body::Incoming>,
) -> Response {
    let path = req.uri().path().to_owned();
    match path.as_str() {
        "/mtls/token" => {
            let n = state.tally.token_request();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let form: HashMap<String, String> =
                form_urlencoded::parse(&body).into_owned().collect();
            let refuse = |why: String| {
                state.tally.refused(why.clone());
                answer(
                    400,
                    json!({"error": "invalid_client", "error_description": why}),
                )
            };
            let Some(x5t) = presented else {
                return refuse("no client certificate".into());
            };
            let registered = state.clients.lock().unwrap().get(&x5t).cloned();
            if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
                return refuse("grant_type".into());
            }
            if form.contains_key("client_secret") {
                return refuse("a client_secret was sent with tls_client_auth".into());
            }
            if registered.is_none() || form.get("client_id") != registered.as_ref() {
                return refuse(format!(
                    "client_id {:?} is not the one of the certificate",
                    form.get("client_id")
                ));
            }
            let token = format!("bound-{}", n);
            state
                .tokens
                .lock()
                .unwrap()
                .insert(token.clone(), x5t.clone());
            answer(
                200,
                json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                       "cnf": {"x5t#S256": x5t}}),
            )
        }
        "/token" => answer(
            401,
            json!({"error": "invalid_client", "error_description": "certificates go to the mtls alias"}),
        ),
        "/api" => {
            let token = req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or_default()
                .to_owned();
            let bound_to = state.tokens.lock().unwrap().get(&token).cloned();
            // RFC 8705 section 3: the token's cnf must match the
            // certificate of this connection.
            if bound_to.is_some() && bound_to == presented {
                state.tally.accepted();
                answer(200, json!({"orders": []}))
            } else {
                state.tally.api_refusal();
                answer(401, json!({"error": "invalid_token"}))
            }
        }
        "/.well-known/oauth-authorization-server" => match &*state.metadata.lock().unwrap() {
            Some(doc) => answer(200, doc.clone()),
            None => answer(404, json!({})),
        },
        _ => answer(404, json!({})),
    }
}

impl std::ops::Deref for MtlsAuthority {
    type Target = Tally;

    /// The counts: token requests, API requests accepted and refused.
    fn deref(&self) -> &Tally {
        &self.state.tally
    }
}
