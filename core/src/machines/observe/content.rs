//! The conventions' JSON for captured content (`gen_ai.input.messages`,
//! `gen_ai.output.messages`, `gen_ai.system_instructions`, `gen_ai.tool.definitions`),
//! written straight from the messages: borrowed views serialized once, no JSON tree
//! built and no schema or argument cloned (capture is opt-in, but a long conversation is
//! written again at every step).

use serde::Serialize;
use serde_json::Value;

use super::{finish_reason, InferenceContent};
use crate::data::message::{Block, Context, Message, Role, Source, ToolResultContent};
use crate::data::response::StopReason;

/// A message: `{"role", "parts", "finish_reason"?}`.
#[derive(Serialize)]
struct MessageView<'a> {
    role: &'static str,
    parts: Vec<Part<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_reason: Option<&'static str>,
}

/// A part, tagged by `type`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { content: &'a str },
    Reasoning { content: &'a str },
    ToolCall { id: &'a str, name: &'a str, arguments: &'a Value },
    ToolCallResponse { id: &'a str, response: Vec<Self> },
    Blob { modality: &'a str, mime_type: &'a str, content: &'a str },
    Uri { modality: &'a str, mime_type: &'a str, uri: &'a str },
}

/// A tool offered: `{"type": "function", "name", "description", "parameters"}`.
#[derive(Serialize)]
struct ToolView<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// An inference's input, from the context its request was built from.
pub(super) fn input(context: &Context) -> InferenceContent {
    let system = context.system.as_deref().map(|text| [Part::Text { content: text }]);
    let tools: Vec<ToolView<'_>> = context
        .tools
        .iter()
        .map(|t| ToolView {
            r#type: "function",
            name: &t.name,
            description: &t.description,
            parameters: &t.input_schema,
        })
        .collect();
    InferenceContent {
        input_messages: messages(&context.messages, None),
        system_instructions: system.map(|parts| to_json(&parts)),
        tool_definitions: (!tools.is_empty()).then(|| to_json(&tools)),
    }
}

/// Messages in the conventions' shape; an output message with its `finish_reason`.
pub(super) fn messages(messages: &[Message], finish: Option<StopReason>) -> String {
    let views: Vec<MessageView<'_>> = messages
        .iter()
        .map(|message| {
            let results = message.content.iter().all(|b| matches!(b, Block::ToolResult(_)));
            let role = match message.role {
                Role::User if results && !message.content.is_empty() => "tool",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            let parts = message.content.iter().map(part).collect();
            MessageView { role, parts, finish_reason: finish.map(finish_reason) }
        })
        .collect();
    to_json(&views)
}

fn part(block: &Block) -> Part<'_> {
    match block {
        Block::Text(t) => Part::Text { content: &t.text },
        Block::Thinking(t) => Part::Reasoning { content: &t.text },
        Block::Attachment(a) => attachment(&a.source, &a.media_type),
        Block::ToolUse(u) => Part::ToolCall { id: &u.id, name: &u.name, arguments: &u.input },
        Block::ToolResult(r) => {
            let response = r
                .content
                .iter()
                .map(|c| match c {
                    ToolResultContent::Text { text } => Part::Text { content: text },
                    ToolResultContent::Attachment(a) => attachment(&a.source, &a.media_type),
                })
                .collect();
            Part::ToolCallResponse { id: &r.tool_use_id, response }
        }
    }
}

fn attachment<'a>(source: &'a Source, mime_type: &'a str) -> Part<'a> {
    let modality = mime_type.split('/').next().unwrap_or("file");
    match source {
        Source::Base64 { data } => Part::Blob { modality, mime_type, content: data },
        Source::Url { url } => Part::Uri { modality, mime_type, uri: url },
    }
}

/// Serialized: these views hold strings and JSON values only, which always serialize.
fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
