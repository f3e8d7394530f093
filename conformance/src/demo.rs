//! The recorded conversation the demo replays when no provider key is set: Anthropic
//! Messages streams (thinking with a signature, text, a tool call; then the answer),
//! written as the API documents them.

use std::time::Duration;

use serde_json::json;

use crate::sim::{BodyStep, Reply};

fn sse(event: &str, data: serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn start(id: &str, input_tokens: u64) -> String {
    sse(
        "message_start",
        json!({"type":"message_start","message":{"id":id,"type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":input_tokens,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}),
    )
}

fn delta(index: u32, delta: serde_json::Value) -> String {
    sse("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":delta}))
}

fn block(index: u32, content_block: serde_json::Value) -> String {
    sse("content_block_start", json!({"type":"content_block_start","index":index,"content_block":content_block}))
}

fn stop(index: u32) -> String {
    sse("content_block_stop", json!({"type":"content_block_stop","index":index}))
}

fn end(reason: &str, output_tokens: u64) -> String {
    sse(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason":reason,"stop_sequence":null},"usage":{"output_tokens":output_tokens}}),
    ) + &sse("message_stop", json!({"type":"message_stop"}))
}

fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_string).collect()
}

/// The two responses of the demo: a tool call, then the answer.
pub fn conversation() -> Vec<Reply> {
    let mut first = vec![start("msg_demo_1", 412), sse("ping", json!({"type":"ping"}))];
    first.push(block(0, json!({"type":"thinking","thinking":"","signature":""})));
    for w in words("The user wants the weather in Paris. I should call get_weather rather than guess.") {
        first.push(delta(0, json!({"type":"thinking_delta","thinking":w})));
    }
    first.push(delta(0, json!({"type":"signature_delta","signature":"EqQBCkYIBxgCKkDemoSignatureOnlyForReplay"})));
    first.push(stop(0));
    first.push(block(1, json!({"type":"text","text":""})));
    for w in words("Let me look that up for you.") {
        first.push(delta(1, json!({"type":"text_delta","text":w})));
    }
    first.push(stop(1));
    first.push(block(2, json!({"type":"tool_use","id":"toolu_demo_01","name":"get_weather","input":{}})));
    for piece in ["{\"city\": ", "\"Paris\", ", "\"unit\": \"celsius\"}"] {
        first.push(delta(2, json!({"type":"input_json_delta","partial_json":piece})));
    }
    first.push(stop(2));
    first.push(end("tool_use", 96));

    let mut second = vec![start("msg_demo_2", 540)];
    second.push(block(0, json!({"type":"text","text":""})));
    for w in
        words("It is 18 °C and partly cloudy in Paris right now, with a light westerly breeze. A light jacket will do.")
    {
        second.push(delta(0, json!({"type":"text_delta","text":w})));
    }
    second.push(stop(0));
    second.push(end("end_turn", 31));

    [first, second].into_iter().map(|events| paced(&events, Duration::from_millis(25))).collect()
}

fn paced(events: &[String], gap: Duration) -> Reply {
    let mut body = Vec::new();
    for e in events {
        body.push(BodyStep::Bytes(e.clone().into_bytes()));
        body.push(BodyStep::Wait(gap));
    }
    Reply::Http { status: 200, headers: vec![("content-type".into(), "text/event-stream".into())], body }
}

/// One streamed Anthropic message: optional text, then optional tool calls, and the stop reason.
fn message(id: &str, input_tokens: u64, text: &str, calls: &[(&str, &str, &str)], reason: &str) -> Reply {
    let mut events = vec![start(id, input_tokens)];
    let mut index = 0;
    if !text.is_empty() {
        events.push(block(0, json!({"type":"text","text":""})));
        for w in words(text) {
            events.push(delta(0, json!({"type":"text_delta","text":w})));
        }
        events.push(stop(0));
        index = 1;
    }
    for (call_id, name, input) in calls {
        events.push(block(index, json!({"type":"tool_use","id":call_id,"name":name,"input":{}})));
        events.push(delta(index, json!({"type":"input_json_delta","partial_json":input})));
        events.push(stop(index));
        index += 1;
    }
    events.push(end(reason, 40));
    paced(&events, Duration::from_millis(15))
}

/// The research agent example's conversation: search, a page fetch that needs the
/// user's approval, partial findings (the agent is told to go on), then the completion
/// tool and a closing line.
pub fn research_conversation() -> Vec<Reply> {
    vec![
        message(
            "msg_research_1",
            620,
            "I'll start by searching the library for sources on heat pumps in cold climates.",
            &[("toolu_research_1", "search", r#"{"query":"heat pump efficiency cold climate"}"#)],
            "tool_use",
        ),
        message(
            "msg_research_2",
            810,
            "The second result looks most relevant; let me read it in full.",
            &[("toolu_research_2", "fetch_page", r#"{"url":"https://example.org/cold-climate-heat-pumps"}"#)],
            "tool_use",
        ),
        message(
            "msg_research_3",
            1040,
            "Modern cold-climate heat pumps keep a coefficient of performance above 2 down to about -15 °C.",
            &[],
            "end_turn",
        ),
        message(
            "msg_research_4",
            1120,
            "I have enough to conclude.",
            &[(
                "toolu_research_3",
                "complete",
                r#"{"summary":"Cold-climate heat pumps stay efficient (COP > 2) down to about -15 °C; below that, backup heat helps."}"#,
            )],
            "tool_use",
        ),
        message("msg_research_5", 1210, "Research complete.", &[], "end_turn"),
    ]
}
