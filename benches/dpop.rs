//! What DPoP costs per request: the warm path with a proof (one signature
//! per request) against its floor, the bearer warm path plus one raw `ring`
//! signature of the same algorithm over a message of the proof's size, all
//! in one run; on one thread and on two. Keys are made by openssl, as in
//! the tests.
//!
//! `cargo bench --bench dpop`

#[path = "../tests/support/keys.rs"]
mod keys;
#[path = "support/raw_signature.rs"]
mod raw_signature;
#[path = "../tests/support/services.rs"]
mod services;
#[path = "support/threads.rs"]
mod threads;

use std::task::{Context, Waker};

use criterion::{criterion_group, criterion_main, Criterion};
use keys::{Kind, TestKey};
use raw_signature::raw_signer;
use services::{drive, warm_dpop_layer, warm_layer, Noop, FIXED_TOKEN};
use threads::{on_two_threads, requests};
use tower::Layer;
use tower_oauth::{client_auth::Algorithm, dpop::DpopKey};

const KEYS: [(Kind, Algorithm); 4] = [
    (Kind::P256, Algorithm::Es256),
    (Kind::Ed25519, Algorithm::EdDsa),
    (Kind::Rsa(2048), Algorithm::Rs256),
    (Kind::Rsa(2048), Algorithm::Ps256),
];

/// The length of a proof's signing input for the request `drive` sends.
fn message_len(rt: &tokio::runtime::Runtime, key: &DpopKey) -> usize {
    let uri = "http://api.example/products/42".parse().unwrap();
    let proof = rt
        .block_on(key.proof(&http::Method::GET, &uri, Some(FIXED_TOKEN), None))
        .unwrap();
    proof.rfind('.').unwrap()
}

fn one_thread(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut group = c.benchmark_group("dpop_1_thread");
    let mut bearer = warm_layer(&rt).layer(Noop);
    group.bench_function("bearer", |b| b.iter(|| drive(&mut bearer, &mut cx)));
    for (kind, algorithm) in KEYS {
        let key = TestKey::new(kind);
        let dpop = DpopKey::from_pem(&key.pkcs8, algorithm).unwrap();
        let message = vec![b'x'; message_len(&rt, &dpop)];
        let raw = raw_signer(&key.pkcs8, algorithm);
        group.bench_function(format!("{algorithm}/raw_signature"), |b| {
            b.iter(|| raw(std::hint::black_box(&message)))
        });
        let mut svc = warm_dpop_layer(&rt, dpop).layer(Noop);
        group.bench_function(format!("{algorithm}/dpop"), |b| {
            b.iter(|| drive(&mut svc, &mut cx))
        });
    }
    group.finish();
}

fn two_threads(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("dpop_2_threads");
    let bearer = warm_layer(&rt).layer(Noop);
    group.bench_function("bearer", |b| {
        b.iter_custom(|n| on_two_threads(requests(bearer.clone()), n))
    });
    for (kind, algorithm) in &KEYS[..2] {
        let key = TestKey::new(*kind);
        let dpop = DpopKey::from_pem(&key.pkcs8, *algorithm).unwrap();
        let len = message_len(&rt, &dpop);
        let (pem, algorithm) = (key.pkcs8.clone(), *algorithm);
        group.bench_function(format!("{algorithm}/raw_signature"), |b| {
            b.iter_custom(|n| {
                let pem = pem.clone();
                on_two_threads(
                    move || {
                        let raw = raw_signer(&pem, algorithm);
                        let message = vec![b'x'; len];
                        Box::new(move || {
                            raw(std::hint::black_box(&message));
                        })
                    },
                    n,
                )
            })
        });
        let svc = warm_dpop_layer(&rt, dpop).layer(Noop);
        group.bench_function(format!("{algorithm}/dpop"), |b| {
            b.iter_custom(|n| on_two_threads(requests(svc.clone()), n))
        });
    }
    group.finish();
}

criterion_group!(benches, one_thread, two_threads);
criterion_main!(benches);
