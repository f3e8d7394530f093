//! Every session scenario through the tokio driver's session handle against the replay
//! server, with the file store and the SQLite store: the transcripts must equal the
//! simulation's (see `omni_conformance::session_drive`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use omni_conformance::session_drive::{run_every_session_scenario, shell_session_driver, BlockOn};
use omni_tokio::Client;

struct Tokio(Arc<tokio::runtime::Runtime>);

impl BlockOn for Tokio {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }
    fn sleep(&self, limit: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move { tokio::time::sleep(limit).await })
    }
}

#[test]
fn every_session_scenario_matches_the_simulation_with_both_stores() {
    let runtime =
        Arc::new(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime"));
    let failures = run_every_session_scenario(
        |scenario, server, store| shell_session_driver::<Client, _>(Tokio(runtime.clone()), scenario, server, store),
        "omni-tokio",
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
