//! `omni-bench-client <client> <case> <base_url>`: one call of `case` against the server
//! at `base_url`, by `client` (`floor`, `tokio`, `tokio-current`, `smol`, `blocking`).
//! Prints one line, `deltas=<n> bytes=<n> allocations=<n>`, and exits 0; on a failure,
//! a message on stderr and exit status 1. Its CPU time is taken by the parent (`wait4`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::ExitCode;

use omni_bench::case::{Case, ClientKind};
use omni_bench::{drivers, floor};
use omni_conformance::heap::AllocationCounter;

#[global_allocator]
static ALLOCATOR: AllocationCounter = AllocationCounter;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(client), Some(case), Some(base_url)) =
        (args.first().and_then(|a| ClientKind::parse(a)), args.get(1).and_then(|a| Case::parse(a)), args.get(2))
    else {
        eprintln!("usage: omni-bench-client <floor|tokio|tokio-current|smol|blocking> <openai-text|anthropic-text|openai-tool|anthropic-tool> <base_url>");
        return ExitCode::from(2);
    };
    let tally = match client {
        ClientKind::Floor => floor::run(case, base_url).map_err(|e| e.to_string()),
        ClientKind::Tokio => drivers::tokio_multi_thread(case, base_url),
        ClientKind::TokioCurrent => drivers::tokio_current_thread(case, base_url),
        ClientKind::Smol => drivers::smol(case, base_url),
        ClientKind::Blocking => drivers::blocking(case, base_url),
    };
    match tally {
        Ok(tally) => {
            println!("{}", tally.line());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{client} {case}: {error}");
            ExitCode::FAILURE
        }
    }
}
