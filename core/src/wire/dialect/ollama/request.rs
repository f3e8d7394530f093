//! Building an `/api/chat` request body.
//!
//! Field by field (Ollama `docs/api.md`, `docs/openapi.yaml`, `docs/capabilities/*`):
//! - `model`, `messages`, `tools`, `stream: true`; `keep_alive` is left to the server;
//! - `think`: `true`/`false`, or `"low"`/`"medium"`/`"high"` for models with named
//!   levels, only for models marked as reasoning;
//! - `format`: the JSON Schema of structured output;
//! - `options`: `num_predict`, `temperature`, `top_p`, `stop`.
//!
//! Messages: `system`, `user` (`content` text and base64 `images`), `assistant`
//! (`content`, `thinking`, `tool_calls` with arguments as an object) and `tool`
//! (`content`, `tool_name`). Ollama has no tool choice, no prompt cache knob, no
//! metadata, no documents and no image URLs: those become warnings.

use serde_json::{json, Map, Value};

use super::NAME;
use crate::data::error::RequestError;
use crate::data::message::{Attachment, Block, Context, Message, Role, Source, ToolResult, ToolResultContent, ToolUse};
use crate::data::model::Model;
use crate::data::options::{Effort, Options, Reasoning, ToolChoice};
use crate::data::response::Warning;
use crate::data::schema::adapt;
use crate::wire::dialect::{DialectRequest, RequestSpec};

pub(crate) fn build_request(
    spec: &RequestSpec<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<DialectRequest, RequestError> {
    let mut w = Warnings(warnings);
    let options = spec.options;
    let mut body = Map::new();
    body.insert("model".into(), spec.model.id.clone().into());
    body.insert("messages".into(), Value::Array(messages(spec.context, &mut w)));
    if let Some(tools) = tools(spec.context, options.tool_choice.as_ref(), &mut w) {
        body.insert("tools".into(), tools);
    }
    body.insert("stream".into(), true.into());
    if let Some(think) = think(spec.model, options.thinking, &mut w) {
        body.insert("think".into(), think);
    }
    if let Some(output) = &options.output {
        match &output.schema {
            Value::Bool(false) => w.unsupported("an output schema of `false`"),
            Value::Bool(true) => {
                body.insert("format".into(), "json".into());
            }
            schema => {
                let (schema, adapted) = adapt::ollama(schema);
                adapted.into_iter().for_each(|warning| w.push(warning));
                body.insert("format".into(), schema);
            }
        }
    }
    let model_options = model_options(options);
    if !model_options.is_empty() {
        body.insert("options".into(), Value::Object(model_options));
    }
    if options.cache.is_some() {
        w.unsupported("prompt cache retention (`cache`)");
    }
    if !options.metadata.is_empty() {
        w.unsupported("request `metadata`");
    }
    Ok(DialectRequest { path: "/api/chat".into(), headers: Vec::new(), body: Value::Object(body) })
}

/// Collects warnings once each: a long history of URL images should say so once.
struct Warnings<'a>(&'a mut Vec<Warning>);

impl Warnings<'_> {
    fn unsupported(&mut self, what: impl std::fmt::Display) {
        self.push(Warning::unsupported(what, NAME));
    }

    /// An option sent in an approximate form: the message says what was sent instead.
    fn approximated(&mut self, message: impl std::fmt::Display) {
        self.push(Warning { code: "unsupported_option".into(), message: format!("{message} (by the {NAME} dialect)") });
    }

    fn push(&mut self, warning: Warning) {
        if !self.0.contains(&warning) {
            self.0.push(warning);
        }
    }
}

/// Sampling options under `options`. `max_tokens` is `num_predict`; without it Ollama
/// generates until the model stops or the context is full.
fn model_options(options: &Options) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(n) = options.max_tokens {
        out.insert("num_predict".into(), n.into());
    }
    if let Some(t) = options.temperature {
        out.insert("temperature".into(), t.into());
    }
    if let Some(p) = options.top_p {
        out.insert("top_p".into(), p.into());
    }
    if !options.stop.is_empty() {
        out.insert("stop".into(), options.stop.clone().into());
    }
    out
}

