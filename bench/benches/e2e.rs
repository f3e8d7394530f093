//! The end-to-end benchmark: `cargo bench -p omni-bench --bench e2e`.
//!
//! For each case (Chat Completions and Anthropic Messages; 100,000 text deltas, or one
//! tool call with 1 MiB of arguments in 4-byte fragments), `ROUNDS` rounds (5) of every
//! client in a child process of its own, the order rotated each round; per case and
//! client, the median whole-process CPU per delta and its ratio to the floor's, the
//! allocations per delta and the start-up to the first request; then the table of all.
//! `DELTAS` scales the streams (text deltas; tool arguments 1 MiB × DELTAS / 100,000).
//! Without `--bench` (`cargo test --benches`) it runs one small round.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::path::Path;
use std::process::ExitCode;

use omni_bench::case::{Case, ClientKind, Scale, FULL_DELTAS};
use omni_bench::harness::{run_case, table};
use omni_bench::server::Server;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

fn main() -> ExitCode {
    let bench = std::env::args().any(|a| a == "--bench");
    let (rounds, deltas) =
        if bench { (env_number("ROUNDS", 5), env_number("DELTAS", FULL_DELTAS)) } else { (1, 2_000) };
    let scale = Scale::with_deltas(deltas);
    let exe = Path::new(env!("CARGO_BIN_EXE_omni-bench-client"));
    let server = match Server::start() {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot start the loopback server: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "e2e: {} text deltas, {} bytes of tool arguments, {rounds} rounds, clients {}",
        scale.text_deltas,
        scale.tool_bytes,
        ClientKind::ALL.map(ClientKind::name).join(", ")
    );
    let mut all = Vec::new();
    for case in Case::ALL {
        let runs = match run_case(exe, &server, case, scale, &ClientKind::ALL, rounds) {
            Ok(runs) => runs,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        for problem in runs.disagreements() {
            eprintln!("counts differ: {problem}");
        }
        println!("\n{case}:");
        for s in runs.summaries() {
            println!(
                "  {:<14} {:>8} deltas  {:>8.3} µs/delta  {:>5.2}× floor  {:>6.2} allocations/delta  start-up {:>6.2} ms",
                s.client.name(),
                s.deltas,
                s.cpu_per_delta_us,
                s.ratio,
                s.allocations_per_delta,
                s.startup_ms
            );
        }
        all.push(runs);
    }
    println!("\n{}", table(&all));
    if all.iter().any(|runs| !runs.disagreements().is_empty()) {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
