//! [`Prepared`]: what a token request holds that depends on the client's
//! credential (the body, the `Basic` header, how the client is proven, the
//! redactor of what was sent), made once, and again when a rotating secret
//! changes; and [`SentProof`], what one request carried of it.

use bytes::Bytes;
use http::HeaderValue;

use crate::endpoint::client_auth::secret::AssertionFile;
use crate::endpoint::client_auth::{ClientAuth, JWT_BEARER_ASSERTION_TYPE};
use crate::endpoint::grant::GrantProof;
use crate::endpoint::redact::Redactor;
use crate::endpoint::spec::{RequestSpec, RequestTarget};
use crate::error::TokenError;
use crate::support::encoding::{base64, form_urlencode, percent_encode};

/// What proves the client, beyond what the request holds from the start.
enum ClientProof {
    /// Nothing more: the body and the `Basic` header say it all.
    Fixed,
    /// A fresh client assertion, signed with a key or under the secret.
    Assertion(Box<crate::endpoint::client_auth::assertion::Assertions>),
    /// The assertion the platform wrote to a file, read now.
    File(AssertionFile),
    /// An assertion asked of its source now.
    Asked(crate::endpoint::grant::token_exchange::SubjectToken),
}

/// The parts of a token request made from the client's credential.
pub(crate) struct Prepared {
    /// The rotating secret's version these were made with (0 for a fixed
    /// secret).
    pub(crate) version: u64,
    /// Every form the secret was sent in, to scrub from the answers.
    pub(crate) redactor: Redactor,
    /// The client id these were made with: the configured one, or the one a
    /// login got.
    pub(crate) client_id: String,
    /// The whole body, or with an assertion all of it but the assertion.
    body: Bytes,
    /// What proves the client in the body (its id, and the secret where it
    /// goes in the body), from `&`: for a login's requests.
    client_part: String,
    proof: ClientProof,
    /// What the grant adds to each request.
    grant: GrantProof,
    pub(crate) basic: Option<HeaderValue>,
}

/// What one token request carried of the client's proof.
#[derive(Clone, Debug, Default)]
pub(crate) struct SentProof {
    /// The signed assertion's audience, among the client's.
    pub(crate) choice: Option<crate::endpoint::client_auth::assertion::AudienceChoice>,
    /// The assertion read from a file.
    pub(crate) from_file: Option<String>,
    /// What the request carried of a credential beyond the secret (an
    /// assertion read or signed for a grant, a subject token): to scrub
    /// from the answer.
    pub(crate) secrets: Vec<String>,
    /// The grant's signed assertion, among its audiences.
    pub(crate) grant_choice: Option<crate::endpoint::client_auth::assertion::AudienceChoice>,
    /// Where in `secrets` the grant's credential is (its assertion, or the
    /// subject token).
    pub(crate) grant_secret: Option<usize>,
}

