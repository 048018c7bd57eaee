//! The token endpoint: the request and its answer, discovery, hardening against
//! hostile answers, parsers, mutual TLS, secrets, the providers' recipes,
//! rotating credentials, client keys and assertions.

#[path = "../support/mod.rs"]
mod support;

mod assertion_audience;
mod assertion_file;
mod client_keys;
mod discovery;
mod endpoints;
mod hardening;
mod mtls;
mod parsers;
mod recipes;
mod rotating_credentials;
mod secrets;
