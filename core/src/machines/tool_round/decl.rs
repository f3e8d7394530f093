//! What a tool is to the machines, and the rules every tool round applies to one: unique
//! names, the input a handler may see, the time a call may take.

use std::sync::Arc;
use std::time::Duration;

use crate::data::message::{InvalidCallInput, ToolSpec, ToolUse};
use crate::data::options::Options;
use crate::data::schema::adapt::validate_adapted;
use crate::data::schema::{JsonSchemaValidator, SchemaError, Validator};

/// A tool as the machines see it.
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
        Self { spec, executable, timeout: None, validator: None }
    }

    /// Compiles the validator from the input schema if none was given.
    pub(crate) fn ensure_validator(&mut self) -> Result<(), SchemaError> {
        if self.validator.is_none() && self.executable {
            let compiled = JsonSchemaValidator::new(self.spec.input_schema.clone())
                .map_err(|e| SchemaError::Invalid(format!("tool {:?}: {e}", self.spec.name)))?;
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
/// ([`ClientConfig::prepare`](crate::machines::client::ClientConfig::prepare)) and to a machine's
/// or an agent's configuration when it is made.
pub(crate) fn duplicate_tool_name<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.windows(2).find(|pair| pair[0] == pair[1]).map(|pair| pair[0])
}

/// Default time one tool call may take, in a call's tool loop and in an agent alike
/// (see `effective_tool_timeout`, the one rule).
///
/// Why 60 s: a tool is real work the model asked for (a web search or fetch, a query, a
/// shell command, another model), and most of it is network-bound: a few seconds on a
/// good day, tens of seconds on a slow one. A limit that cuts such a call only turns it
/// into an error the model sees, and the model usually calls again (a second wait and a
/// second request to pay). 5 s (the agent's old default, the one of Elixir's
/// `Task.yield_many` that the Elixir library Omni keeps for both its loop and its agent)
/// cuts those; 60 s cuts only a tool that hung, at a cost small beside a step's own
/// time (a model's answer takes seconds to minutes). One default for both machines: a
/// tool does not get faster when an agent calls it.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// The time limit of one tool call, the one rule for every machine: the tool's own limit
/// ([`ToolDecl::timeout`]), else the `tool_timeout` option, else [`DEFAULT_TOOL_TIMEOUT`].
pub(crate) fn effective_tool_timeout(decl: Option<&ToolDecl>, options: &Options) -> Duration {
    decl.and_then(|d| d.timeout).or(options.tool_timeout).unwrap_or(DEFAULT_TOOL_TIMEOUT)
}

/// The most of what the model wrote that an error result quotes.
const QUOTED: usize = 600;

/// What the model is told of a call that cannot run: the parser's reason, and (bounded)
/// what it wrote, so that it can see the mistake.
pub(crate) fn invalid_call_message(call: &ToolUse, invalid: &InvalidCallInput) -> String {
    let mut message = format!("your call of tool {:?} was not run: {}", call.name, invalid.reason);
    if let Some(wrote) = invalid.raw.as_deref().or_else(|| call.input.as_str()) {
        let mut quoted: String = wrote.chars().take(QUOTED).collect();
        if quoted.len() < wrote.len() {
            quoted.push_str(" [...]");
        }
        message.push_str(". You wrote: ");
        message.push_str(&quoted);
    }
    message
}

/// The input a handler may see: a JSON object that passes the tool's validator (which
/// may cast it). Otherwise the message the model gets back.
pub(crate) fn check_input(decl: &ToolDecl, call: &ToolUse) -> Result<serde_json::Value, String> {
    if let Some(invalid) = &call.invalid {
        return Err(invalid_call_message(call, invalid));
    }
    if !call.input.is_object() {
        let got = match &call.input {
            // The accumulator keeps input it could not use as raw text: JSON too deep to
            // take (see `crate::data::depth`) or no JSON at all. The model is told which.
            serde_json::Value::String(text) if too_deep(text) => {
                format!("JSON nested deeper than {} levels", crate::data::depth::MAX_DEPTH)
            }
            serde_json::Value::String(_) => "text that is not valid JSON".into(),
            serde_json::Value::Null => "nothing".into(),
            serde_json::Value::Bool(_)
            | serde_json::Value::Number(_)
            | serde_json::Value::Array(_)
            | serde_json::Value::Object(_) => "a JSON value that is not an object".into(),
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

/// True when `text` is JSON nested deeper than [`crate::data::depth::MAX_DEPTH`]: it parses
/// and measures too deep, or the parser stopped at its own recursion limit.
fn too_deep(text: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => crate::data::depth::exceeds(&value, crate::data::depth::MAX_DEPTH),
        Err(e) => e.to_string().starts_with("recursion limit exceeded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(input: serde_json::Value) -> ToolUse {
        ToolUse { invalid: None, id: "c1".into(), name: "t".into(), input, signature: None }
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
