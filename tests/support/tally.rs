//! What a test server counted: token requests, API requests accepted and
//! refused, and why requests were refused.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Tally {
    token_requests: AtomicUsize,
    api_accepted: AtomicUsize,
    api_refused: AtomicUsize,
    refusals: Mutex<Vec<String>>,
}

impl Tally {
    /// Counts a token request; its number, from 1.
    pub fn token_request(&self) -> usize {
        self.token_requests.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Counts an API request accepted.
    pub fn accepted(&self) {
        self.api_accepted.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts an API request refused.
    pub fn api_refusal(&self) {
        self.api_refused.fetch_add(1, Ordering::SeqCst);
    }

    /// Notes why a request was refused.
    pub fn refused(&self, why: impl Into<String>) {
        self.refusals.lock().unwrap().push(why.into());
    }

    pub fn token_requests(&self) -> usize {
        self.token_requests.load(Ordering::SeqCst)
    }

    pub fn api_accepted(&self) -> usize {
        self.api_accepted.load(Ordering::SeqCst)
    }

    pub fn api_refused(&self) -> usize {
        self.api_refused.load(Ordering::SeqCst)
    }

    pub fn refusals(&self) -> Vec<String> {
        self.refusals.lock().unwrap().clone()
    }
}
