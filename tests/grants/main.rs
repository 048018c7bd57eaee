//! The grants beyond client credentials, and DPoP: the JWT-bearer grant and
//! ID-JAG, token exchange and platform identity, refresh tokens, DPoP-bound
//! tokens.

#[path = "../support/mod.rs"]
mod support;

mod account_replicas;
mod accounts;
mod agent_host;
mod authorization_details;
mod backchannel;
mod backchannel_kept;
mod dpop;
mod failovers;
mod identity;
mod jwt_bearer;
#[cfg(all(feature = "keyring", target_os = "linux"))]
mod keyring;
mod late_answers;
mod late_replies;
mod login;
mod lost_chains;
mod par;
mod real_browser;
mod reauthentication;
mod refresh_tokens;
mod replica_failures;
mod second_login;
mod session_failures;
mod token_exchange;
