//! Ollama `/api/chat` streaming lines (<https://github.com/ollama/ollama/blob/main/docs/api.md>):
//! NDJSON, one chat object per line, the last with `done: true` and the counts.

use serde_json::{json, Value};

use super::call_id;
use crate::turn::{Answer, Block, Finish};

pub(super) fn render(answer: &Answer, model: &str) -> (Vec<String>, usize) {
    let line = |n: usize, message: Value| {
        let created_at = format!("2025-10-26T17:15:24.{:06}Z", 12437 + 12437 * n);
        json!({"model": model, "created_at": created_at, "message": message, "done": false})
    };
    let mut messages = Vec::new();
    let mut calls = Vec::new();
    for block in &answer.blocks {
        match block {
            Block::Text(pieces) => messages.extend(pieces.iter().map(|p| json!({"role": "assistant", "content": p}))),
            Block::Thinking(pieces) => {
                messages.extend(pieces.iter().map(|p| json!({"role": "assistant", "content": "", "thinking": p})));
            }
            Block::Call(call) => {
                let id = call_id(call, "call_mock", calls.len() + 1);
                let index = calls.len();
                calls.push(
                    json!({"id": id, "function": {"index": index, "name": call.name, "arguments": call.arguments}}),
                );
            }
        }
    }
    if !calls.is_empty() {
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
    }
    let mut out: Vec<Value> = messages.into_iter().enumerate().map(|(n, message)| line(n, message)).collect();
    let complete = out.len();
    let (input, output) = answer.usage;
    let mut done = line(out.len(), json!({"role": "assistant", "content": ""}));
    let reason = match answer.finish {
        Finish::Natural => "stop",
        Finish::Length => "length",
    };
    let counts = json!({"done": true, "done_reason": reason, "total_duration": 1226565459u64, "load_duration": 146268209,
        "prompt_eval_count": input, "prompt_eval_duration": 294789458, "eval_count": output, "eval_duration": 745392837});
    for (key, value) in counts.as_object().into_iter().flatten() {
        done[key] = value.clone();
    }
    out.push(done);
    (out.into_iter().map(|v| format!("{v}\n")).collect(), complete)
}