impl Prepared {
    /// The parts of `spec`'s requests to `target` with `secret` (version
    /// `version`). The values must already be checked to fit the client
    /// authentication.
    pub(crate) fn new(
        spec: &RequestSpec,
        target: &RequestTarget,
        (client_id, secret, auth): (&str, &str, &ClientAuth),
        version: u64,
    ) -> Self {
        let url = target.url.to_string();
        let encode = |v: &str| match auth {
            ClientAuth::UnencodedBody => v.to_owned(),
            _ => form_urlencode(v),
        };
        let mut client_part = String::new();
        let mut basic = None;
        if auth.is_basic() {
            let credentials = match auth {
                ClientAuth::BasicUnencoded => format!("{client_id}:{secret}"),
                _ => format!("{}:{}", percent_encode(client_id), percent_encode(secret)),
            };
            let mut value =
                HeaderValue::try_from(format!("Basic {}", base64(credentials.as_bytes())))
                    .expect("base64 is a valid header value");
            value.set_sensitive(true);
            basic = Some(value);
        } else if matches!(auth, ClientAuth::UnencodedBody | ClientAuth::FormBody) {
            client_part = format!(
                "&client_id={}&client_secret={}",
                encode(client_id),
                encode(secret)
            );
        } else if !client_id.is_empty() {
            // Assertions, mutual TLS, none: the id, and no secret.
            client_part = format!("&client_id={}", encode(client_id));
        }
        let mut body = format!(
            "grant_type={}{client_part}",
            form_urlencode(spec.grant.grant_type())
        );
        let mut scope = None;
        for (name, value) in &target.params {
            if name == "scope" && spec.grant.takes_scope() {
                scope = Some(value.as_str());
                continue;
            }
            body.push_str(&format!("&{}={}", encode(name), encode(value)));
        }
        let assertions = |key| {
            ClientProof::Assertion(Box::new(
                crate::endpoint::client_auth::assertion::Assertions::new(
                    client_id,
                    &spec.assertion,
                    target.issuer.as_deref(),
                    &url,
                    key,
                ),
            ))
        };
        let proof = match auth {
            ClientAuth::PrivateKeyJwt(key) => {
                // A key file read again (version above 0): its key, if it
                // reads; else the key given, the file's at build.
                let reread = (version > 0)
                    .then(|| crate::endpoint::client_auth::key_from_file(&spec.assertion, secret))
                    .flatten();
                let key = match reread {
                    Some(Ok(current)) => current,
                    _ => key.clone(),
                };
                assertions(crate::endpoint::client_auth::assertion::AssertionKey::Key(
                    key,
                ))
            }
            ClientAuth::ClientSecretJwt => assertions(
                crate::endpoint::client_auth::assertion::AssertionKey::Secret(
                    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes()),
                ),
            ),
            ClientAuth::AssertionFile(path) => ClientProof::File(AssertionFile::new(path)),
            ClientAuth::Assertion(source) => ClientProof::Asked(source.clone()),
            _ => ClientProof::Fixed,
        };
        // A key file's PEM is no secret sent anywhere: nothing to scrub.
        let secret = if spec.assertion.key_file.is_some() {
            ""
        } else {
            secret
        };
        Prepared {
            version,
            redactor: Redactor::new(client_id, secret),
            client_id: client_id.to_owned(),
            body: Bytes::from(body),
            client_part,
            proof,
            grant: spec.grant.proof(
                &url,
                target.issuer.as_deref(),
                (scope, &target.params),
                &spec.assertion,
            ),
            basic,
        }
    }

    /// The body of a request, with a fresh client assertion when the client
    /// authenticates with one (with `other_audience`, a signed one for the
    /// audience the server did not take last; `other_grant_audience` the
    /// same for a grant's), and what it carried.
    pub(crate) async fn body(
        &self,
        other_audience: bool,
        other_grant_audience: bool,
        transport: &dyn crate::transport::Transport,
    ) -> Result<(Bytes, SentProof), TokenError> {
        let mut sent = SentProof::default();
        let mut body = self
            .proven(self.body.clone(), other_audience, transport, &mut sent)
            .await?;
        if !matches!(self.grant, GrantProof::Nothing) {
            let mut extended = body.to_vec();
            let appended = self
                .grant
                .append(
                    &mut extended,
                    other_grant_audience,
                    &mut sent.grant_choice,
                    transport,
                )
                .await?;
            if let Some(carried) = appended {
                sent.grant_secret = Some(sent.secrets.len());
                sent.secrets.push(carried);
            }
            body = Bytes::from(extended);
        }
        Ok((body, sent))
    }

    /// Whether the client's part of a body names the client id itself (a
    /// body method, an assertion, no authentication): a request that adds
    /// its own parameters then leaves `client_id` out of them.
    pub(crate) fn names_client(&self) -> bool {
        self.client_part.starts_with("&client_id=")
    }

    /// The body of one of a login's requests: `grant_type` (none for the
    /// device authorization request), the client's proof, and `pairs`
    /// (their values secrets to scrub from the answer), and what it carried.
    pub(crate) async fn login_body(
        &self,
        grant_type: Option<&str>,
        pairs: &[(&str, &str)],
        transport: &dyn crate::transport::Transport,
    ) -> Result<(Bytes, SentProof), TokenError> {
        let mut body = match grant_type {
            Some(grant_type) => format!("grant_type={}", form_urlencode(grant_type)),
            None => String::new(),
        };
        body.push_str(&self.client_part);
        for (name, value) in pairs {
            body.push_str(&format!("&{name}={}", form_urlencode(value)));
        }
        let body = body.strip_prefix('&').unwrap_or(&body).to_owned();
        let mut sent = SentProof::default();
        let body = self
            .proven(Bytes::from(body), false, transport, &mut sent)
            .await?;
        Ok((body, sent))
    }

    /// `base` with the client's proof appended when it is made for each
    /// request (an assertion), noted in `sent`.
    async fn proven(
        &self,
        base: Bytes,
        other_audience: bool,
        transport: &dyn crate::transport::Transport,
        sent: &mut SentProof,
    ) -> Result<Bytes, TokenError> {
        Ok(match &self.proof {
            ClientProof::Fixed => base,
            ClientProof::Assertion(assertions) => {
                let choice = assertions.choice(other_audience);
                sent.choice = Some(choice);
                let jwt = assertions.sign(choice).await?;
                let body = with_assertion(&base, &jwt);
                sent.secrets.push(jwt);
                body
            }
            ClientProof::File(file) => {
                let jwt = file.read().await?;
                let body = with_assertion(&base, &jwt);
                sent.secrets.push(jwt.clone());
                sent.from_file = Some(jwt);
                body
            }
            ClientProof::Asked(source) => {
                let asking = Default::default();
                let jwt = crate::endpoint::grant::read_subject(
                    source,
                    "client assertion",
                    &asking,
                    transport,
                )
                .await?;
                let body = with_assertion(&base, &jwt);
                sent.secrets.push(jwt);
                body
            }
        })
    }

    /// The signed assertions, when the client signs its own.
    pub(crate) fn assertions(
        &self,
    ) -> Option<&crate::endpoint::client_auth::assertion::Assertions> {
        match &self.proof {
            ClientProof::Assertion(assertions) => Some(assertions),
            _ => None,
        }
    }

    /// The grant's signed assertions, when it signs its own.
    pub(crate) fn grant_assertions(
        &self,
    ) -> Option<&crate::endpoint::client_auth::assertion::Assertions> {
        self.grant.assertions()
    }

    /// What to check when the endpoint refused the grant `sent` carried (a
    /// JWT-bearer assertion's claims and key id, a token exchange's subject
    /// and what it asked for of the request's `params`); `None` for client
    /// credentials.
    pub(crate) fn grant_refused(
        &self,
        sent: &SentProof,
        params: &[(String, String)],
    ) -> Option<String> {
        let carried = sent.grant_secret.map(|i| sent.secrets[i].as_str());
        self.grant.refusal_hint(carried, params)
    }

    /// The chain of refresh tokens, for the refresh grant.
    pub(crate) fn chain(&self) -> Option<&crate::endpoint::grant::refresh::Chain> {
        self.grant.chain()
    }

    /// After `error` refused the grant's assertion made for this request
    /// (an ID-JAG): whether its source dropped it, so that the next one is
    /// new.
    pub(crate) fn renews_refused_assertion(&self, error: &TokenError) -> bool {
        use crate::endpoint::grant::token_exchange::SubjectFrom;
        let GrantProof::Asked(source, asking) = &self.grant else {
            return false;
        };
        let SubjectFrom::ForRequest { source, .. } = &source.0 else {
            return false;
        };
        error.error_code() == Some("invalid_grant") && (source.refused)(asking.clone())
    }

    /// Whether the grant is a token exchange.
    pub(crate) fn exchanges(&self) -> bool {
        matches!(self.grant, GrantProof::Subject(..))
    }

    /// The assertion file, when the client sends one.
    pub(crate) fn assertion_file(&self) -> Option<&AssertionFile> {
        match &self.proof {
            ClientProof::File(file) => Some(file),
            _ => None,
        }
    }
}

/// `base` with `assertion` appended (RFC 7523 section 2.2).
fn with_assertion(base: &[u8], assertion: &str) -> Bytes {
    let mut body = Vec::with_capacity(base.len() + assertion.len() + 128);
    body.extend_from_slice(base);
    body.extend_from_slice(b"&client_assertion_type=");
    body.extend(form_urlencode(JWT_BEARER_ASSERTION_TYPE).bytes());
    body.extend_from_slice(b"&client_assertion=");
    // A JWT is base64url and dots, but one read from a file is encoded all
    // the same.
    body.extend(form_urlencode(assertion).bytes());
    Bytes::from(body)
}
