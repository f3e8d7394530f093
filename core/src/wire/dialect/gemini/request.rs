//! Building a `streamGenerateContent` request body.
//!
//! Field by field from the Gemini API reference (`GenerateContentRequest`, `Content`,
//! `Part`, `FunctionDeclaration`, `ToolConfig`, `GenerationConfig`, `ThinkingConfig`).

use serde_json::{json, Map, Value};

use super::DIALECT;
use crate::data::error::RequestError;
use crate::data::message::{Attachment, Block, Message, Role, Source, ToolResult, ToolResultContent};
use crate::data::options::{Effort, Reasoning, ToolChoice};
use crate::data::response::Warning;
use crate::data::schema::adapt;
use crate::wire::dialect::{DialectRequest, RequestSpec};

/// Google's documented placeholder for a function call that has no real thought
/// signature (history from another model), accepted by Gemini 3's validator.
const SIGNATURE_PLACEHOLDER: &str = "skip_thought_signature_validator";

/// Gemini accepts at most this many stop sequences.
const MAX_STOP_SEQUENCES: usize = 5;

/// Builds the path and JSON body of a streaming request.
pub(crate) fn build_request(
    spec: &RequestSpec<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<DialectRequest, RequestError> {
    let model_id = spec.model.id.strip_prefix("models/").unwrap_or(&spec.model.id);
    if model_id.is_empty() {
        return Err(RequestError::Unsupported { message: "the model id is empty".into() });
    }
    let family = Family::of(model_id);
    let mut body = Map::new();
    let contents: Vec<Value> = spec.context.messages.iter().filter_map(|m| content(m, &family, warnings)).collect();
    body.insert("contents".into(), Value::Array(contents));
    if let Some(system) = spec.context.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("systemInstruction".into(), json!({ "parts": [{ "text": system }] }));
    }
    if !spec.context.tools.is_empty() {
        let declarations: Vec<Value> = spec
            .context
            .tools
            .iter()
            .map(|tool| {
                let mut decl = Map::new();
                decl.insert("name".into(), json!(tool.name));
                if !tool.description.is_empty() {
                    decl.insert("description".into(), json!(tool.description));
                }
                // `parametersJsonSchema` takes JSON Schema as is; `parameters` would need
                // the OpenAPI subset with upper-case types.
                if !tool.input_schema.is_null() {
                    let (schema, adapted) = adapt::gemini(&tool.input_schema);
                    warnings.extend(adapt::label(adapted, &format!("tool `{}`", tool.name)));
                    decl.insert("parametersJsonSchema".into(), schema);
                }
                Value::Object(decl)
            })
            .collect();
        body.insert("tools".into(), json!([{ "functionDeclarations": declarations }]));
    }
    if let Some(choice) = &spec.options.tool_choice {
        if spec.context.tools.is_empty() {
            if matches!(choice, ToolChoice::Required | ToolChoice::Tool(_)) {
                warnings.push(Warning::unsupported("tool_choice without tools", DIALECT));
            }
        } else {
            let config = match choice {
                ToolChoice::Auto => json!({ "mode": "AUTO" }),
                ToolChoice::None => json!({ "mode": "NONE" }),
                ToolChoice::Required => json!({ "mode": "ANY" }),
                ToolChoice::Tool(name) => json!({ "mode": "ANY", "allowedFunctionNames": [name] }),
            };
            body.insert("toolConfig".into(), json!({ "functionCallingConfig": config }));
        }
    }
    let generation = generation_config(spec, model_id, &family, warnings);
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    if !spec.options.metadata.is_empty() {
        warnings.push(Warning::unsupported("metadata", DIALECT));
    }
    if spec.options.cache.is_some() {
        warnings.push(Warning {
            code: "unsupported_option".into(),
            message: "cache: the google_gemini dialect has no per-request cache option; Gemini caches \
                      repeated prefixes implicitly (explicit cachedContents are not created)"
                .into(),
        });
    }
    Ok(DialectRequest {
        path: format!("/models/{}:streamGenerateContent?alt=sse", path_segment(model_id)),
        headers: Vec::new(),
        body: Value::Object(body),
    })
}

