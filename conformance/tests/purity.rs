//! The core stays pure: its dependency tree holds only data-handling crates, never a
//! runtime, an HTTP client, a socket or a clock source. A new dependency of omni-protocol
//! must be added here on purpose.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates omni-protocol may depend on (normal dependencies, transitively).
const ALLOWED: &[&str] = &[
    "omni-protocol",
    "serde",
    "serde_core",
    "serde_derive",
    "serde_json",
    "memchr",
    "itoa",
    "ryu",
    "zmij",
    "proc-macro2",
    "quote",
    "syn",
    "unicode-ident",
    // compact_str (`Fragment`, a delta's text held inline) and what it builds on.
    "compact_str",
    "castaway",
    "rustversion",
    "static_assertions",
    // JSON Schema validation (jsonschema, default features off: no file or network
    // resolution) and what it brings: regexes, number handling, hashing, formats.
    "jsonschema",
    "jsonschema-regex",
    "jsonschema-value",
    "referencing",
    "ahash",
    "aho-corasick",
    "allocator-api2",
    "bit-set",
    "bit-vec",
    "borrow-or-share",
    "bytecount",
    "cfg-if",
    "data-encoding",
    "email_address",
    "equivalent",
    "fancy-regex",
    "fluent-uri",
    "foldhash",
    "fraction",
    "getrandom",
    "hashbrown",
    "heck",
    "libc",
    "lock_api",
    "micromap",
    "num",
    "num-bigint",
    "num-cmp",
    "num-complex",
    "num-integer",
    "num-iter",
    "num-rational",
    "num-traits",
    "once_cell",
    "outref",
    "parking_lot",
    "parking_lot_core",
    "percent-encoding",
    "ref-cast",
    "ref-cast-impl",
    "regex",
    "regex-automata",
    "regex-syntax",
    "scopeguard",
    "smallvec",
    "strum",
    "strum_macros",
    "unicode-general-category",
    "uuid-simd",
    "vsimd",
    "zerocopy",
];

/// Crates that would mean I/O, threads or an async runtime in the core.
const FORBIDDEN: &[&str] =
    &["tokio", "mio", "socket2", "async-std", "smol", "async-io", "reqwest", "hyper", "ureq", "futures", "rustls"];

#[test]
fn core_dependency_tree_is_pure() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "-p", "omni-protocol", "-e", "normal", "--prefix", "none", "--format", "{p}", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
    let names: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(names.contains("omni-protocol"), "unexpected cargo tree output: {names:?}");
    let forbidden: Vec<&String> = names.iter().filter(|n| FORBIDDEN.contains(&n.as_str())).collect();
    assert!(forbidden.is_empty(), "omni-protocol depends on I/O or runtime crates: {forbidden:?}");
    let unexpected: Vec<&String> = names.iter().filter(|n| !ALLOWED.contains(&n.as_str())).collect();
    assert!(unexpected.is_empty(), "new omni-protocol dependencies, review and allow them here: {unexpected:?}");
}

#[test]
fn core_sources_use_no_clock_threads_files_or_sockets() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let banned = ["Instant::now", "SystemTime::now", "thread::spawn", "std::fs", "std::net", "std::env", "tokio::"];
    let mut hits = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("core/src is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                // Test-only modules (`tests.rs`, `*_tests.rs`, compiled under #[cfg(test)])
                // may read the upstream corpus; the library may not.
                && !path.file_name().is_some_and(|n| n.to_string_lossy().ends_with("tests.rs"))
            {
                let text = std::fs::read_to_string(&path).expect("source is UTF-8");
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    if banned.iter().any(|b| code.contains(b)) {
                        hits.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(hits.is_empty(), "impure code in omni-protocol:\n{}", hits.join("\n"));
}
