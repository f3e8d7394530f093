//! Many streams at once (issue 29): `cargo bench -p omni-bench --bench concurrency`.
//!
//! For each case and each number of streams `N`, every client (the floor's `N` threads,
//! omni-tokio multi-thread and current-thread, omni-smol, omni-blocking) runs `N` streams
//! at once through one client in a child process of its own, against a loopback server
//! that serves every connection on a thread of its own. Every stream must count exactly
//! the case's deltas and bytes (else the run fails). Per client and `N`: the median
//! whole-process CPU per delta (÷ `N` × deltas), its ratio to the floor's at the same `N`,
//! and the median peak resident set per stream (raw, and above the same client's at one
//! stream). See the crate's README, "Many streams at once".
//!
//! Environment (defaults in brackets): `STREAMS` [1,10,100,1000] (one stream is always
//! added: the resident set per stream is taken above it), `DELTAS` [2000] per stream
//! (tool arguments scaled as the e2e benchmark scales them), `ROUNDS` [3], `CLIENTS`
//! [floor,tokio,tokio-current,smol,blocking], `CASES` [openai-text,anthropic-text,
//! openai-tool,anthropic-tool], `GATE` [delta] (where each stream waits for all the
//! others: `delta`, after its first delta, or `start`, before its call; `delta,start`
//! runs both; see `omni_bench::many`). Without `--bench` (`cargo test --benches`) it runs one
//! small round (N = 1, 3; 200 deltas).
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use omni_bench::case::{Case, ClientKind, Scale};
use omni_bench::concurrency::{case_table, run_case, summary_table, Plan};
use omni_bench::many::Gate;
use omni_bench::server::Server;

fn env_number(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| format!("{name}={v:?}: a number above 0")),
    }
}

/// A comma-separated list from `name`, each item read by `parse`, or `default`.
fn env_list<T>(name: &str, default: Vec<T>, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let Ok(v) = std::env::var(name) else { return Ok(default) };
    v.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| parse(item).ok_or_else(|| format!("{name}: cannot read {item:?}")))
        .collect::<Result<Vec<T>, String>>()
        .and_then(|list| if list.is_empty() { Err(format!("{name} is empty")) } else { Ok(list) })
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("concurrency: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let bench = std::env::args().any(|a| a == "--bench");
    let (streams, deltas, rounds) = if bench {
        (
            env_list("STREAMS", vec![1, 10, 100, 1000], |s| s.parse().ok().filter(|&n| n > 0))?,
            env_number("DELTAS", 2_000)?,
            env_number("ROUNDS", 3)?,
        )
    } else {
        (vec![1, 3], 200, 1)
    };
    let clients = env_list("CLIENTS", ClientKind::ALL.to_vec(), ClientKind::parse)?;
    let cases = env_list("CASES", Case::ALL.to_vec(), Case::parse)?;
    let gates = env_list("GATE", vec![Gate::Delta], Gate::parse)?;
    let mut streams = streams;
    streams.push(1);
    streams.sort_unstable();
    streams.dedup();
    let scale = Scale::with_deltas(deltas);
    let exe = Path::new(env!("CARGO_BIN_EXE_omni-bench-client"));
    let server = Server::start_concurrent().map_err(|e| format!("cannot start the loopback server: {e}"))?;
    println!(
        "concurrency: streams {streams:?}, {} text deltas or {} bytes of tool arguments per stream, {rounds} rounds, clients {}, cases {}, gates {}",
        scale.text_deltas,
        scale.tool_bytes,
        clients.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
        cases.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
        gates.iter().map(|g| g.name()).collect::<Vec<_>>().join(", "),
    );
    let started = Instant::now();
    let mut all = Vec::new();
    for &gate in &gates {
        for &case in &cases {
            let case_started = Instant::now();
            let plan = Plan { scale, clients: clients.clone(), streams: streams.clone(), gate, rounds };
            let runs = run_case(exe, &server, case, &plan, &mut |line| eprintln!("  {line}"))?;
            println!("\n{}", case_table(&runs));
            println!("({case}, gate {}: {:.0} s)", gate.name(), case_started.elapsed().as_secs_f64());
            all.push(runs);
        }
    }
    println!("\n{}", summary_table(&all));
    println!("every stream of every run received whole; {:.0} s in all", started.elapsed().as_secs_f64());
    Ok(())
}
