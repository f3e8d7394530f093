#!/usr/bin/env python3
"""Holds the MSRV: every package the published crates build with (normal and build
dependencies, every feature turned on, on every target) must declare a `rust-version` no
newer than the workspace's, and so must the rest of the workspace's graph (dev-dependencies,
omni-conformance, omni-bench: what `cargo test` builds). Reads the resolved graph of
Cargo.lock (`cargo metadata --locked`, so a lock that would have to change fails too) and
lists every package that is too new, saying whether a user's build would meet it.

A toolchain of the declared version cannot be installed here; this check and clippy's
`incompatible_msrv` lint (which reads the same `rust-version`) stand in for building with it.
Run from anywhere in the workspace: scripts/msrv.py
"""
import json
import subprocess
import sys

PUBLISHED = ["omni-protocol", "omni-shell", "omni-store", "omni-tokio", "omni-smol", "omni-blocking"]


def version(text):
    """'1.89' or '1.89.0' as a tuple to compare."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--all-features"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    members = {packages[i]["name"]: i for i in metadata["workspace_members"]}

    declared = {packages[members[name]]["rust_version"] for name in PUBLISHED}
    if len(declared) != 1 or None in declared:
        sys.exit(f"error: the published crates must declare one rust-version, found {sorted(map(str, declared))}")
    msrv = declared.pop()

    # The published crates' graph through normal and build edges only.
    seen, todo = set(), [members[name] for name in PUBLISHED]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            if any(kind["kind"] in (None, "build") for kind in dep["dep_kinds"]):
                todo.append(dep["pkg"])

    too_new = sorted(
        (packages[pid]["name"], packages[pid]["version"], packages[pid]["rust_version"], pid in seen)
        for pid in nodes
        if packages[pid]["rust_version"] and version(packages[pid]["rust_version"]) > version(msrv)
    )
    if too_new:
        print(f"error: {len(too_new)} package(s) in the workspace's graph need a newer Rust than {msrv}:", file=sys.stderr)
        for name, ver, rust, published in too_new:
            where = "built by the published crates" if published else "tests, benches and unpublished crates only"
            print(f"  {name} {ver} (rust-version {rust}; {where})", file=sys.stderr)
        print(
            "With .cargo/config.toml's MSRV-aware resolver, `cargo update <package>` picks the newest version"
            " that fits, when one fits the requirement.",
            file=sys.stderr,
        )
        sys.exit(1)
    print(
        f"MSRV {msrv}: none of the {len(nodes)} resolved packages ({len(seen)} built by the published crates)"
        " declares a newer rust-version"
    )

main()
