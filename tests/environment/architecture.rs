//! The layout ARCHITECTURE.md describes, kept true: dependencies between the
//! top-level modules of `src/` point one way (from the user's entry down to
//! the wire and the leaf types); no source file grows past 600 non-blank
//! lines outside its tests, and no folder past 10 files of its own; one name
//! for one crate-visible type; features gate dependencies, not code paths
//! (few `cfg` lines).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module's level: a module may use only modules of a lower
/// level (leaves, level 0, may use other leaves). The one exception is the
/// layer and its builder, which know each other.
const LEVELS: &[(&str, u32)] = &[
    ("middleware", 100),
    ("grant", 100),
    ("client_auth", 100),
    ("metadata", 100),
    ("mcp", 100),
    ("layer", 90),
    ("builder", 90),
    ("retry", 90),
    ("service", 80),
    ("slots", 70),
    ("cache", 60),
    ("store", 50),
    ("login", 45),
    ("source", 40),
    ("endpoint", 30),
    ("transport", 25),
    ("dpop", 20),
    ("keys", 10),
    ("docs", 0),
    ("error", 0),
    ("policy", 0),
    ("message", 0),
    ("telemetry", 0),
    ("support", 0),
    ("token", 0),
];

const MAX_LINES: usize = 600;

/// The most files a folder of `src/` (`src/` itself too) holds of its own.
const MAX_FILES: usize = 10;

/// The most `cfg` lines (`#[cfg(..)]`, `cfg_attr`, `cfg!`) in `src/`, less
/// one: the `#[cfg(test)]` of unit-test modules aside, which gate no feature.
const MAX_CFG_LINES: usize = 56;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` before its unit tests (a `#[cfg(test)]` followed by
/// `mod tests`); none for a file of tests.
pub(crate) fn code_lines(path: &Path, text: &str) -> Vec<String> {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .map(|l| l.split("//").next().unwrap_or("").to_owned())
        .collect()
}

/// The top-level modules of `src/` and, for each, the ones its code names
/// through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in paths {
        let rel = path.strip_prefix(src()).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let used = graph.entry(top.clone()).or_default();
        for line in code_lines(&path, &text) {
            for (at, _) in line.match_indices("crate::") {
                let name: String = line[at + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    name.starts_with(|c: char| c.is_lowercase()),
                    "{}: `crate::{name}` names a re-export; name the module it lives in",
                    rel.display()
                );
                if name != top {
                    used.insert(name);
                }
            }
        }
    }
    graph
}

fn level(module: &str) -> u32 {
    LEVELS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, level)| *level)
        .unwrap_or_else(|| panic!("module `{module}` is not in ARCHITECTURE.md's levels"))
}

#[test]
fn dependencies_point_one_way() {
    let graph = imports();
    let mut upward = Vec::new();
    for (module, used) in &graph {
        for dep in used {
            let (from, to) = (level(module), level(dep));
            let pair = [module.as_str(), dep.as_str()];
            let allowed = to < from
                || (from == 0 && to == 0)
                || pair == ["layer", "builder"]
                || pair == ["builder", "layer"];
            if !allowed {
                upward.push(format!("{module} -> {dep}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up: {upward:?}");
    // And no cycle among the leaves either.
    for (module, used) in &graph {
        for dep in used {
            let back = graph.get(dep).is_some_and(|u| u.contains(module));
            let pair = [module.as_str(), dep.as_str()];
            assert!(
                !back || pair == ["layer", "builder"] || pair == ["builder", "layer"],
                "{module} and {dep} import each other"
            );
        }
    }
}

#[test]
fn every_module_has_a_level_and_a_first_doc_line() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    for path in paths {
        let rel = path.strip_prefix(src()).unwrap().display().to_string();
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
        if top != "lib" {
            level(top);
        }
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("//!"),
            "{rel} does not begin with a doc line saying what it owns"
        );
    }
}

#[test]
fn no_source_file_is_over_600_lines_outside_its_tests() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    for path in paths {
        let text = fs::read_to_string(&path).unwrap();
        // Every non-blank line before the unit tests, comments included.
        let before_tests = code_lines(&path, &text).len();
        let lines = text
            .lines()
            .take(before_tests)
            .filter(|l| !l.trim().is_empty())
            .count();
        assert!(
            lines <= MAX_LINES,
            "{} has {lines} non-blank lines outside its tests",
            path.display()
        );
    }
}

#[test]
fn no_folder_holds_more_than_10_files_of_its_own() {
    fn walk(dir: &Path) {
        let mut own = 0;
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path);
            } else {
                own += 1;
            }
        }
        assert!(
            own <= MAX_FILES,
            "{} holds {own} files of its own",
            dir.display()
        );
    }
    walk(&src());
}

