//! Every session scenario on the virtual clock, its transcript checked against
//! `conformance/transcripts/session/<name>.txt` (`OMNI_BLESS=1` writes them): the
//! transcripts the drivers' runs are held to, with file and SQLite stores.
#![allow(clippy::disallowed_methods)] // the simulation's start reads the clock once

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use omni_conformance::fixtures::check_or_bless;
use omni_conformance::session_scenarios::{self, run_session_scenario, transcript_path, FlakyStore};
use omni_conformance::session_sim::SimSession;
use omni_store::{MemoryStore, SessionId};

#[test]
fn every_session_scenario_writes_its_transcript() {
    let mut failures = Vec::new();
    for scenario in session_scenarios::all() {
        let failing = Arc::new(AtomicBool::new(false));
        let store = Arc::new(FlakyStore::new(Arc::new(MemoryStore::default()), failing.clone()));
        let id = SessionId::new(scenario.name).expect("a valid id");
        let mut sim = SimSession::create(&scenario, store, id).expect("created");
        let lines = run_session_scenario(&scenario, &mut sim, &failing).expect("the scenario runs");
        if let Err(diff) = check_or_bless(&transcript_path(scenario.name), &(lines.join("\n") + "\n")) {
            failures.push(format!("{diff}\nfull transcript:\n{}", lines.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_scenario_has_a_transcript_and_every_transcript_a_scenario() {
    let names: std::collections::BTreeSet<String> =
        session_scenarios::all().iter().map(|s| format!("{}.txt", s.name)).collect();
    let dir = transcript_path("x").parent().expect("a directory").to_path_buf();
    let files: std::collections::BTreeSet<String> = std::fs::read_dir(dir)
        .expect("the transcripts directory")
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, files);
}
