//! The conversation as Responses input items.
//!
//! User messages become `message` items (`input_text`, `input_image`, `input_file`
//! parts); tool results become `function_call_output` items. Assistant messages become
//! `reasoning`, `message` (`output_text` parts) and `function_call` items in block order;
//! item ids and encrypted reasoning are sent only for messages this dialect produced.

use serde_json::{json, Value};

use super::NAME;
use crate::data::message::{
    Attachment, Block, Message, Role, Source, Thinking, ToolResult, ToolResultContent, ToolUse,
};
use crate::data::response::Warning;

/// Every message as input items, in order.
pub(super) fn input_items(messages: &[Message], warnings: &mut Vec<Warning>) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        match message.role {
            Role::User => user_items(message, &mut items, warnings),
            Role::Assistant => assistant_items(message, &mut items, warnings),
        }
    }
    items
}

/// Adds a warning unless the same one is already there (one per kind of dropped content).
pub(super) fn warn_once(warnings: &mut Vec<Warning>, warning: Warning) {
    if !warnings.contains(&warning) {
        warnings.push(warning);
    }
}

fn user_items(message: &Message, items: &mut Vec<Value>, warnings: &mut Vec<Warning>) {
    let mut content = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(t) if t.text.is_empty() => {}
            Block::Text(t) => content.push(json!({ "type": "input_text", "text": t.text })),
            Block::Attachment(a) => content.push(attachment_part(a)),
            Block::ToolResult(result) => {
                // Items keep their order: text before a result stays before it.
                flush_user_message(&mut content, items);
                items.push(tool_output(result));
            }
            Block::ToolUse(_) => warn_once(warnings, Warning::unsupported("a tool call in a user message", NAME)),
            Block::Thinking(_) => warn_once(warnings, Warning::unsupported("a thinking block in a user message", NAME)),
        }
    }
    flush_user_message(&mut content, items);
}

fn flush_user_message(content: &mut Vec<Value>, items: &mut Vec<Value>) {
    if !content.is_empty() {
        items.push(json!({ "type": "message", "role": "user", "content": std::mem::take(content) }));
    }
}

fn assistant_items(message: &Message, items: &mut Vec<Value>, warnings: &mut Vec<Warning>) {
    // Signatures and item ids from another dialect mean nothing here (or worse, would be
    // rejected), so only this dialect's own messages send them back.
    let own = message.is_from_dialect(NAME);
    let start = items.len();
    for block in &message.content {
        match block {
            Block::Thinking(thinking) => {
                // Without its encrypted content a reasoning item can only be looked up in
                // server storage, which `store: false` does not have: drop it.
                if let (true, Some(encrypted)) = (own, &thinking.signature) {
                    items.push(reasoning_item(thinking, encrypted));
                }
            }
            Block::Text(t) if t.text.is_empty() => {}
            Block::Text(t) => {
                let id = if own { t.signature.as_deref() } else { None };
                push_output_text(items, start, id, &t.text);
            }
            Block::ToolUse(call) => items.push(function_call(call, own)),
            Block::ToolResult(result) => items.push(tool_output(result)),
            Block::Attachment(_) => {
                warn_once(warnings, Warning::unsupported("an attachment in an assistant message", NAME))
            }
        }
    }
    // The API rejects a reasoning item that is not followed by the item it led to
    // ("provided without its required following item"), as after a response cut short.
    while items.len() > start && items.last().is_some_and(|i| i["type"] == "reasoning") {
        items.pop();
    }
}

fn reasoning_item(thinking: &Thinking, encrypted: &str) -> Value {
    let summary: Vec<Value> = if thinking.text.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "type": "summary_text", "text": thinking.text })]
    };
    let mut item = json!({ "type": "reasoning", "summary": summary, "encrypted_content": encrypted });
    if let Some(id) = &thinking.id {
        item["id"] = json!(id);
    }
    item
}

