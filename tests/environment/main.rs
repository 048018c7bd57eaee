//! The environment the crate meets: the repository's layout and toolchain
//! (architecture, MSRV), and the process's environment variables (proxies,
//! `OAUTH_*`), whose tests set them.

#[path = "../support/mod.rs"]
mod support;

mod architecture;
mod file_imports;
mod from_env;
mod msrv;
mod proxy;
