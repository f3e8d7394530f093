//! OpenAI Responses streaming events
//! (<https://platform.openai.com/docs/api-reference/responses-streaming>).

use serde_json::{json, Value};

use super::{argument_halves, call_id};
use crate::turn::{Answer, Block, Finish};

/// Numbers the events in order (`sequence_number`) and frames them.
#[derive(Default)]
struct Events {
    out: Vec<String>,
}

impl Events {
    fn push(&mut self, kind: &str, mut data: Value) {
        data["type"] = kind.into();
        data["sequence_number"] = self.out.len().into();
        self.out.push(format!("event: {kind}\ndata: {data}\n\n"));
    }
}

fn response(model: &str, status: &str, output: Vec<Value>, usage: Value, incomplete: Value) -> Value {
    json!({"id": "resp_mock01", "object": "response", "created_at": 1763000000, "status": status, "error": null,
        "incomplete_details": incomplete, "model": model, "output": output, "usage": usage})
}

/// `fields` plus the keys that say which item and output index an event belongs to.
fn on_item(id: &str, index: usize, fields: Value) -> Value {
    let mut event = json!({"item_id": id, "output_index": index});
    if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
        event.extend(fields);
    }
    event
}

pub(super) fn render(answer: &Answer, model: &str) -> (Vec<String>, usize) {
    let mut events = Events::default();
    events.push(
        "response.created",
        json!({"response": response(model, "in_progress", vec![], Value::Null, Value::Null)}),
    );
    events.push(
        "response.in_progress",
        json!({"response": response(model, "in_progress", vec![], Value::Null, Value::Null)}),
    );
    let mut output = Vec::new();
    let mut calls = 0;
    // With interleaved calls, each call's second fragment and its end wait until every call started.
    let mut later: Vec<(&str, Value)> = Vec::new();
    for (index, block) in answer.blocks.iter().enumerate() {
        let item = match block {
            Block::Text(pieces) => {
                let id = format!("msg_mock{index:02}");
                let part = |text: &str| json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
                let item = |status: &str, content: Value| json!({"id": id, "type": "message", "status": status, "content": content, "role": "assistant"});
                events.push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": item("in_progress", json!([]))}),
                );
                let text = pieces.concat();
                let on_part = |fields: Value| {
                    let mut event = on_item(&id, index, json!({"content_index": 0}));
                    if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
                        event.extend(fields);
                    }
                    event
                };
                events.push("response.content_part.added", on_part(json!({"part": part("")})));
                for piece in pieces {
                    events.push("response.output_text.delta", on_part(json!({"delta": piece, "logprobs": []})));
                }
                events.push("response.output_text.done", on_part(json!({"text": text, "logprobs": []})));
                events.push("response.content_part.done", on_part(json!({"part": part(&text)})));
                item("completed", json!([part(&text)]))
            }
            Block::Thinking(pieces) => {
                let id = format!("rs_mock{index:02}");
                let item = |summary: Value| json!({"id": id, "type": "reasoning", "summary": summary, "encrypted_content": "gAAAAABmock=="});
                events.push("response.output_item.added", json!({"output_index": index, "item": item(json!([]))}));
                let part = |text: &str| json!({"type": "summary_text", "text": text});
                events.push(
                    "response.reasoning_summary_part.added",
                    on_item(&id, index, json!({"summary_index": 0, "part": part("")})),
                );
                for piece in pieces {
                    events.push(
                        "response.reasoning_summary_text.delta",
                        on_item(&id, index, json!({"summary_index": 0, "delta": piece})),
                    );
                }
                let text = pieces.concat();
                events.push(
                    "response.reasoning_summary_text.done",
                    on_item(&id, index, json!({"summary_index": 0, "text": text})),
                );
                events.push(
                    "response.reasoning_summary_part.done",
                    on_item(&id, index, json!({"summary_index": 0, "part": part(&text)})),
                );
                item(json!([part(&text)]))
            }
            Block::Call(call) => {
                calls += 1;
                let id = format!("fc_mock{index:02}");
                let call_id = call_id(call, "call_mock", calls);
                let arguments = call.arguments.to_string();
                let item = |status: &str, arguments: &str| {
                    json!({"id": id, "type": "function_call", "status": status,
                    "arguments": arguments, "call_id": call_id, "name": call.name})
                };
                events.push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": item("in_progress", "")}),
                );
                let (a, b) = argument_halves(call);
                events.push("response.function_call_arguments.delta", on_item(&id, index, json!({"delta": a})));
                let rest = [
                    ("response.function_call_arguments.delta", on_item(&id, index, json!({"delta": b}))),
                    ("response.function_call_arguments.done", on_item(&id, index, json!({"arguments": arguments}))),
                    (
                        "response.output_item.done",
                        json!({"output_index": index, "item": item("completed", &arguments)}),
                    ),
                ];
                if answer.interleave_calls {
                    later.extend(rest);
                } else {
                    rest.into_iter().for_each(|(kind, data)| events.push(kind, data));
                }
                output.push(item("completed", &arguments));
                continue;
            }
        };
        events.push("response.output_item.done", json!({"output_index": index, "item": item}));
        output.push(item);
    }
    later.into_iter().for_each(|(kind, data)| events.push(kind, data));
    let complete = events.out.len();
    let (input, output_tokens) = answer.usage;
    let usage = json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + output_tokens});
    match answer.finish {
        Finish::Natural => {
            events.push(
                "response.completed",
                json!({"response": response(model, "completed", output, usage, Value::Null)}),
            );
        }
        Finish::Length => {
            let why = json!({"reason": "max_output_tokens"});
            events.push("response.incomplete", json!({"response": response(model, "incomplete", output, usage, why)}));
        }
    }
    (events.out, complete)
}