/// What the model id says about the generation, which decides thinking knobs and
/// signature validation.
#[derive(Debug)]
struct Family {
    /// `(major, minor)` from `gemini-<major>[.<minor>]-…`, when the id has one.
    version: Option<(u32, u32)>,
    pro: bool,
    flash_lite: bool,
}

impl Family {
    fn of(model_id: &str) -> Self {
        let id = model_id.to_ascii_lowercase();
        let version = id.find("gemini-").and_then(|at| {
            let rest = &id[at + "gemini-".len()..];
            let (major, rest) = leading_number(rest)?;
            let minor = rest.strip_prefix('.').and_then(leading_number).map_or(0, |(m, _)| m);
            Some((major, minor))
        });
        Self { version, pro: id.contains("-pro"), flash_lite: id.contains("flash-lite") }
    }

    /// Gemini 3 and later: `thinkingLevel`, and strict signature checks on function calls.
    fn is_gemini3(&self) -> bool {
        self.version.is_some_and(|(major, _)| major >= 3)
    }

    /// Whether a function call without a signature needs the placeholder: Gemini 3, or
    /// an id without a version (an alias such as `gemini-flash-latest` may be Gemini 3).
    fn validates_signatures(&self) -> bool {
        self.version.is_none() || self.is_gemini3()
    }
}

fn leading_number(s: &str) -> Option<(u32, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Some((s[..end].parse().ok()?, &s[end..]))
}

/// One `Content`, or `None` when the message has nothing Gemini can take.
fn content(message: &Message, family: &Family, warnings: &mut Vec<Warning>) -> Option<Value> {
    let parts = match message.role {
        Role::User => user_parts(message, family),
        Role::Assistant => model_parts(message, family, warnings),
    };
    if parts.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "model",
    };
    Some(json!({ "role": role, "parts": parts }))
}

fn user_parts(message: &Message, family: &Family) -> Vec<Value> {
    let mut parts = Vec::new();
    // Media returned by tools on models without multimodal function responses: sent as
    // ordinary parts after the function responses of the same turn.
    let mut tool_media = Vec::new();
    for block in &message.content {
        match block {
            Block::Text(t) if !t.text.is_empty() => parts.push(json!({ "text": t.text })),
            Block::Attachment(a) => parts.push(attachment_part(a)),
            Block::ToolResult(result) => parts.push(function_response(result, family, &mut tool_media)),
            // Reasoning and tool calls belong to model turns.
            Block::Text(_) | Block::Thinking(_) | Block::ToolUse(_) => {}
        }
    }
    parts.append(&mut tool_media);
    parts
}

/// A `functionResponse` part. The API reads `{"output": …}` as the result and
/// `{"error": …}` as a failure.
fn function_response(result: &ToolResult, family: &Family, tool_media: &mut Vec<Value>) -> Value {
    let key = if result.is_error { "error" } else { "output" };
    let mut response = Map::new();
    response.insert("name".into(), json!(result.name));
    response.insert("response".into(), json!({ key: result.text_content() }));
    if !result.tool_use_id.is_empty() {
        response.insert("id".into(), json!(result.tool_use_id));
    }
    let mut inline = Vec::new();
    for item in &result.content {
        let ToolResultContent::Attachment(a) = item else { continue };
        match &a.source {
            // Gemini 3 takes inline media inside the function response itself.
            Source::Base64 { data } if family.is_gemini3() => {
                inline.push(json!({ "inlineData": { "mimeType": a.media_type, "data": data } }));
            }
            _ => tool_media.push(attachment_part(a)),
        }
    }
    if !inline.is_empty() {
        response.insert("parts".into(), Value::Array(inline));
    }
    json!({ "functionResponse": response })
}

