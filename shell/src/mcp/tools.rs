//! A server's tools as omni tools: what the model is told (a name valid for every
//! provider, prefixed by the server's name when asked), the input validated against the
//! tool's `inputSchema` before the call as every omni tool's is, and the result mapped
//! to omni's tool output.

use std::collections::BTreeSet;
use std::sync::Arc;

use omni_protocol::mcp::{CallError, Content, McpTool, ResourceBody, ToolCallResult, ToolRejection};
use omni_protocol::schema::{JsonSchemaValidator, Validator};
use omni_protocol::{Attachment, Source, ToolError, ToolOutput, ToolResultContent};
use serde_json::Value;

use super::{McpFailure, McpServer};
use crate::AsyncTool;

/// The longest tool name every provider takes (OpenAI's and Gemini's limit).
pub const MAX_TOOL_NAME: usize = 64;

/// Why a server's tool is not offered as an omni tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTool {
    /// Its name on the server.
    pub name: String,
    /// Why.
    pub reason: String,
    /// The kind of reason, as the connection's warnings say it.
    pub kind: ToolRejection,
}

/// A listed tool made ready to offer: its name for the model, its description, its
/// compiled validator. Holds no handle on the connection (the cache of them is kept by
/// the connection's handle, which tools hold in turn).
#[derive(Clone)]
pub(crate) struct Prepared {
    name: String,
    remote: String,
    description: String,
    validator: Arc<dyn Validator>,
}

/// The tools of one listing, prepared once (compiling 10,000 schemas is not free), and
/// the ones left out with their reasons.
#[derive(Clone, Default)]
pub(crate) struct PreparedList {
    pub(crate) version: u64,
    tools: Vec<Prepared>,
    pub(crate) skipped: Vec<SkippedTool>,
}

impl PreparedList {
    /// Prepares `list` (of `version`), with names prefixed by `prefix` if given.
    pub(crate) fn new(version: u64, prefix: Option<&str>, list: &[McpTool]) -> Self {
        let mut tools = Vec::with_capacity(list.len());
        let mut skipped = Vec::new();
        let mut names = BTreeSet::new();
        let mut skip = |name: &str, kind: ToolRejection, reason: String| {
            skipped.push(SkippedTool { name: name.to_string(), reason, kind });
        };
        for tool in list {
            let name = model_name(prefix, &tool.name);
            if name.is_empty() {
                skip(&tool.name, ToolRejection::NoName, "its name has no usable character".into());
                continue;
            }
            if !names.insert(name.clone()) {
                skip(
                    &tool.name,
                    ToolRejection::Duplicate,
                    format!("its name for the model, {name:?}, is another tool's too"),
                );
                continue;
            }
            // One the validator refuses drops this tool, never the list.
            let validator = match JsonSchemaValidator::new(tool.input_schema.clone()) {
                Ok(validator) => Arc::new(validator) as Arc<dyn Validator>,
                Err(error) => {
                    skip(&tool.name, ToolRejection::BadInputSchema, format!("its inputSchema: {error}"));
                    continue;
                }
            };
            let description = tool.description.clone().or_else(|| tool.title.clone()).unwrap_or_default();
            tools.push(Prepared { name, remote: tool.name.clone(), description, validator });
        }
        Self { version, tools, skipped }
    }

    /// The omni tools, each calling its tool on `server`.
    pub(crate) fn tools(&self, server: &McpServer) -> Vec<AsyncTool> {
        // The connection's own deadline (reset by progress, capped by its hard maximum)
        // decides how long a call may take, not omni's default tool limit.
        let limit = server.max_request_time();
        let tool = |prepared: &Prepared| {
            let (owner, remote) = (server.clone(), prepared.remote.clone());
            let handler = move |input: Value| {
                let (server, remote) = (owner.clone(), remote.clone());
                async move { to_output(server.call_tool(&remote, input).await, server.name()) }
            };
            let (name, description) = (prepared.name.clone(), prepared.description.clone());
            AsyncTool::with_validator::<Value, _, _, _>(name, description, prepared.validator.clone(), handler)
                .timeout(limit)
        };
        self.tools.iter().map(tool).collect()
    }
}

/// The tool's name for the model: `{prefix}__{name}` when prefixed, characters other
/// than ASCII letters, digits, `_` and `-` made `_`, at most [`MAX_TOOL_NAME`] long.
pub(crate) fn model_name(prefix: Option<&str>, name: &str) -> String {
    let full = match prefix {
        Some(prefix) => format!("{prefix}__{name}"),
        None => name.to_string(),
    };
    full.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(MAX_TOOL_NAME)
        .collect()
}

