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

use std::collections::{HashMap, HashSet};
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

#[test]
fn the_declared_rust_version_is_the_trees_minimum() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = metadata["resolve"]["root"].as_str().unwrap().to_owned();
    let rust_version: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["rust_version"].as_str()?)))
        .collect();
    let names: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    // Everything a user's build of the crate compiles, as `name version`.
    let tree = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
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
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        tree.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let tree = String::from_utf8(tree.stdout).unwrap();
    let built: HashSet<(&str, &str)> = tree
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?, words.next()?.strip_prefix('v')?))
        })
        .collect();
    let versions: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["version"].as_str()?)))
        .collect();
    let mut seen: HashSet<&str> = names
        .iter()
        .filter(|(id, name)| built.contains(&(**name, versions[*id])))
        .map(|(id, _)| *id)
        .collect();
    seen.remove(root.as_str());
    let highest = seen
        .iter()
        .filter_map(|id| Some((version(rust_version.get(id)?), names[id])))
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
        seen.len(),
        highest.0,
        highest.1
    );
}
