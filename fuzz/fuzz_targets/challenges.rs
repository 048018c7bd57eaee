//! Any bytes as an API's `WWW-Authenticate` headers (split at newlines into
//! several): challenges read within the caps, never a panic.
//!
//! `cargo fuzz run challenges` (nightly), or on stable with libFuzzer's
//! coverage passes:
//!
//! ```text
//! RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
//!   -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
//!   -Cllvm-args=-sanitizer-coverage-pc-table \
//!   -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing" \
//!   cargo build --release --target x86_64-unknown-linux-gnu --bin challenges
//! target/x86_64-unknown-linux-gnu/release/challenges corpus/ -max_total_time=120
//! ```
#![no_main]

use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use tower_oauth::metadata::Challenge;

fuzz_target!(|data: &[u8]| {
    let mut headers = HeaderMap::new();
    for line in data.split(|b| *b == b'\n') {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(http::header::WWW_AUTHENTICATE, value);
        }
    }
    let challenges = Challenge::parse(&headers);
    assert!(challenges.len() <= 16);
    for challenge in &challenges {
        assert!(!challenge.scheme().is_empty());
        assert!(challenge.params().len() <= 32);
        assert!(challenge.token68().is_none() || challenge.params().is_empty());
        let _ = (challenge.param("scope"), challenge.is("Bearer"), format!("{challenge:?}"));
    }
});
