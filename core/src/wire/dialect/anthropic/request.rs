//! Building a streaming `POST /v1/messages` request.
//!
//! Field by field from Anthropic's Messages API reference: `model`, `max_tokens`
//! (required), `system`, `messages`, `tools`, `tool_choice`, `thinking`,
//! `output_config` (effort and structured output, GA without a beta header),
//! `temperature`, `top_p`, `stop_sequences`, `metadata.user_id`, `stream`, and
//! `cache_control` breakpoints when `options.cache` is set.

use serde_json::{json, Map, Value};

use super::cache::place_breakpoints;
use super::content::{cache_control, convert_messages};
use super::models::ModelTraits;
use super::NAME;
use crate::data::error::RequestError;
use crate::data::options::{Effort, Reasoning, ToolChoice};
use crate::data::response::Warning;
use crate::data::schema::adapt;
use crate::wire::dialect::{DialectRequest, RequestSpec};
use crate::wire::http::Header;

/// The only API version; new features arrive as body fields or beta headers.
const API_VERSION: &str = "2023-06-01";
/// `max_tokens` when neither the options nor the model say.
const DEFAULT_MAX_TOKENS: u32 = 4_096;
/// Anthropic's floor for `budget_tokens`.
const MIN_THINKING_BUDGET: u32 = 1_024;
/// With thinking on, `top_p` may only be between this and 1.
const MIN_TOP_P_WITH_THINKING: f64 = 0.95;

/// What goes into `thinking` (and `output_config.effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThinkingPlan {
    /// No `thinking` field.
    Off,
    /// `{"type": "enabled", "budget_tokens": N}`.
    Budget(u32),
    /// `{"type": "adaptive"}` with `output_config.effort`.
    Adaptive(&'static str),
}

pub(crate) fn build_request(
    spec: &RequestSpec<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<DialectRequest, RequestError> {
    let options = spec.options;
    let context = spec.context;
    let traits = ModelTraits::from_id(&spec.model.id);

    let mut max_tokens = options.max_tokens.unwrap_or(match spec.model.max_output_tokens {
        0 => DEFAULT_MAX_TOKENS,
        n => n,
    });
    let thinking = plan_thinking(spec, traits, &mut max_tokens, warnings);

    let mut body = Map::new();
    body.insert("model".into(), Value::String(spec.model.id.clone()));
    body.insert("max_tokens".into(), max_tokens.into());
    body.insert("stream".into(), Value::Bool(true));

    if let Some(system) = context.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), Value::String(system.to_string()));
    }
    body.insert("messages".into(), Value::Array(convert_messages(&context.messages, warnings)));
    if !context.tools.is_empty() {
        let tools: Vec<Value> = context
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(retention) = options.cache {
        place_breakpoints(&mut body, &cache_control(retention));
    }
    if let Some(choice) = tool_choice(spec, warnings) {
        body.insert("tool_choice".into(), choice);
    }

    let mut output_config = Map::new();
    match thinking {
        ThinkingPlan::Off => {}
        ThinkingPlan::Budget(budget) => {
            body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
        }
        ThinkingPlan::Adaptive(effort) => {
            // Newer models default to `display: "omitted"` (empty thinking text); ask for
            // the summary so callers see the reasoning on every model.
            body.insert("thinking".into(), json!({"type": "adaptive", "display": "summarized"}));
            output_config.insert("effort".into(), Value::String(effort.into()));
        }
    }
    if let Some(output) = &options.output {
        let (schema, adapted) = adapt::anthropic_output(&output.schema);
        warnings.extend(adapt::label(adapted, &format!("output schema `{}`", output.name)));
        output_config.insert("format".into(), json!({"type": "json_schema", "schema": schema}));
    }
    if !output_config.is_empty() {
        body.insert("output_config".into(), Value::Object(output_config));
    }

    add_sampling(&mut body, spec, traits, thinking != ThinkingPlan::Off, warnings);
    if !options.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(options.stop));
    }
    for (key, value) in &options.metadata {
        if key == "user_id" {
            body.insert("metadata".into(), json!({"user_id": value}));
        } else {
            warnings.push(Warning::unsupported(format!("metadata key `{key}` (only `user_id` exists)"), NAME));
        }
    }

    Ok(DialectRequest {
        path: "/messages".into(),
        headers: vec![Header::new("anthropic-version", API_VERSION)],
        body: Value::Object(body),
    })
}