/// Appends text to the assistant message item just before it when that item has the same
/// id (consecutive parts of one message item), else starts a new message item.
fn push_output_text(items: &mut Vec<Value>, start: usize, id: Option<&str>, text: &str) {
    // With an id the item is the API's own output message (which has `status` and
    // `annotations`); without one it is a plain assistant message, as Codex sends it.
    let part = match id {
        Some(_) => json!({ "type": "output_text", "text": text, "annotations": [] }),
        None => json!({ "type": "output_text", "text": text }),
    };
    if items.len() > start {
        if let Some(last) = items.last_mut() {
            let same_item = last["type"] == "message" && last.get("id").and_then(Value::as_str) == id;
            if let (true, Some(content)) = (same_item, last.get_mut("content").and_then(Value::as_array_mut)) {
                content.push(part);
                return;
            }
        }
    }
    let mut item = json!({ "type": "message", "role": "assistant", "content": [part] });
    if let Some(id) = id {
        item["id"] = json!(id);
        item["status"] = json!("completed");
    }
    items.push(item);
}

fn function_call(call: &ToolUse, own: bool) -> Value {
    let arguments = match &call.input {
        // Input that was not valid JSON is kept raw as a string: send the raw text back.
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_string(),
        input => input.to_string(),
    };
    let mut item = json!({ "type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments });
    if let (true, Some(id)) = (own, &call.signature) {
        item["id"] = json!(id);
    }
    item
}

/// A tool result. There is no error flag, so a failure says so in its text.
fn tool_output(result: &ToolResult) -> Value {
    let has_attachments = result.content.iter().any(|c| matches!(c, ToolResultContent::Attachment(_)));
    let output = if has_attachments {
        // Since 2025-09 `output` may also be a list of input_text/input_image/input_file parts.
        let mut parts = Vec::new();
        let mut marked = !result.is_error;
        for part in &result.content {
            match part {
                ToolResultContent::Text { text } => {
                    let text = if marked { text.clone() } else { error_text(text) };
                    marked = true;
                    parts.push(json!({ "type": "input_text", "text": text }));
                }
                ToolResultContent::Attachment(a) => {
                    if !marked {
                        parts.push(json!({ "type": "input_text", "text": error_text("") }));
                        marked = true;
                    }
                    parts.push(attachment_part(a));
                }
            }
        }
        Value::Array(parts)
    } else if result.is_error {
        json!(error_text(&result.text_content()))
    } else {
        json!(result.text_content())
    };
    json!({ "type": "function_call_output", "call_id": result.tool_use_id, "output": output })
}

fn error_text(text: &str) -> String {
    if text.is_empty() {
        "Error".to_string()
    } else if text.trim_start().get(..5).is_some_and(|w| w.eq_ignore_ascii_case("error")) {
        text.to_string()
    } else {
        format!("Error: {text}")
    }
}

fn attachment_part(attachment: &Attachment) -> Value {
    let url = match &attachment.source {
        Source::Base64 { data } => format!("data:{};base64,{data}", attachment.media_type),
        Source::Url { url } => url.clone(),
    };
    if attachment.is_image() {
        return json!({ "type": "input_image", "image_url": url, "detail": "auto" });
    }
    match &attachment.source {
        Source::Base64 { .. } => {
            let name = attachment.name.clone().unwrap_or_else(|| default_file_name(&attachment.media_type));
            json!({ "type": "input_file", "filename": name, "file_data": url })
        }
        Source::Url { .. } => {
            let mut part = json!({ "type": "input_file", "file_url": url });
            if let Some(name) = &attachment.name {
                part["filename"] = json!(name);
            }
            part
        }
    }
}

/// Inline files need a name; the API reads the type from it.
fn default_file_name(media_type: &str) -> String {
    match media_type {
        "application/pdf" => "document.pdf".into(),
        "text/plain" => "document.txt".into(),
        _ => "file".into(),
    }
}
