//! Allocation budget of the decoding pipeline, counted (not timed) with a counting
//! global allocator. Issue 12 asked for at most one allocation per text delta and 1.1 per
//! tool-argument fragment; a short delta's text is held inline (`omni_protocol::Fragment`),
//! so the budget here is far lower: a twentieth of an allocation per delta, amortised
//! (the growth of the response's own text), in every dialect; and nothing per delta for
//! an agent over a call.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Instant;

use omni_conformance::heap::{allocations, AllocationCounter};
use omni_conformance::synth::{long_string_args, text_stream, tool_call_stream};
use omni_conformance::{agent_sim, scenarios};
use omni_protocol::agent::{Agent, AgentEvent, AgentInput, NoCallbacks};
use omni_protocol::generate::{Effect, Generate, Input, Report};
use omni_protocol::{dialect::StreamDecoder, Dialect, Response};
use omni_shell::{Command, EventSink, Host};

#[global_allocator]
static GLOBAL: AllocationCounter = AllocationCounter;

/// The counter is the process's: tests that read it take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Allocations made while `body` is decoded in 16 KiB chunks, as a network read gives it,
/// and the response decoded.
fn decoding_allocations(dialect: Dialect, body: &[u8]) -> (u64, Response) {
    let mut decoder = StreamDecoder::new(dialect, "bench");
    let mut events = Vec::with_capacity(1024);
    let before = allocations();
    for chunk in body.chunks(16 * 1024) {
        decoder.feed(chunk, &mut events);
        events.clear();
    }
    decoder.finish(&mut events);
    let used = allocations() - before;
    (used, decoder.response().clone())
}

#[test]
fn no_allocation_per_short_text_delta() {
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    const DELTAS: usize = 20_000;
    let mut report = Vec::new();
    for dialect in Dialect::ALL {
        let body = text_stream(dialect, DELTAS, "token ");
        let (used, response) = decoding_allocations(dialect, &body);
        let per_delta = used as f64 / DELTAS as f64;
        report.push(format!("{dialect}: {per_delta:.3} allocations per text delta"));
        assert_eq!(response.text().len(), DELTAS * 6, "{dialect} decoded every delta");
        assert!(per_delta <= 0.05, "{dialect}: {per_delta:.3} allocations per text delta (budget: 0.05)");
    }
    println!("{}", report.join("\n"));
}

#[test]
fn no_allocation_per_short_tool_argument_fragment() {
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    const BYTES: usize = 64 * 1024;
    const FRAGMENT: usize = 4;
    // OpenAI Chat sends each fragment in an array of calls: no allocation for that array.
    // (Anthropic's fragments are not arrays; what its tool input costs is building the
    // input's JSON value, which depends on the input, not on the fragments.)
    let args = long_string_args(BYTES);
    let streams = [(Dialect::OpenaiCompletions, tool_call_stream(Dialect::OpenaiCompletions, &args, FRAGMENT))];
    let mut report = Vec::new();
    for (dialect, body) in streams {
        let body = body.expect("a tool-call stream in this dialect");
        let (used, response) = decoding_allocations(dialect, &body);
        let fragments = BYTES.div_ceil(FRAGMENT);
        let per_fragment = used as f64 / fragments as f64;
        report.push(format!("{dialect}: {per_fragment:.3} allocations per tool-argument fragment"));
        let calls = response.message.tool_uses().count();
        assert_eq!(calls, 1, "{dialect} decoded the call");
        assert!(per_fragment <= 0.05, "{dialect}: {per_fragment:.3} allocations per fragment (budget: 0.05)");
    }
    println!("{}", report.join("\n"));
}

/// A subscriber that keeps what it is offered, as a driver's queue does.
struct Keep(Vec<AgentEvent>);

impl EventSink for Keep {
    fn offer(&mut self, event: AgentEvent) -> bool {
        self.0.push(event);
        true
    }
}

/// Allocations made while `body` streams through a call's machine.
fn call_allocations(body: &[u8]) -> u64 {
    let now = Instant::now();
    let mut machine = Generate::new(scenarios::offline_call(), now).expect("valid");
    let Some(Effect::SendRequest { id, .. }) = machine.poll_effect() else { panic!("a request") };
    machine.handle_input(Input::Report(scenarios::stream_head(id)), now).expect("taken");
    let mut kept = Vec::with_capacity(2 * DELTAS);
    let before = allocations();
    for chunk in body.chunks(16 * 1024) {
        machine.handle_input(Input::Report(Report::Body { id, bytes: chunk }), now).expect("taken");
        kept.extend(std::iter::from_fn(|| machine.poll_event()));
    }
    let used = allocations() - before;
    assert!(kept.len() >= DELTAS, "every delta came out");
    used
}

/// Allocations made while `body` streams through an agent with one subscriber.
fn agent_allocations(body: &[u8]) -> u64 {
    let now = Instant::now();
    let mut config = agent_sim::config();
    config.tools.clear();
    config.system = None;
    let mut host = Host::new(Agent::new(config, NoCallbacks, now).expect("valid"));
    host.apply(Command::Subscribe(Box::new(Keep(Vec::with_capacity(2 * DELTAS))), Box::new(|_| {})), now);
    host.apply(Command::Prompt("Hi".into(), Box::new(|r| r.expect("accepted"))), now);
    let Some(Effect::SendRequest { id, .. }) = host.poll_effect() else { panic!("a request") };
    host.agent().handle_input(AgentInput::Report(scenarios::stream_head(id)), now).expect("taken");
    let before = allocations();
    for chunk in body.chunks(16 * 1024) {
        host.agent().handle_input(AgentInput::Report(Report::Body { id, bytes: chunk }), now).expect("taken");
        host.publish();
    }
    allocations() - before
}

const DELTAS: usize = 10_000;

#[test]
fn the_agent_adds_no_allocation_per_delta_over_a_call() {
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let body = text_stream(Dialect::AnthropicMessages, DELTAS, "token ");
    let call = call_allocations(&body);
    let agent = agent_allocations(&body);
    println!("call: {call} allocations, agent with one subscriber: {agent} ({DELTAS} deltas)");
    // The agent's own growth (its partial message, its history) is amortised: a few
    // percent of a delta each, not one per delta.
    assert!(agent <= call + DELTAS as u64 / 20, "the agent made {agent} allocations where the call made {call}");
}
