//! The telemetry checks, written once and run through every driver's public API
//! (`conformance/tests/telemetry.rs`): the exact spans, names, parents and attributes
//! of a text call, a two-step tool loop, a retried request, a failure, an agent's turn
//! with a tool, a session's turn; no secret in any recorded value with content capture
//! on. A driver implements [`TelemetryDriver`] (three operations); the scenarios, their
//! mock providers and the checks are here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use omni_protocol::{Dialect, Options};
use omni_shell::telemetry::{instruments, MetricAttributes, Metrics, TokenType};
use omni_shell::{ClientBuilder, Connect};
use omni_testkit::http::Reply;
use omni_testkit::{MockProvider, Turn, MODEL_ID, PROVIDER_ID};
use serde_json::json;

use crate::telemetry_capture::{Capture, SpanRecord};

/// The key the secrets check gives the client (and the mock expects).
pub const SECRET_KEY: &str = "sk-telemetry-key-4f1e9a";
/// A secret header's value the secrets check sends with each request.
pub const SECRET_HEADER: &str = "hdr-telemetry-secret-77c2";
/// The password of the proxy the secrets check goes through (a port nothing listens on).
pub const PROXY_PASSWORD: &str = "proxy-telemetry-pw-91d0";
/// The system prompt of the content check.
pub const SYSTEM: &str = "You answer about the weather.";
/// The prompt of every scenario.
pub const PROMPT: &str = "What is the weather in Paris?";
/// What the `lookup` tool answers.
pub const TOOL_ANSWER: &str = "sunny";

/// What one driver does for the suite, through its public API. `root` is entered while
/// the call, agent or session is started (never across an await): omni's spans go under
/// the span current then.
pub trait TelemetryDriver {
    /// A client of `mock` (its provider registered), with `settings`.
    fn client_for(&mut self, mock: &MockProvider, settings: Settings);
    /// A call with the `lookup` tool (a tool whose handler emits a `tracing` event of
    /// its own, target `omni_test_tool`, and answers [`TOOL_ANSWER`]), run to its end.
    /// `Err` holds the error's text.
    fn call(&mut self, root: &tracing::Span, system: Option<&str>, options: Options) -> Result<String, String>;
    /// An agent with the `lookup` tool, started under `root`, prompted once (under
    /// `prompt_under` when given: the prompt's future polled inside it), until its turn
    /// ends.
    fn agent_turn(&mut self, root: &tracing::Span, prompt_under: Option<&tracing::Span>);
    /// A session (memory store) with the `lookup` tool, prompted once, until its turn
    /// ends; returns the session's id.
    fn session_turn(&mut self, root: &tracing::Span) -> String;
}

/// A client's telemetry settings in a scenario.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `ClientBuilder::capture_content`.
    pub content: bool,
    /// The key, if any.
    pub key: Option<&'static str>,
    /// `ClientBuilder::metrics`.
    pub metrics: Option<RecordingMetrics>,
    /// `ClientBuilder::proxy` instead of `no_proxy`.
    pub proxy: Option<&'static str>,
}

impl Settings {
    /// A client builder of any driver for `mock` with these settings.
    pub fn apply<D: Connect>(&self, mock: &MockProvider, builder: ClientBuilder<D>) -> ClientBuilder<D> {
        let builder = builder.provider(mock.provider()).capture_content(self.content);
        let builder = match self.proxy {
            Some(proxy) => builder.proxy(proxy),
            None => builder.no_proxy(),
        };
        let builder = match self.key {
            Some(key) => builder.api_key(PROVIDER_ID, key),
            None => builder,
        };
        match self.metrics.clone() {
            Some(metrics) => builder.metrics(metrics),
            None => builder,
        }
    }
}

/// One measurement, as [`RecordingMetrics`] keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The instrument's name.
    pub instrument: &'static str,
    /// The value.
    pub value: f64,
    /// `gen_ai.token.type`, for token usage.
    pub token_type: Option<&'static str>,
    /// The attributes.
    pub attributes: MetricAttributes,
}

/// Metrics that keep every measurement.
#[derive(Debug, Clone, Default)]
pub struct RecordingMetrics(Arc<Mutex<Vec<Measurement>>>);

