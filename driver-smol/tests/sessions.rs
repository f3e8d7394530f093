//! Every session scenario through the smol driver's session handle against the replay
//! server, with the file store and the SQLite store: the transcripts must equal the
//! simulation's (see `omni_conformance::session_drive`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use omni_conformance::session_drive::{run_every_session_scenario, shell_session_driver, BlockOn};
use omni_smol::Client;

struct Smol;

impl BlockOn for Smol {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        smol::block_on(future)
    }
    fn sleep(&self, limit: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            smol::Timer::after(limit).await;
        })
    }
}

#[test]
fn every_session_scenario_matches_the_simulation_with_both_stores() {
    let failures = run_every_session_scenario(
        |scenario, server, store| shell_session_driver::<Client, _>(Smol, scenario, server, store),
        "omni-smol",
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
