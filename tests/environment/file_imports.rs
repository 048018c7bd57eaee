//! No files of `src/` import one another round a circle, of two files or of
//! any length: every `crate::`, `super::` and `self::` path a file's code
//! names (in `use` items, grouped ones too, and inline) is resolved to the
//! file that holds it, and the graph of files has no strongly connected
//! component of more than one file. A module's own file and its direct
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
    named(code).into_iter().map(|(path, _)| path).collect()
}

/// [`paths`], each with the name it is given where it is imported
/// (`use a::b as c;`: `c`; else the path's last segment).
fn named(code: &str) -> Vec<(String, String)> {
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
        let (mut found, end) = read_path(&bytes, i + start.len() - 2, start.trim_end_matches("::"));
        let (alias, end) = alias_at(&bytes, end);
        if let (Some(alias), [(_, name)]) = (alias, found.as_mut_slice()) {
            *name = alias;
        }
        out.extend(found);
        i = end.max(i + 1);
    }
    out
}

/// The alias of an `as alias` at `at` (after spaces), and where it ends.
fn alias_at(chars: &[char], at: usize) -> (Option<String>, usize) {
    let mut k = at;
    while chars.get(k).is_some_and(|c| c.is_whitespace()) {
        k += 1;
    }
    if !code_at(chars, k, "as") || chars.get(k + 2).is_none_or(|c| !c.is_whitespace()) {
        return (None, at);
    }
    k += 2;
    while chars.get(k).is_some_and(|c| c.is_whitespace()) {
        k += 1;
    }
    let alias: String = chars[k..].iter().take_while(|c| is_ident(**c)).collect();
    let end = k + alias.len();
    ((!alias.is_empty()).then_some(alias), end)
}

/// The re-exports of `code` (`pub use`, `pub(crate) use`, ...): each name
/// they give and the path it stands for; and `code` without them, since a
/// re-export only names what its module offers, and uses none of it.
fn reexports(code: &str) -> (Vec<(String, String)>, String) {
    let mut found = Vec::new();
    let mut rest = String::new();
    let mut at = 0;
    while let Some(start) = code[at..].find("pub").map(|k| at + k) {
        let before = code[..start].chars().next_back();
        let after = &code[start + 3..];
        let visibility = match after.strip_prefix('(') {
            Some(inner) => inner.find(')').map_or(0, |k| k + 2),
            None => 0,
        };
        let is_use = before.is_none_or(|c| !is_ident(c))
            && after[visibility..].trim_start().starts_with("use ");
        let end = code[start..].find(';').map(|k| start + k + 1);
        match (is_use, end) {
            (true, Some(end)) => {
                rest.push_str(&code[at..start]);
                found.extend(named(&code[start..end]));
                at = end;
            }
            _ => {
                rest.push_str(&code[at..start + 3]);
                at = start + 3;
            }
        }
    }
    rest.push_str(&code[at..]);
    (found, rest)
}

