//! Every generate scenario through the tokio driver against the loopback replay server:
//! the transcript must equal the simulation's, file for file; and the scenarios of every
//! wire (omni_conformance::wires), whose requests must also be the simulation's.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use futures_core::Stream;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{scripted_async_tool, transcript_line};
use omni_conformance::wires::Wire;
use omni_protocol::generate::{GenerateEvent, RetryPolicy};
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

/// One call on a runtime of its own, for the shared checks (which are not async).
fn run_blocking(wire: Wire, scenario: &NamedScenario) -> (Vec<String>, ReplayServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(run(wire, scenario))
}

omni_conformance::wire_suite_tests!(run_blocking);
