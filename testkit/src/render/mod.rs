//! An [`Answer`] in each built-in dialect's documented streaming format, and an error in
//! its documented error shape. The shapes follow the providers' API references and the
//! recordings omni's decoders are tested on (`conformance/fixtures/<dialect>/`):
//!
//! - Anthropic Messages: `event:`/`data:` SSE, `message_start`, content blocks (`text`,
//!   `thinking` with its `signature_delta`, `tool_use` with `input_json_delta`),
//!   `message_delta` with the stop reason and usage, `message_stop`.
//! - OpenAI Chat Completions: `data:` SSE of `chat.completion.chunk` objects (reasoning as
//!   `reasoning_content`, as DeepSeek, vLLM and llama.cpp send it), a `finish_reason`
//!   chunk, a usage-only chunk (`stream_options.include_usage`), `data: [DONE]`.
//! - OpenAI Responses: typed SSE events, `response.created` … `response.completed` (or
//!   `response.incomplete`), reasoning summaries, `function_call` items; no `[DONE]`.
//! - Gemini: one `GenerateContentResponse` per `data:` event, CRLF line ends, `thought`
//!   parts, whole `functionCall` parts, `finishReason` and `usageMetadata` last.
//! - Ollama `/api/chat`: NDJSON, `message.thinking`, whole `tool_calls`, a last line with
//!   `done: true` and the counts.

mod anthropic;
mod gemini;
mod ollama;
mod openai_chat;
mod openai_responses;

use omni_protocol::Dialect;
use serde_json::{json, Value};

use crate::turn::{Answer, ToolCall};

/// An answer's body: its events (or lines), and where those that end the stream begin.
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) content_type: &'static str,
    pub(crate) events: Vec<String>,
    /// Index of the first event that only ends the stream (what [`crate::Turn::cut`]
    /// leaves out).
    pub(crate) complete: usize,
}

/// `answer` from `model` in `dialect`'s streaming format; `None` for a custom dialect.
pub(crate) fn render(dialect: Dialect, answer: &Answer, model: &str) -> Option<Rendered> {
    let sse = |(events, complete)| Rendered { content_type: "text/event-stream", events, complete };
    Some(match dialect {
        Dialect::AnthropicMessages => sse(anthropic::render(answer, model)),
        Dialect::OpenaiCompletions => sse(openai_chat::render(answer, model)),
        Dialect::OpenaiResponses => sse(openai_responses::render(answer, model)),
        Dialect::GoogleGemini => sse(gemini::render(answer, model)),
        Dialect::OllamaChat => {
            let (events, complete) = ollama::render(answer, model);
            Rendered { content_type: "application/x-ndjson", events, complete }
        }
        Dialect::Custom(_) => return None,
    })
}

/// The error body `dialect`'s provider sends with `status`.
pub(crate) fn error_body(dialect: Dialect, status: u16, message: &str) -> Value {
    match dialect {
        Dialect::AnthropicMessages => {
            // https://docs.anthropic.com/en/api/errors
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Dialect::GoogleGemini => {
            // https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes
            let status_name = match status {
                400 => "INVALID_ARGUMENT",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": status_name}})
        }
        Dialect::OllamaChat => json!({"error": message}),
        // OpenAI's shape, which OpenAI-compatible servers and most others use too.
        _ => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", "invalid_api_key"),
                404 => ("invalid_request_error", "model_not_found"),
                429 => ("requests", "rate_limit_exceeded"),
                400 => ("invalid_request_error", "invalid_request"),
                _ => ("server_error", "server_error"),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    }
}

/// `call`'s arguments as JSON text, in two fragments where the dialect streams them (the
/// second starts mid-value, as real fragments do).
pub(crate) fn argument_halves(call: &ToolCall) -> (String, String) {
    let text = call.arguments.to_string();
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle -= 1;
    }
    let (a, b) = text.split_at(middle);
    (a.to_string(), b.to_string())
}

/// `call`'s id, or the `n`th (from 1) in the dialect's style with `prefix`.
pub(crate) fn call_id(call: &ToolCall, prefix: &str, n: usize) -> String {
    call.id.clone().unwrap_or_else(|| format!("{prefix}{n:02}"))
}

#[cfg(all(test, feature = "proptest"))]
mod tests {
    //! The mock's bodies checked by the kit's own checks: what omni's decoders make of
    //! them however they are split, cut or damaged, for every dialect.

    use serde_json::json;

    use super::*;
    use crate::check::{wire, Config, Sample};
    use crate::turn::{Block, Finish};

    fn answers() -> Vec<(&'static str, Answer)> {
        let call = |name: &str, arguments| Block::Call(ToolCall { id: None, name: name.into(), arguments });
        let text = |pieces: &[&str]| Block::Text(pieces.iter().map(|p| p.to_string()).collect());
        let base = Answer { usage: (20, 12), ..Answer::default() };
        vec![
            ("text", Answer { blocks: vec![text(&["It is ", "sunny ✓"])], ..base.clone() }),
            (
                "thinking_and_calls",
                Answer {
                    blocks: vec![
                        Block::Thinking(vec!["Hmm, ".into(), "both.".into()]),
                        text(&["Checking."]),
                        call("get_weather", json!({"city": "Zürich"})),
                        call("get_time", json!({"zone": "CET", "exact": true})),
                    ],
                    ..base.clone()
                },
            ),
            (
                "interleaved_calls",
                Answer {
                    blocks: vec![call("a", json!({"x": "one two"})), call("b", json!({"y": [1, 2, 3]}))],
                    interleave_calls: true,
                    ..base.clone()
                },
            ),
            ("length", Answer { blocks: vec![text(&["One, two"])], finish: Finish::Length, ..base }),
        ]
    }

    #[test]
    fn every_dialects_mock_body_passes_the_wire_checks() {
        for dialect in Dialect::ALL {
            let samples: Vec<Sample> = answers()
                .into_iter()
                .filter_map(|(name, answer)| {
                    Some(Sample::new(name, render(dialect, &answer, "mock-model")?.events.concat()))
                })
                .collect();
            assert_eq!(samples.len(), 4, "{dialect:?} renders every answer");
            if let Err(failure) = wire::check_dialect(dialect, &samples, &Config::new().cases(16)) {
                panic!("{failure}");
            }
        }
    }
}