fn attachment_part(a: &Attachment) -> Value {
    match &a.source {
        Source::Base64 { data } => json!({ "inlineData": { "mimeType": a.media_type, "data": data } }),
        Source::Url { url } => json!({ "fileData": { "mimeType": a.media_type, "fileUri": url } }),
    }
}

fn model_parts(message: &Message, family: &Family, warnings: &mut Vec<Warning>) -> Vec<Value> {
    // Only this dialect's thought parts and signatures are valid here. The model is not
    // compared: Gemini reports `modelVersion`, which differs from the requested id for
    // aliases, and replaying a signature to the alias it came from is what Google's SDKs do.
    let own = message.is_from_dialect(DIALECT);
    let signature = |sig: &Option<String>| if own { sig.clone() } else { None };
    let mut parts = Vec::new();
    for block in &message.content {
        let (mut part, sig) = match block {
            Block::Text(t) => {
                let sig = signature(&t.signature);
                if t.text.is_empty() && sig.is_none() {
                    continue;
                }
                (json!({ "text": t.text }), sig)
            }
            // Another dialect's or model's reasoning cannot be replayed as Gemini thoughts.
            Block::Thinking(t) if own && t.redacted.is_none() => {
                let sig = signature(&t.signature);
                if t.text.is_empty() && sig.is_none() {
                    continue;
                }
                (json!({ "text": t.text, "thought": true }), sig)
            }
            Block::Thinking(_) | Block::ToolResult(_) => continue,
            Block::ToolUse(call) => {
                let args = if call.input.is_object() {
                    call.input.clone()
                } else {
                    warnings.push(Warning {
                        code: "invalid_tool_input".into(),
                        message: format!(
                            "tool call {} ({}) has input that is not a JSON object; sent as {{}}",
                            call.id, call.name
                        ),
                    });
                    json!({})
                };
                let mut fc = Map::new();
                fc.insert("name".into(), json!(call.name));
                fc.insert("args".into(), args);
                if !call.id.is_empty() {
                    fc.insert("id".into(), json!(call.id));
                }
                (json!({ "functionCall": fc }), signature(&call.signature))
            }
            Block::Attachment(a) => (attachment_part(a), None),
        };
        if let (Some(sig), Some(obj)) = (sig, part.as_object_mut()) {
            obj.insert("thoughtSignature".into(), Value::String(sig));
        }
        parts.push(part);
    }
    if family.validates_signatures() {
        // Only the first function call of a step carries the signature (parallel calls
        // share it), so that is the one the validator checks.
        if let Some(first_call) = parts.iter_mut().find(|p| p.get("functionCall").is_some()) {
            if let Some(obj) = first_call.as_object_mut() {
                obj.entry("thoughtSignature").or_insert_with(|| json!(SIGNATURE_PLACEHOLDER));
            }
        }
    }
    parts
}

