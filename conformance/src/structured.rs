//! Typed tools, validators and structured output: the scenarios every driver runs
//! through its public API against the [`ReplayServer`](crate::replay::ReplayServer),
//! defined once here with the facts to check.
//!
//! The tool is `city_population`: its input is a [`CityQuery`], its handler looks the
//! city up in a shared [`PopulationStore`] (state the handler captures, and from which
//! the tool's description is built). The structured output is a [`City`]. Custom
//! validators are [`KnownCity`]: they accept only cities of the store, which the schema
//! alone would not, so a rejection proves the custom validator was used.
//!
//! A driver test, for each [`ToolCase`]: start the server with `case.replies`, build the
//! tool (`Tool::from_type_with_state`, or `Tool::with_validator` with
//! [`KnownCity::for_tool`] when `case.custom_validator`), run a call with [`TOOL_PROMPT`],
//! and hand the response and the recorded requests to [`check_tool_case`]. For each
//! [`OutputCase`]: `generate_object::<City>()` with [`OUTPUT_PROMPT`] (plus
//! `output_validator(KnownCity::for_output(..))` when `case.custom_validator`), then
//! [`check_output_case`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::schema::{self, JsonSchemaValidator, SchemaError, ValidationError, Validator};
use omni_protocol::tool::ToolError;
use omni_protocol::{Response, StopReason};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::replay::RecordedRequest;
use crate::scenarios::{paced, text_events, tool_events};
use crate::sim::Reply;

/// The tool's name.
pub const TOOL: &str = "city_population";
/// The prompt of the tool cases.
pub const TOOL_PROMPT: &str = "How many people live in Paris?";
/// The prompt of the structured output cases.
pub const OUTPUT_PROMPT: &str = "The largest city of France, as JSON.";
/// The model's final answer in the tool cases.
pub const FINAL_ANSWER: &str = "Paris has about 2.1 million people.";
/// Asking about this city makes the handler panic.
pub const PANIC_CITY: &str = "Atlantis";

/// The tool's input.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
pub struct CityQuery {
    /// The city's name.
    pub name: String,
}

/// The structured output.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
pub struct City {
    /// The city's name.
    pub name: String,
    /// How many people live there.
    pub population: u64,
}

/// State a tool handler captures: populations, and how often the handler ran.
#[derive(Debug)]
pub struct PopulationStore {
    populations: BTreeMap<String, u64>,
    lookups: AtomicUsize,
}

impl PopulationStore {
    /// A store of Paris and Lyon, shared.
    pub fn new() -> Arc<Self> {
        let populations = BTreeMap::from([("Lyon".to_string(), 522_250), ("Paris".to_string(), 2_102_650)]);
        Arc::new(Self { populations, lookups: AtomicUsize::new(0) })
    }

    /// The tool's description, built from the state.
    pub fn description(&self) -> String {
        let known: Vec<&str> = self.populations.keys().map(String::as_str).collect();
        format!("The population of a city. Known cities: {}.", known.join(", "))
    }

    /// The handler's work. Panics for [`PANIC_CITY`] (the panicking-handler case).
    pub fn lookup(&self, query: CityQuery) -> Result<String, ToolError> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        if query.name == PANIC_CITY {
            panic!("the map of {PANIC_CITY} is lost");
        }
        match self.populations.get(&query.name) {
            Some(population) => Ok(population.to_string()),
            None => Err(ToolError(format!("no population for {:?}", query.name))),
        }
    }

    /// How often [`PopulationStore::lookup`] ran.
    pub fn lookups(&self) -> usize {
        self.lookups.load(Ordering::SeqCst)
    }

    /// The canonical name of a known city, ignoring case and surrounding blanks.
    fn canonical(&self, name: &str) -> Option<&str> {
        self.populations.keys().find(|k| k.eq_ignore_ascii_case(name.trim())).map(String::as_str)
    }
}

/// A custom validator: the schema's checks, then the `name` must be a city of the store;
/// the value is normalised to its canonical name (`" paris "` becomes `"Paris"`).
pub struct KnownCity {
    store: Arc<PopulationStore>,
    schema: JsonSchemaValidator,
}

impl fmt::Debug for KnownCity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnownCity").finish_non_exhaustive()
    }
}

impl KnownCity {
    /// For the tool's input ([`CityQuery`]).
    pub fn for_tool(store: Arc<PopulationStore>) -> Result<Arc<Self>, SchemaError> {
        Ok(Arc::new(Self { store, schema: JsonSchemaValidator::new(schema::for_type::<CityQuery>())? }))
    }

    /// For the structured output ([`City`]).
    pub fn for_output(store: Arc<PopulationStore>) -> Result<Arc<Self>, SchemaError> {
        Ok(Arc::new(Self { store, schema: JsonSchemaValidator::new(schema::for_type::<City>())? }))
    }
}

impl Validator for KnownCity {
    fn schema(&self) -> &Value {
        self.schema.schema()
    }

