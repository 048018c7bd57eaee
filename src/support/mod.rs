//! Small helpers every level may use, none of them about tokens: the
//! encodings a token request needs (`encoding`), random numbers for jitter
//! and lock values (`random`), and the boxed future and error types
//! (`boxed`).

pub(crate) mod boxed;
pub(crate) mod encoding;
pub(crate) mod random;
