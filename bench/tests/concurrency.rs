//! The concurrency benchmark's machinery run small: every client kind starts 3 streams at
//! once of every case (a few deltas each) in a child process against the concurrent
//! loopback server, and every stream must count exactly the case's deltas and bytes.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::path::Path;

use omni_bench::case::{Case, ClientKind, Scale};
use omni_bench::concurrency::run_streams;
use omni_bench::many::Gate;
use omni_bench::server::Server;

#[test]
fn every_client_receives_every_stream_whole() {
    let scale = Scale::with_deltas(300);
    let exe = Path::new(env!("CARGO_BIN_EXE_omni-bench-client"));
    let server = Server::start_concurrent().unwrap();
    for (k, case) in Case::ALL.into_iter().enumerate() {
        server.serve(&case.body(scale));
        let (deltas, _) = case.expected(scale);
        for (i, client) in ClientKind::ALL.into_iter().enumerate() {
            // Both gates, in turn: each client meets each in some case.
            let gate = Gate::ALL[(i + k) % 2];
            let run = run_streams(exe, &server, client, case, scale, 3, gate).unwrap();
            // `run_streams` checked each stream; the totals, once more.
            assert_eq!(run.counts.streams, 3, "{case} {client}");
            assert_eq!(run.counts.deltas(), 3 * deltas, "{case} {client}");
            assert!(run.cpu > std::time::Duration::ZERO && run.max_rss_kb > 0, "{case} {client}: {run:?}");
        }
    }
}

#[test]
fn a_stream_cut_short_fails_the_run() {
    // The server's body has fewer deltas than the harness expects: the check must say so.
    let exe = Path::new(env!("CARGO_BIN_EXE_omni-bench-client"));
    let server = Server::start_concurrent().unwrap();
    server.serve(&Case::OpenaiText.body(Scale::with_deltas(99)));
    let error = run_streams(exe, &server, ClientKind::Floor, Case::OpenaiText, Scale::with_deltas(100), 3, Gate::Delta)
        .unwrap_err();
    assert!(error.contains("3 streams 99 deltas/594 bytes") && error.contains("each 100 deltas/600 bytes"), "{error}");
}
