//! Large synthetic streams in each dialect's documented shape, for benchmarks and
//! scaling tests: a message start, `n` text deltas, a stop and usage.

use std::fmt::Write as _;

use omni_protocol::Dialect;

/// A text stream of `n` deltas of `word` (which must need no JSON escaping).
pub fn text_stream(dialect: Dialect, n: usize, word: &str) -> Vec<u8> {
    let mut s = String::with_capacity(n * (word.len() + 160) + 1024);
    match dialect {
        Dialect::AnthropicMessages => {
            s.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
            s.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
            for _ in 0..n {
                let _ = write!(s, "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{word}\"}}}}\n\n");
            }
            s.push_str("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n");
            let _ = write!(s, "event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":{n}}}}}\n\n");
            s.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        }
        Dialect::OpenaiCompletions => {
            let head = "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,\"delta\":";
            let _ = write!(s, "data: {head}{{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n");
            for _ in 0..n {
                let _ = write!(s, "data: {head}{{\"content\":\"{word}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n");
            }
            let _ = write!(s, "data: {head}{{}},\"logprobs\":null,\"finish_reason\":\"stop\"}}],\"usage\":null}}\n\n");
            let _ = write!(s, "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\n", n + 10);
            s.push_str("data: [DONE]\n\n");
        }
        Dialect::OpenaiResponses => {
            s.push_str("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_bench\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[],\"usage\":null}}\n\n");
            s.push_str("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_bench\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}\n\n");
            s.push_str("event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_bench\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"text\":\"\"}}\n\n");
            for i in 0..n {
                let _ = write!(s, "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"sequence_number\":{},\"item_id\":\"msg_bench\",\"output_index\":0,\"content_index\":0,\"delta\":\"{word}\",\"logprobs\":[]}}\n\n", i + 3);
            }
            let _ = write!(s, "event: response.completed\ndata: {{\"type\":\"response.completed\",\"sequence_number\":{},\"response\":{{\"id\":\"resp_bench\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":[],\"usage\":{{\"input_tokens\":10,\"input_tokens_details\":{{\"cached_tokens\":0}},\"output_tokens\":{n},\"output_tokens_details\":{{\"reasoning_tokens\":0}},\"total_tokens\":{}}}}}}}\n\n", n + 3, n + 10);
        }
        Dialect::GoogleGemini => {
            for i in 0..n {
                let finish = if i + 1 == n { ",\"finishReason\":\"STOP\"" } else { "" };
                let _ = write!(s, "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"{word}\"}}],\"role\":\"model\"}}{finish},\"index\":0}}],\"usageMetadata\":{{\"promptTokenCount\":10,\"candidatesTokenCount\":{},\"totalTokenCount\":{}}},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"bench\"}}\r\n\r\n", i + 1, i + 11);
            }
        }
        Dialect::Custom(_) => unreachable!("built-in wires only"),
        Dialect::OllamaChat => {
            for _ in 0..n {
                let _ = writeln!(s, "{{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00.000000Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"{word}\"}},\"done\":false}}");
            }
            let _ = writeln!(s, "{{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00.000000Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"\"}},\"done_reason\":\"stop\",\"done\":true,\"total_duration\":1,\"load_duration\":1,\"prompt_eval_count\":10,\"prompt_eval_duration\":1,\"eval_count\":{n},\"eval_duration\":1}}");
        }
    }
    s.into_bytes()
}

/// An Anthropic stream with one tool call whose JSON input (`bytes` long, a string
/// array: [`string_array_args`]) arrives in fragments of `fragment` bytes.
pub fn tool_args_stream(bytes: usize, fragment: usize) -> Vec<u8> {
    tool_call_stream(Dialect::AnthropicMessages, &string_array_args(bytes), fragment).unwrap_or_default()
}

/// A stream of one tool call whose JSON arguments `args` (ASCII, so that any cut leaves
/// valid UTF-8) arrive in fragments of `fragment` bytes, in the documented streaming
/// shape of `dialect`:
///
/// - Anthropic Messages: a `tool_use` block, one `input_json_delta` per fragment, a
///   stop reason `tool_use`;
/// - Chat Completions: the first chunk names the call, each later one carries
///   `tool_calls[0].function.arguments`, then `finish_reason: "tool_calls"`, the usage
///   chunk and `[DONE]`.
///
/// `None` for the other dialects.
pub fn tool_call_stream(dialect: Dialect, args: &str, fragment: usize) -> Option<Vec<u8>> {
    let fragments = args.len().div_ceil(fragment.max(1));
    let mut s = String::with_capacity(fragments * 260 + 1024);
    match dialect {
        Dialect::AnthropicMessages => {
            s.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
            s.push_str("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_bench\",\"name\":\"store\",\"input\":{}}}\n\n");
            for escaped in escaped_fragments(args, fragment) {
                let _ = write!(s, "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{escaped}}}}}\n\n");
            }
            s.push_str("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n");
            s.push_str("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":100}}\n\n");
            s.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
        }
        Dialect::OpenaiCompletions => {
            let head = "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-2024-08-06\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,\"delta\":";
            let tail = ",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n";
            let _ = write!(s, "data: {head}{{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{{\"index\":0,\"id\":\"call_bench\",\"type\":\"function\",\"function\":{{\"name\":\"store\",\"arguments\":\"\"}}}}]}}{tail}");
            for escaped in escaped_fragments(args, fragment) {
                let _ = write!(
                    s,
                    "data: {head}{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{escaped}}}}}]}}{tail}"
                );
            }
            let _ = write!(
                s,
                "data: {head}{{}},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}}],\"usage\":null}}\n\n"
            );
            s.push_str("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":100,\"total_tokens\":110}}\n\n");
            s.push_str("data: [DONE]\n\n");
        }
        Dialect::Custom(_) => unreachable!("built-in wires only"),
        Dialect::OpenaiResponses | Dialect::GoogleGemini | Dialect::OllamaChat => return None,
    }
    Some(s.into_bytes())
}

/// Tool arguments of many small values: a JSON array of `"ab"` strings, `bytes` long
/// (at least the 6 bytes of one element). Decoded, it is a tree of `bytes / 5` nodes.
pub fn string_array_args(bytes: usize) -> String {
    let mut args = String::with_capacity(bytes + 8);
    args.push('[');
    while args.len() + 5 < bytes {
        args.push_str("\"ab\",");
    }
    args.push_str("\"ab\"]");
    args
}

/// Tool arguments of one long value: `{"text":"abcd…"}`, `bytes` long (at least 11), the
/// string of lower-case letters (nothing to escape). Decoded, it is one string.
pub fn long_string_args(bytes: usize) -> String {
    let mut args = String::with_capacity(bytes.max(11));
    args.push_str("{\"text\":\"");
    let letters = b"abcdefghijklmnopqrstuvwxyz";
    args.extend((0..bytes.saturating_sub(11)).map(|i| char::from(letters[i % letters.len()])));
    args.push_str("\"}");
    args
}

/// `args` cut into pieces of `fragment` bytes, each as a JSON string literal.
fn escaped_fragments(args: &str, fragment: usize) -> impl Iterator<Item = String> + '_ {
    args.as_bytes().chunks(fragment.max(1)).map(|piece| {
        // The arguments are ASCII, so any split is a valid UTF-8 string.
        let piece = std::str::from_utf8(piece).unwrap_or_default();
        serde_json::to_string(piece).unwrap_or_default()
    })
}
