//! Converting the conversation into Anthropic `messages` and content blocks.
//!
//! Rules from the Messages API reference:
//! - text blocks must not be empty; a message with no blocks left is skipped;
//! - images: `{"type": "image", "source": {"type": "base64" | "url", ..}}` (jpeg, png, gif, webp);
//!   PDFs: `{"type": "document", "source": ..}`; plain text documents use a `text` source;
//! - `tool_result` blocks come first in their user message, before any other content;
//! - `thinking` (with its signature) and `redacted_thinking` go back only to this dialect,
//!   and only signed: the API rejects thinking it did not sign;
//! - tool use ids must match `^[a-zA-Z0-9_-]+$`; ids from other providers are mapped
//!   (the same way for the call and its result);
//! - a final assistant message (a prefill) must not end with whitespace.

use serde_json::{json, Map, Value};

use super::NAME;
use crate::data::message::{Attachment, Block, Message, Role, Source, ToolResult, ToolResultContent, ToolUse};
use crate::data::options::CacheRetention;
use crate::data::response::Warning;

/// Image types the API accepts.
const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// A `cache_control` breakpoint for the retention asked for.
pub(super) fn cache_control(retention: CacheRetention) -> Value {
    match retention {
        CacheRetention::Short => json!({"type": "ephemeral"}),
        CacheRetention::Long => json!({"type": "ephemeral", "ttl": "1h"}),
    }
}

/// Converts every message; warnings name what could not be sent.
pub(super) fn convert_messages(messages: &[Message], warnings: &mut Vec<Warning>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        let own = message.is_from_dialect(NAME);
        let mut results = Vec::new();
        let mut blocks = Vec::with_capacity(message.content.len());
        for block in &message.content {
            match block {
                Block::ToolResult(result) if message.role == Role::User => {
                    results.push(tool_result_block(result, warnings));
                }
                _ => blocks.extend(content_block(block, message.role, own, warnings)),
            }
        }
        results.append(&mut blocks);
        if results.is_empty() {
            continue;
        }
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        out.push(json!({"role": role, "content": results}));
    }
    trim_prefill(&mut out);
    out
}

fn content_block(block: &Block, role: Role, own: bool, warnings: &mut Vec<Warning>) -> Option<Value> {
    match block {
        Block::Text(t) if t.text.is_empty() => None,
        Block::Text(t) => Some(json!({"type": "text", "text": t.text})),
        Block::Thinking(t) => {
            if role != Role::Assistant || !own {
                // Foreign reasoning cannot be verified by Anthropic; the answer it led to stays.
                return None;
            }
            if let Some(data) = &t.redacted {
                return Some(json!({"type": "redacted_thinking", "data": data}));
            }
            let signature = t.signature.as_deref().filter(|s| !s.is_empty())?;
            Some(json!({"type": "thinking", "thinking": t.text, "signature": signature}))
        }
        Block::Attachment(a) => attachment_block(a, warnings),
        Block::ToolUse(call) => Some(tool_use_block(call, warnings)),
        Block::ToolResult(result) => Some(tool_result_block(result, warnings)),
    }
}

fn tool_use_block(call: &ToolUse, warnings: &mut Vec<Warning>) -> Value {
    let input = match &call.input {
        Value::Object(_) => call.input.clone(),
        Value::Null => Value::Object(Map::new()),
        other => {
            // Invalid JSON from a cut stream is kept as a string; the API needs an object.
            warnings.push(Warning {
                code: "tool_input_replaced".into(),
                message: format!("tool call {} had non-object input {other}; sent as {{}}", call.id),
            });
            Value::Object(Map::new())
        }
    };
    json!({"type": "tool_use", "id": tool_use_id(&call.id), "name": call.name, "input": input})
}

fn tool_result_block(result: &ToolResult, warnings: &mut Vec<Warning>) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), "tool_result".into());
    block.insert("tool_use_id".into(), tool_use_id(&result.tool_use_id).into());
    let mut parts: Vec<Value> = Vec::with_capacity(result.content.len());
    for part in &result.content {
        match part {
            ToolResultContent::Text { text } if text.is_empty() => {}
            ToolResultContent::Text { text } => parts.push(json!({"type": "text", "text": text})),
            ToolResultContent::Attachment(a) => parts.extend(attachment_block(a, warnings)),
        }
    }
    match parts.as_mut_slice() {
        [] => {}
        // The common case, a single text, in the compact string form.
        [Value::Object(only)] if only.get("type").and_then(Value::as_str) == Some("text") => {
            block.insert("content".into(), only.remove("text").unwrap_or_default());
        }
        _ => {
            block.insert("content".into(), Value::Array(parts));
        }
    }
    if result.is_error {
        block.insert("is_error".into(), Value::Bool(true));
    }
    Value::Object(block)
}

fn attachment_block(a: &Attachment, warnings: &mut Vec<Warning>) -> Option<Value> {
    let media_type = a.media_type.to_ascii_lowercase();
    let source = match (&a.source, media_type.as_str()) {
        (Source::Base64 { data }, _) if IMAGE_TYPES.contains(&media_type.as_str()) => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        (Source::Base64 { data }, "application/pdf") => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        (Source::Url { url }, m) if IMAGE_TYPES.contains(&m) || m == "application/pdf" => {
            json!({"type": "url", "url": url})
        }
        (Source::Base64 { data }, m) if m.starts_with("text/") => match decode_base64_utf8(data) {
            Some(text) => json!({"type": "text", "media_type": "text/plain", "data": text}),
            None => {
                warnings.push(Warning::unsupported(format!("a {m} attachment that is not base64 UTF-8"), NAME));
                return None;
            }
        },
        (_, m) => {
            warnings.push(Warning::unsupported(format!("a {m} attachment"), NAME));
            return None;
        }
    };
    let kind = if media_type.starts_with("image/") { "image" } else { "document" };
    let mut block = json!({"type": kind, "source": source});
    if let (Some(name), Value::Object(map), "document") = (&a.name, &mut block, kind) {
        map.insert("title".into(), Value::String(name.clone()));
    }
    Some(block)
}

/// Maps a tool call id onto the characters the API accepts, deterministically, so a
/// call and its result still match.
fn tool_use_id(id: &str) -> String {
    if id.is_empty() {
        return "toolu_unknown".into();
    }
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// Trailing whitespace in a final assistant message is rejected by the API.
fn trim_prefill(messages: &mut [Value]) {
    let Some(last) = messages.last_mut() else { return };
    if last.get("role").and_then(Value::as_str) != Some("assistant") {
        return;
    }
    let Some(Value::Object(block)) = last.get_mut("content").and_then(Value::as_array_mut).and_then(|c| c.last_mut())
    else {
        return;
    };
    if let Some(Value::String(text)) = block.get_mut("text") {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
    }
}

/// Decodes standard or URL-safe base64 (padding optional, whitespace ignored) into UTF-8.
fn decode_base64_utf8(data: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(data.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in data.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' | b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_base64_text() {
        assert_eq!(decode_base64_utf8("aGVsbG8gd29ybGQ=").as_deref(), Some("hello world"));
        assert_eq!(decode_base64_utf8("w6k=").as_deref(), Some("é"));
        assert_eq!(decode_base64_utf8("a*b"), None);
    }

    #[test]
    fn maps_foreign_tool_ids() {
        assert_eq!(tool_use_id("call_1|fc_2"), "call_1_fc_2");
        assert_eq!(tool_use_id("toolu_01A"), "toolu_01A");
    }
}