#[test]
fn features_gate_dependencies_with_few_cfg_lines() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let mut count = 0;
    for path in &paths {
        let text = fs::read_to_string(path).unwrap();
        count += text
            .lines()
            .filter(|l| l.contains("cfg") && !l.contains("cfg(test)"))
            .count();
        for folded in ["feature = \"jwt\"", "feature = \"mtls\""] {
            assert!(!text.contains(folded), "{}: {folded}", path.display());
        }
    }
    assert!(
        count < MAX_CFG_LINES,
        "{count} lines in src/ name `cfg`, test modules aside"
    );
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for folded in ["\njwt =", "\nmtls ="] {
        assert!(
            !manifest.contains(folded),
            "Cargo.toml still has the feature{folded}"
        );
    }
}

#[test]
fn one_name_for_one_crate_visible_type() {
    let mut paths = Vec::new();
    files(&src(), &mut paths);
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for path in &paths {
        let rel = path.strip_prefix(src()).unwrap().display().to_string();
        let text = fs::read_to_string(path).unwrap();
        for line in code_lines(path, &text) {
            let line = line.trim_start();
            let Some(rest) = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|v| line.strip_prefix(v))
            else {
                continue;
            };
            let Some(rest) = ["struct ", "enum ", "trait ", "type "]
                .iter()
                .find_map(|k| rest.strip_prefix(k))
            else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(first) = seen.insert(name.clone(), rel.clone()) {
                panic!("`{name}` names a type in {first} and in {rel}");
            }
        }
    }
}

/// `Cargo.toml`'s features, less `default`.
fn features() -> BTreeSet<String> {
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let section = manifest
        .split("\n[features]\n")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    section
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_owned()))
        .filter(|name| !name.is_empty() && name != "default")
        .collect()
}

/// The first column of the features table that follows `heading` in
/// `text` (rows `| \`name\` | ...`).
fn table_after(text: &str, heading: &str) -> BTreeSet<String> {
    text.split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no {heading:?}"))
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_owned))
        .collect()
}

#[test]
fn the_features_tables_are_the_manifests_and_no_doc_names_another() {
    let features = features();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    assert_eq!(
        table_after(&lib, "# Cargo features"),
        features,
        "src/lib.rs"
    );
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    assert_eq!(
        table_after(&readme, "## Cargo features"),
        features,
        "README.md"
    );
    // Every "feature `x`" a doc comment, guide or the README names exists.
    let mut texts = vec![(root.join("README.md"), readme)];
    for entry in fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        texts.push((path.clone(), fs::read_to_string(&path).unwrap()));
    }
    let mut sources = Vec::new();
    files(&src(), &mut sources);
    for path in sources {
        let text = fs::read_to_string(&path).unwrap();
        let docs: String = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//"))
            .map(|l| l.trim_start_matches(['/', '!']).trim())
            .collect::<Vec<_>>()
            .join(" ");
        texts.push((path, docs));
    }
    for (path, text) in &texts {
        let flat = text.replace('\n', " ");
        for (at, _) in flat.to_lowercase().match_indices("feature `") {
            let name: String = flat[at + 9..].chars().take_while(|c| *c != '`').collect();
            assert!(
                features.contains(&name),
                "{} names feature `{name}`, which Cargo.toml does not have",
                path.display()
            );
        }
    }
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    for (i, piece) in text.split('`').enumerate() {
        let path = piece.trim_end_matches('/');
        let named = i % 2 == 1
            && (piece.contains('/') || piece.ends_with(".rs"))
            && !piece.contains(' ')
            && !piece.contains('{');
        if !named || path.is_empty() {
            continue;
        }
        let found = [
            root.join(path),
            src().join(path),
            src().join(format!("{path}.rs")),
        ]
        .iter()
        .any(|p| p.exists());
        if !found {
            missing.push(piece.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names {missing:?}, which do not exist"
    );
}

#[test]
fn every_file_the_source_tree_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let tree = text
        .split("## The source tree")
        .nth(1)
        .expect("ARCHITECTURE.md has its source tree")
        .split("```text\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let mut parents: Vec<String> = Vec::new();
    let mut named = 0;
    for line in tree.lines().skip(1) {
        let Some(at) = line.find("── ") else {
            continue;
        };
        // Each level of the tree is four columns (`│   ` or `    `).
        let depth = line[..at].chars().count() / 4;
        let name = line[at + "── ".len()..].split_whitespace().next().unwrap();
        parents.truncate(depth);
        let path = src()
            .join(parents.join("/"))
            .join(name.trim_end_matches('/'));
        assert!(
            path.exists(),
            "ARCHITECTURE.md's tree names {}, which does not exist",
            path.display()
        );
        if name.ends_with('/') {
            parents.push(name.trim_end_matches('/').to_owned());
        }
        named += 1;
    }
    assert!(named > 50, "the tree names {named} files and folders");
}
