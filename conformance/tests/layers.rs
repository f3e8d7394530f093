//! The core's layers go one way: `data` below `wire` below `text_tools` below `machines`
//! (DESIGN.md, "The core"). A file of `core/src` may name its own group or a lower one,
//! never a higher one: nothing in data knows a wire format or a machine, the wire knows
//! text tools only through a trait it owns, and so on. This test reads every file and
//! fails on an upward reference, listing each as `file:line`, so a cycle cannot come back
//! unseen.
//!
//! What counts as a reference is textual, so that doc links and comments are held to it
//! as much as code: `crate::<group>` in a path, a `use crate::{..}` group (nested groups
//! too), a name `core/src/lib.rs` re-exports from a group (`crate::Dialect` is a
//! reference to `data`), and `super::` that climbs out of the file's top-level group. The
//! `super::` of an inline module (`mod tests { .. }`) is resolved as if it were the
//! file's, which can only miss a climb, never invent one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The groups, lowest first.
const GROUPS: [&str; 4] = ["data", "wire", "text_tools", "machines"];

/// The crate root's facade modules, above every group.
const FACE: &str = "the face (lib.rs)";

fn rank(group: &str) -> Option<usize> {
    if group == FACE {
        return Some(GROUPS.len());
    }
    GROUPS.iter().position(|g| *g == group)
}

/// One path of a `use` or an expression, its groups expanded: `crate::{a::b, c}` is two.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UsePath {
    segments: Vec<String>,
    /// The name it is brought in as (`as x`), if renamed.
    alias: Option<String>,
}

/// Reads paths (`a::b::{c, d::{e as f}}`) out of source text, from a given position.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.text[self.at..].starts_with(token.as_bytes()) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    /// An identifier, or `*`.
    fn segment(&mut self) -> Option<String> {
        if self.eat("*") {
            return Some("*".into());
        }
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            self.at += 1;
        }
        (self.at > start).then(|| String::from_utf8_lossy(&self.text[start..self.at]).into_owned())
    }

    /// `as name` after a path inside a group, if there.
    fn alias(&mut self) -> Option<String> {
        let back = self.at;
        self.skip_blanks();
        if self.eat("as") && self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.skip_blanks();
            if let Some(name) = self.segment() {
                return Some(name);
            }
        }
        self.at = back;
        None
    }

    /// The path that starts here, its groups expanded.
    fn paths(&mut self) -> Vec<UsePath> {
        let mut prefix = Vec::new();
        loop {
            if self.eat("{") {
                let mut out = Vec::new();
                loop {
                    self.skip_blanks();
                    if self.eat("}") || self.peek().is_none() {
                        return out;
                    }
                    for inner in self.paths() {
                        let mut segments = prefix.clone();
                        segments.extend(inner.segments);
                        out.push(UsePath { segments, alias: inner.alias });
                    }
                    self.skip_blanks();
                    if !self.eat(",") {
                        self.skip_blanks();
                        self.eat("}");
                        return out;
                    }
                }
            }
            match self.segment() {
                Some(segment) => prefix.push(segment),
                None => return vec![UsePath { segments: prefix, alias: None }],
            }
            if !self.eat("::") {
                let alias = self.alias();
                return vec![UsePath { segments: prefix, alias }];
            }
        }
    }
}

/// Every path in `source` that starts with `crate::` or `super::`, with its line.
fn paths_in(source: &str) -> Vec<(usize, UsePath)> {
    let text = source.as_bytes();
    let mut found = Vec::new();
    for start in ["crate::", "super::"] {
        for (at, _) in source.match_indices(start) {
            // A whole word only (not `foo_crate::`, not the `super::` inside `super::super::`).
            let before = at.checked_sub(1).map(|i| text[i]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue;
            }
            let line = source[..at].matches('\n').count() + 1;
            let mut parser = Parser { text, at };
            for path in parser.paths() {
                found.push((line, path));
            }
        }
    }
    found.sort_by_key(|(line, _)| *line);
    found
}

/// The group a path names, seen from a file in module `module` (its path from the crate
/// root: `["data", "catalogue"]` for `data/catalogue/mod.rs`); `roots` are the names the
/// crate root re-exports, with their groups.
fn group_of(path: &UsePath, module: &[String], roots: &BTreeMap<String, String>) -> Option<String> {
    let segments = &path.segments;
    let rest = match segments.first()?.as_str() {
        "crate" => &segments[1..],
        "super" => {
            let climbs = segments.iter().take_while(|s| *s == "super").count();
            let base = module.len().checked_sub(climbs)?;
            if base > 0 {
                // Still inside a group: the file's own.
                return Some(module[0].clone());
            }
            &segments[climbs..]
        }
        _ => return None,
    };
    let first = rest.first()?;
    if rank(first).is_some() {
        return Some(first.clone());
    }
    roots.get(first).cloned()
}

