//! The transitions: what a driver or an application can feed a machine, generated as
//! choices resolved against what is outstanding when applied; and the bodies a head announces.

use omni_conformance::scenarios::{text_events, tool_events};
use proptest::prelude::*;

/// One thing that happens to a machine.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// The head of a request that has none yet.
    Head { pick: usize, status: u16, retry_after: Option<(&'static str, &'static str)>, body: usize },
    /// A whole answer at once: a 200 head, all of a valid stream, the body end.
    Reply { pick: usize, body: usize },
    /// The next `len` bytes of a headed request's planned body.
    Body { pick: usize, len: usize },
    /// Bytes that are no valid stream.
    Garbage { pick: usize, bytes: Vec<u8> },
    /// The body of a headed request ends (wherever its plan is).
    End { pick: usize },
    /// A request fails below HTTP.
    Fail { pick: usize, kind: u8 },
    /// A tool run ends.
    ToolDone { pick: usize, outcome: u8 },
    /// A report for an id that is settled or was never issued: must change nothing.
    Stale { pick: usize, what: u8 },
    /// The caller cancels.
    Cancel,
    /// Agent: a prompt (starts a turn when idle, else is staged).
    Prompt(u8),
    /// Agent: the decision for a paused call.
    Resume(u8),
    /// Agent: a state change (clears or keeps the history, changes the system prompt).
    SetState(u8),
    /// Agent: the last handle goes away (work in flight is cancelled, no more events).
    Terminate,
    /// Time moves on by this many ms, then `handle_timeout`.
    Tick(u32),
    /// Time jumps to the deadline plus this many ms (if there is one), then `handle_timeout`.
    ToDeadline(u32),
}

/// `retry-after` headers: short, longer than the policy allows, odd and hostile.
const RETRY_AFTER: &[(&str, &str)] = &[
    ("retry-after", "0"),
    ("retry-after", "1"),
    ("retry-after", "120"),
    ("retry-after-ms", "250"),
    ("retry-after", "-1"),
    ("retry-after", "1e30"),
    ("retry-after", "NaN"),
    ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
];

pub(crate) fn step(agent: bool) -> BoxedStrategy<Step> {
    let pick = 0usize..4;
    let common = prop_oneof![
        6 => (pick.clone(), prop_oneof![6 => Just(200u16), 2 => Just(429), 2 => Just(500), 1 => Just(307)],
              proptest::option::weighted(0.3, proptest::sample::select(RETRY_AFTER)), 0usize..9)
            .prop_map(|(pick, status, retry_after, body)| Step::Head { pick, status, retry_after, body }),
        6 => (pick.clone(), 0usize..9).prop_map(|(pick, body)| Step::Reply { pick, body }),
        10 => (pick.clone(), prop_oneof![2 => 1usize..64, 1 => 64usize..600, 2 => Just(usize::MAX)])
            .prop_map(|(pick, len)| Step::Body { pick, len }),
        1 => (pick.clone(), proptest::collection::vec(any::<u8>(), 1..40))
            .prop_map(|(pick, bytes)| Step::Garbage { pick, bytes }),
        3 => pick.clone().prop_map(|pick| Step::End { pick }),
        1 => (pick.clone(), 0u8..5).prop_map(|(pick, kind)| Step::Fail { pick, kind }),
        5 => (pick.clone(), 0u8..6).prop_map(|(pick, outcome)| Step::ToolDone { pick, outcome }),
        2 => (0usize..8, 0u8..5).prop_map(|(pick, what)| Step::Stale { pick, what }),
        1 => Just(Step::Cancel),
        2 => prop_oneof![0u32..50, 0u32..3_000].prop_map(Step::Tick),
        2 => prop_oneof![Just(0u32), Just(1), 0u32..10_000].prop_map(Step::ToDeadline),
    ];
    if !agent {
        return common.boxed();
    }
    prop_oneof![
        12 => common,
        2 => any::<u8>().prop_map(Step::Prompt),
        1 => any::<u8>().prop_map(Step::Resume),
        1 => any::<u8>().prop_map(Step::SetState),
        1 => Just(Step::Terminate),
    ]
    .boxed()
}

/// Valid Anthropic streams a 200 head may announce; the fifth is an in-stream error.
pub(crate) fn stream_bodies() -> Vec<Vec<u8>> {
    let weather = r#"{"city":"Paris"}"#;
    let bodies = [
        text_events(&["It is ", "sunny."]),
        tool_events(&[("toolu_1", "get_weather", weather), ("toolu_2", "get_time", weather)]),
        tool_events(&[("toolu_3", "ask_user", "{}")]),
        tool_events(&[("toolu_4", "get_weather", r#"{"town":1}"#), ("toolu_5", "nope", "{}")]),
        vec![
            text_events(&["x"])[0].clone(),
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n"
                .to_string(),
        ],
        tool_events(&[("toolu_6", "complete", "{}")]),
        text_events(&["{\"done\":", " true}"]),
        tool_events(&[("toolu_7", "get_time", weather)]),
    ];
    let mut bodies: Vec<Vec<u8>> = bodies.iter().map(|events| events.concat().into_bytes()).collect();
    // A hostile one: tool calls under stop reason `end_turn`.
    let calls = tool_events(&[("toolu_8", "get_weather", weather)]).concat();
    bodies.push(calls.replace(r#""stop_reason":"tool_use""#, r#""stop_reason":"end_turn""#).into_bytes());
    bodies
}

pub(crate) const ERROR_BODY: &[u8] = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