/// Decides the thinking configuration, adjusting `max_tokens` or the budget so that
/// `budget_tokens < max_tokens` holds, as the API requires.
fn plan_thinking(
    spec: &RequestSpec<'_>,
    traits: ModelTraits,
    max_tokens: &mut u32,
    warnings: &mut Vec<Warning>,
) -> ThinkingPlan {
    let model = spec.model;
    let reasoning = match spec.options.thinking {
        None | Some(Reasoning::Off) => return ThinkingPlan::Off,
        Some(r) => r,
    };
    if !model.reasoning {
        warnings.push(Warning::unsupported(format!("thinking on model {} (not a reasoning model)", model.id), NAME));
        return ThinkingPlan::Off;
    }
    if matches!(spec.options.tool_choice, Some(ToolChoice::Required | ToolChoice::Tool(_))) {
        // The API allows only `auto` or `none` with thinking; the forced tool call is
        // what the caller depends on, so thinking gives way.
        warnings.push(Warning::unsupported("thinking together with a forced tool choice", NAME));
        return ThinkingPlan::Off;
    }
    if traits.adaptive_thinking && !(traits.budget_thinking && matches!(reasoning, Reasoning::Budget(_))) {
        let effort = match reasoning {
            Reasoning::Effort(e) => e,
            Reasoning::Budget(b) => {
                let effort = effort_for_budget(b);
                warnings.push(Warning {
                    code: "thinking_budget_mapped".into(),
                    message: format!(
                        "model {} takes an effort level, not a token budget; {b} tokens sent as effort {}",
                        model.id,
                        effort_name(effort)
                    ),
                });
                effort
            }
            Reasoning::Off => return ThinkingPlan::Off,
        };
        let effort = if effort == Effort::Xhigh && !traits.xhigh_effort {
            warnings.push(Warning::unsupported(format!("effort xhigh on model {} (sent as high)", model.id), NAME));
            Effort::High
        } else {
            effort
        };
        return ThinkingPlan::Adaptive(effort_name(effort));
    }
    let mut budget = match reasoning {
        Reasoning::Effort(e) => e.budget_tokens(),
        Reasoning::Budget(b) => b,
        Reasoning::Off => return ThinkingPlan::Off,
    };
    if budget >= *max_tokens {
        if spec.options.max_tokens.is_none() && model.max_output_tokens == 0 {
            // Nothing caps the output: make room for the budget and an answer.
            *max_tokens = budget.saturating_add(DEFAULT_MAX_TOKENS);
        } else {
            budget = max_tokens.saturating_sub(1);
            if budget < MIN_THINKING_BUDGET {
                warnings.push(Warning::unsupported(
                    format!(
                        "thinking with max_tokens {max_tokens} (the budget must be at least 1024 and below max_tokens)"
                    ),
                    NAME,
                ));
                return ThinkingPlan::Off;
            }
            warnings.push(Warning {
                code: "thinking_budget_reduced".into(),
                message: format!("thinking budget reduced to {budget} tokens to stay below max_tokens {max_tokens}"),
            });
        }
    }
    ThinkingPlan::Budget(budget)
}

/// The largest effort level whose shared budget fits within `budget`.
fn effort_for_budget(budget: u32) -> Effort {
    [Effort::Max, Effort::Xhigh, Effort::High, Effort::Medium]
        .into_iter()
        .find(|e| budget >= e.budget_tokens())
        .unwrap_or(Effort::Low)
}

fn effort_name(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
        Effort::Xhigh => "xhigh",
        Effort::Max => "max",
    }
}

/// `tool_choice`, sent only with tools (the API rejects it otherwise).
fn tool_choice(spec: &RequestSpec<'_>, warnings: &mut Vec<Warning>) -> Option<Value> {
    let choice = spec.options.tool_choice.as_ref()?;
    if spec.context.tools.is_empty() {
        if matches!(choice, ToolChoice::Required | ToolChoice::Tool(_)) {
            warnings.push(Warning::unsupported("a forced tool choice without tools", NAME));
        }
        return None;
    }
    Some(match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    })
}

/// `temperature` and `top_p`, within what the model and thinking allow.
fn add_sampling(
    body: &mut Map<String, Value>,
    spec: &RequestSpec<'_>,
    traits: ModelTraits,
    thinking: bool,
    warnings: &mut Vec<Warning>,
) {
    let model = &spec.model.id;
    let mut temperature = spec.options.temperature;
    let mut top_p = spec.options.top_p;
    if traits.fixed_sampling {
        for (name, value) in [("temperature", &mut temperature), ("top_p", &mut top_p)] {
            if value.take().is_some() {
                warnings.push(Warning::unsupported(format!("{name} on model {model}"), NAME));
            }
        }
    }
    if thinking {
        if temperature.take().is_some() {
            warnings.push(Warning::unsupported("temperature together with thinking", NAME));
        }
        if top_p.is_some_and(|p| p < MIN_TOP_P_WITH_THINKING) {
            top_p = None;
            warnings.push(Warning::unsupported("top_p below 0.95 together with thinking", NAME));
        }
    }
    if traits.one_sampler && temperature.is_some() && top_p.take().is_some() {
        warnings.push(Warning::unsupported(format!("top_p together with temperature on model {model}"), NAME));
    }
    if let Some(t) = temperature {
        // Anthropic's range is 0..=1; the shared option allows up to 2.
        if t > 1.0 {
            warnings.push(Warning {
                code: "temperature_clamped".into(),
                message: format!("temperature {t} clamped to 1, the Anthropic maximum"),
            });
        }
        body.insert("temperature".into(), json!(t.min(1.0)));
    }
    if let Some(p) = top_p {
        body.insert("top_p".into(), json!(p));
    }
}
