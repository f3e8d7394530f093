//! The blocking driver must not pull in an async runtime.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets, clocks

use std::process::Command;

#[test]
fn the_dependency_tree_has_no_tokio() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "-p", "omni-blocking", "-e", "normal", "--offline", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(tree.contains("ureq"), "unexpected tree:\n{tree}");
    let runtimes: Vec<&str> = tree.lines().filter(|l| l.starts_with("tokio") || l.contains(" tokio")).collect();
    assert!(runtimes.is_empty(), "tokio in the tree: {runtimes:?}");
}
