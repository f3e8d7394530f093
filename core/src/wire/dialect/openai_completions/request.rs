//! Building a Chat Completions request body.

use serde_json::{json, Map, Value};

use super::NAME;
use crate::data::error::RequestError;
use crate::data::message::{Attachment, Block, Message, Role, Source, ToolResult, ToolResultContent, ToolSpec};
use crate::data::options::{CacheRetention, Effort, Reasoning, ToolChoice};
use crate::data::response::Warning;
use crate::data::schema::adapt;
use crate::wire::dialect::{DialectRequest, RequestSpec};

/// Prefix of a failed tool's output: the API has no `is_error` flag.
const TOOL_ERROR_PREFIX: &str = "Error: ";

/// Builds the path and JSON body of a streaming Chat Completions request.
pub(crate) fn build_request(
    spec: &RequestSpec<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<DialectRequest, RequestError> {
    let options = spec.options;
    let quirks = &spec.provider.quirks;
    let mut body = Map::new();
    body.insert("model".into(), json!(spec.model.id));
    body.insert("messages".into(), Value::Array(messages(spec, warnings)));
    body.insert("stream".into(), json!(true));
    if !quirks.no_stream_options {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }

    if !spec.context.tools.is_empty() {
        let tools = spec.context.tools.iter().map(|t| tool(t, warnings)).collect();
        body.insert("tools".into(), tools);
    }
    match (&options.tool_choice, spec.context.tools.is_empty()) {
        (None, _) | (Some(ToolChoice::None | ToolChoice::Auto), true) => {}
        (Some(choice), true) => {
            warnings.push(Warning::unsupported(format!("tool_choice {choice:?} without tools"), NAME))
        }
        (Some(choice), false) => {
            body.insert("tool_choice".into(), tool_choice(choice));
        }
    }

    if let Some(max) = options.max_tokens {
        let field = if quirks.legacy_max_tokens { "max_tokens" } else { "max_completion_tokens" };
        body.insert(field.into(), json!(max));
    }
    if let Some(t) = options.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = options.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if !options.stop.is_empty() {
        body.insert("stop".into(), json!(options.stop));
    }
    if let Some(thinking) = options.thinking {
        if spec.model.reasoning {
            body.insert("reasoning_effort".into(), json!(reasoning_effort(thinking, warnings)));
        } else if thinking != Reasoning::Off {
            warnings
                .push(Warning::unsupported(format!("thinking for the non-reasoning model {}", spec.model.id), NAME));
        }
    }
    if let Some(output) = options.output.as_ref().filter(|_| spec.provider.quirks.json_object_schema) {
        // The server constrains the reply with a grammar built from the schema as given.
        body.insert("response_format".into(), json!({"type": "json_object", "schema": output.schema}));
    } else if let Some(output) = &options.output {
        let (schema, adapted) = adapt::openai_strict(&output.schema);
        warnings.extend(adapt::label(adapted, &format!("output schema `{}`", output.name)));
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {
                "name": output.name,
                "strict": adapt::is_openai_strict(&schema),
                "schema": schema,
            }}),
        );
    }
    if !options.metadata.is_empty() {
        body.insert("metadata".into(), json!(options.metadata));
        body.insert("store".into(), json!(true));
    }
    if options.cache == Some(CacheRetention::Long) {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    Ok(DialectRequest { path: "/chat/completions".into(), headers: Vec::new(), body: Value::Object(body) })
}

