//! Ratios of criterion's estimates, printed at the end of a run: each
//! benchmark of a group against the group's baseline, measured in the same
//! run (read back from `target/criterion/<group>/<bench>/new/estimates.json`).
#![allow(dead_code)]

use std::path::PathBuf;

/// The directory criterion writes its estimates to.
fn criterion_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("criterion")
}

/// The median time of `group/bench` in this run, in nanoseconds.
fn median(group: &str, bench: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(bench)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["median"]["point_estimate"].as_f64()
}

/// Prints each of `benches` of `group` against `baseline`, as a table row.
pub fn print(group: &str, baseline: &str, benches: &[&str]) {
    let Some(base) = median(group, baseline) else {
        return;
    };
    for bench in benches {
        if let Some(time) = median(group, bench) {
            println!(
                "| {group} | {bench} | {time:.1} ns | {baseline} {base:.1} ns | {:.3} |",
                time / base
            );
        }
    }
}
