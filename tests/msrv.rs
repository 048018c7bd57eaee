//! The declared `rust-version` is the true minimum of the tree as it
//! resolves: at least the highest `rust-version` any dependency declares
//! that the crate's features pull in (normal and build dependencies, every
//! feature on; dev-dependencies do not reach users). Read from `cargo
//! metadata` on the lock file (which may download the sources of
//! dependencies of other platforms, from the registry).

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
    let nodes: HashMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    // Everything reachable from the crate through normal and build edges
    // (for every target platform: a user may build on any).
    let mut seen = HashSet::new();
    let mut stack = vec![root.as_str()];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let reaches_users = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            if reaches_users {
                stack.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
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
