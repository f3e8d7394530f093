//! Streams with many tool calls, in each dialect's documented shape: the input of the
//! `many_calls` benchmark (decode cost must grow linearly with the number of calls) and
//! of the test that decodes 100,000 calls in every dialect.
//!
//! Call `i` is named `f` and has the arguments `{"n":i}`; its id is `call_i`, except in
//! Gemini, which sends none (the dialect makes one up).

use std::fmt::Write as _;

use omni_protocol::{Block, Dialect, Response};

/// A stream of `n` tool calls, one call (start, arguments, end) after the other.
pub fn sequential_calls(dialect: Dialect, n: usize) -> Vec<u8> {
    let mut s = String::with_capacity(n * 400 + 1024);
    match dialect {
        Dialect::AnthropicMessages => {
            s.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_calls\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
            for i in 0..n {
                let _ = write!(s, "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"call_{i}\",\"name\":\"f\",\"input\":{{}}}}}}\n\n");
                let _ = write!(s, "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"n\\\":{i}}}\"}}}}\n\n");
                let _ =
                    write!(s, "event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{i}}}\n\n");
            }
            s.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":100}}\n\n");
            s.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        }
        Dialect::OpenaiCompletions => {
            let head = "{\"id\":\"chatcmpl-calls\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":";
            let _ =
                write!(s, "data: {head}{{\"role\":\"assistant\",\"content\":null}},\"finish_reason\":null}}]}}\n\n");
            for i in 0..n {
                let _ = write!(s, "data: {head}{{\"tool_calls\":[{{\"index\":{i},\"id\":\"call_{i}\",\"type\":\"function\",\"function\":{{\"name\":\"f\",\"arguments\":\"\"}}}}]}},\"finish_reason\":null}}]}}\n\n");
                let _ = write!(s, "data: {head}{{\"tool_calls\":[{{\"index\":{i},\"function\":{{\"arguments\":\"{{\\\"n\\\":{i}}}\"}}}}]}},\"finish_reason\":null}}]}}\n\n");
            }
            let _ = write!(s, "data: {head}{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\n");
            s.push_str("data: [DONE]\n\n");
        }
        Dialect::OpenaiResponses => {
            s.push_str("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_calls\",\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[]}}\n\n");
            for i in 0..n {
                let _ = write!(s, "event: response.output_item.added\ndata: {{\"type\":\"response.output_item.added\",\"output_index\":{i},\"item\":{{\"id\":\"fc_{i}\",\"type\":\"function_call\",\"status\":\"in_progress\",\"arguments\":\"\",\"call_id\":\"call_{i}\",\"name\":\"f\"}}}}\n\n");
                let _ = write!(s, "event: response.function_call_arguments.delta\ndata: {{\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_{i}\",\"output_index\":{i},\"delta\":\"{{\\\"n\\\":{i}}}\"}}\n\n");
                let _ = write!(s, "event: response.function_call_arguments.done\ndata: {{\"type\":\"response.function_call_arguments.done\",\"item_id\":\"fc_{i}\",\"output_index\":{i},\"arguments\":\"{{\\\"n\\\":{i}}}\"}}\n\n");
                let _ = write!(s, "event: response.output_item.done\ndata: {{\"type\":\"response.output_item.done\",\"output_index\":{i},\"item\":{{\"id\":\"fc_{i}\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{{\\\"n\\\":{i}}}\",\"call_id\":\"call_{i}\",\"name\":\"f\"}}}}\n\n");
            }
            s.push_str("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_calls\",\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":100}}}\n\n");
        }
        Dialect::GoogleGemini => {
            for i in 0..n {
                let _ = write!(s, "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"functionCall\":{{\"name\":\"f\",\"args\":{{\"n\":{i}}}}}}}],\"role\":\"model\"}},\"index\":0}}],\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"calls\"}}\r\n\r\n");
            }
            s.push_str("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":100,\"totalTokenCount\":110}}\r\n\r\n");
        }
        Dialect::Custom(_) => unreachable!("built-in wires only"),
        Dialect::OllamaChat => {
            for i in 0..n {
                let _ = writeln!(s, "{{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{{\"id\":\"call_{i}\",\"function\":{{\"index\":{i},\"name\":\"f\",\"arguments\":{{\"n\":{i}}}}}}}]}},\"done\":false}}");
            }
            let _ = writeln!(s, "{{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"\"}},\"done_reason\":\"stop\",\"done\":true,\"prompt_eval_count\":10,\"eval_count\":100}}");
        }
    }
    s.into_bytes()
}

/// A stream whose calls all come in one event, where the dialect allows it (Chat
/// Completions: one chunk's `tool_calls`; Gemini: one chunk's parts; Ollama: one line's
/// `tool_calls`); `None` for the dialects that carry one call per event.
pub fn calls_in_one_event(dialect: Dialect, n: usize) -> Option<Vec<u8>> {
    let mut s = String::with_capacity(n * 120 + 1024);
    let mut calls = String::with_capacity(n * 100);
    match dialect {
        Dialect::AnthropicMessages | Dialect::OpenaiResponses => return None,
        Dialect::OpenaiCompletions => {
            for i in 0..n {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(calls, "{comma}{{\"index\":{i},\"id\":\"call_{i}\",\"type\":\"function\",\"function\":{{\"name\":\"f\",\"arguments\":\"{{\\\"n\\\":{i}}}\"}}}}");
            }
            let head = "{\"id\":\"chatcmpl-calls\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":";
            let _ = write!(
                s,
                "data: {head}{{\"role\":\"assistant\",\"tool_calls\":[{calls}]}},\"finish_reason\":null}}]}}\n\n"
            );
            let _ = write!(s, "data: {head}{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\n");
            s.push_str("data: [DONE]\n\n");
        }
        Dialect::GoogleGemini => {
            for i in 0..n {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(calls, "{comma}{{\"functionCall\":{{\"name\":\"f\",\"args\":{{\"n\":{i}}}}}}}");
            }
            let _ = write!(s, "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{calls}],\"role\":\"model\"}},\"finishReason\":\"STOP\",\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":10,\"candidatesTokenCount\":100,\"totalTokenCount\":110}}}}\r\n\r\n");
        }
        Dialect::Custom(_) => unreachable!("built-in wires only"),
        Dialect::OllamaChat => {
            for i in 0..n {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(calls, "{comma}{{\"id\":\"call_{i}\",\"function\":{{\"index\":{i},\"name\":\"f\",\"arguments\":{{\"n\":{i}}}}}}}");
            }
            let _ = writeln!(s, "{{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{calls}]}},\"done\":false}}");
            let _ = writeln!(s, "{{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"\"}},\"done_reason\":\"stop\",\"done\":true}}");
        }
    }
    Some(s.into_bytes())
}

/// Checks a decoded response of one of these streams: `n` tool calls, in order, call `i`
/// with the arguments `{"n":i}` and a unique id. Returns what is wrong, if anything.
pub fn check_calls(response: &Response, n: usize) -> Result<(), String> {
    let calls: Vec<_> = response
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse(t) => Some(t),
            _ => None,
        })
        .collect();
    if calls.len() != n {
        return Err(format!("{} calls, expected {n}", calls.len()));
    }
    let mut ids = std::collections::BTreeSet::new();
    for (i, call) in calls.iter().enumerate() {
        if call.name != "f" || call.input != serde_json::json!({ "n": i }) {
            return Err(format!("call {i}: {} {}", call.name, call.input));
        }
        if !ids.insert(call.id.as_str()) {
            return Err(format!("call {i}: id {} repeated", call.id));
        }
    }
    Ok(())
}
