//! One answer of the scripted provider, rendered in each wire's documented streaming
//! format. The shapes follow the project's fixtures under `conformance/fixtures/<dialect>/`
//! (which cite the providers' API references and real recordings):
//!
//! - Anthropic Messages: `event:`/`data:` SSE, `message_start` … `message_stop`
//!   (built by [`crate::scenarios`], the generate scenarios' own bodies).
//! - OpenAI Chat Completions: `data:` SSE of `chat.completion.chunk` objects, a
//!   `finish_reason` chunk, a usage-only chunk (`stream_options.include_usage`), `data: [DONE]`.
//! - OpenAI Responses: typed SSE events `response.created`, `response.output_item.added`,
//!   `response.output_text.delta`, `response.function_call_arguments.delta`, … and
//!   `response.completed` carrying the output and usage; no `[DONE]`.
//! - Gemini: `streamGenerateContent?alt=sse`, one `GenerateContentResponse` per `data:`
//!   event (CRLF line ends), `functionCall` parts, `finishReason` and `usageMetadata`
//!   on the last chunk.
//! - Ollama `/api/chat`: NDJSON, one chat object per line, whole `tool_calls` in
//!   `message`, a last line with `done: true` and the token counts.

use serde_json::{json, Value};

use crate::scenarios;

/// A tool call of an answer.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// The call id the provider assigns (Gemini sends none: it links results by name).
    pub id: &'static str,
    /// The tool's name.
    pub name: &'static str,
    /// The arguments, a JSON object as text.
    pub input: &'static str,
}

impl Call {
    fn args(&self) -> Value {
        serde_json::from_str(self.input).unwrap_or(Value::Null)
    }

    /// The arguments in two fragments, as streaming wires send them.
    fn halves(&self) -> (&'static str, &'static str) {
        self.input.split_at(self.input.len() / 2)
    }
}

/// What the provider answers: text pieces, then tool calls; `finished` false cuts the
/// stream after the text, before anything that ends it.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Text, one streamed piece each.
    pub text: &'a [&'a str],
    /// Tool calls after the text.
    pub calls: &'a [Call],
    /// Whether the stream ends properly.
    pub finished: bool,
}

/// Anthropic Messages events (one string per SSE event).
pub fn anthropic(answer: &Answer) -> Vec<String> {
    if !answer.calls.is_empty() {
        // The scenarios' tool answer starts with the same short text.
        let calls: Vec<_> = answer.calls.iter().map(|c| (c.id, c.name, c.input)).collect();
        return scenarios::tool_events(&calls);
    }
    let mut events = scenarios::text_events(answer.text);
    if !answer.finished {
        // Drop `content_block_stop` and the `message_delta` + `message_stop` pair.
        events.truncate(events.len() - 2);
    }
    events
}

fn completions_chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-replay01", "object": "chat.completion.chunk", "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null,
    });
    format!("data: {chunk}\n\n")
}