    fn validate(&self, value: &Value) -> Result<Value, ValidationError> {
        let mut value = self.schema.validate(value)?;
        let name = value.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(canonical) = self.store.canonical(name) else {
            let known: Vec<&str> = self.store.populations.keys().map(String::as_str).collect();
            let message = format!("unknown city {name:?}; known cities: {}", known.join(", "));
            return Err(ValidationError { path: "/name".into(), message });
        };
        value["name"] = Value::String(canonical.to_string());
        Ok(value)
    }
}

/// A tool result the model must see in the second request.
#[derive(Debug, Clone)]
pub struct ExpectedResult {
    /// The call it answers.
    pub tool_use_id: &'static str,
    /// Fragments the result's text contains.
    pub contains: Vec<&'static str>,
    /// Whether it is an error result.
    pub is_error: bool,
}

/// A tool scenario.
#[derive(Debug, Clone)]
pub struct ToolCase {
    /// Short name.
    pub name: &'static str,
    /// What the server answers: the tool call(s), then the final answer.
    pub replies: Vec<Reply>,
    /// Build the tool with `Tool::with_validator` and [`KnownCity::for_tool`].
    pub custom_validator: bool,
    /// The tool results in the second request, in order.
    pub results: Vec<ExpectedResult>,
    /// How often the handler must have run (a rejected input never reaches it).
    pub lookups: usize,
}

fn answer(text: &str) -> Reply {
    paced(&text_events(&[text]), Duration::ZERO)
}

fn calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<(&str, &str, &str)> = calls.iter().map(|(id, input)| (*id, TOOL, *input)).collect();
    paced(&tool_events(&calls), Duration::ZERO)
}

fn result(tool_use_id: &'static str, contains: &[&'static str], is_error: bool) -> ExpectedResult {
    ExpectedResult { tool_use_id, contains: contains.to_vec(), is_error }
}