/// `think`: sent only for reasoning models. Named levels exist only for some models
/// (GPT-OSS takes `low`/`medium`/`high`); the others take `true`/`false`, and Ollama
/// versions before named levels reject a string there.
fn think(model: &Model, thinking: Option<Reasoning>, w: &mut Warnings<'_>) -> Option<Value> {
    let thinking = thinking?;
    if !model.reasoning {
        w.unsupported(format_args!("thinking for model {} (not a reasoning model)", model.id));
        return None;
    }
    let levels = takes_levels(model);
    let effort = match thinking {
        Reasoning::Off => return Some(false.into()),
        Reasoning::Effort(effort) => effort,
        Reasoning::Budget(budget) => {
            let sent = if levels { level(effort_for_budget(budget)) } else { "true" };
            w.approximated(format_args!(
                "Ollama takes no thinking budget: {budget} tokens was sent as `think: {sent}`"
            ));
            effort_for_budget(budget)
        }
    };
    if levels {
        return Some(level(effort).into());
    }
    if !matches!(thinking, Reasoning::Budget(_)) && effort != Effort::Medium {
        w.approximated(format_args!(
            "model {} turns thinking on or off only: effort {effort:?} was sent as `think: true`",
            model.id
        ));
    }
    Some(true.into())
}

/// Models that take named thinking levels. Ollama documents them for GPT-OSS only.
fn takes_levels(model: &Model) -> bool {
    model.id.to_ascii_lowercase().contains("gpt-oss")
}

fn level(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        // "high" is the most Ollama offers.
        Effort::High | Effort::Xhigh | Effort::Max => "high",
    }
}

/// The effort whose shared budget (see [`Effort::budget_tokens`]) a budget reaches.
fn effort_for_budget(budget: u32) -> Effort {
    if budget >= Effort::High.budget_tokens() {
        Effort::High
    } else if budget >= Effort::Medium.budget_tokens() {
        Effort::Medium
    } else {
        Effort::Low
    }
}

/// Tool definitions. Ollama has no tool choice: `none` is honoured by not offering the
/// tools, a named tool by offering only that one (the model may still answer in text),
/// `required` cannot be expressed.
fn tools(context: &Context, choice: Option<&ToolChoice>, w: &mut Warnings<'_>) -> Option<Value> {
    if context.tools.is_empty() || choice == Some(&ToolChoice::None) {
        return None;
    }
    let offered: Vec<Value> = match choice {
        Some(ToolChoice::Tool(name)) if context.tools.iter().any(|t| &t.name == name) => {
            w.approximated(format_args!(
                "Ollama cannot force a tool: only `{name}` was offered, and the model may still answer in text"
            ));
            context.tools.iter().filter(|t| &t.name == name).map(tool).collect()
        }
        Some(ToolChoice::Tool(name)) => {
            w.approximated(format_args!("tool_choice names `{name}`, which is not among the tools: all were offered"));
            context.tools.iter().map(tool).collect()
        }
        Some(ToolChoice::Required) => {
            w.unsupported("`tool_choice: required`");
            context.tools.iter().map(tool).collect()
        }
        _ => context.tools.iter().map(tool).collect(),
    };
    Some(Value::Array(offered))
}

fn tool(spec: &crate::data::message::ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.input_schema},
    })
}

fn messages(context: &Context, w: &mut Warnings<'_>) -> Vec<Value> {
    let mut out = Vec::with_capacity(context.messages.len() + 1);
    if let Some(system) = context.system.as_deref().filter(|s| !s.is_empty()) {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &context.messages {
        match message.role {
            Role::User => user_message(message, &mut out, w),
            Role::Assistant => assistant_message(message, &mut out, w),
        }
    }
    out
}

/// A user message: tool results first, each as its own `tool` message (they answer the
/// previous assistant turn), then the text and images, if any.
fn user_message(message: &Message, out: &mut Vec<Value>, w: &mut Warnings<'_>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(t) => push_paragraph(&mut text, &t.text),
            Block::Attachment(a) => push_image(a, &mut images, w),
            Block::ToolResult(result) => out.push(tool_message(result, w)),
            Block::Thinking(_) => {} // the user has no reasoning to send
            Block::ToolUse(_) => w.unsupported("tool calls inside user messages"),
        }
    }
    if !text.is_empty() || !images.is_empty() {
        let mut msg = json!({"role": "user", "content": text});
        if !images.is_empty() {
            msg["images"] = images.into();
        }
        out.push(msg);
    }
}

