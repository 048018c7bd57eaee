//! Instruction counts of the warm path, for a measure that does not move
//! with the machine's load: run each mode under callgrind with two request
//! counts; the difference divided by the difference in requests is the cost
//! of one request, set-up excluded.
//!
//! ```text
//! cargo bench --bench instructions --no-run
//! for mode in bare set_request_header exact_clock middle oauth slots8; do for n in 10000 20000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/deps/instructions-* $mode $n 2>&1 | grep refs
//! done; done
//! ```
//!
//! Modes `dpop` (the warm path with an ES256 DPoP
//! proof) and `raw_es256` (a raw `ring` signature over a message of the
//! proof's size, the floor) measure DPoP the same way.
//!
//! Modes `exact_clock` (the fixed header behind a read of the clock) and
//! `middle` (the closest peer) are the contenders of `benches/hot_path.rs`;
//! `exact_clock_reading` is `exact_clock` reading each answer, as a layer
//! that drops a refused token must (`benches/side_by_side.rs`).
//!
//! Mode `slots8`: requests choose among 8 warm token slots in turn, through
//! `params_for`.
//!
//! Modes `accounts1`, `accounts1000` and `accounts100000`: each request names
//! an account (`TokenParams::account` in its extensions), the accounts in
//! turn, every one's token in memory. Modes `bound1`, `bound1000` and
//! `bound100000`: the same layers, requests through
//! `OAuthLayer::for_account` of one account. Modes `tagged1000` and
//! `tagged100000`: the same layers, requests with a `Tag` through the layer's
//! own token (the heap as the accounts left it, without an account's
//! lookup). Warming 100,000 accounts varies by more than 10,000 requests
//! cost, so for those count the requests alone, one run each:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   --toggle-collect='instructions::run*' target/release/deps/instructions-* accounts100000 100000
//! ```
//!
//! Mode `oauth_tagged` is `oauth` with an
//! extension of the same cost that the layer ignores: the caller's share of
//! naming an account. Allocations per request: the same two runs under
//! `valgrind --tool=memcheck` ("total heap usage").
//!
//! Modes `params_resource` and `params_details`: a request that carries
//! `TokenParams` in its extensions, naming a `resource`, or RFC 9396
//! authorization details (a payment), its slot's token already fetched.
//!
//! Modes `mw_fixed`, `mw_oauth`, `mw_oauth_without_resend`: the reqwest
//! middleware against a fixed-header one (build with
//! `--features reqwest-middleware`).
//!
//! Run without arguments (as `cargo bench` does) it does nothing.

#[path = "support/peers.rs"]
mod peers;
#[path = "../tests/support/provider.rs"]
mod provider;
#[path = "../tests/support/serve.rs"]
mod serve;
#[path = "../tests/support/services.rs"]
mod services;

use std::task::{Context, Waker};

use http::{Request, Response};
use services::{drive, drive_with, fixed_header, warm_layer, Noop};
use tower::{Layer, Service};
use tower_http::set_header::SetRequestHeaderLayer;

fn run<S>(mut svc: S, n: u64)
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..n {
        drive(&mut svc, &mut cx);
    }
}

/// `n` requests through `svc`, the `i`th with `extensions[i % len]` in its
/// extensions. Never inlined: under callgrind,
/// `--toggle-collect='instructions::run*'` counts the requests alone.
#[inline(never)]
fn run_with<S, T>(mut svc: S, n: u64, extensions: &[T])
where
    S: Service<Request<()>, Response = Response<()>>,
    S::Error: std::fmt::Debug,
    T: Clone + Send + Sync + 'static,
{
    let mut cx = Context::from_waker(Waker::noop());
    for i in 0..n as usize {
        drive_with(&mut svc, &mut cx, &extensions[i % extensions.len()]);
    }
}

