//! The generate and agent machines fuzzed against a small reference model of what they
//! should be doing (firezone's `tests/fuzz/{reference,transition}.rs` pattern): proptest
//! makes random sequences of transitions (`transition.rs`) — a response head (200, 429,
//! 500 or a redirect, with or without a hostile `retry-after`), the next bytes of a valid
//! stream or garbage, a body end, a transport failure, a tool outcome, a late answer to a
//! settled or unknown id, a cancel, agent prompts, resumes, state changes and `terminate`,
//! time moving on to (or past) the deadline — and after each one the harness
//! (`harness.rs`) drains every effect and event and checks them against the reference
//! (`reference.rs` for effects, `subjects.rs` for each machine's events):
//!
//! 1. the agent's committed history changes only at a `turn` event (by exactly the turn's
//!    messages, appended) or a `state` event (to what was set); a cancel or a final error
//!    leaves it as it was;
//! 2. every request and tool run is settled: answered (body end, transport failure, the
//!    whole of a valid stream, a tool outcome) or cancelled by the machine; one request
//!    is in flight at a time; when the machine is done, idle or paused nothing is left
//!    unsettled; a cancel names only an id it issued and never twice; an answer to a
//!    settled or unknown id changes nothing;
//! 3. nothing after a terminal event: after `Finished`/`Failed` the generate machine says
//!    nothing more; after an agent turn's `turn stop`, `error` or `cancelled` only `state`
//!    events come until the next prompt;
//! 4. after `handle_timeout(now)` the deadline is none or later than `now` (and no input
//!    leaves it in the past);
//! 5. nothing panics (any panic fails the case);
//! 6. time only moves forward in what the harness feeds;
//! 7. never stuck: a call or turn in flight (not paused) always has a deadline;
//! 8. every request carries a conversation a provider accepts (every tool call answered in
//!    the next message, every result answering a call, the user's turn last).
//!
//! The transitions are generated as choices (`pick` indexes) resolved against what is
//! outstanding when they are applied, so every generated sequence is valid and shrinks
//! well; plain proptest does this without `proptest-state-machine` (whose reference
//! state picks transitions up front, which these choices make unnecessary).
//! `OMNI_MACHINE_FUZZ_CASES` sets the number of cases (512 by default).

mod harness;
mod reference;
mod subjects;
mod transition;

use std::time::{Duration, Instant};

use omni_conformance::{agent_sim, scenarios};
use omni_protocol::agent::{Agent, Status};
use omni_protocol::generate::{Generate, RetryPolicy};
use omni_protocol::observe::Observe;
use omni_protocol::{Context, Options, OutputSchema};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;

use harness::Harness;
use subjects::{AgentSubject, FuzzCallbacks, GenerateSubject};
use transition::{step, Step};

/// Knobs of a case's configuration.
#[derive(Debug, Clone)]
struct Knobs {
    max_retries: u32,
    timeout_ms: Option<u64>,
    stall_ms: u64,
    tool_timeout_ms: Option<u64>,
    max_steps: Option<u32>,
    max_response_bytes: u64,
    /// Ask for structured output (an object): text answers are corrected, `{}`-less ones fail.
    structured: bool,
    /// Honour any `retry-after`, however long (instead of the default 60 s at most).
    patient: bool,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    let limits = (
        0u32..3,
        proptest::option::weighted(0.3, 500u64..20_000),
        prop_oneof![2 => Just(120_000u64), 1 => 100u64..10_000],
        proptest::option::weighted(0.5, 100u64..10_000),
        proptest::option::weighted(0.5, 1u32..4),
        prop_oneof![4 => Just(u64::MAX), 1 => 50u64..2_000],
    );
    (limits, proptest::bool::weighted(0.2), proptest::bool::weighted(0.2)).prop_map(
        |((max_retries, timeout_ms, stall_ms, tool_timeout_ms, max_steps, max_response_bytes), structured, patient)| {
            Knobs {
                max_retries,
                timeout_ms,
                stall_ms,
                tool_timeout_ms,
                max_steps,
                max_response_bytes,
                structured,
                patient,
            }
        },
    )
}

fn options(knobs: &Knobs) -> Options {
    Options {
        timeout: knobs.timeout_ms.map(Duration::from_millis),
        tool_timeout: knobs.tool_timeout_ms.map(Duration::from_millis),
        max_steps: knobs.max_steps,
        output: knobs.structured.then(|| OutputSchema { name: "answer".into(), schema: json!({"type": "object"}) }),
        ..Options::default()
    }
}

fn retry(knobs: &Knobs) -> RetryPolicy {
    let max_retry_after = if knobs.patient { Duration::MAX } else { RetryPolicy::default().max_retry_after };
    RetryPolicy { max_retries: knobs.max_retries, max_retry_after, seed: 7, ..RetryPolicy::default() }
}

fn cases() -> u32 {
    std::env::var("OMNI_MACHINE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512)
}

fn runner() -> TestRunner {
    TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() })
}

fn check(result: Result<(), String>) -> Result<(), TestCaseError> {
    result.map_err(TestCaseError::fail)
}

#[test]
fn generate_machine_against_its_reference() {
    let strategy = (knobs(), proptest::collection::vec(step(false), 0..60));
    runner()
        .run(&strategy, |(knobs, steps)| {
            let mut config = scenarios::config(&scenarios::all()[0], "http://fuzz.invalid/v1");
            config.context = Context::from_prompt("What is the weather in Paris?");
            config.options = options(&knobs);
            config.retry = retry(&knobs);
            config.stall_timeout = Duration::from_millis(knobs.stall_ms);
            config.max_response_bytes = knobs.max_response_bytes;
            config.observe = Observe::Content;
            let start = Instant::now();
            let machine = Generate::new(config, start).expect("a valid configuration");
            let subject = GenerateSubject { machine, terminal: false, events: 0 };
            check(Harness::new(subject, start).run(&steps))
        })
        .unwrap();
}

#[test]
fn agent_machine_against_its_reference() {
    let strategy =
        (knobs(), proptest::collection::vec(any::<u8>(), 1..16), proptest::collection::vec(step(true), 0..60));
    runner()
        .run(&strategy, |(knobs, choices, steps)| {
            let mut config = agent_sim::config();
            config.options = options(&knobs);
            config.retry = retry(&knobs);
            config.stall_timeout = Duration::from_millis(knobs.stall_ms);
            config.max_response_bytes = knobs.max_response_bytes;
            config.observe = Observe::Content;
            let machine = Agent::new(config, FuzzCallbacks { choices, at: 0 }, std::time::Instant::now())
                .expect("a valid configuration");
            let subject = AgentSubject {
                machine,
                committed: Vec::new(),
                in_turn: false,
                status: Status::Idle,
                patched: None,
                terminated: false,
                pending: Vec::new(),
                events: 0,
            };
            // Every case starts with a prompt, so that most of the steps find a turn.
            let mut steps = steps;
            steps.insert(0, Step::Prompt(0));
            check(Harness::new(subject, Instant::now()).run(&steps))
        })
        .unwrap();
}