/// A function tool. Its schema is adapted to strict mode when it can be, and then sent
/// with `strict: true`; otherwise as given, without the flag.
fn tool(spec: &ToolSpec, warnings: &mut Vec<Warning>) -> Value {
    let (parameters, adapted) = adapt::openai_strict(&spec.input_schema);
    warnings.extend(adapt::label(adapted, &format!("tool `{}`", spec.name)));
    let mut function = Map::new();
    function.insert("name".into(), json!(spec.name));
    if !spec.description.is_empty() {
        function.insert("description".into(), json!(spec.description));
    }
    let strict = adapt::is_openai_strict(&parameters);
    function.insert("parameters".into(), parameters);
    if strict {
        function.insert("strict".into(), json!(true));
    }
    json!({"type": "function", "function": function})
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

/// `reasoning_effort` values: `none`, `minimal`, `low`, `medium`, `high`, `xhigh`.
fn reasoning_effort(thinking: Reasoning, warnings: &mut Vec<Warning>) -> &'static str {
    let effort = match thinking {
        Reasoning::Off => return "none",
        Reasoning::Effort(effort) => effort,
        Reasoning::Budget(budget) => {
            let effort = match budget {
                0..=2_047 => Effort::Low,
                2_048..=8_191 => Effort::Medium,
                _ => Effort::High,
            };
            warnings.push(Warning {
                code: "approximated_option".into(),
                message: format!(
                    "a thinking budget of {budget} tokens is not supported by the {NAME} dialect; \
                     sent as reasoning_effort {:?}",
                    effort_name(effort)
                ),
            });
            effort
        }
    };
    if effort == Effort::Max {
        warnings.push(Warning {
            code: "approximated_option".into(),
            message: format!("thinking effort max is not supported by the {NAME} dialect; sent as xhigh"),
        });
    }
    effort_name(effort)
}

fn effort_name(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
        Effort::Xhigh | Effort::Max => "xhigh",
    }
}

fn messages(spec: &RequestSpec<'_>, warnings: &mut Vec<Warning>) -> Vec<Value> {
    let mut out = Vec::with_capacity(spec.context.messages.len() + 1);
    if let Some(system) = spec.context.system.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": system}));
    }
    let reasoning_field = spec.provider.quirks.reasoning_field.as_deref();
    for message in &spec.context.messages {
        match message.role {
            Role::User => user_messages(message, &mut out, warnings),
            Role::Assistant => out.extend(assistant_message(message, reasoning_field)),
        }
    }
    out
}

/// One user message becomes its `tool` messages (first: they must follow the assistant
/// message that made the calls), then a `user` message with everything else.
fn user_messages(message: &Message, out: &mut Vec<Value>, warnings: &mut Vec<Warning>) {
    let mut parts = Vec::new();
    let mut tool_images = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(t) => parts.push(json!({"type": "text", "text": t.text})),
            Block::Attachment(a) => parts.extend(attachment_part(a, warnings)),
            Block::ToolResult(result) => out.push(tool_message(result, &mut tool_images, warnings)),
            Block::Thinking(_) | Block::ToolUse(_) => {
                warnings.push(Warning::unsupported("a thinking or tool call block in a user message", NAME))
            }
        }
    }
    if !tool_images.is_empty() {
        // Images come before the user's own text so the text reads as the next turn.
        tool_images.append(&mut parts);
        parts = tool_images;
    }
    match parts.as_slice() {
        [] => {}
        [Value::Object(part)] if part.get("type") == Some(&json!("text")) => {
            out.push(json!({"role": "user", "content": part.get("text")}))
        }
        _ => out.push(json!({"role": "user", "content": parts})),
    }
}

fn tool_message(result: &ToolResult, images: &mut Vec<Value>, warnings: &mut Vec<Warning>) -> Value {
    let mut text = String::new();
    if result.is_error {
        text.push_str(TOOL_ERROR_PREFIX);
    }
    let mut first = true;
    let mut labelled = false;
    for part in &result.content {
        match part {
            ToolResultContent::Text { text: t } => {
                if !first {
                    text.push('\n');
                }
                text.push_str(t);
                first = false;
            }
            ToolResultContent::Attachment(a) => {
                let converted = attachment_part(a, warnings);
                if let Some(part) = converted {
                    if !labelled {
                        let label =
                            format!("Attachments returned by tool {} (call {}):", result.name, result.tool_use_id);
                        images.push(json!({"type": "text", "text": label}));
                        labelled = true;
                    }
                    images.push(part);
                }
            }
        }
    }
    json!({"role": "tool", "tool_call_id": result.tool_use_id, "content": text})
}

