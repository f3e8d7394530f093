//! omni-smol must not pull in tokio, not even a piece of it.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::Command;

#[test]
fn the_dependency_tree_has_no_tokio_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "-p", "omni-smol", "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
    let crates: Vec<&str> = tree.lines().filter_map(|line| line.split_whitespace().next()).collect();
    // Sanity: the tree is the real one (the HTTP stack is there).
    assert!(crates.contains(&"smol") && crates.contains(&"ureq-proto") && crates.contains(&"futures-rustls"), "{tree}");
    let tokio: Vec<&&str> = crates.iter().filter(|name| **name == "tokio" || name.starts_with("tokio-")).collect();
    assert!(tokio.is_empty(), "tokio crates in the tree: {tokio:?}\n{tree}");
}
