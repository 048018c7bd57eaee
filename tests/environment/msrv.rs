//! The declared `rust-version` is the true minimum of the tree as it
//! resolves: at least the highest `rust-version` any dependency declares
//! that the crate's features pull in (normal and build dependencies, every
//! feature on, every target platform; dev-dependencies do not reach users,
//! nor the features they turn on). The packages a user builds come from
//! `cargo tree`, which resolves features as a user's build does (`cargo
//! metadata`'s graph unifies them with the dev-dependencies': rmcp's server
//! features, which only the tests use, would count); their `rust-version`
//! from `cargo metadata`, on the lock file (which may download the sources
//! of dependencies of other platforms, from the registry).

use std::collections::HashSet;
use std::process::Command;

use serde_json::Value;

/// `1.88` or `1.88.0` as (major, minor, patch).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// What `cargo args` prints, run in the crate's folder.
fn cargo(args: &[&str]) -> Vec<u8> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn the_declared_rust_version_is_the_trees_minimum() {
    let metadata = cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--all-features",
        "--locked",
    ]);
    let metadata: Value = serde_json::from_slice(&metadata).unwrap();
    // Every package of the lock file: its name, version and rust-version.
    let packages: Vec<(&str, &str, Option<&str>)> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            Some((
                p["name"].as_str()?,
                p["version"].as_str()?,
                p["rust_version"].as_str(),
            ))
        })
        .collect();
    // Everything a user's build of the crate compiles, as `name version`.
    let tree = cargo(&[
        "tree",
        "-e",
        "normal,build",
        "--all-features",
        "--target",
        "all",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "--locked",
    ]);
    let tree = String::from_utf8(tree).unwrap();
    let built: HashSet<(&str, &str)> = tree
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?, words.next()?.strip_prefix('v')?))
        })
        .collect();
    let dependencies: Vec<&(&str, &str, Option<&str>)> = packages
        .iter()
        .filter(|(name, version, _)| {
            *name != env!("CARGO_PKG_NAME") && built.contains(&(*name, *version))
        })
        .collect();
    let highest = dependencies
        .iter()
        .filter_map(|(name, _, rust_version)| Some((version((*rust_version)?), *name)))
        .max()
        .expect("dependencies declare rust-version");
    let declared = version(env!("CARGO_PKG_RUST_VERSION"));
    assert!(
        declared >= highest.0,
        "rust-version = \"{}\" is lower than {:?}, which {} declares: raise it",
        env!("CARGO_PKG_RUST_VERSION"),
        highest.0,
        highest.1
    );
    eprintln!(
        "declared {:?}; highest of {} dependencies: {:?} ({})",
        declared,
        dependencies.len(),
        highest.0,
        highest.1
    );
}
