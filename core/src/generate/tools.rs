//! The tool phase of the generate loop: every call of a step runs in parallel, each
//! with its own deadline; results go back in the order of the calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::effective_tool_timeout;
use super::io::{Effect, ToolOutcome, ToolRunId};
use crate::message::{Block, ToolResult, ToolSpec, ToolUse};
use crate::options::Options;
use crate::schema::adapt::validate_adapted;
use crate::schema::{JsonSchemaValidator, SchemaError, Validator};

/// A tool as the generate machine sees it.
#[derive(Debug, Clone)]
pub struct ToolDecl {
    /// Name, description and input schema.
    pub spec: ToolSpec,
    /// True when the driver has a handler; a call to a tool without one ends the loop
    /// and returns the calls to the caller.
    pub executable: bool,
    /// Time limit for one call, overriding the `tool_timeout` option.
    pub timeout: Option<Duration>,
    /// Checks the model's input before the handler runs. `None`: compiled from
    /// `spec.input_schema` when the call starts.
    pub validator: Option<Arc<dyn Validator>>,
}

impl ToolDecl {
    /// A tool whose input is checked against its own schema.
    pub fn new(spec: ToolSpec, executable: bool) -> Self {
        ToolDecl { spec, executable, timeout: None, validator: None }
    }

    /// Compiles the validator from the input schema if none was given.
    pub(crate) fn ensure_validator(&mut self) -> Result<(), SchemaError> {
        if self.validator.is_none() && self.executable {
            let compiled = JsonSchemaValidator::new(self.spec.input_schema.clone())
                .map_err(|e| SchemaError(format!("tool {:?}: {}", self.spec.name, e.0)))?;
            self.validator = Some(Arc::new(compiled));
        }
        Ok(())
    }
}

/// Checks a call's or an agent's tools before they are used: names are unique (a model
/// names the tool it calls, so two with one name would be ambiguous) and every validator
/// compiles.
pub(crate) fn prepare_tools(decls: &mut [ToolDecl]) -> Result<(), String> {
    if let Some(name) = duplicate_tool_name(decls.iter().map(|d| d.spec.name.as_str())) {
        return Err(format!("two tools are named {name:?}"));
    }
    decls.iter_mut().try_for_each(ToolDecl::ensure_validator).map_err(|e| e.to_string())
}

/// The first name (in sorted order) that two of `names` share: the one rule for tool
/// names, applied to a call's tools when it is prepared
/// ([`ClientConfig::prepare`](crate::client::ClientConfig::prepare)) and to a machine's
/// or an agent's configuration when it is made.
pub fn duplicate_tool_name<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.windows(2).find(|pair| pair[0] == pair[1]).map(|pair| pair[0])
}

#[derive(Debug)]
struct PendingCall {
    call: ToolUse,
    run: Option<(ToolRunId, Instant, Duration)>,
    result: Option<ToolResult>,
}

/// The calls of one step and their results.
#[derive(Debug)]
pub(super) struct ToolPhase {
    calls: Vec<PendingCall>,
}

/// True when every call can be answered here: by a handler, or by an error result for
/// an unknown tool. A call to a known tool without a handler belongs to the caller.
pub(super) fn all_runnable(decls: &[ToolDecl], context_tools: &[ToolSpec], calls: &[ToolUse]) -> bool {
    calls.iter().all(|call| match decls.iter().find(|d| d.spec.name == call.name) {
        Some(decl) => decl.executable,
        None => !context_tools.iter().any(|t| t.name == call.name),
    })
}

/// The input a handler may see: a JSON object that passes the tool's validator (which
/// may cast it). Otherwise the message the model gets back.
pub(crate) fn check_input(decl: &ToolDecl, call: &ToolUse) -> Result<serde_json::Value, String> {
    if !call.input.is_object() {
        let got = match &call.input {
            // The accumulator keeps input it could not use as raw text: JSON too deep to
            // take (see `crate::depth`) or no JSON at all. The model is told which.
            serde_json::Value::String(text) if too_deep(text) => {
                format!("JSON nested deeper than {} levels", crate::depth::MAX_DEPTH)
            }
            serde_json::Value::String(_) => "text that is not valid JSON".into(),
            serde_json::Value::Null => "nothing".into(),
            _ => "a JSON value that is not an object".into(),
        };
        return Err(format!("invalid input for tool {:?}: expected a JSON object, got {got}", call.name));
    }
    match &decl.validator {
        // Strict mode sends optional properties as nullable: a `null` there means absent.
        Some(v) => validate_adapted(v.as_ref(), &call.input)
            .map_err(|e| format!("invalid input for tool {:?}: {e}", call.name)),
        None => Ok(call.input.clone()),
    }
}

/// True when `text` is JSON nested deeper than [`crate::depth::MAX_DEPTH`]: it parses
/// and measures too deep, or the parser stopped at its own recursion limit.
fn too_deep(text: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => crate::depth::exceeds(&value, crate::depth::MAX_DEPTH),
        Err(e) => e.to_string().starts_with("recursion limit exceeded"),
    }
}

