//! OpenAI Chat Completions streaming chunks
//! (<https://platform.openai.com/docs/api-reference/chat-streaming>).

use serde_json::{json, Value};

use super::{argument_halves, call_id};
use crate::turn::{Answer, Block, Finish};

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-mock01", "object": "chat.completion.chunk", "created": 1741570283,
        "model": model, "system_fingerprint": "fp_mock",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    });
    format!("data: {chunk}\n\n")
}

pub(super) fn render(answer: &Answer, model: &str) -> (Vec<String>, usize) {
    let mut out = vec![chunk(model, json!({"role": "assistant", "content": "", "refusal": null}), None)];
    let mut calls = 0;
    // With interleaved calls, each call's second fragment waits until every call started.
    let mut later = Vec::new();
    for block in &answer.blocks {
        match block {
            Block::Text(pieces) => out.extend(pieces.iter().map(|p| chunk(model, json!({"content": p}), None))),
            Block::Thinking(pieces) => {
                out.extend(pieces.iter().map(|p| chunk(model, json!({"reasoning_content": p, "content": null}), None)));
            }
            Block::Call(call) => {
                let index = calls;
                calls += 1;
                let id = call_id(call, "call_mock", calls);
                let start = json!({"index": index, "id": id, "type": "function", "function": {"name": call.name, "arguments": ""}});
                out.push(chunk(model, json!({"tool_calls": [start]}), None));
                let (a, b) = argument_halves(call);
                let piece = |fragment| {
                    chunk(model, json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}), None)
                };
                out.push(piece(a));
                if answer.interleave_calls {
                    later.push(piece(b));
                } else {
                    out.push(piece(b));
                }
            }
        }
    }
    out.append(&mut later);
    let complete = out.len();
    let finish = match (answer.finish, answer.has_calls()) {
        (Finish::Length, _) => "length",
        (Finish::Natural, true) => "tool_calls",
        (Finish::Natural, false) => "stop",
    };
    out.push(chunk(model, json!({}), Some(finish)));
    let (input, output) = answer.usage;
    let usage = json!({
        "id": "chatcmpl-mock01", "object": "chat.completion.chunk", "created": 1741570283,
        "model": model, "system_fingerprint": "fp_mock", "choices": [],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
    });
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".to_string());
    (out, complete)
}