/// A layer on a token endpoint that grants each token the authorization
/// details its request asked for.
fn echoing_layer() -> tower_oauth::OAuthLayer {
    let endpoint = tower::service_fn(|req: Request<bytes::Bytes>| async move {
        let details = form_urlencoded::parse(req.body())
            .find(|(name, _)| name == "authorization_details")
            .map(|(_, value)| serde_json::from_str::<serde_json::Value>(&value).unwrap());
        let mut body = serde_json::json!({
            "access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600,
        });
        if let Some(details) = details {
            body["authorization_details"] = details;
        }
        let body = http_body_util::Full::<bytes::Bytes>::from(body.to_string());
        Ok::<_, std::convert::Infallible>(Response::new(body))
    });
    tower_oauth::OAuthLayer::builder()
        .token_url("https://login.example/oauth2/token")
        .client_id("bench-client")
        .client_secret("bench-secret")
        .transport(endpoint)
        .build()
        .unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(n)) = (args.first(), args.get(1).and_then(|n| n.parse().ok())) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let oauth = warm_layer(&rt);
    let fixed = fixed_header();
    match mode.as_str() {
        "bare" => run(Noop, n),
        "set_request_header" => run(
            SetRequestHeaderLayer::overriding(http::header::AUTHORIZATION, fixed).layer(Noop),
            n,
        ),
        "exact_clock" => run(peers::exact_clock(Noop), n),
        "exact_clock_reading" => run(peers::exact_clock_reading(Noop), n),
        "middle" => {
            let (_provider, authorizer) = peers::middle_authorizer(&rt);
            run(peers::middle(Noop, &authorizer), n)
        }
        "oauth" => run(oauth.layer(Noop), n),
        "slots8" => run(services::warm_slots_layer(&rt, 8).layer(Noop), n),
        "oauth_tagged" => {
            let tag = services::Tag("person-0@example.com".into());
            run_with(oauth.layer(Noop), n, &[tag]);
        }
        tagged if tagged.starts_with("tagged") => {
            let count = tagged["tagged".len()..].parse().expect("tagged<N>");
            let (layer, _) = services::warm_accounts_layer(&rt, count);
            rt.block_on(layer.token()).unwrap();
            let tag = services::Tag("person-0@example.com".into());
            run_with(layer.layer(Noop), n, &[tag]);
        }
        bound if bound.starts_with("bound") => {
            let count = bound["bound".len()..].parse().expect("bound<N>");
            let (layer, _) = services::warm_accounts_layer(&rt, count);
            let alice = layer.for_account("person-0@example.com").unwrap();
            run(alice.layer(Noop), n)
        }
        accounts if accounts.starts_with("accounts") => {
            let count = accounts["accounts".len()..].parse().expect("accounts<N>");
            let (layer, accounts) = services::warm_accounts_layer(&rt, count);
            run_with(layer.layer(Noop), n, &accounts);
        }
        #[cfg(feature = "reqwest")]
        "dpop" | "raw_es256" => dpop::run(mode, &rt, n),
        #[cfg(feature = "reqwest-middleware")]
        "mw_fixed" | "mw_oauth" | "mw_oauth_without_resend" => middleware::run(mode, &rt, oauth, n),
        "params_resource" | "params_details" => {
            let params = match mode.as_str() {
                "params_resource" => tower_oauth::TokenParams::new().resource("urn:api:0"),
                _ => tower_oauth::TokenParams::new().authorization_details(serde_json::json!([{
                    "type": "payment_initiation",
                    "instructedAmount": {"currency": "EUR", "amount": "25.00"},
                    "creditorName": "Merchant A",
                }])),
            };
            let layer = echoing_layer();
            rt.block_on(layer.token_for(&params)).unwrap();
            run_with(layer.layer(Noop), n, &[params]);
        }
        other => panic!("unknown mode {other}"),
    }
}

#[cfg(feature = "reqwest-middleware")]
#[path = "support/middlewares.rs"]
mod middlewares;
#[cfg(feature = "reqwest-middleware")]
#[path = "../tests/support/reqwest_client.rs"]
mod reqwest_client;

/// Modes `mw_fixed`, `mw_oauth` and `mw_oauth_without_resend` (feature
/// `reqwest-middleware`): a request through a reqwest-middleware chain
/// that answers at once, with a fixed header (the floor) or the layer's
/// middleware (`benches/middleware.rs`).
#[cfg(feature = "reqwest-middleware")]
mod middleware {
    use super::middlewares::{client, FixedHeader};
    use super::services::fixed_header;

    pub fn run(mode: &str, rt: &tokio::runtime::Runtime, oauth: tower_oauth::OAuthLayer, n: u64) {
        let client = match mode {
            "mw_fixed" => client(FixedHeader(fixed_header())),
            "mw_oauth" => client(oauth.middleware()),
            _ => client(oauth.middleware().resend(false)),
        };
        for _ in 0..n {
            rt.block_on(client.get("http://api.example/products/42").send())
                .unwrap();
        }
    }
}

#[cfg(feature = "reqwest")]
mod dpop {
    use base64::Engine;
    use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    use tower::Layer;

    use super::services::{warm_dpop_layer, Noop, FIXED_TOKEN};

    pub fn run(mode: &str, rt: &tokio::runtime::Runtime, n: u64) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
        );
        let key =
            tower_oauth::dpop::DpopKey::from_pem(pem, tower_oauth::client_auth::Algorithm::Es256)
                .unwrap();
        if mode == "dpop" {
            return super::run(warm_dpop_layer(rt, key).layer(Noop), n);
        }
        let uri = "http://api.example/products/42".parse().unwrap();
        let proof = rt
            .block_on(key.proof(&http::Method::GET, &uri, Some(FIXED_TOKEN), None))
            .unwrap();
        let message = vec![b'x'; proof.rfind('.').unwrap()];
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        for _ in 0..n {
            std::hint::black_box(pair.sign(&rng, std::hint::black_box(&message)).unwrap());
        }
    }
}