/// A tool result. Ollama matches it to the call by `tool_name`; recent versions also
/// read `tool_call_id`. An error is marked in the text, the only channel there is.
fn tool_message(result: &ToolResult, w: &mut Warnings<'_>) -> Value {
    let mut text = String::new();
    let mut images = Vec::new();
    for part in &result.content {
        match part {
            ToolResultContent::Text { text: t } => push_paragraph(&mut text, t),
            ToolResultContent::Attachment(a) => push_image(a, &mut images, w),
        }
    }
    if result.is_error {
        text.insert_str(0, "Error: ");
    }
    let mut msg = json!({"role": "tool", "content": text});
    if !result.name.is_empty() {
        msg["tool_name"] = result.name.clone().into();
    }
    if !result.tool_use_id.is_empty() {
        msg["tool_call_id"] = result.tool_use_id.clone().into();
    }
    if !images.is_empty() {
        msg["images"] = images.into();
    }
    msg
}

/// An assistant message. Reasoning text goes back only to this dialect; Ollama has no
/// signatures, and redacted reasoning from other providers cannot be shown to it.
fn assistant_message(message: &Message, out: &mut Vec<Value>, w: &mut Warnings<'_>) {
    let own = message.is_from_dialect(NAME);
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(t) => text.push_str(&t.text),
            Block::Thinking(t) if own && t.redacted.is_none() => thinking.push_str(&t.text),
            Block::Thinking(_) => {}
            Block::ToolUse(call) => calls.push(tool_call(call, calls.len(), w)),
            Block::Attachment(_) => w.unsupported("attachments in assistant messages"),
            Block::ToolResult(_) => w.unsupported("tool results inside assistant messages"),
        }
    }
    let mut msg = json!({"role": "assistant", "content": text});
    if !thinking.is_empty() {
        msg["thinking"] = thinking.into();
    }
    if !calls.is_empty() {
        msg["tool_calls"] = calls.into();
    }
    out.push(msg);
}

fn tool_call(call: &ToolUse, index: usize, w: &mut Warnings<'_>) -> Value {
    let arguments = match &call.input {
        Value::Object(_) => call.input.clone(),
        Value::Null => json!({}),
        _ => {
            // Ollama reads arguments as an object; invalid input kept as text cannot go back.
            w.approximated(format_args!(
                "the input of tool call `{}` is not a JSON object and was sent as {{}}",
                call.name
            ));
            json!({})
        }
    };
    let mut value = json!({
        "type": "function",
        "function": {"index": index, "name": call.name, "arguments": arguments},
    });
    if !call.id.is_empty() {
        value["id"] = call.id.clone().into();
    }
    value
}

/// Ollama takes images as bare base64 only. A `data:` URL is unwrapped; other URLs and
/// non-image files cannot be sent.
fn push_image(attachment: &Attachment, images: &mut Vec<Value>, w: &mut Warnings<'_>) {
    if !attachment.is_image() {
        w.unsupported(format_args!("`{}` attachments", attachment.media_type));
        return;
    }
    match &attachment.source {
        Source::Base64 { data } => images.push(data.clone().into()),
        Source::Url { url } => match base64_of_data_url(url) {
            Some(data) => images.push(data.into()),
            None => w.unsupported("image URLs (Ollama takes base64 images only)"),
        },
    }
}

fn base64_of_data_url(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("data:")?;
    let (header, data) = rest.split_once(',')?;
    header.ends_with(";base64").then_some(data)
}

fn push_paragraph(out: &mut String, text: &str) {
    if text.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

#[cfg(test)]
mod tests;
