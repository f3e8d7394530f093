//! The one contract of every machine (issue 11), shown on the generate machine and the
//! agent alike: `new(.., now)`; `handle_input` answers `Ok` or refuses with a typed error
//! and changes nothing; `poll_timeout` gives the deadline with its reason; a driver that
//! feeds input before taking every effect is caught by a debug assertion. Every machine
//! here is driven through the core's `Machine` trait, as a driver loop drives it. Kept out of
//! `core/src` because the core reads no clock, even in tests: each test reads it once.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use omni_conformance::agent_sim;
use omni_protocol::agent::{Agent, AgentError, AgentInput, NoCallbacks};
use omni_protocol::generate::{
    Effect, Generate, GenerateConfig, GenerateEvent, Input, InputError, Report, RequestId, DEFAULT_STALL_TIMEOUT,
};
use omni_protocol::machine::{Machine, Timer};
use omni_protocol::{Context, Dialect, Model, Options, Provider};

const ANSWER: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

fn call(options: Options, now: Instant) -> Generate {
    let model = Model::new("local", "m", Dialect::OpenaiCompletions);
    let provider = Provider::openai_compatible("local", "http://127.0.0.1:9/v1", None);
    Generate::new(GenerateConfig::new(model, provider, Context::from_prompt("hi"), options), now).expect("machine")
}

fn sent(machine: &mut impl Machine) -> RequestId {
    let effects: Vec<_> = std::iter::from_fn(|| machine.poll_effect()).collect();
    match &effects[..] {
        [Effect::SendRequest { id, .. }] => *id,
        other => panic!("one request, not {other:?}"),
    }
}

/// Answers request `id` with a whole reply, as a driver would (effects taken between).
fn answer(machine: &mut impl Machine, id: RequestId, status: u16, body: &str, now: Instant) -> Vec<Effect> {
    let mut effects = Vec::new();
    for report in [
        Report::ResponseHead { id, status, headers: Vec::new() },
        Report::Body { id, bytes: body.as_bytes() },
        Report::BodyEnd { id },
    ] {
        machine.handle_report(report, now);
        effects.extend(std::iter::from_fn(|| machine.poll_effect()));
    }
    effects
}

#[test]
fn a_cancel_after_the_call_ended_is_refused_and_changes_nothing() {
    let now = Instant::now();
    let mut machine = call(Options::default(), now);
    let id = sent(&mut machine);
    assert_eq!(answer(&mut machine, id, 200, ANSWER, now), []);
    let events: Vec<_> = std::iter::from_fn(|| machine.poll_event()).collect();
    assert!(matches!(events.last(), Some(GenerateEvent::Finished(_))), "{events:?}");
    assert_eq!(machine.handle_input(Input::Cancel, now), Err(InputError::Finished));
    assert_eq!(machine.poll_effect(), None);
    assert_eq!(machine.poll_event(), None);
    assert!(machine.is_done());
    // Late reports are still taken (and ignored), as in the agent.
    assert_eq!(machine.handle_input(Input::Report(Report::BodyEnd { id }), now), Ok(()));
}

#[test]
fn the_agent_refuses_the_same_way() {
    let now = Instant::now();
    let mut agent = Agent::new(agent_sim::config(), NoCallbacks, now).expect("agent");
    assert_eq!(agent.poll_timeout(), None, "an idle agent waits for nothing");
    assert_eq!(agent.handle_input(AgentInput::Cancel, now), Err(AgentError::Idle));
    assert_eq!(agent.poll_effect(), None);
    assert_eq!(agent.poll_event(), None);
    assert_eq!(agent.handle_input(AgentInput::Report(Report::BodyEnd { id: RequestId(9) }), now), Ok(()));
}

#[test]
fn the_deadline_comes_with_its_reason() {
    let now = Instant::now();
    let mut machine = call(Options::default(), now);
    let id = sent(&mut machine);
    assert_eq!(machine.poll_timeout(), Some((now + DEFAULT_STALL_TIMEOUT, Timer::Stall)));
    let total = Options { timeout: Some(Duration::from_secs(30)), ..Options::default() };
    let mut limited = call(total, now);
    sent(&mut limited);
    assert_eq!(limited.poll_timeout(), Some((now + Duration::from_secs(30), Timer::RequestTimeout)));
    // A server error is retried after a backoff: the deadline says so.
    assert_eq!(answer(&mut machine, id, 500, "{}", now), []);
    let (at, why) = machine.poll_timeout().expect("a backoff");
    assert_eq!(why, Timer::RetryBackoff);
    assert!(at > now);
    machine.handle_timeout(at);
    sent(&mut machine);
    assert_eq!(machine.poll_timeout(), Some((at + DEFAULT_STALL_TIMEOUT, Timer::Stall)));
    // The agent's step is a request like any other.
    let mut agent = Agent::new(agent_sim::config(), NoCallbacks, now).expect("agent");
    agent.handle_input(AgentInput::Prompt("Hi".into()), now).expect("a prompt when idle");
    sent(&mut agent);
    assert_eq!(Machine::poll_timeout(&agent), Some((now + agent.config().stall_timeout, Timer::Stall)));
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "before executing every effect")]
fn a_call_fed_before_its_effects_are_taken_is_caught() {
    let now = Instant::now();
    let mut machine = call(Options::default(), now);
    // The first request was never taken (poll_effect), yet an answer comes.
    machine.handle_report(Report::BodyEnd { id: RequestId(0) }, now);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "before executing every effect")]
fn an_agent_woken_before_its_effects_are_taken_is_caught() {
    let now = Instant::now();
    let mut agent = Agent::new(agent_sim::config(), NoCallbacks, now).expect("agent");
    agent.handle_input(AgentInput::Prompt("Hi".into()), now).expect("a prompt when idle");
    agent.handle_timeout(now + Duration::from_secs(1));
}
