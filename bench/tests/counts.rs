//! The benchmark's machinery run small: every client, every case, one round, each in a
//! child process against the loopback server, and every client must count exactly the
//! deltas and bytes the floor counted (and the floor what the stream holds), so that the
//! benchmark cannot silently measure a client that drops or invents events.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::path::Path;

use omni_bench::case::{tool_args, Case, ClientKind, Scale, FRAGMENT, WORD};
use omni_bench::harness::{run_case, table};
use omni_bench::server::Server;

#[test]
fn every_client_counts_what_the_floor_counts() {
    let scale = Scale::with_deltas(2_000);
    let exe = Path::new(env!("CARGO_BIN_EXE_omni-bench-client"));
    let server = Server::start().unwrap();
    let mut all = Vec::new();
    for case in Case::ALL {
        let runs = run_case(exe, &server, case, scale, &ClientKind::ALL, 1).unwrap();
        let floor = runs.runs[0][0].tally;
        let (deltas, bytes) = if case.is_tool() {
            let args = tool_args(scale).len();
            (args.div_ceil(FRAGMENT), args)
        } else {
            (scale.text_deltas, scale.text_deltas * WORD.len())
        };
        assert_eq!((floor.deltas, floor.bytes), (deltas as u64, bytes as u64), "{case}: the floor");
        assert_eq!(runs.disagreements(), Vec::<String>::new(), "{case}");
        for (client, runs) in runs.clients.iter().zip(&runs.runs) {
            let run = runs[0];
            // Every omni client allocates (its request, its response), so the counter
            // works; and stays within issue 12's budget of one allocation per delta.
            if *client != ClientKind::Floor {
                let tally = run.tally;
                assert!(tally.allocations > 0 && tally.allocations <= tally.deltas, "{case} {client}: {tally:?}");
            }
            assert!(run.cpu > std::time::Duration::ZERO, "{case} {client}: no CPU time taken");
        }
        all.push(runs);
    }
    // A debug build's numbers: for the eye only (`--nocapture`).
    println!("{}", table(&all));
}
