//! Every generate scenario through the smol driver against the loopback replay server:
//! the transcript must equal the simulation's, file for file, and the server must have
//! seen what the simulation's provider saw; and the scenarios of every wire
//! (omni_conformance::wires), held to the same two checks.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::{Duration, Instant};

use futures_lite::future;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{scripted_async_tool, transcript_line};
use omni_conformance::wires::Wire;
use omni_protocol::generate::RetryPolicy;
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

fn run_blocking(wire: Wire, scenario: &NamedScenario) -> (Vec<String>, ReplayServer) {
    smol::block_on(run(wire, scenario))
}

omni_conformance::wire_suite_tests!(run_blocking);

async fn sleep_for(limit: Duration) {
    smol::Timer::after(limit).await;
}