fn generation_config(
    spec: &RequestSpec<'_>,
    model_id: &str,
    family: &Family,
    warnings: &mut Vec<Warning>,
) -> Map<String, Value> {
    let options = spec.options;
    let mut config = Map::new();
    if let Some(n) = options.max_tokens {
        config.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(t) = options.temperature {
        config.insert("temperature".into(), json!(t));
    }
    if let Some(p) = options.top_p {
        config.insert("topP".into(), json!(p));
    }
    if !options.stop.is_empty() {
        if options.stop.len() > MAX_STOP_SEQUENCES {
            warnings.push(Warning {
                code: "unsupported_option".into(),
                message: format!(
                    "stop: Gemini accepts at most {MAX_STOP_SEQUENCES} stop sequences; the other {} were not sent",
                    options.stop.len() - MAX_STOP_SEQUENCES
                ),
            });
        }
        let stop: Vec<&String> = options.stop.iter().take(MAX_STOP_SEQUENCES).collect();
        config.insert("stopSequences".into(), json!(stop));
    }
    if let Some(output) = &options.output {
        config.insert("responseMimeType".into(), json!("application/json"));
        let (schema, adapted) = adapt::gemini(&output.schema);
        warnings.extend(adapt::label(adapted, &format!("output schema `{}`", output.name)));
        config.insert("responseJsonSchema".into(), schema);
    }
    if let Some(reasoning) = options.thinking {
        if spec.model.reasoning {
            let thinking = thinking_config(reasoning, model_id, family, warnings);
            config.insert("thinkingConfig".into(), Value::Object(thinking));
        } else {
            warnings.push(Warning::unsupported(format!("thinking for the non-reasoning model {model_id}"), DIALECT));
        }
    }
    config
}

/// `thinkingConfig`: `thinkingLevel` on Gemini 3, `thinkingBudget` on 2.5 and for
/// explicit budgets (Gemini 3 still accepts budgets).
fn thinking_config(
    reasoning: Reasoning,
    model_id: &str,
    family: &Family,
    warnings: &mut Vec<Warning>,
) -> Map<String, Value> {
    let mut config = Map::new();
    let gemini3 = family.is_gemini3();
    // Gemini 3.0 Pro has only `low` and `high`; Flash and Pro from 3.1 add `minimal`
    // and `medium`.
    let pro_30 = family.pro && family.version.is_some_and(|(major, minor)| major == 3 && minor == 0);
    let cannot_disable = |warnings: &mut Vec<Warning>, sent: &str| {
        warnings.push(Warning {
            code: "unsupported_option".into(),
            message: format!("thinking off: {model_id} cannot turn thinking off; {sent} was sent instead"),
        });
    };
    match reasoning {
        Reasoning::Off if gemini3 => {
            let level = if pro_30 { "low" } else { "minimal" };
            cannot_disable(warnings, &format!("thinkingLevel {level}"));
            config.insert("thinkingLevel".into(), json!(level));
        }
        Reasoning::Off if family.pro => {
            cannot_disable(warnings, "the minimum thinkingBudget 128");
            config.insert("thinkingBudget".into(), json!(128));
        }
        Reasoning::Off => {
            config.insert("thinkingBudget".into(), json!(0));
        }
        Reasoning::Effort(effort) if gemini3 => {
            let level = match effort {
                Effort::Low => "low",
                Effort::Medium if pro_30 => "high",
                Effort::Medium => "medium",
                Effort::High | Effort::Xhigh | Effort::Max => "high",
            };
            config.insert("includeThoughts".into(), json!(true));
            config.insert("thinkingLevel".into(), json!(level));
        }
        Reasoning::Effort(effort) => {
            config.insert("includeThoughts".into(), json!(true));
            config.insert("thinkingBudget".into(), json!(budget_for(effort.budget_tokens(), family, warnings)));
        }
        Reasoning::Budget(budget) => {
            let budget = if gemini3 { budget } else { budget_for(budget, family, warnings) };
            config.insert("includeThoughts".into(), json!(true));
            config.insert("thinkingBudget".into(), json!(budget));
        }
    }
    config
}

/// Clamps a budget to the Gemini 2.5 ranges: Pro 128..=32768, Flash 0..=24576,
/// Flash-Lite 512..=24576.
fn budget_for(budget: u32, family: &Family, warnings: &mut Vec<Warning>) -> u32 {
    let (min, max) = match (family.pro, family.flash_lite) {
        (true, _) => (128, 32_768),
        (false, true) => (512, 24_576),
        (false, false) => (1, 24_576),
    };
    let clamped = budget.clamp(min, max);
    if clamped != budget {
        warnings.push(Warning {
            code: "thinking_budget_clamped".into(),
            message: format!("thinking budget {budget} is outside the model's range {min}..={max}; {clamped} was sent"),
        });
    }
    clamped
}

/// The model id as it may stand in the URL's path: unreserved characters and `/` as they
/// are (ids like `tunedModels/x`), everything else percent-encoded, so an id can neither
/// break the URL (a space, a control character) nor add a query or a fragment to it.
fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