/// A call's result as omni's tool output: text and images go to the model; the
/// structured result too when the content does not carry it; a result the tool marks
/// as an error is an error result; a failed call is one naming the server.
pub(crate) fn to_output(result: Result<ToolCallResult, McpFailure>, server: &str) -> Result<ToolOutput, ToolError> {
    let result = match result {
        Ok(result) => result,
        Err(McpFailure::Call(CallError::Rpc(error))) => {
            return Err(ToolError(format!("the MCP server {server:?} refused the call: {}", error.message)));
        }
        Err(failure) => return Err(ToolError(format!("the MCP server {server:?}: {failure}"))),
    };
    let mut content: Vec<ToolResultContent> = result.content.into_iter().map(block).collect();
    let has_text = content.iter().any(|c| matches!(c, ToolResultContent::Text { .. }));
    if let (Some(structured), false) = (&result.structured, has_text) {
        content.push(ToolResultContent::Text { text: structured.to_string() });
    }
    if result.is_error {
        let text: Vec<&str> = content
            .iter()
            .filter_map(|c| match c {
                ToolResultContent::Text { text } => Some(text.as_str()),
                ToolResultContent::Attachment(_) => None,
            })
            .collect();
        let text = if text.is_empty() { "the tool failed".to_string() } else { text.join("\n") };
        return Err(ToolError(text));
    }
    Ok(ToolOutput(content))
}

/// One block of a result, as the model gets it.
fn block(content: Content) -> ToolResultContent {
    let text = |text: String| ToolResultContent::Text { text };
    match content {
        Content::Text(t) => text(t),
        Content::Image { data, mime_type } => attachment(data, mime_type),
        Content::Audio { mime_type, data } => {
            // No provider takes audio in a tool result: the model is told what it was.
            text(format!("[audio of type {mime_type}, {} bytes of base64, not shown]", data.len()))
        }
        Content::ResourceLink { uri, name, description, .. } => match description {
            Some(d) => text(format!("resource {name} <{uri}>: {d}")),
            None => text(format!("resource {name} <{uri}>")),
        },
        Content::Resource { uri, mime_type, body: ResourceBody::Text(t) } => {
            let kind = mime_type.map(|m| format!(" ({m})")).unwrap_or_default();
            text(format!("resource <{uri}>{kind}:\n{t}"))
        }
        Content::Resource { mime_type: Some(mime), body: ResourceBody::Blob(data), .. }
            if mime.starts_with("image/") =>
        {
            attachment(data, mime)
        }
        Content::Resource { uri, mime_type, body: ResourceBody::Blob(data) } => {
            let kind = mime_type.unwrap_or_else(|| "unknown type".into());
            text(format!("[resource <{uri}> of {kind}, {} bytes of base64, not shown]", data.len()))
        }
        other => text(match other {
            Content::Other(value) => value.to_string(),
            _ => format!("{other:?}"),
        }),
    }
}

fn attachment(data: String, media_type: String) -> ToolResultContent {
    ToolResultContent::Attachment(Attachment { source: Source::Base64 { data }, media_type, name: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_made_valid_for_every_provider() {
        assert_eq!(model_name(None, "get_weather"), "get_weather");
        assert_eq!(model_name(Some("fs"), "read.file"), "fs__read_file");
        assert_eq!(model_name(None, "a/b c:é"), "a_b_c__");
        assert_eq!(model_name(None, &"x".repeat(100)).len(), MAX_TOOL_NAME);
    }

    #[test]
    fn results_map_to_tool_output() {
        let result = ToolCallResult {
            content: vec![
                Content::Text("hi".into()),
                Content::Image { data: "iVBO".into(), mime_type: "image/png".into() },
            ],
            structured: None,
            is_error: false,
        };
        let output = to_output(Ok(result), "s").expect("ok");
        assert_eq!(output.0.len(), 2);
        assert!(matches!(&output.0[1], ToolResultContent::Attachment(a) if a.media_type == "image/png"));
        // Structured content without text reaches the model as JSON.
        let structured = ToolCallResult { content: vec![], structured: Some(json!({"sum": 3})), is_error: false };
        let output = to_output(Ok(structured), "s").expect("ok");
        assert_eq!(output.0, vec![ToolResultContent::Text { text: r#"{"sum":3}"#.into() }]);
        // isError is an error result with the tool's text.
        let failed =
            ToolCallResult { content: vec![Content::Text("no such city".into())], structured: None, is_error: true };
        assert_eq!(to_output(Ok(failed), "s"), Err(ToolError("no such city".into())));
        // A call that failed names the server.
        let timeout = to_output(Err(McpFailure::Call(CallError::Timeout { hard: false })), "weather");
        assert!(timeout.expect_err("error").0.contains("\"weather\""));
    }
}
