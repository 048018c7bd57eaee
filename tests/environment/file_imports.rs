//! No two files of `src/` import each other: every `crate::`, `super::` and
//! `self::` path a file's code names (in `use` items, grouped ones too, and
//! inline) is resolved to the file that holds it, and a file and the one it
//! names must not name each other back. A module's own file and its direct
//! submodules are the one exception: a module re-exports what its files
//! hold, and they name one another's siblings through it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::architecture::code_lines;

/// A file's module path: `src/slots/accounts.rs` is `["slots", "accounts"]`,
/// `src/slots/mod.rs` is `["slots"]`, `src/lib.rs` is `[]`.
type Module = Vec<String>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn modules(dir: &Path, out: &mut BTreeMap<Module, PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            modules(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src()).unwrap().with_extension("");
            let mut module: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|l| l == "mod") || module == ["lib"] {
                module.pop();
            }
            out.insert(module, path);
        }
    }
}

/// Every path `code` names from `crate`, `super` or `self`, grouped `use`
/// items spelled out: `use super::{a::B, c};` names `super::a::B` and
/// `super::c`.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .find(|p| code_at(&bytes, i, p) && (i == 0 || !is_ident(bytes[i - 1])));
        let Some(start) = starts else {
            i += 1;
            continue;
        };
        let (path, end) = read_path(&bytes, i + start.len() - 2, start.trim_end_matches("::"));
        out.extend(path);
        i = end.max(i + 1);
    }
    out
}

fn code_at(chars: &[char], at: usize, text: &str) -> bool {
    text.chars()
        .enumerate()
        .all(|(k, c)| chars.get(at + k) == Some(&c))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths that begin with `prefix` at `at` (just before its `::`),
/// and where they end: `a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`.
fn read_path(chars: &[char], mut at: usize, prefix: &str) -> (Vec<String>, usize) {
    let mut path = prefix.to_owned();
    while code_at(chars, at, "::") {
        at += 2;
        if chars.get(at) == Some(&'{') {
            let mut out = Vec::new();
            at += 1;
            loop {
                while chars
                    .get(at)
                    .is_some_and(|c| c.is_whitespace() || *c == ',')
                {
                    at += 1;
                }
                match chars.get(at) {
                    None => return (out, at),
                    Some('}') => return (out, at + 1),
                    _ => {}
                }
                let word: String = chars[at..].iter().take_while(|c| is_ident(**c)).collect();
                at += word.len().max(1);
                let (inner, end) = read_path(chars, at, &format!("{path}::{word}"));
                out.extend(if inner.is_empty() {
                    vec![format!("{path}::{word}")]
                } else {
                    inner
                });
                at = end;
                // `as alias`
                while chars.get(at).is_some_and(|c| *c != ',' && *c != '}') {
                    at += 1;
                }
            }
        }
        let word: String = chars[at..].iter().take_while(|c| is_ident(**c)).collect();
        if word.is_empty() {
            break;
        }
        at += word.len();
        path = format!("{path}::{word}");
    }
    (vec![path], at)
}

/// The file that holds what `path`, named in `module`, names: the longest
/// module path that is a file.
fn resolve(module: &Module, path: &str, files: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let mut segments = path.split("::").peekable();
    let mut current: Module = match segments.peek() {
        Some(&"crate") => Vec::new(),
        _ => module.clone(),
    };
    for segment in segments {
        match segment {
            "crate" | "self" => {}
            "super" => {
                current.pop();
            }
            name => current.push(name.to_owned()),
        }
    }
    (0..=current.len())
        .rev()
        .map(|n| current[..n].to_vec())
        .find(|m| files.contains_key(m))
}

#[test]
fn no_two_files_import_each_other() {
    let mut files = BTreeMap::new();
    modules(&src(), &mut files);
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, path) in &files {
        let code = code_lines(path, &fs::read_to_string(path).unwrap()).join("\n");
        let used = graph.entry(module.clone()).or_default();
        for named in paths(&code) {
            if let Some(file) = resolve(module, &named, &files) {
                if file != *module {
                    used.insert(file);
                }
            }
        }
    }
    let mut circles = Vec::new();
    for (a, used) in &graph {
        for b in used {
            let parent_and_child =
                |x: &Module, y: &Module| y.len() == x.len() + 1 && y.starts_with(x);
            if a < b
                && graph.get(b).is_some_and(|u| u.contains(a))
                && !parent_and_child(a, b)
                && !parent_and_child(b, a)
            {
                circles.push(format!("{} <-> {}", a.join("/"), b.join("/")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "files that import each other: {circles:?}"
    );
}

#[test]
fn the_reader_finds_grouped_and_inline_paths() {
    let found = paths("use super::{a::B, c::{d, e as f}};\nlet x = crate::g::h(1);");
    assert_eq!(
        found,
        ["super::a::B", "super::c::d", "super::c::e", "crate::g::h"]
    );
}