/// The tool scenarios.
pub fn tool_cases() -> Vec<ToolCase> {
    let case = |name, input: &str, custom_validator, results, lookups| ToolCase {
        name,
        replies: vec![calls(&[("toolu_1", input)]), answer(FINAL_ANSWER)],
        custom_validator,
        results,
        lookups,
    };
    vec![
        case("typed_tool_valid_input", r#"{"name":"Paris"}"#, false, vec![result("toolu_1", &["2102650"], false)], 1),
        case(
            "typed_tool_invalid_input",
            r#"{"city":"Paris"}"#,
            false,
            vec![result("toolu_1", &["invalid input for tool \"city_population\"", "\"name\" is a required"], true)],
            0,
        ),
        case(
            "typed_tool_handler_panics",
            &format!(r#"{{"name":"{PANIC_CITY}"}}"#),
            false,
            vec![result("toolu_1", &["the tool failed unexpectedly: the map of Atlantis is lost"], true)],
            1,
        ),
        ToolCase {
            name: "custom_tool_validator",
            replies: vec![
                calls(&[("toolu_1", r#"{"name":" paris "}"#), ("toolu_2", r#"{"name":"Gotham"}"#)]),
                answer(FINAL_ANSWER),
            ],
            custom_validator: true,
            results: vec![
                result("toolu_1", &["2102650"], false),
                result(
                    "toolu_2",
                    &["invalid input for tool \"city_population\": at /name: unknown city \"Gotham\""],
                    true,
                ),
            ],
            lookups: 1,
        },
    ]
}

/// Checks a tool case: the tool as declared in the first request, the results the model
/// saw in the second, the handler runs, and the final answer.
pub fn check_tool_case(case: &ToolCase, store: &PopulationStore, requests: &[RecordedRequest], response: &Response) {
    let name = case.name;
    assert_eq!(requests.len(), 2, "{name}: the call and the answer after the tool results");
    let first = body(&requests[0]);
    let declared = first["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == TOOL));
    let declared = declared.unwrap_or_else(|| panic!("{name}: the tool is declared: {first}"));
    assert_eq!(declared["description"], store.description(), "{name}: the description comes from the state");
    assert_eq!(declared["input_schema"], schema::for_type::<CityQuery>(), "{name}: the schema comes from the type");
    let seen = tool_results(&requests[1]);
    assert_eq!(seen.len(), case.results.len(), "{name}: tool results {seen:?}");
    for (expected, (id, text, is_error)) in case.results.iter().zip(&seen) {
        assert_eq!(id, expected.tool_use_id, "{name}: results in the order of the calls");
        assert_eq!(*is_error, expected.is_error, "{name}: {text}");
        for fragment in &expected.contains {
            assert!(text.contains(fragment), "{name}: {text:?} should contain {fragment:?}");
        }
    }
    assert_eq!(store.lookups(), case.lookups, "{name}: handler runs");
    assert_eq!(response.text(), FINAL_ANSWER, "{name}");
    assert_eq!(response.stop_reason, Some(StopReason::Stop), "{name}");
}

/// What a structured output call must end with.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpectedOutput {
    /// This value.
    Object(City),
    /// The driver's `Error::Output`, its error containing this fragment.
    Error(&'static str),
}

/// A structured output scenario.
#[derive(Debug, Clone)]
pub struct OutputCase {
    /// Short name.
    pub name: &'static str,
    /// What the server answers.
    pub replies: Vec<Reply>,
    /// Plug [`KnownCity::for_output`] in with `Call::output_validator`.
    pub custom_validator: bool,
    /// The outcome.
    pub expected: ExpectedOutput,
    /// A fragment of the correction the second request ends with, if one is asked.
    pub correction: Option<&'static str>,
    /// The stop reason of the response carried by the error.
    pub stop: StopReason,
}

/// A driver's `Error::Output`, in neutral form.
#[derive(Debug, Clone)]
pub struct OutputFailure {
    /// The error.
    pub error: String,
    /// The response.
    pub response: Response,
}

const PARIS: &str = r#"{"name": "Paris", "population": 2102650}"#;

/// The structured output scenarios.
pub fn output_cases() -> Vec<OutputCase> {
    let paris = || ExpectedOutput::Object(City { name: "Paris".into(), population: 2_102_650 });
    let base = |name, replies, expected| OutputCase {
        name,
        replies,
        custom_validator: false,
        expected,
        correction: None,
        stop: StopReason::Stop,
    };
    let bad = || answer("Paris, about two million people.");
    let mut cut = text_events(&[r#"{"name": "Par"#]);
    if let Some(last) = cut.last_mut() {
        *last = last.replace("end_turn", "max_tokens");
    }
    vec![
        base("output_valid_at_once", vec![answer(PARIS)], paris()),
        OutputCase {
            correction: Some(
                "Your previous reply could not be used: the reply does not match the schema: at /population",
            ),
            ..base(
                "output_invalid_then_valid",
                vec![answer(r#"{"name": "Paris", "population": "about two million"}"#), answer(PARIS)],
                paris(),
            )
        },
        OutputCase {
            correction: Some("Your previous reply could not be used: the reply is not valid JSON"),
            ..base(
                "output_three_corrections_fail",
                vec![bad(), bad(), bad(), bad()],
                ExpectedOutput::Error("the reply is not valid JSON"),
            )
        },
        OutputCase {
            stop: StopReason::Length,
            ..base(
                "output_cut_by_length",
                vec![paced(&cut, Duration::ZERO)],
                ExpectedOutput::Error("cut by the output token limit"),
            )
        },
        OutputCase {
            custom_validator: true,
            correction: Some("at /name: unknown city \"Gotham\""),
            ..base(
                "custom_output_validator",
                vec![answer(r#"{"name": "Gotham", "population": 1}"#), answer(PARIS)],
                paris(),
            )
        },
    ]
}

/// Checks an output case: the schema sent, the number of requests, the correction, and
/// the outcome.
pub fn check_output_case(case: &OutputCase, outcome: Result<City, OutputFailure>, requests: &[RecordedRequest]) {
    let name = case.name;
    assert_eq!(requests.len(), case.replies.len(), "{name}: one request per reply");
    let first = body(&requests[0]);
    let format = &first["output_config"]["format"];
    assert_eq!(format["type"], "json_schema", "{name}: {first}");
    // The type's schema, as fitted to Anthropic's structured outputs.
    let sent = schema::adapt::anthropic_output(&schema::for_type::<City>()).0;
    assert_eq!(format["schema"], sent, "{name}: the schema comes from the type");
    if let Some(fragment) = case.correction {
        let second = body(&requests[1]);
        let asked = last_user_text(&second);
        assert!(asked.contains(fragment), "{name}: {asked:?} should contain {fragment:?}");
    }
    match (&case.expected, outcome) {
        (ExpectedOutput::Object(expected), Ok(city)) => assert_eq!(&city, expected, "{name}"),
        (ExpectedOutput::Error(fragment), Err(failure)) => {
            assert!(failure.error.contains(fragment), "{name}: {:?} should contain {fragment:?}", failure.error);
            assert_eq!(failure.response.output_error.as_deref(), Some(failure.error.as_str()), "{name}");
            assert_eq!(failure.response.stop_reason, Some(case.stop), "{name}");
            assert_eq!(failure.response.messages.len(), 2 * case.replies.len() - 1, "{name}: replies and corrections");
        }
        (expected, outcome) => panic!("{name}: expected {expected:?}, got {outcome:?}"),
    }
}

fn body(request: &RecordedRequest) -> Value {
    serde_json::from_slice(&request.body).unwrap_or_else(|e| panic!("request body is JSON: {e}"))
}

/// The tool results of the request's last message: (tool_use_id, text, is_error).
pub fn tool_results(request: &RecordedRequest) -> Vec<(String, String, bool)> {
    let body = body(request);
    let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    let blocks = last["content"].as_array().cloned().unwrap_or_default();
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
                _ => String::new(),
            };
            let id = b["tool_use_id"].as_str().unwrap_or_default().to_string();
            (id, text, b["is_error"] == json!(true))
        })
        .collect()
}

/// The text of the body's last message (a user turn: the correction).
fn last_user_text(body: &Value) -> String {
    let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    assert_eq!(last["role"], "user", "{body}");
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}
