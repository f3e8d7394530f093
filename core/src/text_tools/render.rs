//! A request under a text protocol, made from the one a native-tools request would be: the
//! tools leave the request's `tools` field for the system prompt (the protocol's rules
//! and each tool's documentation), the assistant's past calls become text in the
//! protocol's format, and tool results become text in a user message. One function,
//! [`build_request`], which every machine calls instead of the dialect's own, so the
//! decision is taken in one place.
//!
//! Tool results are written as the protocol's [`TextProtocol::format_result`] says; by
//! default (this module's [`format_result`]) as
//!
//! ```text
//! <tool_result tool="get_weather">
//! Sunny, 21 °C
//! </tool_result>
//! ```
//!
//! with `status="error"` after the tool's name when the tool failed, one element per
//! result, in the order of the calls; an attachment in a result is named by its media
//! type (`[attachment: image/png]`), since a text protocol carries text.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::prompt::{render, tools_doc, PromptParts, DEFAULT_TEMPLATE};
use super::{TextProtocol, ToolProtocol};
use crate::data::error::RequestError;
use crate::data::message::{Block, Context, Message, Role, ToolResult, ToolResultContent, ToolSpec};
use crate::data::model::Model;
use crate::data::options::{Options, ToolChoice};
use crate::data::provider::Provider;
use crate::wire::dialect::{BuiltRequest, RequestSpec};

/// The protocol a request uses: the option's, else the model's, else the provider's,
/// else native.
pub(crate) fn protocol_for(model: &Model, provider: &Provider, options: &Options) -> ToolProtocol {
    options
        .tool_protocol
        .clone()
        .or_else(|| model.tool_protocol.clone())
        .or_else(|| provider.tool_protocol.clone())
        .unwrap_or_default()
}

/// Builds `spec`'s request: as the dialect does for native tools, or rendered for the
/// text protocol the options (or the model) name. Returns the protocol with it, for the
/// stream's parser.
pub(crate) fn build_request(
    spec: &RequestSpec<'_>,
) -> Result<(BuiltRequest, Option<Arc<dyn TextProtocol>>), RequestError> {
    let Some(protocol) = protocol_for(spec.model, spec.provider, spec.options).text() else {
        return Ok((spec.model.dialect.build_request(spec)?, None));
    };
    let (context, options) = render_request(&*protocol, spec.context, spec.options)?;
    let rendered = RequestSpec { context: &context, options: &options, ..*spec };
    Ok((spec.model.dialect.build_request(&rendered)?, Some(protocol)))
}

/// The context and options of a text-protocol request (see the module's doc).
pub(crate) fn render_request(
    protocol: &dyn TextProtocol,
    context: &Context,
    options: &Options,
) -> Result<(Context, Options), RequestError> {
    let tools: Vec<(ToolSpec, Vec<Map<String, Value>>)> =
        context.tools.iter().map(|t| (t.clone(), examples(t))).collect();
    let mut user = String::new();
    // A tool choice cannot be enforced without native tools: it becomes an instruction.
    match &options.tool_choice {
        Some(ToolChoice::Tool(name)) => user = format!("Call the tool `{name}` now."),
        Some(ToolChoice::Required) if !tools.is_empty() => user = "Call one of the tools now.".into(),
        Some(ToolChoice::None) => user = "Do not call any tool now.".into(),
        _ => {}
    }
    let parts = PromptParts {
        system: context.system.clone().unwrap_or_default(),
        rules: if tools.is_empty() { String::new() } else { protocol.rules() },
        tools: tools_doc(protocol, &tools),
        user,
    };
    let system = render(DEFAULT_TEMPLATE, &parts).map_err(|e| RequestError::Unsupported { message: e.to_string() })?;
    let messages = context.messages.iter().map(|m| render_message(protocol, m)).collect();
    let context = Context { system: Some(system).filter(|s| !s.is_empty()), messages, tools: Vec::new() };
    let options = Options { tool_choice: None, tool_protocol: Some(ToolProtocol::Native), ..options.clone() };
    Ok((context, options))
}

/// A tool's own example calls: the `examples` of its input schema (JSON Schema's keyword
/// for example instances), those that are objects.
pub(crate) fn examples(tool: &ToolSpec) -> Vec<Map<String, Value>> {
    let listed = tool.input_schema.get("examples").and_then(Value::as_array);
    listed.map(|e| e.iter().filter_map(|v| v.as_object().cloned()).collect()).unwrap_or_default()
}

/// One message with its calls and results as text; adjacent text joined into one block.
pub(crate) fn render_message(protocol: &dyn TextProtocol, message: &Message) -> Message {
    let mut content: Vec<Block> = Vec::with_capacity(message.content.len());
    let mut text = String::new();
    let flush = |text: &mut String, content: &mut Vec<Block>| {
        if !text.is_empty() {
            content.push(Block::text(std::mem::take(text)));
        }
    };
    for block in &message.content {
        match block {
            Block::Text(t) => text.push_str(&t.text),
            // A call that could not be read goes back as the model wrote it, so that the
            // model sees its mistake beside the error result that names it.
            Block::ToolUse(call) => match call.invalid.as_ref().and_then(|invalid| invalid.raw.as_deref()) {
                Some(raw) => text.push_str(raw),
                None => {
                    let arguments = match &call.input {
                        Value::Object(map) => map.clone(),
                        _ => Map::new(),
                    };
                    text.push_str(&protocol.format_call(&call.name, &arguments));
                }
            },
            Block::ToolResult(result) => {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&protocol.format_result(result));
            }
            other => {
                flush(&mut text, &mut content);
                content.push(other.clone());
            }
        }
    }
    flush(&mut text, &mut content);
    if content.is_empty() && message.role == Role::Assistant {
        content.push(Block::text(""));
    }
    Message { content, ..message.clone() }
}

/// One tool result as text (see the module's doc).
pub(crate) fn format_result(result: &ToolResult) -> String {
    let status = if result.is_error { " status=\"error\"" } else { "" };
    let mut body = String::new();
    for part in &result.content {
        if !body.is_empty() {
            body.push('\n');
        }
        match part {
            ToolResultContent::Text { text } => body.push_str(text),
            ToolResultContent::Attachment(attachment) => {
                body.push_str(&format!("[attachment: {}]", attachment.media_type))
            }
        }
    }
    format!("<tool_result tool=\"{}\"{status}>\n{body}\n</tool_result>\n", result.name)
}