/// The names `lib_rs` re-exports from a group (`pub use data::model::Model;`), with the group.
fn root_names(lib_rs: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for (at, _) in lib_rs.match_indices("pub use ") {
        let mut parser = Parser { text: lib_rs.as_bytes(), at: at + "pub use ".len() };
        for path in parser.paths() {
            let (Some(first), Some(last)) = (path.segments.first(), path.segments.last()) else { continue };
            if rank(first).is_some() && last != "*" {
                names.insert(path.alias.clone().unwrap_or_else(|| last.clone()), first.clone());
            }
        }
    }
    // The facade modules (`pub mod dialect { pub use crate::wire::… }`) are the face
    // itself, above every group: a file names what it uses by its own path.
    for (at, _) in lib_rs.match_indices("\npub mod ") {
        let rest = &lib_rs[at + "\npub mod ".len()..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if rest[name.len()..].trim_start().starts_with('{') {
            names.insert(name, FACE.to_owned());
        }
    }
    names
}

/// The upward references of one file: `(line, own group, referenced group, path)`.
fn upward(source: &str, module: &[String], roots: &BTreeMap<String, String>) -> Vec<(usize, String, String, String)> {
    let Some(own) = module.first().filter(|g| rank(g).is_some()) else { return Vec::new() };
    paths_in(source)
        .into_iter()
        .filter_map(|(line, path)| {
            let group = group_of(&path, module, roots)?;
            (rank(&group) > rank(own)).then(|| (line, own.clone(), group, path.segments.join("::")))
        })
        .collect()
}

/// The module path of a file under `src`: `data/catalogue/mod.rs` is `data::catalogue`,
/// `data/catalogue/tests.rs` is `data::catalogue::tests`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut module: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if module.last().is_some_and(|last| last == "mod") {
        module.pop();
    }
    module
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_file_of_the_core_names_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let lib_rs = std::fs::read_to_string(src.join("lib.rs")).expect("core/src/lib.rs");
    let roots = root_names(&lib_rs);
    assert!(roots.contains_key("Dialect"), "the crate root's re-exports were not read: {roots:?}");
    assert_eq!(roots.get("hooks").map(String::as_str), Some(FACE), "the facade modules were not read: {roots:?}");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut per_group = BTreeMap::<String, usize>::new();
    let mut found = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if let Some(group) = module.first().filter(|g| rank(g).is_some()) {
            *per_group.entry(group.clone()).or_default() += 1;
        }
        let source = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (line, own, group, path) in upward(&source, &module, &roots) {
            let shown = file.strip_prefix(&src).unwrap_or(file).display().to_string();
            found.push(format!("core/src/{shown}:{line}: {own} names {group} ({path})"));
        }
    }
    // The walk saw the whole core, or passing would mean nothing.
    for group in GROUPS {
        assert!(per_group.get(group).is_some_and(|n| *n > 5), "too few files of {group}: {per_group:?}");
    }
    assert!(found.is_empty(), "upward references (data < wire < text_tools < machines):\n{}", found.join("\n"));
}

fn module(path: &str) -> Vec<String> {
    path.split("::").map(str::to_string).collect()
}

#[test]
fn the_scanner_finds_upward_references_and_only_those() {
    let roots: BTreeMap<String, String> = [("Accumulator".to_string(), "wire".to_string())].into();
    let lines = |source: &str, at: &str| -> Vec<(usize, String)> {
        upward(source, &module(at), &roots).into_iter().map(|(line, _, group, _)| (line, group)).collect()
    };
    // Upward, in a path, a doc link and through the crate root's re-export.
    assert_eq!(lines("use crate::machines::generate::Effect;", "data::tool"), [(1, "machines".into())]);
    assert_eq!(lines("//! x\n/// [y](crate::wire::http::Header)\nfn f() {}", "data"), [(2, "wire".into())]);
    assert_eq!(lines("fn f(_: crate::Accumulator) {}", "data::event"), [(1, "wire".into())]);
    // Downward and sideways are fine.
    assert!(lines("use crate::data::message::Message;\nuse crate::wire::delta::Delta;", "wire::decoder").is_empty());
    assert!(lines("use crate::Accumulator;", "machines::request").is_empty());
    // Nested groups.
    let nested = "use crate::{\n    data::model::Model,\n    wire::{delta::Delta, http as h},\n};";
    let wire = (1, "wire".to_string());
    assert_eq!(lines(nested, "data::x"), [wire.clone(), wire]);
    let machines = (1, "machines".to_string());
    assert_eq!(lines("use crate::{data::a, machines::{b, c::{d}}};", "text_tools"), [machines.clone(), machines]);
    // `super::` out of the group, and not out of it.
    assert_eq!(lines("use super::super::machines::Machine;", "data::catalogue"), [(1, "machines".into())]);
    assert!(lines("use super::super::{Json, FENCE};", "text_tools::json::tests::properties").is_empty());
    assert!(lines("use super::*;", "data::catalogue::tests").is_empty());
    // Words that only look like paths.
    assert!(lines("pub(crate) fn f() {}\nlet my_crate::x = 1;", "data").is_empty());
}

#[test]
fn the_crate_roots_re_exports_are_read_with_their_groups() {
    let lib_rs = "pub mod data;\npub use data::model::{Model, Prices as Cost};\npub use wire::decoder::{decode_body, StreamDecoder};\npub use schemars;\n";
    let roots = root_names(lib_rs);
    let expected: BTreeMap<String, String> =
        [("Model", "data"), ("Cost", "data"), ("decode_body", "wire"), ("StreamDecoder", "wire")]
            .into_iter()
            .map(|(n, g)| (n.to_string(), g.to_string()))
            .collect();
    assert_eq!(roots, expected);
}