fn code_at(chars: &[char], at: usize, text: &str) -> bool {
    text.chars()
        .enumerate()
        .all(|(k, c)| chars.get(at + k) == Some(&c))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths that begin with `prefix` at `at` (just before its `::`), each
/// with its name, and where they end: `a::b::{c, d::e as f}` gives `a::b::c`
/// (`c`) and `a::b::d::e` (`f`).
fn read_path(chars: &[char], mut at: usize, prefix: &str) -> (Vec<(String, String)>, usize) {
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
                let (mut inner, end) = read_path(chars, at, &format!("{path}::{word}"));
                let (alias, end) = alias_at(chars, end);
                if let (Some(alias), [(_, name)]) = (alias, inner.as_mut_slice()) {
                    *name = alias;
                }
                out.extend(inner);
                at = end;
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
    let name = path.rsplit("::").next().unwrap_or_default().to_owned();
    (vec![(path, name)], at)
}

/// The module path `path` names from `module`, spelled out from the crate's
/// root: `super::a::B` in `["x", "y"]` is `["x", "a", "B"]`.
fn absolute(module: &Module, path: &str) -> Vec<String> {
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
    current
}

/// What each file re-exports: by the name it gives, the path (from the
/// crate's root) it stands for.
type Reexports = BTreeMap<Module, BTreeMap<String, Vec<String>>>;

/// The file that holds what `path`, named in `module`, names: the longest
/// module path that is a file, and through that file's re-exports, the file
/// that holds what it re-exports (a facade's name leads to the file behind
/// it).
fn resolve(
    module: &Module,
    path: &str,
    files: &BTreeMap<Module, PathBuf>,
    reexports: &Reexports,
) -> Option<Module> {
    let mut current = absolute(module, path);
    let mut file = None;
    // A re-export of a re-export is followed too, a few deep.
    for _ in 0..8 {
        let found = (0..=current.len())
            .rev()
            .map(|n| current[..n].to_vec())
            .find(|m| files.contains_key(m))?;
        let behind = current
            .get(found.len())
            .and_then(|name| reexports.get(&found)?.get(name));
        match behind {
            Some(target) if *target != current[..=found.len()] => {
                let mut next = target.clone();
                next.extend_from_slice(&current[found.len() + 1..]);
                current = next;
                file = Some(found);
            }
            _ => return Some(found),
        }
    }
    file
}

/// Each file of `src/` and the files its code names, a module's own file and
/// its direct submodules aside (see the module's first lines).
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = BTreeMap::new();
    modules(&src(), &mut files);
    let parent_and_child = |x: &Module, y: &Module| {
        (y.len() == x.len() + 1 && y.starts_with(x)) || (x.len() == y.len() + 1 && x.starts_with(y))
    };
    let mut codes = BTreeMap::new();
    let mut reexported: Reexports = BTreeMap::new();
    for (module, path) in &files {
        let code = code_lines(path, &fs::read_to_string(path).unwrap()).join("\n");
        let (given, rest) = reexports(&code);
        let names = reexported.entry(module.clone()).or_default();
        for (path, name) in given {
            names.insert(name, absolute(module, &path));
        }
        codes.insert(module.clone(), rest);
    }
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, code) in &codes {
        let used = graph.entry(module.clone()).or_default();
        for named in paths(code) {
            if let Some(file) = resolve(module, &named, &files, &reexported) {
                if file != *module && !parent_and_child(module, &file) {
                    used.insert(file);
                }
            }
        }
    }
    graph
}

/// The circles of `graph`: its strongly connected components of more than
/// one file (Tarjan's algorithm), each sorted.
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on_stack: BTreeSet<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, at: &'a Module) {
            let n = self.index.len();
            self.index.insert(at, n);
            self.low.insert(at, n);
            self.stack.push(at);
            self.on_stack.insert(at);
            for next in self.graph.get(at).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[at].min(self.low[next]);
                    self.low.insert(at, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[at].min(self.index[next]);
                    self.low.insert(at, low);
                }
            }
            if self.low[at] == self.index[at] {
                let mut component = Vec::new();
                loop {
                    let top = self.stack.pop().unwrap();
                    self.on_stack.remove(top);
                    component.push(top.clone());
                    if top == at {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module) {
            walk.visit(module);
        }
    }
    walk.found
}

#[test]
fn no_files_import_each_other_round_a_circle_of_any_length() {
    let found: Vec<String> = circles(&graph())
        .iter()
        .map(|c| c.iter().map(|m| m.join("/")).collect::<Vec<_>>().join(", "))
        .collect();
    assert!(
        found.is_empty(),
        "files that import one another round a circle: {found:#?}"
    );
}

#[test]
fn the_circle_finder_finds_long_circles_and_only_those() {
    let m = |s: &str| -> Module { s.split('/').map(str::to_owned).collect() };
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, to) in [
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("d", "e"),
        ("e", "x/y"),
        ("x/y", "e"),
        ("f", "a"),
    ] {
        graph.entry(m(from)).or_default().insert(m(to));
    }
    let mut found = circles(&graph);
    found.sort();
    assert_eq!(
        found,
        vec![vec![m("a"), m("b"), m("c")], vec![m("e"), m("x/y")]]
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
