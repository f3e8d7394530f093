//! Every generate scenario through the smol driver against the loopback replay server:
//! the transcript must equal the simulation's, file for file, and the server must have
//! seen what the simulation's provider saw; and the scenarios of every wire
//! (omni_conformance::wires), held to the same two checks.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::time::{Duration, Instant};

use futures_lite::{future, StreamExt};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{scripted_async_tool, simulate, transcript_line};
use omni_conformance::wires::{check_every_wire, check_every_wire_of, Wire};
use omni_core::generate::RetryPolicy;
use omni_core::Dialect;
use omni_smol::Client;
use smol::Timer;

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
        .map(|decl| scripted_async_tool(decl, scenario.scenario.tools.get(&decl.spec.name).cloned(), sleep_for))
        .collect::<Vec<_>>();
    let config = wire.config(scenario, "unused");
    let mut stream = client
        .call(config.model, config.context)
        .options(scenario.options.clone())
        .tools(tools)
        .stream()
        .expect("stream starts");
    let mut transcript = Vec::new();
    let started = Instant::now();
    loop {
        let event = match scenario.scenario.cancel_at {
            Some(at) => {
                let cancel = async {
                    Timer::at(started + at).await;
                    None
                };
                match future::or(async { Some(stream.next().await) }, cancel).await {
                    Some(event) => event,
                    None => {
                        drop(stream);
                        // The drop cancels the call; what the application saw ends here.
                        transcript.push("dropped".to_string());
                        break;
                    }
                }
            }
            None => stream.next().await,
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

#[test]
fn every_scenario_matches_the_simulation() {
    let mut failures = Vec::new();
    for scenario in scenarios::all() {
        let (mut actual, server) = smol::block_on(run(Wire(Dialect::AnthropicMessages), &scenario));
        let mut want = expected(scenario.name);
        if actual.last().is_some_and(|l| l == "dropped") {
            // A dropped stream never sees the final `finished cancelled` line.
            actual.pop();
            want.pop();
        }
        if actual != want {
            failures.push(format!("{}:\n  expected {want:#?}\n  actual {actual:#?}", scenario.name));
        }
        // The server saw what the simulated provider saw: as many requests, each with the
        // key, and the same bodies (tool results included) in the same order.
        let simulated =
            simulate(scenarios::config(&scenario, &format!("{}/v1", server.base_url())), &scenario.scenario);
        let requests = server.requests();
        if requests.len() != simulated.requests.len() {
            failures.push(format!(
                "{}: {} requests, the simulation sent {}",
                scenario.name,
                requests.len(),
                simulated.requests.len()
            ));
        }
        for (i, (got, want)) in requests.iter().zip(&simulated.requests).enumerate() {
            if got.header("x-api-key") != Some("sk-replay") {
                failures.push(format!("{}: request {i} lacked the key", scenario.name));
            }
            if got.body != want.body {
                failures.push(format!(
                    "{}: request {i} body differs:\n  sent {}\n  simulated {}",
                    scenario.name,
                    String::from_utf8_lossy(&got.body),
                    String::from_utf8_lossy(&want.body)
                ));
            }
            let host = server.base_url().trim_start_matches("http://").to_string();
            if got.header("host") != Some(host.as_str()) || got.path != "/v1/messages" {
                failures.push(format!("{}: request {i} went to {:?} {}", scenario.name, got.header("host"), got.path));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn run_blocking(wire: Wire, scenario: &NamedScenario) -> (Vec<String>, ReplayServer) {
    smol::block_on(run(wire, scenario))
}

#[test]
fn every_wire_matches_the_simulation() {
    check_every_wire(run_blocking);
}

#[test]
fn every_wire_reads_a_body_cut_inside_an_event_as_a_cut() {
    check_every_wire_of(Wire::cuts_inside_an_event, run_blocking);
}

async fn sleep_for(limit: Duration) {
    smol::Timer::after(limit).await;
}