impl ToolPhase {
    /// Starts the phase: run effects for valid calls to known tools, immediate error
    /// results for the rest.
    pub(super) fn start(
        calls: Vec<ToolUse>,
        decls: &[ToolDecl],
        options: &Options,
        next_id: &mut u64,
        now: Instant,
    ) -> (Self, Vec<Effect>, Vec<ToolResult>) {
        let mut effects = Vec::new();
        let mut immediate = Vec::new();
        let mut pending = Vec::with_capacity(calls.len());
        for call in calls {
            let checked = match decls.iter().find(|d| d.spec.name == call.name) {
                None => Err(format!("unknown tool {:?}", call.name)),
                Some(decl) => check_input(decl, &call).map(|input| (decl, input)),
            };
            let refusal = match checked {
                Err(message) => Some(message),
                Ok((decl, input)) => {
                    let limit = effective_tool_timeout(Some(decl), options);
                    let id = ToolRunId(*next_id);
                    *next_id += 1;
                    effects.push(Effect::RunTool { id, call: ToolUse { input, ..call.clone() } });
                    pending.push(PendingCall { call: call.clone(), run: Some((id, now + limit, limit)), result: None });
                    None
                }
            };
            if let Some(message) = refusal {
                let result = ToolResult::error(&call.id, &call.name, message);
                immediate.push(result.clone());
                pending.push(PendingCall { call, run: None, result: Some(result) });
            }
        }
        (ToolPhase { calls: pending }, effects, immediate)
    }

    /// Records a run's outcome; `None` for unknown or already answered runs.
    pub(super) fn finish(&mut self, id: ToolRunId, outcome: ToolOutcome) -> Option<ToolResult> {
        let pending = self.calls.iter_mut().find(|c| c.result.is_none() && c.run.is_some_and(|(r, ..)| r == id))?;
        let call = &pending.call;
        let result = match outcome {
            ToolOutcome::Ok(content) => {
                ToolResult { tool_use_id: call.id.clone(), name: call.name.clone(), content, is_error: false }
            }
            ToolOutcome::Err(message) => ToolResult::error(&call.id, &call.name, message),
            ToolOutcome::Panicked(message) => {
                ToolResult::error(&call.id, &call.name, format!("the tool failed unexpectedly: {message}"))
            }
        };
        pending.result = Some(result.clone());
        Some(result)
    }

    /// Times out every run whose deadline passed: their ids (to cancel) and results.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<(ToolRunId, ToolResult)> {
        let mut expired = Vec::new();
        for pending in &mut self.calls {
            if let (None, Some((id, deadline, limit))) = (&pending.result, pending.run) {
                if now >= deadline {
                    let call = &pending.call;
                    let result = ToolResult::error(&call.id, &call.name, format!("the tool timed out after {limit:?}"));
                    pending.result = Some(result.clone());
                    expired.push((id, result));
                }
            }
        }
        expired
    }

    /// The earliest deadline of a run still going.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.calls.iter().filter(|c| c.result.is_none()).filter_map(|c| c.run.map(|(_, d, _)| d)).min()
    }

    /// True when every call has a result.
    pub(super) fn is_complete(&self) -> bool {
        self.calls.iter().all(|c| c.result.is_some())
    }

    /// Runs still going, to cancel.
    pub(super) fn cancel_running(self) -> impl Iterator<Item = ToolRunId> {
        self.calls.into_iter().filter(|c| c.result.is_none()).filter_map(|c| c.run.map(|(id, ..)| id))
    }

    /// The results as content blocks, in the order of the calls.
    pub(super) fn into_result_blocks(self) -> Vec<Block> {
        self.calls.into_iter().filter_map(|c| c.result).map(Block::ToolResult).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolSpec;

    fn call(input: serde_json::Value) -> ToolUse {
        ToolUse { id: "c1".into(), name: "t".into(), input, signature: None }
    }

    #[test]
    fn a_tool_time_limit_is_the_tools_own_then_the_option_then_one_default() {
        let spec = ToolSpec { name: "t".into(), description: String::new(), input_schema: serde_json::json!({}) };
        let mut decl = ToolDecl::new(spec, true);
        let mut options = Options::default();
        assert_eq!(effective_tool_timeout(None, &options), Duration::from_secs(60));
        assert_eq!(effective_tool_timeout(Some(&decl), &options), Duration::from_secs(60));
        options.tool_timeout = Some(Duration::from_secs(7));
        assert_eq!(effective_tool_timeout(Some(&decl), &options), Duration::from_secs(7));
        decl.timeout = Some(Duration::from_millis(300));
        assert_eq!(effective_tool_timeout(Some(&decl), &options), Duration::from_millis(300));
    }

    #[test]
    fn unusable_input_is_named_for_the_model() {
        let decl = ToolDecl::new(
            ToolSpec {
                name: "t".into(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
            },
            true,
        );
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let deeper = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
        for (input, expected) in [
            (serde_json::Value::String(deep), "JSON nested deeper than 64 levels"),
            (serde_json::Value::String(deeper), "JSON nested deeper than 64 levels"),
            (serde_json::Value::String("{\"a\": ".into()), "text that is not valid JSON"),
            (serde_json::Value::Null, "nothing"),
            (serde_json::json!([1]), "a JSON value that is not an object"),
        ] {
            let message = check_input(&decl, &call(input)).unwrap_err();
            assert!(message.ends_with(expected), "{message}");
        }
        assert_eq!(check_input(&decl, &call(serde_json::json!({"a": 1}))), Ok(serde_json::json!({"a": 1})));
    }
}
