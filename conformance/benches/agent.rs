//! What the agent adds on top of a call: the same streamed reply (10,000 text deltas,
//! Anthropic Messages, 16 KiB chunks) through the generate machine alone (`generate`)
//! and through the agent with one subscriber fed by its host (`agent`), core only, no
//! I/O. Report `agent / generate`: the cost of the agent's per-delta work (partial
//! message for snapshots, event forwarding, fan-out) over the call's.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::time::Instant;

use divan::{black_box, AllocProfiler, Bencher};
use omni_conformance::agent_sim;
use omni_conformance::scenarios;
use omni_conformance::synth::text_stream;
use omni_protocol::agent::{Agent, AgentEvent, NoCallbacks};
use omni_protocol::generate::{Effect, Generate, GenerateEvent, Input, Report};
use omni_protocol::Dialect;
use omni_shell::{Command, EventSink, Host};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

const DELTAS: usize = 10_000;
const CHUNK: usize = 16 * 1024;

fn main() {
    divan::main();
}

#[divan::bench]
fn generate(bencher: Bencher) {
    let body = text_stream(Dialect::AnthropicMessages, DELTAS, "token ");
    let config = scenarios::offline_call();
    bencher.counter(divan::counter::ItemsCount::new(DELTAS)).bench(|| {
        let now = Instant::now();
        let mut machine = Generate::new(config.clone(), now).expect("valid");
        let Some(Effect::SendRequest { id, .. }) = machine.poll_effect() else { panic!("a request") };
        machine.handle_input(Input::Report(scenarios::stream_head(id)), now).expect("a report is never refused");
        let mut events = 0usize;
        for chunk in body.chunks(CHUNK) {
            machine
                .handle_input(Input::Report(Report::Body { id, bytes: chunk }), now)
                .expect("a report is never refused");
            while let Some(event) = machine.poll_event() {
                events += usize::from(matches!(black_box(&event), GenerateEvent::Stream { .. }));
            }
        }
        machine.handle_input(Input::Report(Report::BodyEnd { id }), now).expect("a report is never refused");
        while let Some(event) = machine.poll_event() {
            events += usize::from(matches!(black_box(&event), GenerateEvent::Stream { .. }));
        }
        events
    });
}

/// A subscriber that keeps what it is offered, as a driver's queue does.
struct Keep(Vec<AgentEvent>);

impl EventSink for Keep {
    fn offer(&mut self, event: AgentEvent) -> bool {
        self.0.push(event);
        true
    }
}

#[divan::bench]
fn agent(bencher: Bencher) {
    let body = text_stream(Dialect::AnthropicMessages, DELTAS, "token ");
    let mut config = agent_sim::config();
    config.tools.clear();
    config.system = None;
    bencher.counter(divan::counter::ItemsCount::new(DELTAS)).bench(|| {
        let now = Instant::now();
        let mut host = Host::new(Agent::new(config.clone(), NoCallbacks, std::time::Instant::now()).expect("valid"));
        host.apply(Command::Subscribe(Box::new(Keep(Vec::with_capacity(2 * DELTAS))), Box::new(|_| {})), now);
        host.apply(Command::Prompt("Hi".into(), Box::new(|r| r.expect("accepted"))), now);
        let Some(Effect::SendRequest { id, .. }) = host.poll_effect() else { panic!("a request") };
        host.agent()
            .handle_input(omni_protocol::agent::AgentInput::Report(scenarios::stream_head(id)), now)
            .expect("report");
        for chunk in body.chunks(CHUNK) {
            let input = omni_protocol::agent::AgentInput::Report(Report::Body { id, bytes: chunk });
            host.agent().handle_input(input, now).expect("report");
            host.publish();
        }
        let end = omni_protocol::agent::AgentInput::Report(Report::BodyEnd { id });
        host.agent().handle_input(end, now).expect("report");
        host.publish();
        black_box(host)
    });
}
