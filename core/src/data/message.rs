//! The conversation data model: messages, content blocks and the context of a request.
//!
//! Every type here is plain data and serde-serializable. Opaque data that a provider
//! needs back on the next turn (thinking signatures, redacted thinking, OpenAI
//! `encrypted_content`, Gemini `thoughtSignature`) travels on the block it came with,
//! and [`Message::origin`] records which dialect produced it, so a request builder sends
//! it back only to the dialect that understands it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The application or its user (tool results travel in user messages).
    User,
    /// The model.
    Assistant,
}

/// Where an assistant message came from: the dialect (wire format), provider and model.
///
/// Request builders compare `dialect` with their own name before sending opaque
/// round-trip data (signatures, encrypted reasoning) back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// Dialect name, e.g. `anthropic_messages`.
    pub dialect: String,
    /// Provider id, e.g. `anthropic`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Model id as the provider reported it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Content blocks in order.
    pub content: Vec<Block>,
    /// The dialect that produced this message, for assistant messages decoded from a stream.
    /// Boxed: three strings that half the messages lack would double every message's size
    /// (a long conversation holds many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Box<Origin>>,
    /// Provider-private data for opaque round trips (for example a Responses message
    /// item id), keyed by a name the owning dialect chooses.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub private: BTreeMap<String, Value>,
}

impl Message {
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![Block::text(text)])
    }

    /// An assistant message with one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![Block::text(text)])
    }

    /// A message with the given role and blocks.
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Self { role, content, origin: None, private: BTreeMap::new() }
    }

    /// The concatenated text of all text blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let Block::Text(t) = block {
                out.push_str(&t.text);
            }
        }
        out
    }

    /// The tool calls in this message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUse> {
        self.content.iter().filter_map(|b| match b {
            Block::ToolUse(t) => Some(t),
            _ => None,
        })
    }

    /// True when this message was produced by the named dialect, so its opaque
    /// round-trip data may be sent back to it.
    pub fn is_from_dialect(&self, dialect: &str) -> bool {
        self.origin.as_ref().is_some_and(|o| o.dialect == dialect)
    }
}

/// A content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text(Text),
    /// Model reasoning, possibly signed or redacted.
    Thinking(Thinking),
    /// An image, PDF or other file.
    Attachment(Attachment),
    /// A tool call made by the model.
    ToolUse(ToolUse),
    /// The result of a tool call, sent back by the application.
    ToolResult(ToolResult),
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(Text { text: text.into(), signature: None })
    }
}

/// A text block.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Text {
    /// The text.
    pub text: String,
    /// Opaque signature attached to this part (Gemini `thoughtSignature`; Responses message item id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A reasoning block.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Thinking {
    /// Visible reasoning text or summary (empty for redacted thinking).
    pub text: String,
    /// Opaque signature (Anthropic `signature`, Responses `encrypted_content`, Gemini `thoughtSignature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Encrypted reasoning the provider withheld (Anthropic `redacted_thinking.data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<String>,
    /// Provider item id (Responses reasoning item `id`), needed to send the item back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Where an attachment's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Inline base64 data (no `data:` prefix).
    Base64 {
        /// Base64 text.
        data: String,
    },
    /// A URL the provider fetches itself.
    Url {
        /// The URL.
        url: String,
    },
}

/// An image, PDF or other file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Where the bytes are.
    pub source: Source,
    /// MIME type, e.g. `image/png` or `application/pdf`.
    pub media_type: String,
    /// Optional file name (some providers show it to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Attachment {
    /// True for `image/*` media types.
    pub fn is_image(&self) -> bool {
        self.media_type.starts_with("image/")
    }
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    /// Call id, unique within the conversation; tool results refer to it.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Parsed input arguments.
    pub input: Value,
    /// Opaque signature attached to the call (Gemini `thoughtSignature`; Responses `function_call` item id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Set when the call cannot run whatever its input holds: its arguments were not
    /// JSON, or a text protocol's parser found the call malformed. Such a call never
    /// reaches a handler; the model is answered with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<Box<InvalidCallInput>>,
}

/// Why a tool call cannot run, kept with the call (see [`ToolUse::invalid`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidCallInput {
    /// What was wrong, in words for the model.
    pub reason: String,
    /// What the model wrote, as it wrote it (a text protocol's span, delimiters
    /// included): sent back as it was, not as a clean call, so the model sees its
    /// mistake. `None` for a native call, whose arguments the input holds as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

impl ToolUse {
    /// A call of `name` with `input`, its id `id`.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self { id: id.into(), name: name.into(), input, signature: None, invalid: None }
    }
}

/// Content of a tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultContent {
    /// Text output.
    Text {
        /// The text.
        text: String,
    },
    /// An image or file output.
    Attachment(Attachment),
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolUse::id`] this answers.
    pub tool_use_id: String,
    /// The tool's name (Gemini matches results by name).
    pub name: String,
    /// Output content.
    pub content: Vec<ToolResultContent>,
    /// True when the tool failed; the model sees the content as an error.
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResult {
    /// A successful text result.
    pub fn text(tool_use_id: impl Into<String>, name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            name: name.into(),
            content: vec![ToolResultContent::Text { text: text.into() }],
            is_error: false,
        }
    }

    /// An error result with a message for the model.
    pub fn error(tool_use_id: impl Into<String>, name: impl Into<String>, message: impl Into<String>) -> Self {
        Self { is_error: true, ..Self::text(tool_use_id, name, message) }
    }

    /// All text content joined with newlines.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let ToolResultContent::Text { text } = part {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

/// What the model is told about a tool: name, description and input JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// Everything a request says besides options: system prompt, history and tools.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Context {
    /// System prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
}

impl Context {
    /// A context with a single user message.
    pub fn from_prompt(text: impl Into<String>) -> Self {
        Self { messages: vec![Message::user(text)], ..Self::default() }
    }
}

impl From<&str> for Context {
    fn from(text: &str) -> Self {
        Self::from_prompt(text)
    }
}

impl From<String> for Context {
    fn from(text: String) -> Self {
        Self::from_prompt(text)
    }
}

impl From<Vec<Message>> for Context {
    fn from(messages: Vec<Message>) -> Self {
        Self { messages, ..Self::default() }
    }
}
