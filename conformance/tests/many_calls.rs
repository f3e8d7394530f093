//! 100,000 tool calls in one stream decode in every dialect, with every call there, in
//! order, with its arguments and a unique id: one call after the other, and (where the
//! dialect allows it) all in one event. With a lookup over every earlier call this took
//! minutes per dialect; the `many_calls` benchmark measures that the cost is linear.

use omni_conformance::many_calls::{calls_in_one_event, check_calls, sequential_calls};
use omni_protocol::{dialect::decode_body, Dialect, StopReason, StreamEvent};

const CALLS: usize = 100_000;

fn decode_and_check(dialect: Dialect, body: &[u8], what: &str) {
    let (events, response) = decode_body(dialect, "model", body);
    assert!(
        matches!(events.last(), Some(StreamEvent::Done { stop_reason: StopReason::ToolUse, .. })),
        "{dialect} {what}: {:?}",
        events.last()
    );
    if let Err(problem) = check_calls(&response, CALLS) {
        panic!("{dialect} {what}: {problem}");
    }
    let ends = events.iter().filter(|e| matches!(e, StreamEvent::ToolUseEnd { .. })).count();
    assert_eq!(ends, CALLS, "{dialect} {what}: one end event per call");
}

#[test]
fn a_hundred_thousand_sequential_calls_in_every_dialect() {
    for dialect in Dialect::ALL {
        decode_and_check(dialect, &sequential_calls(dialect, CALLS), "sequential");
    }
}

#[test]
fn a_hundred_thousand_calls_in_one_event() {
    let mut checked = 0;
    for dialect in Dialect::ALL {
        if let Some(body) = calls_in_one_event(dialect, CALLS) {
            decode_and_check(dialect, &body, "one event");
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "Chat Completions, Gemini and Ollama carry many calls in one event");
}