/// OpenAI Chat Completions chunks (one string per SSE event).
pub fn openai_completions(answer: &Answer) -> Vec<String> {
    let mut out = vec![completions_chunk(json!({"role": "assistant", "content": "", "refusal": null}), None)];
    for piece in answer.text {
        out.push(completions_chunk(json!({"content": piece}), None));
    }
    for (index, call) in answer.calls.iter().enumerate() {
        let start = json!({"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}});
        out.push(completions_chunk(json!({"tool_calls": [start]}), None));
        let (a, b) = call.halves();
        for fragment in [a, b] {
            out.push(completions_chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                None,
            ));
        }
    }
    if answer.finished {
        let finish = if answer.calls.is_empty() { "stop" } else { "tool_calls" };
        out.push(completions_chunk(json!({}), Some(finish)));
        let usage = json!({
            "id": "chatcmpl-replay01", "object": "chat.completion.chunk", "created": 1741570283,
            "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_44709d6fcb", "choices": [],
            "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                    "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
        });
        out.push(format!("data: {usage}\n\n"));
        out.push("data: [DONE]\n\n".to_string());
    }
    out
}

/// Numbers the Responses events in order (`sequence_number`) and frames them.
#[derive(Default)]
struct ResponsesEvents {
    out: Vec<String>,
}

impl ResponsesEvents {
    fn push(&mut self, kind: &str, mut data: Value) {
        data["type"] = kind.into();
        data["sequence_number"] = self.out.len().into();
        self.out.push(format!("event: {kind}\ndata: {data}\n\n"));
    }
}

fn response_object(status: &str, output: Vec<Value>, usage: Value) -> Value {
    json!({
        "id": "resp_replay01", "object": "response", "created_at": 1763000000, "status": status,
        "error": null, "incomplete_details": null, "model": "gpt-4.1-2025-04-14", "output": output, "usage": usage,
    })
}

/// OpenAI Responses events (one string per SSE event).
pub fn openai_responses(answer: &Answer) -> Vec<String> {
    let mut events = ResponsesEvents::default();
    events.push("response.created", json!({"response": response_object("in_progress", vec![], Value::Null)}));
    events.push("response.in_progress", json!({"response": response_object("in_progress", vec![], Value::Null)}));
    let mut output = Vec::new();
    let message_id = "msg_replay01";
    let item = |status: &str, content: Value| json!({"id": message_id, "type": "message", "status": status, "content": content, "role": "assistant"});
    let part = |text: &str| json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
    events.push("response.output_item.added", json!({"output_index": 0, "item": item("in_progress", json!([]))}));
    // The events of the message's one text part say which part they belong to.
    let on_part = |fields: Value| {
        let mut event = json!({"item_id": message_id, "output_index": 0, "content_index": 0});
        if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
            event.extend(fields);
        }
        event
    };
    events.push("response.content_part.added", on_part(json!({"part": part("")})));
    for piece in answer.text {
        events.push("response.output_text.delta", on_part(json!({"delta": piece, "logprobs": []})));
    }
    if !answer.finished {
        return events.out;
    }
    let text = answer.text.concat();
    events.push("response.output_text.done", on_part(json!({"text": text, "logprobs": []})));
    events.push("response.content_part.done", on_part(json!({"part": part(&text)})));
    output.push(item("completed", json!([part(&text)])));
    events.push("response.output_item.done", json!({"output_index": 0, "item": output[0]}));
    for (i, call) in answer.calls.iter().enumerate() {
        let (index, item_id) = (i + 1, format!("fc_replay0{}", i + 1));
        let item = |status: &str, arguments: &str| json!({"id": item_id, "type": "function_call", "status": status, "arguments": arguments, "call_id": call.id, "name": call.name});
        events.push("response.output_item.added", json!({"output_index": index, "item": item("in_progress", "")}));
        let (a, b) = call.halves();
        for fragment in [a, b] {
            events.push(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": fragment}),
            );
        }
        events.push(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": index, "arguments": call.input}),
        );
        events.push("response.output_item.done", json!({"output_index": index, "item": item("completed", call.input)}));
        output.push(item("completed", call.input));
    }
    let usage = json!({"input_tokens": 20, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 32});
    events.push("response.completed", json!({"response": response_object("completed", output, usage)}));
    events.out
}

/// Gemini `GenerateContentResponse` chunks (one string per SSE event).
pub fn google_gemini(answer: &Answer) -> Vec<String> {
    let mut groups: Vec<Vec<Value>> = answer.text.iter().map(|t| vec![json!({"text": t})]).collect();
    if !answer.calls.is_empty() {
        groups.push(answer.calls.iter().map(|c| json!({"functionCall": {"name": c.name, "args": c.args()}})).collect());
    }
    let last = groups.len() - 1;
    let mut out = Vec::new();
    for (i, parts) in groups.into_iter().enumerate() {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        let mut usage = json!({"promptTokenCount": 20, "totalTokenCount": 20,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 20}]});
        if i == last && answer.finished {
            candidate["finishReason"] = "STOP".into();
            usage["candidatesTokenCount"] = 12.into();
            usage["totalTokenCount"] = 32.into();
        }
        let chunk = json!({"candidates": [candidate], "usageMetadata": usage,
            "modelVersion": "gemini-2.5-flash", "responseId": "Vb3YaKXzB8yTnvgP8t2o2QE"});
        // Google ends its lines with CRLF (as the recordings in the fixtures show).
        out.push(format!("data: {chunk}\r\n\r\n"));
    }
    out
}

/// Ollama chat lines (one string per NDJSON line).
pub fn ollama_chat(answer: &Answer) -> Vec<String> {
    let line = |n: usize, message: Value| {
        let created_at = format!("2025-10-26T17:15:24.{:06}Z", 12437 + 12437 * n);
        json!({"model": "qwen3:4b", "created_at": created_at, "message": message, "done": false})
    };
    let mut lines: Vec<Value> =
        answer.text.iter().map(|t| json!({"role": "assistant", "content": t})).collect::<Vec<_>>();
    if !answer.calls.is_empty() {
        let calls: Vec<Value> = answer
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"id": c.id, "function": {"index": i, "name": c.name, "arguments": c.args()}}))
            .collect();
        lines.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
    }
    let mut out: Vec<Value> = lines.into_iter().enumerate().map(|(n, message)| line(n, message)).collect();
    if answer.finished {
        let mut done = line(out.len(), json!({"role": "assistant", "content": ""}));
        let counts = json!({"done": true, "done_reason": "stop", "total_duration": 1226565459u64,
            "load_duration": 146268209, "prompt_eval_count": 20, "prompt_eval_duration": 294789458,
            "eval_count": 12, "eval_duration": 745392837});
        for (key, value) in counts.as_object().into_iter().flatten() {
            done[key] = value.clone();
        }
        out.push(done);
    }
    out.into_iter().map(|v| format!("{v}\n")).collect()
}
