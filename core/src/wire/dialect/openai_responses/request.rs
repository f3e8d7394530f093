//! Building the request body: options, tools, reasoning and output format.
//! Conversation items are built in [`super::input`].

use serde_json::{json, Map, Value};

use super::input::{input_items, warn_once};
use super::NAME;
use crate::data::error::RequestError;
use crate::data::message::ToolSpec;
use crate::data::model::Model;
use crate::data::options::{CacheRetention, Effort, Options, Reasoning, ToolChoice};
use crate::data::response::Warning;
use crate::data::schema::adapt;
use crate::wire::dialect::{DialectRequest, RequestSpec};

/// Builds the `/responses` request.
pub(crate) fn build_request(
    spec: &RequestSpec<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<DialectRequest, RequestError> {
    let RequestSpec { model, context, options, .. } = *spec;
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    if let Some(system) = context.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input_items(&context.messages, warnings)));
    add_tools(&context.tools, options.tool_choice.as_ref(), &mut body, warnings);
    if let Some(max) = options.max_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    add_sampling(model, options, &mut body, warnings);
    if !options.stop.is_empty() {
        warnings.push(Warning::unsupported("stop sequences", NAME));
    }
    add_reasoning(model, options.thinking, &mut body, warnings);
    if !options.metadata.is_empty() {
        body.insert("metadata".into(), json!(options.metadata));
    }
    if let Some(output) = &options.output {
        let (schema, adapted) = adapt::openai_strict(&output.schema);
        warnings.extend(adapt::label(adapted, &format!("output schema `{}`", output.name)));
        let format = json!({
            "type": "json_schema",
            "name": schema_name(&output.name),
            "strict": adapt::is_openai_strict(&schema),
            "schema": schema,
        });
        body.insert("text".into(), json!({ "format": format }));
    }
    // The short retention is the default ("in_memory"); only the long one needs the knob.
    if options.cache == Some(CacheRetention::Long) {
        body.insert("prompt_cache_retention".into(), json!("24h"));
    }
    // The library is stateless: every request carries the whole conversation, so nothing
    // needs to be stored server-side (and encrypted reasoning replaces stored reasoning).
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    Ok(DialectRequest { path: "/responses".into(), headers: Vec::new(), body: Value::Object(body) })
}

fn add_tools(
    tools: &[ToolSpec],
    choice: Option<&ToolChoice>,
    body: &mut Map<String, Value>,
    warnings: &mut Vec<Warning>,
) {
    if tools.is_empty() {
        if matches!(choice, Some(ToolChoice::Required | ToolChoice::Tool(_))) {
            warnings.push(Warning::unsupported("a required tool choice without tools", NAME));
        }
        return;
    }
    let specs: Vec<Value> = tools
        .iter()
        .map(|t| {
            // Strict mode rejects schemas outside its subset: adapt, and ask for it only
            // when the result qualifies.
            let (parameters, adapted) = adapt::openai_strict(&t.input_schema);
            warnings.extend(adapt::label(adapted, &format!("tool `{}`", t.name)));
            json!({
                "type": "function",
                "name": t.name,
                "description": t.description,
                "strict": adapt::is_openai_strict(&parameters),
                "parameters": parameters,
            })
        })
        .collect();
    body.insert("tools".into(), Value::Array(specs));
    if let Some(choice) = choice {
        let value = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({ "type": "function", "name": name }),
        };
        body.insert("tool_choice".into(), value);
    }
}

/// Reasoning models reject `temperature` and `top_p` unless reasoning is off
/// (`effort: "none"`, gpt-5.1 and later); see OpenAI's reasoning guide, "Limitations".
fn add_sampling(model: &Model, options: &Options, body: &mut Map<String, Value>, warnings: &mut Vec<Warning>) {
    let allowed = !model.reasoning || options.thinking == Some(Reasoning::Off);
    for (name, value) in [("temperature", options.temperature), ("top_p", options.top_p)] {
        let Some(value) = value else { continue };
        if allowed {
            body.insert(name.into(), json!(value));
        } else {
            warnings.push(Warning::unsupported(
                format_args!("{name} with a reasoning model (unless thinking is off)"),
                NAME,
            ));
        }
    }
}

fn add_reasoning(
    model: &Model,
    thinking: Option<Reasoning>,
    body: &mut Map<String, Value>,
    warnings: &mut Vec<Warning>,
) {
    if !model.reasoning {
        if matches!(thinking, Some(Reasoning::Effort(_) | Reasoning::Budget(_))) {
            warn_once(warnings, Warning::unsupported("thinking on a model without reasoning", NAME));
        }
        return;
    }
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    let reasoning = match thinking {
        // The model's default effort; summaries are opt-in (they need a verified organisation).
        None => return,
        Some(Reasoning::Off) => json!({ "effort": "none" }),
        Some(Reasoning::Effort(effort)) => json!({ "effort": effort_name(effort), "summary": "auto" }),
        Some(Reasoning::Budget(tokens)) => {
            let effort = effort_for_budget(tokens);
            warnings.push(Warning {
                code: "approximated_option".into(),
                message: format!(
                    "a thinking budget of {tokens} tokens was sent as reasoning effort \"{}\": \
                     the {NAME} dialect takes effort levels, not budgets",
                    effort_name(effort)
                ),
            });
            json!({ "effort": effort_name(effort), "summary": "auto" })
        }
    };
    body.insert("reasoning".into(), reasoning);
}

/// `reasoning.effort` values: none, minimal, low, medium, high, xhigh. `xhigh` is the
/// highest level, so it also serves for "the most the model allows".
fn effort_name(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
        Effort::Xhigh | Effort::Max => "xhigh",
    }
}

/// The effort level whose shared budget ([`Effort::budget_tokens`]) is nearest.
fn effort_for_budget(tokens: u32) -> Effort {
    match tokens {
        0..2_048 => Effort::Low,
        2_048..8_192 => Effort::Medium,
        8_192..24_576 => Effort::High,
        _ => Effort::Xhigh,
    }
}

/// `text.format.name` allows `[a-zA-Z0-9_-]{1,64}`; anything else is replaced.
fn schema_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if clean.is_empty() {
        "output".into()
    } else {
        clean
    }
}