impl RecordingMetrics {
    /// What was measured so far.
    pub fn taken(&self) -> Vec<Measurement> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn push(&self, instrument: &'static str, value: f64, token_type: Option<TokenType>, attributes: &MetricAttributes) {
        let token_type = token_type.map(TokenType::as_str);
        let measurement = Measurement { instrument, value, token_type, attributes: attributes.clone() };
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(measurement);
    }
}

impl Metrics for RecordingMetrics {
    fn token_usage(&self, tokens: u64, token_type: TokenType, attributes: &MetricAttributes) {
        self.push(instruments::TOKEN_USAGE, tokens as f64, Some(token_type), attributes);
    }
    fn operation_duration(&self, seconds: f64, attributes: &MetricAttributes) {
        self.push(instruments::OPERATION_DURATION, seconds, None, attributes);
    }
    fn time_to_first_chunk(&self, seconds: f64, attributes: &MetricAttributes) {
        self.push(instruments::TIME_TO_FIRST_CHUNK, seconds, None, attributes);
    }
}

/// Every attribute a `chat` span declares, by the conventions' names.
pub const CHAT_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.request.top_p",
    "gen_ai.request.top_k",
    "gen_ai.request.frequency_penalty",
    "gen_ai.request.presence_penalty",
    "gen_ai.request.seed",
    "gen_ai.request.stop_sequences",
    "gen_ai.conversation.id",
    "server.address",
    "server.port",
    "gen_ai.response.id",
    "gen_ai.response.model",
    "gen_ai.response.finish_reasons",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
    "error.type",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
];

/// Every attribute an `execute_tool` span declares.
pub const TOOL_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.conversation.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "error.type",
];

/// Every attribute an `invoke_agent` span declares.
pub const AGENT_ATTRIBUTES: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.conversation.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "error.type",
];

/// Anthropic's documented stream for "Hello", with a prompt partly read from and written
/// to the cache: the conventions' input tokens are 10 + 30 + 5.
fn cached_anthropic_reply() -> Turn {
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_telemetry_1", "type": "message",
            "role": "assistant", "model": "mock-model-2026", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 30, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Hello"}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 7}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let body: String = events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect();
    Turn::body("text/event-stream", body)
}

fn start_mock(dialect: Dialect) -> MockProvider {
    MockProvider::start(dialect).expect("the mock provider")
}

fn test_root(case: &'static str) -> tracing::Span {
    let _ = Capture::global();
    tracing::info_span!(target: "omni_test", "test", case)
}

fn field<'a>(span: &'a SpanRecord, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

fn expect_field(span: &SpanRecord, name: &str, value: &str) {
    assert_eq!(field(span, name), Some(value), "{name} of {} ({:?})", span.name, span.fields);
}

/// Checks what every span of omni's has: its declared attributes, nothing recorded that
/// was not declared, closed, the conventions' `otel.name`.
fn well_formed(span: &SpanRecord, declared: &[&str]) {
    for name in declared {
        assert!(span.declared.contains(name), "{} does not declare {name}: {:?}", span.name, span.declared);
    }
    assert!(span.undeclared.is_empty(), "{} recorded undeclared fields {:?}", span.name, span.undeclared);
    assert!(span.closed, "{} was left open", span.name);
    assert_eq!(span.target, "omni");
}

fn names(spans: &[SpanRecord]) -> Vec<&'static str> {
    spans.iter().map(|s| s.name).collect()
}

