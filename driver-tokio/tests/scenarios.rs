//! Every generate scenario through the tokio driver against the loopback replay server:
//! the transcript must equal the simulation's, file for file; and the scenarios of every
//! wire (omni_conformance::wires), whose requests must also be the simulation's.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

use futures_core::Stream;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{scripted_async_tool, transcript_line};
use omni_conformance::wires::{check_every_wire, check_every_wire_of, Wire};
use omni_core::generate::{GenerateEvent, RetryPolicy};
use omni_core::Dialect;
use omni_tokio::Client;

async fn next(stream: &mut omni_tokio::TextStream) -> Option<GenerateEvent> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

async fn run(wire: Wire, scenario: &NamedScenario) -> (Vec<String>, ReplayServer) {
    let server = ReplayServer::start(scenario.scenario.replies.clone()).expect("replay server");
    let client = wire
        .apply(Client::builder(), &server.base_url())
        .retry(RetryPolicy { seed: 7, ..RetryPolicy::default() })
        .stall_timeout(scenario.stall_timeout)
        .build()
        .expect("client");
    let tools = scenarios::tools()
        .iter()
        .map(|decl| {
            scripted_async_tool(decl, scenario.scenario.tools.get(&decl.spec.name).cloned(), tokio::time::sleep)
        })
        .collect::<Vec<_>>();
    let config = wire.config(scenario, "unused");
    let mut stream = client
        .call(config.model, config.context)
        .options(scenario.options.clone())
        .tools(tools)
        .stream()
        .expect("stream starts");
    let mut transcript = Vec::new();
    let started = tokio::time::Instant::now();
    loop {
        let event = match scenario.scenario.cancel_at {
            Some(at) => tokio::select! {
                e = next(&mut stream) => e,
                _ = tokio::time::sleep_until(started + at) => {
                    drop(stream);
                    // The drop cancels the call; what the application saw ends here.
                    transcript.push("dropped".to_string());
                    break;
                }
            },
            None => next(&mut stream).await,
        };
        let Some(event) = event else { break };
        transcript.push(transcript_line(&event));
    }
    (transcript, server)
}

fn expected(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/transcripts").join(format!("{name}.txt"));
    std::fs::read_to_string(&path).expect("transcript file").lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_matches_the_simulation() {
    let mut failures = Vec::new();
    for scenario in scenarios::all() {
        let (mut actual, server) = run(Wire(Dialect::AnthropicMessages), &scenario).await;
        let mut want = expected(scenario.name);
        if actual.last().is_some_and(|l| l == "dropped") {
            // A dropped stream never sees the final `finished cancelled` line.
            actual.pop();
            want.pop();
        }
        if actual != want {
            failures.push(format!("{}:\n  expected {want:#?}\n  actual {actual:#?}", scenario.name));
        }
        let requests = server.requests();
        if requests.iter().any(|r| r.header("x-api-key") != Some("sk-replay")) {
            failures.push(format!("{}: a request lacked the key", scenario.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One call on a runtime of its own, for the shared wire checks (which are not async).
fn run_blocking(wire: Wire, scenario: &NamedScenario) -> (Vec<String>, ReplayServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(run(wire, scenario))
}

#[test]
fn every_wire_matches_the_simulation() {
    check_every_wire(run_blocking);
}

#[test]
fn every_wire_reads_a_body_cut_inside_an_event_as_a_cut() {
    check_every_wire_of(Wire::cuts_inside_an_event, run_blocking);
}
