//! Holding a driver to the simulation: each scenario run through the driver's public API
//! against a replay server must give the simulation's transcript, and the server must
//! receive the simulation's requests. [`wire_suite_tests!`](crate::wire_suite_tests)
//! declares these checks as a driver's `#[test]`s, one list for every driver.

use std::path::Path;

use super::Wire;
use crate::replay::ReplayServer;
use crate::scenarios::{self, NamedScenario};

/// What a driver's run of one scenario gives: the transcript the application saw (ending
/// in `dropped` when the run dropped its stream at the scenario's `cancel_at`) and the
/// server it ran against.
pub type RunResult = (Vec<String>, ReplayServer);

/// Runs every Anthropic scenario ([`scenarios::all`]) through a driver: the transcript
/// must be `conformance/transcripts/<name>.txt` (the pure simulation's), and the
/// server must receive the simulation's requests. A run that dropped its stream to
/// cancel never sees the last line (`finished cancelled`), so it is held to the rest.
/// Panics listing every difference.
pub fn check_every_scenario<F>(run: F)
where
    F: Fn(Wire, &NamedScenario) -> RunResult,
{
    let wire = Wire(omni_protocol::Dialect::AnthropicMessages);
    let transcripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts");
    let mut failures = Vec::new();
    for scenario in scenarios::all() {
        let (mut actual, server) = run(wire, &scenario);
        let path = transcripts.join(format!("{}.txt", scenario.name));
        let mut want: Vec<String> = match std::fs::read_to_string(&path) {
            Ok(text) => text.lines().map(str::to_string).collect(),
            Err(error) => vec![format!("{}: {error}", path.display())],
        };
        if actual.last().is_some_and(|line| line == "dropped") {
            actual.pop();
            want.pop();
        }
        if actual != want {
            failures.push(format!("{}:\n  expected {want:#?}\n  actual {actual:#?}", scenario.name));
        }
        failures.extend(wire.check_requests(&scenario, &server.requests(), &server.base_url()));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs every scenario of every wire through a driver: see [`check_every_wire_of`].
pub fn check_every_wire<F>(run: F)
where
    F: Fn(Wire, &NamedScenario) -> RunResult + Sync,
{
    check_every_wire_of(Wire::scenarios, run);
}

/// Runs the `scenarios` of every wire through a driver and checks each run against the
/// simulation ([`Wire::check_run`]); panics listing every difference. `run` makes one
/// call of the scenario through the driver's public API against a replay server it
/// starts with the scenario's replies, and returns the transcript and the server. The
/// wires run side by side, one thread each (the scenarios wait more than they compute).
pub fn check_every_wire_of<F>(scenarios: fn(Wire) -> Vec<NamedScenario>, run: F)
where
    F: Fn(Wire, &NamedScenario) -> RunResult + Sync,
{
    let failures: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = Wire::all()
            .into_iter()
            .map(|wire| {
                let run = &run;
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for scenario in scenarios(wire) {
                        let (transcript, server) = run(wire, &scenario);
                        failures.extend(wire.check_run(&scenario, &transcript, &server.requests(), &server.base_url()));
                    }
                    failures
                })
            })
            .collect();
        threads
            .into_iter()
            .zip(Wire::all())
            .flat_map(|(thread, wire)| match thread.join() {
                Ok(failures) => failures,
                Err(_) => vec![format!("{}: the run panicked (see above)", wire.name())],
            })
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `#[test]` functions that hold a driver to the simulation, for its test binary:
/// `omni_conformance::wire_suite_tests!(run);`, where `run` is a
/// `fn(Wire, &NamedScenario) -> (Vec<String>, ReplayServer)` making one call of the
/// scenario through the driver's public API against a replay server it starts with the
/// scenario's replies. One list for every driver, so none can miss a check.
#[macro_export]
macro_rules! wire_suite_tests {
    ($run:expr) => {
        #[test]
        fn every_scenario_matches_the_simulation() {
            $crate::wires::check_every_scenario($run);
        }

        #[test]
        fn every_wire_matches_the_simulation() {
            $crate::wires::check_every_wire($run);
        }

        #[test]
        fn every_wire_reads_a_body_cut_inside_an_event_as_a_cut() {
            $crate::wires::check_every_wire_of($crate::wires::Wire::cuts_inside_an_event, $run);
        }
    };
}