/// A text call: one `chat` span under the caller's span, with every request attribute,
/// the response's id and model, usage with cached tokens summed, time to first chunk.
pub fn text_call(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::AnthropicMessages);
    mock.push(cached_anthropic_reply());
    driver.client_for(&mock, Settings::default());
    let root = test_root("text");
    let mut options = Options { max_tokens: Some(100), temperature: Some(0.5), top_p: Some(0.9), ..Options::default() };
    options.stop = vec!["END".into()];
    options.extra.insert("seed".into(), json!(42));
    let text = driver.call(&root, None, options).expect("the call");
    assert_eq!(text, "Hello");
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat"], "{spans:#?}");
    let chat = &spans[0];
    well_formed(chat, CHAT_ATTRIBUTES);
    assert_eq!(chat.parent, root.id().map(|id| id.into_u64()));
    let port = mock.base_url().split(':').nth(2).and_then(|p| p.split('/').next()).map(str::to_string);
    for (name, value) in [
        ("otel.name", format!("chat {MODEL_ID}")),
        ("otel.kind", "client".into()),
        ("gen_ai.operation.name", "chat".into()),
        ("gen_ai.provider.name", PROVIDER_ID.into()),
        ("gen_ai.request.model", MODEL_ID.into()),
        ("gen_ai.request.max_tokens", "100".into()),
        ("gen_ai.request.temperature", "0.5".into()),
        ("gen_ai.request.top_p", "0.9".into()),
        ("gen_ai.request.seed", "42".into()),
        ("gen_ai.request.stop_sequences", r#"["END"]"#.into()),
        ("server.address", "127.0.0.1".into()),
        ("server.port", port.expect("a port")),
        ("gen_ai.response.id", "msg_telemetry_1".into()),
        ("gen_ai.response.model", "mock-model-2026".into()),
        ("gen_ai.response.finish_reasons", r#"["stop"]"#.into()),
        ("gen_ai.usage.input_tokens", "45".into()),
        ("gen_ai.usage.output_tokens", "7".into()),
        ("gen_ai.usage.cache_read.input_tokens", "30".into()),
        ("gen_ai.usage.cache_creation.input_tokens", "5".into()),
        ("gen_ai.usage.reasoning.output_tokens", "0".into()),
    ] {
        expect_field(chat, name, &value);
    }
    let first_chunk: f64 =
        field(chat, "gen_ai.response.time_to_first_chunk").expect("time to first chunk").parse().expect("seconds");
    assert!((0.0..60.0).contains(&first_chunk), "{first_chunk}");
    for absent in
        ["error.type", "otel.status_code", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.conversation.id"]
    {
        assert_eq!(field(chat, absent), None, "{absent} without content capture or error");
    }
}

/// A two-step tool loop: `chat` (finish `tool_call`), `execute_tool` (the tool's own
/// event inside it), `chat` (finish `stop`), all under the caller's span.
pub fn tool_loop(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::OpenaiCompletions);
    mock.push(Turn::tool_call("lookup", json!({"city": "Paris"})).usage(11, 3));
    mock.push(Turn::text("It is sunny.").usage(20, 4));
    driver.client_for(&mock, Settings::default());
    let root = test_root("tool loop");
    driver.call(&root, None, Options::default()).expect("the call");
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat", "execute_tool", "chat"], "{spans:#?}");
    let root_id = root.id().map(|id| id.into_u64());
    assert!(spans.iter().all(|s| s.parent == root_id), "all three under the caller's span: {spans:#?}");
    let (first, tool, second) = (&spans[0], &spans[1], &spans[2]);
    well_formed(first, CHAT_ATTRIBUTES);
    well_formed(tool, TOOL_ATTRIBUTES);
    well_formed(second, CHAT_ATTRIBUTES);
    expect_field(first, "gen_ai.response.finish_reasons", r#"["tool_call"]"#);
    expect_field(first, "gen_ai.usage.input_tokens", "11");
    expect_field(second, "gen_ai.response.finish_reasons", r#"["stop"]"#);
    expect_field(second, "gen_ai.usage.output_tokens", "4");
    expect_field(tool, "otel.name", "execute_tool lookup");
    expect_field(tool, "gen_ai.operation.name", "execute_tool");
    expect_field(tool, "gen_ai.tool.name", "lookup");
    expect_field(tool, "gen_ai.tool.type", "function");
    let call_id = field(tool, "gen_ai.tool.call.id").expect("the call's id");
    let asked = &mock.requests()[1].body;
    assert!(String::from_utf8_lossy(asked).contains(call_id), "the id the model gave, {call_id}");
    assert_eq!(field(tool, "error.type"), None);
    assert!(
        tool.events.iter().any(|e| e.fields.get("message").is_some_and(|m| m == "inside the tool")),
        "the tool's own event nests under its span: {:?}",
        tool.events
    );
}

/// A request answered 503 then streamed: one `chat` span with one `retrying` event.
pub fn retried(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::OpenaiCompletions);
    mock.push(Turn::error(503, "busy").retry_after(0));
    mock.push(Turn::text("ok"));
    driver.client_for(&mock, Settings::default());
    let root = test_root("retried");
    driver.call(&root, None, Options::default()).expect("the call");
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat"], "{spans:#?}");
    let chat = &spans[0];
    well_formed(chat, CHAT_ATTRIBUTES);
    let retries: Vec<&BTreeMap<String, String>> = chat
        .events
        .iter()
        .filter(|e| e.fields.get("message").is_some_and(|m| m == "retrying"))
        .map(|e| &e.fields)
        .collect();
    assert_eq!(retries.len(), 1, "{:?}", chat.events);
    assert_eq!(retries[0].get("retry.attempt").map(String::as_str), Some("1"));
    assert!(retries[0].get("error.type").is_some_and(|t| t == "overloaded" || t == "server_error"), "{retries:?}");
    expect_field(chat, "gen_ai.response.finish_reasons", r#"["stop"]"#);
    assert_eq!(field(chat, "error.type"), None);
}

/// A request refused (400): the `chat` span carries `error.type` and the error status.
pub fn failure(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::OpenaiCompletions);
    mock.push(Turn::error(400, "the request is malformed"));
    driver.client_for(&mock, Settings::default());
    let root = test_root("failure");
    assert!(driver.call(&root, None, Options::default()).is_err(), "a 400 fails the call");
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat"], "{spans:#?}");
    let chat = &spans[0];
    well_formed(chat, CHAT_ATTRIBUTES);
    expect_field(chat, "error.type", "invalid_request");
    expect_field(chat, "otel.status_code", "ERROR");
    assert_eq!(field(chat, "gen_ai.response.finish_reasons"), None);
}

fn agent_mock() -> MockProvider {
    let mock = start_mock(Dialect::OpenaiCompletions);
    mock.push(Turn::tool_call("lookup", json!({"city": "Paris"})).usage(11, 3));
    mock.push(Turn::text("It is sunny.").usage(20, 4));
    mock
}

/// `invoke_agent` under the span current at the start, its steps inside it.
fn check_turn(spans: &[SpanRecord], root: &tracing::Span, conversation: Option<&str>) {
    assert_eq!(names(spans), ["invoke_agent", "chat", "execute_tool", "chat"], "{spans:#?}");
    let turn = &spans[0];
    well_formed(turn, AGENT_ATTRIBUTES);
    assert_eq!(turn.parent, root.id().map(|id| id.into_u64()));
    assert!(spans[1..].iter().all(|s| s.parent == Some(turn.id)), "the steps inside the turn: {spans:#?}");
    expect_field(turn, "otel.name", "invoke_agent");
    expect_field(turn, "gen_ai.operation.name", "invoke_agent");
    expect_field(turn, "gen_ai.provider.name", PROVIDER_ID);
    expect_field(turn, "gen_ai.request.model", MODEL_ID);
    expect_field(turn, "gen_ai.usage.input_tokens", "31");
    expect_field(turn, "gen_ai.usage.output_tokens", "7");
    assert_eq!(field(turn, "error.type"), None);
    for span in spans {
        assert_eq!(field(span, "gen_ai.conversation.id"), conversation, "{} {:?}", span.name, span.fields);
    }
    well_formed(&spans[1], CHAT_ATTRIBUTES);
    well_formed(&spans[2], TOOL_ATTRIBUTES);
    well_formed(&spans[3], CHAT_ATTRIBUTES);
}

/// An agent's turn with a tool: under the span current where the agent started, or
/// where its prompt was sent, when it was sent inside one.
pub fn agent_turn(driver: &mut impl TelemetryDriver) {
    let mock = agent_mock();
    driver.client_for(&mock, Settings::default());
    let root = test_root("agent");
    driver.agent_turn(&root, None);
    check_turn(&Capture::global().under(&root), &root, None);

    let mock = agent_mock();
    driver.client_for(&mock, Settings::default());
    let (started, prompted) = (test_root("agent started"), test_root("agent prompted"));
    driver.agent_turn(&started, Some(&prompted));
    check_turn(&Capture::global().under(&prompted), &prompted, None);
    assert!(Capture::global().under(&started).is_empty(), "the turn goes under the prompt's span");
}

/// A session's turn: the agent's spans, with the session's id as the conversation's.
pub fn session_turn(driver: &mut impl TelemetryDriver) {
    let mock = agent_mock();
    driver.client_for(&mock, Settings::default());
    let root = test_root("session");
    let id = driver.session_turn(&root);
    check_turn(&Capture::global().under(&root), &root, Some(&id));
}

/// Content capture on: the messages, system instructions, tool definitions, arguments
/// and results are recorded; the key and a secret header never are, in any span or
/// event of the process, whatever the server echoes.
pub fn content_without_secrets(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::OpenaiCompletions).with_key(SECRET_KEY);
    mock.push(Turn::tool_call("lookup", json!({"city": "Paris"})));
    mock.push(Turn::text("It is sunny."));
    mock.push(Turn::error(401, format!("invalid key {SECRET_KEY} with {SECRET_HEADER}")));
    driver.client_for(&mock, Settings { content: true, key: Some(SECRET_KEY), ..Settings::default() });
    let options = || Options {
        headers: vec![("x-telemetry-secret".into(), SECRET_HEADER.into())],
        secret_headers: vec!["x-telemetry-secret".into()],
        ..Options::default()
    };
    let root = test_root("content");
    driver.call(&root, Some(SYSTEM), options()).expect("the call");
    assert!(driver.call(&root, Some(SYSTEM), options()).is_err(), "the 401 fails");
    assert!(mock.sent_key(), "the key went to the provider");
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat", "execute_tool", "chat", "chat"], "{spans:#?}");
    let first = &spans[0];
    let input = field(first, "gen_ai.input.messages").expect("input messages captured");
    let messages: serde_json::Value = serde_json::from_str(input).expect("JSON");
    assert_eq!(messages, json!([{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]));
    let system: serde_json::Value =
        serde_json::from_str(field(first, "gen_ai.system_instructions").expect("system")).expect("JSON");
    assert_eq!(system, json!([{"type": "text", "content": SYSTEM}]));
    let tools: serde_json::Value =
        serde_json::from_str(field(first, "gen_ai.tool.definitions").expect("tools")).expect("JSON");
    assert_eq!(tools[0]["name"], "lookup");
    assert_eq!(tools[0]["type"], "function");
    let output: serde_json::Value =
        serde_json::from_str(field(first, "gen_ai.output.messages").expect("output")).expect("JSON");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["finish_reason"], "tool_call");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["arguments"], json!({"city": "Paris"}));
    let tool = &spans[1];
    let arguments: serde_json::Value =
        serde_json::from_str(field(tool, "gen_ai.tool.call.arguments").expect("arguments")).expect("JSON");
    assert_eq!(arguments, json!({"city": "Paris"}));
    expect_field(tool, "gen_ai.tool.call.result", TOOL_ANSWER);
    let second_input = field(&spans[2], "gen_ai.input.messages").expect("the second step's input");
    let second: serde_json::Value = serde_json::from_str(second_input).expect("JSON");
    assert_eq!(second[2]["role"], "tool", "{second}");
    assert_eq!(second[2]["parts"][0]["type"], "tool_call_response");
    expect_field(&spans[3], "error.type", "authentication");

    // Through a proxy with credentials (none listens: the call fails to connect, or goes
    // around it for loopback); its password is in no span either.
    let proxied = start_mock(Dialect::OpenaiCompletions);
    proxied.push(Turn::text("ok"));
    let proxy = Box::leak(format!("http://user:{PROXY_PASSWORD}@127.0.0.1:9").into_boxed_str());
    let settings = Settings { content: true, key: Some(SECRET_KEY), proxy: Some(proxy), ..Settings::default() };
    driver.client_for(&proxied, settings);
    let root = test_root("proxied");
    let _ = driver.call(&root, Some(SYSTEM), options());
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat"], "{spans:#?}");
    assert_eq!(field(&spans[0], "server.address"), Some("127.0.0.1"), "the provider's host, not the proxy's");
    for value in Capture::global().all_text() {
        for secret in [SECRET_KEY, SECRET_HEADER, PROXY_PASSWORD] {
            assert!(!value.contains(secret), "a secret was recorded: {value}");
        }
    }
}

/// A same-origin redirect: one `chat` span, the redirect an event on it.
pub fn redirected(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::OpenaiCompletions);
    mock.push(Turn::http(Reply::error(307, &[("location", "/v1/chat/completions")], "")));
    mock.push(Turn::text("ok"));
    driver.client_for(&mock, Settings::default());
    let root = test_root("redirected");
    driver.call(&root, None, Options::default()).expect("the call");
    let spans = Capture::global().under(&root);
    assert_eq!(names(&spans), ["chat"], "{spans:#?}");
    let chat = &spans[0];
    well_formed(chat, CHAT_ATTRIBUTES);
    let redirects: Vec<&BTreeMap<String, String>> = chat
        .events
        .iter()
        .filter(|e| e.fields.get("message").is_some_and(|m| m == "redirected"))
        .map(|e| &e.fields)
        .collect();
    assert_eq!(redirects.len(), 1, "{:?}", chat.events);
    assert_eq!(redirects[0].get("http.response.status_code").map(String::as_str), Some("307"));
    expect_field(chat, "gen_ai.response.finish_reasons", r#"["stop"]"#);
}

/// The conventions' metrics for a two-step tool loop: per inference, its duration, its
/// time to first chunk, and its input and output tokens, with the request's attributes;
/// a failed inference's with `error.type`.
pub fn metrics(driver: &mut impl TelemetryDriver) {
    let mock = start_mock(Dialect::OpenaiCompletions);
    mock.push(Turn::tool_call("lookup", json!({"city": "Paris"})).usage(11, 3));
    mock.push(Turn::text("It is sunny.").usage(20, 4));
    mock.push(Turn::error(400, "no"));
    let recorded = RecordingMetrics::default();
    driver.client_for(&mock, Settings { metrics: Some(recorded.clone()), ..Settings::default() });
    let root = test_root("metrics");
    driver.call(&root, None, Options::default()).expect("the call");
    assert!(driver.call(&root, None, Options::default()).is_err());
    let taken = recorded.taken();
    let of = |instrument: &str| taken.iter().filter(|m| m.instrument == instrument).collect::<Vec<_>>();
    let durations = of(instruments::OPERATION_DURATION);
    assert_eq!(durations.len(), 3, "{taken:#?}");
    assert_eq!(of(instruments::TIME_TO_FIRST_CHUNK).len(), 2, "no first chunk for the refused request: {taken:#?}");
    let tokens: Vec<(Option<&str>, f64)> =
        of(instruments::TOKEN_USAGE).iter().map(|m| (m.token_type, m.value)).collect();
    assert_eq!(tokens, [(Some("input"), 11.0), (Some("output"), 3.0), (Some("input"), 20.0), (Some("output"), 4.0)]);
    for measurement in &taken {
        let a = &measurement.attributes;
        assert_eq!(
            (a.operation_name, a.provider_name.as_str(), a.request_model.as_str()),
            ("chat", PROVIDER_ID, MODEL_ID)
        );
        assert_eq!(a.server_address.as_deref(), Some("127.0.0.1"));
        assert!(measurement.value >= 0.0);
    }
    assert_eq!(durations[0].attributes.error_type, None);
    assert_eq!(durations[2].attributes.error_type, Some("invalid_request"));
    let pairs = durations[2].attributes.pairs();
    assert!(pairs.iter().any(|(name, _)| *name == "error.type"), "{pairs:?}");
}

/// Every dialect's inference gets the same `chat` span: usage, finish reason and the
/// first chunk, whatever the wire format.
pub fn every_dialect(driver: &mut impl TelemetryDriver) {
    for dialect in [
        Dialect::AnthropicMessages,
        Dialect::OpenaiCompletions,
        Dialect::OpenaiResponses,
        Dialect::GoogleGemini,
        Dialect::OllamaChat,
    ] {
        let mock = start_mock(dialect);
        mock.push(Turn::text("Hello there.").usage(12, 5));
        driver.client_for(&mock, Settings::default());
        let root = test_root("dialect");
        let text = driver.call(&root, None, Options::default()).expect("the call");
        assert_eq!(text, "Hello there.", "{dialect:?}");
        let spans = Capture::global().under(&root);
        assert_eq!(names(&spans), ["chat"], "{dialect:?}: {spans:#?}");
        let chat = &spans[0];
        well_formed(chat, CHAT_ATTRIBUTES);
        expect_field(chat, "gen_ai.response.finish_reasons", r#"["stop"]"#);
        expect_field(chat, "gen_ai.usage.input_tokens", "12");
        expect_field(chat, "gen_ai.usage.output_tokens", "5");
        assert!(field(chat, "gen_ai.response.time_to_first_chunk").is_some(), "{dialect:?}");
        assert!(field(chat, "gen_ai.response.model").is_some(), "{dialect:?}");
    }
}

/// Every check, in one driver.
pub fn all(driver: &mut impl TelemetryDriver) {
    text_call(driver);
    every_dialect(driver);
    tool_loop(driver);
    retried(driver);
    redirected(driver);
    metrics(driver);
    failure(driver);
    agent_turn(driver);
    session_turn(driver);
    content_without_secrets(driver);
}
