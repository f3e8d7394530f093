//! `omni-bench-client <client> <case> <base_url> [<streams> [<gate>]]`: one call of `case` against
//! the server at `base_url`, by `client` (`floor`, `tokio`, `tokio-current`, `smol`,
//! `blocking`). Prints one line, `deltas=<n> bytes=<n> allocations=<n>`, and exits 0; on
//! a failure, a message on stderr and exit status 1. Its CPU time is taken by the parent
//! (`wait4`).
//!
//! With `<streams>`, `streams` calls at once from one client (`omni_bench::many`), each
//! waiting for the others at `<gate>` (`delta`, the default, or `start`): prints
//! `streams=<n> failed=<n> allocations=<n> counts=<deltas>/<bytes>x<streams>,…` (each
//! distinct count of a stream that ended well and how many streams had it), and exits 1,
//! the first failure on stderr, if any stream failed.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::ExitCode;

use omni_bench::case::{Case, ClientKind};
use omni_bench::{drivers, floor, many};
use omni_conformance::heap::AllocationCounter;

#[global_allocator]
static ALLOCATOR: AllocationCounter = AllocationCounter;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(client), Some(case), Some(base_url)) =
        (args.first().and_then(|a| ClientKind::parse(a)), args.get(1).and_then(|a| Case::parse(a)), args.get(2))
    else {
        eprintln!("usage: omni-bench-client <floor|tokio|tokio-current|smol|blocking> <openai-text|anthropic-text|openai-tool|anthropic-tool> <base_url> [<streams> [delta|start]]");
        return ExitCode::from(2);
    };
    if let Some(streams) = args.get(3) {
        let Some(streams) = streams.parse::<usize>().ok().filter(|&n| n > 0) else {
            eprintln!("<streams> must be a number above 0, not {streams:?}");
            return ExitCode::from(2);
        };
        let Some(gate) = args.get(4).map_or(Some(many::Gate::Delta), |g| many::Gate::parse(g)) else {
            eprintln!("<gate> is `delta` or `start`");
            return ExitCode::from(2);
        };
        return match many::run(client, case, base_url, streams, gate) {
            Ok(counts) => {
                println!("{}", counts.line());
                match &counts.failure {
                    Some(failure) => {
                        eprintln!(
                            "{client} {case}: {} of {streams} streams failed; the first: {failure}",
                            counts.failed
                        );
                        ExitCode::FAILURE
                    }
                    None => ExitCode::SUCCESS,
                }
            }
            Err(error) => {
                eprintln!("{client} {case}: {error}");
                ExitCode::FAILURE
            }
        };
    }
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