/// A user content part for an attachment: images (base64 or URL), PDFs (base64) and
/// WAV/MP3 audio (base64). Anything else is reported and left out.
fn attachment_part(a: &Attachment, warnings: &mut Vec<Warning>) -> Option<Value> {
    let data_url = |data: &str| format!("data:{};base64,{data}", a.media_type);
    match (&a.source, a.media_type.as_str()) {
        (Source::Base64 { data }, _) if a.is_image() => {
            Some(json!({"type": "image_url", "image_url": {"url": data_url(data)}}))
        }
        (Source::Url { url }, _) if a.is_image() => Some(json!({"type": "image_url", "image_url": {"url": url}})),
        (Source::Base64 { data }, "application/pdf") => Some(json!({"type": "file", "file": {
            "filename": a.name.as_deref().unwrap_or("document.pdf"),
            "file_data": data_url(data),
        }})),
        (Source::Base64 { data }, "audio/wav" | "audio/x-wav" | "audio/wave") => {
            Some(json!({"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}))
        }
        (Source::Base64 { data }, "audio/mpeg" | "audio/mp3") => {
            Some(json!({"type": "input_audio", "input_audio": {"data": data, "format": "mp3"}}))
        }
        (source, media_type) => {
            let how = match source {
                Source::Base64 { .. } => "inline",
                Source::Url { .. } => "by URL",
            };
            warnings.push(Warning::unsupported(format!("an attachment of type {media_type} given {how}"), NAME));
            None
        }
    }
}

/// An assistant message: text as one string, tool calls with JSON-string arguments and,
/// for messages this dialect produced, reasoning text under the provider's field.
fn assistant_message(message: &Message, reasoning_field: Option<&str>) -> Option<Value> {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    let own = message.is_from_dialect(NAME);
    for block in &message.content {
        match block {
            Block::Text(t) => text.push_str(&t.text),
            Block::Thinking(t) if own && reasoning_field.is_some() => reasoning.push_str(&t.text),
            Block::ToolUse(call) => {
                // Input that was not valid JSON is kept as a string: send the model's raw text back.
                let arguments = match &call.input {
                    Value::String(raw) => raw.clone(),
                    Value::Null => "{}".to_string(),
                    input => input.to_string(),
                };
                tool_calls.push(json!({"id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": arguments}}));
            }
            Block::Thinking(_) | Block::Attachment(_) | Block::ToolResult(_) => {}
        }
    }
    if text.is_empty() && tool_calls.is_empty() && reasoning.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    // Always a string, empty beside tool calls without text (as the Vercel AI SDK sends it):
    // llama-cpp-python refuses `null` (HTTP 500, its request type wants a string) and cannot
    // render a message without `content` (its chat templates read it unconditionally).
    out.insert("content".into(), Value::String(text));
    if let (Some(field), false) = (reasoning_field, reasoning.is_empty()) {
        out.insert(field.to_string(), Value::String(reasoning));
    }
    if !tool_calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_map_to_efforts_with_a_warning() {
        let mut w = Vec::new();
        assert_eq!(reasoning_effort(Reasoning::Budget(1_024), &mut w), "low");
        assert_eq!(reasoning_effort(Reasoning::Budget(4_096), &mut w), "medium");
        assert_eq!(reasoning_effort(Reasoning::Budget(20_000), &mut w), "high");
        assert_eq!(w.len(), 3);
        assert_eq!(reasoning_effort(Reasoning::Effort(Effort::Xhigh), &mut w), "xhigh");
        assert_eq!(w.len(), 3);
        assert_eq!(reasoning_effort(Reasoning::Effort(Effort::Max), &mut w), "xhigh");
        assert_eq!(w.len(), 4);
        assert_eq!(reasoning_effort(Reasoning::Off, &mut w), "none");
    }
}
