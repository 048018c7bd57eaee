//! Any bytes as a token endpoint's success body: a valid token or a
//! `TokenError`, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tower_oauth::{AccessToken, TokenErrorKind};

fuzz_target!(|body: &[u8]| {
    match AccessToken::from_json(body) {
        Ok(token) => {
            assert!(!token.expose_token().is_empty());
            assert!(!token.lifetime().is_zero());
            let _ = format!("{token:?}");
        }
        Err(e) => {
            assert_eq!(e.kind(), TokenErrorKind::InvalidResponse);
            let _ = (e.to_string(), format!("{e:?}"));
        }
    }
});
