//! Anthropic Messages streaming events
//! (<https://docs.anthropic.com/en/docs/build-with-claude/streaming>).

use serde_json::{json, Value};

use super::{argument_halves, call_id};
use crate::turn::{Answer, Block, Finish};

fn sse(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

pub(super) fn render(answer: &Answer, model: &str) -> (Vec<String>, usize) {
    let (input, output) = answer.usage;
    let mut out = vec![sse(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_mock01", "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}}}),
    )];
    let mut calls = 0;
    for (index, block) in answer.blocks.iter().enumerate() {
        let start = |content: Value| {
            sse("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": content}))
        };
        let delta = |delta: Value| {
            sse("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}))
        };
        match block {
            Block::Text(pieces) => {
                out.push(start(json!({"type": "text", "text": ""})));
                out.extend(pieces.iter().map(|p| delta(json!({"type": "text_delta", "text": p}))));
            }
            Block::Thinking(pieces) => {
                out.push(start(json!({"type": "thinking", "thinking": "", "signature": ""})));
                out.extend(pieces.iter().map(|p| delta(json!({"type": "thinking_delta", "thinking": p}))));
                out.push(delta(json!({"type": "signature_delta", "signature": "EqQBCgIYAhIMock=="})));
            }
            Block::Call(call) => {
                calls += 1;
                let id = call_id(call, "toolu_mock", calls);
                out.push(start(json!({"type": "tool_use", "id": id, "name": call.name, "input": {}})));
                let (a, b) = argument_halves(call);
                for fragment in [a, b] {
                    out.push(delta(json!({"type": "input_json_delta", "partial_json": fragment})));
                }
            }
        }
        out.push(sse("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    let complete = out.len();
    let stop = match (answer.finish, answer.has_calls()) {
        (Finish::Length, _) => "max_tokens",
        (Finish::Natural, true) => "tool_use",
        (Finish::Natural, false) => "end_turn",
    };
    out.push(sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}}),
    ));
    out.push(sse("message_stop", json!({"type": "message_stop"})));
    (out, complete)
}
