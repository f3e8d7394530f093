//! The generate scenarios of every wire: one definition, five dialects. Each scenario
//! (a text stream, a two-step tool loop, a provider error, a rate limit with
//! `retry-after`, a cut stream, the text stream in 7-byte chunks) is scripted in the
//! wire's documented streaming format ([`bodies`]) and error shape, run by the pure
//! simulation (held to `conformance/transcripts/wires/<dialect>/<scenario>.txt`) and by
//! every driver against the replay server ([`check_every_wire`]), which must produce
//! the same transcript and send the same requests.

pub mod bodies;
mod check;

pub use check::{check_every_scenario, check_every_wire, check_every_wire_of, RunResult};

use std::path::{Path, PathBuf};
use std::time::Duration;

use omni_protocol::generate::GenerateConfig;
use omni_protocol::text_tools::ToolProtocol;
use omni_protocol::{Auth, Dialect, Model, Options, Provider, ProviderErrorKind, Quirks};
use omni_shell::{ClientBuilder, Connect};
use serde_json::Value;

use crate::replay::RecordedRequest;
use crate::scenarios::{self, NamedScenario};
use crate::sim::{simulate, Reply, Scenario};
use bodies::{Answer, Call};

/// The key every wire's client sends (Ollama sends none).
pub const KEY: &str = "sk-replay";

/// Gap between streamed events, as in [`scenarios`].
const GAP: Duration = Duration::from_millis(5);

/// The final answer's text, one streamed piece each.
const WORDS: [&str; 3] = ["It is ", "sunny and ", "noon."];

/// A scenario of `replies`, default options, the scenarios' stall limit.
fn named(name: &'static str, replies: Vec<Reply>) -> NamedScenario {
    NamedScenario {
        name,
        scenario: Scenario { replies, ..Scenario::default() },
        options: Options::default(),
        stall_timeout: Duration::from_secs(2),
    }
}

/// One dialect as the scenarios speak it: its model, provider, bodies and error bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire(pub Dialect);

impl Wire {
    /// Every wire.
    pub fn all() -> [Self; 5] {
        Dialect::ALL.map(Wire)
    }

    /// The dialect's name, e.g. `google_gemini`.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The model of every scenario of this wire.
    pub fn model(self) -> Model {
        let mut model = match self.0 {
            Dialect::AnthropicMessages => return scenarios::model(),
            Dialect::OpenaiCompletions => Model::new(self.provider_id(), "gpt-4o-mini", self.0),
            Dialect::OpenaiResponses => Model::new(self.provider_id(), "gpt-4.1", self.0),
            Dialect::GoogleGemini => Model::new(self.provider_id(), "gemini-2.5-flash", self.0),
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => Model::new(self.provider_id(), "qwen3:4b", self.0),
        };
        model.max_output_tokens = 1024;
        model
    }

    fn provider_id(self) -> &'static str {
        match self.0 {
            Dialect::AnthropicMessages => "anthropic",
            Dialect::OpenaiCompletions => "openai-chat",
            Dialect::OpenaiResponses => "openai",
            Dialect::GoogleGemini => "google",
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => "ollama",
        }
    }

    /// The provider at `base_url` (the API root, e.g. `…/v1beta` for Gemini).
    pub fn provider(self, base_url: &str) -> Provider {
        let auth = match self.0 {
            Dialect::AnthropicMessages => return scenarios::provider(base_url),
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => Auth::Bearer,
            Dialect::GoogleGemini => Auth::Header { name: "x-goog-api-key".into() },
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => Auth::None,
        };
        Provider {
            id: self.provider_id().into(),
            name: format!("{} (replay)", self.name()),
            base_url: base_url.into(),
            dialect: self.0,
            auth,
            api_key_env: None,
            headers: Vec::new(),
            secret_headers: Vec::new(),
            quirks: Quirks::default(),
            hooks: Default::default(),
            tool_protocol: None,
        }
    }

    /// The API root on a server whose address is `server` (`http://127.0.0.1:port`).
    pub fn base_url(self, server: &str) -> String {
        match self.0 {
            Dialect::GoogleGemini => format!("{server}/v1beta"),
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => server.to_string(),
            _ => format!("{server}/v1"),
        }
    }

    /// Points a driver's client at the replay server `server` for this wire, with the
    /// key (none for a keyless provider: a key given explicitly is always sent). Anthropic
    /// keeps the catalogue's provider (only its base URL changes), as the drivers'
    /// Anthropic scenarios always did; the others register their provider.
    pub fn apply<D: Connect>(self, builder: ClientBuilder<D>, server: &str) -> ClientBuilder<D> {
        let builder = match self.0 {
            Dialect::AnthropicMessages => builder.base_url("anthropic", self.base_url(server)),
            _ => builder.provider(self.provider(&self.base_url(server))),
        };
        match self.key_header() {
            Some(_) => builder.api_key(self.provider_id(), KEY),
            None => builder,
        }
    }

    /// The header carrying the key, and its value, as this wire's provider documents it.
    pub fn key_header(self) -> Option<(&'static str, String)> {
        match self.0 {
            Dialect::AnthropicMessages => Some(("x-api-key", KEY.into())),
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => Some(("authorization", format!("Bearer {KEY}"))),
            Dialect::GoogleGemini => Some(("x-goog-api-key", KEY.into())),
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => None,
        }
    }

    /// The generate configuration of `scenario` against the API root `base_url`.
    pub fn config(self, scenario: &NamedScenario, base_url: &str) -> GenerateConfig {
        let mut config = scenarios::config(scenario, base_url);
        config.model = self.model();
        config.provider = self.provider(base_url);
        config.api_key = self.key_header().map(|_| KEY.into());
        config
    }

    /// The tool calls of the first step: two, in this wire's id style.
    pub fn calls(self) -> [Call; 2] {
        let ids = match self.0 {
            Dialect::AnthropicMessages => ["toolu_1", "toolu_2"],
            Dialect::GoogleGemini => ["", ""], // Gemini 2.5 sends no call ids
            _ => ["call_1", "call_2"],
        };
        let input = r#"{"city":"Paris"}"#;
        [Call { id: ids[0], name: "get_weather", input }, Call { id: ids[1], name: "get_time", input }]
    }

    /// What links a tool result to its call in this wire's requests, for each call in
    /// order: the call id, or the tool's name where the wire links by name (Gemini's
    /// `functionResponse.name`, Ollama's `tool_name`).
    pub fn result_keys(self) -> Vec<String> {
        self.calls()
            .iter()
            .map(|c| match self.0 {
                Dialect::Custom(_) => unreachable!("built-in wires only"),
                Dialect::GoogleGemini | Dialect::OllamaChat => c.name.to_string(),
                _ => c.id.to_string(),
            })
            .collect()
    }

    /// The tool results a request body carries, in order, as (link, text), read where
    /// the wire's API reference puts them.
    pub fn tool_results(self, body: &Value) -> Vec<(String, String)> {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            other => other.to_string(),
        };
        let field = |v: &Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
        let items = |key: &str| body[key].as_array().cloned().unwrap_or_default();
        match self.0 {
            // A user message with `tool_result` blocks.
            Dialect::AnthropicMessages => items("messages")
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_result")
                .map(|b| (field(&b, "tool_use_id"), text(&b["content"])))
                .collect(),
            // `{"role":"tool","tool_call_id","content"}` messages.
            Dialect::OpenaiCompletions => items("messages")
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| (field(m, "tool_call_id"), text(&m["content"])))
                .collect(),
            // `{"type":"function_call_output","call_id","output"}` input items.
            Dialect::OpenaiResponses => items("input")
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| (field(i, "call_id"), text(&i["output"])))
                .collect(),
            // `functionResponse` parts: `{name, response: {output}}`.
            Dialect::GoogleGemini => items("contents")
                .iter()
                .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
                .filter_map(|p| p.get("functionResponse").cloned())
                .map(|r| (field(&r, "name"), text(&r["response"]["output"])))
                .collect(),
            // `{"role":"tool","tool_name","content"}` messages.
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => items("messages")
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| (field(m, "tool_name"), text(&m["content"])))
                .collect(),
        }
    }

    fn render(self, answer: &Answer) -> Vec<String> {
        match self.0 {
            Dialect::AnthropicMessages => bodies::anthropic(answer),
            Dialect::OpenaiCompletions => bodies::openai_completions(answer),
            Dialect::OpenaiResponses => bodies::openai_responses(answer),
            Dialect::GoogleGemini => bodies::google_gemini(answer),
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => bodies::ollama_chat(answer),
        }
    }

    /// A 200 response streaming `answer`, one event (or line) per chunk.
    fn stream(self, answer: &Answer) -> Reply {
        self.paced(&self.render(answer))
    }

    /// A 200 response with the wire's content type sending `events` one per chunk.
    fn paced(self, events: &[String]) -> Reply {
        self.with_content_type(scenarios::paced(events, GAP))
    }

    /// A 200 response sending `answer` in chunks of 7 bytes, 1 ms apart: events,
    /// lines, CRLF pairs and JSON strings split anywhere.
    fn in_small_chunks(self, answer: &Answer) -> Reply {
        let body = self.render(answer).concat();
        self.with_content_type(Reply::stream(body.as_bytes(), 7, Duration::from_millis(1)))
    }

    fn with_content_type(self, mut reply: Reply) -> Reply {
        if let (Dialect::OllamaChat, Reply::Http { headers, .. }) = (self.0, &mut reply) {
            *headers = vec![("content-type".into(), "application/x-ndjson".into())];
        }
        reply
    }

    /// Bodies cut inside an event, which must read as cut between events: an
    /// unterminated event is never dispatched (WHATWG SSE: "If the file ends in the
    /// middle of an event, before the final empty line, the incomplete event is not
    /// dispatched"), and half a line is no line; the body was cut, not malformed.
    /// - `cut_mid_event`: the first two pieces of text whole, then half the event (or
    ///   line) carrying the third; the caller must see `cut_stream` exactly.
    /// - `cut_in_first_event_then_ok`: half the first event and nothing else, then the
    ///   whole answer: nothing reached the caller, so the cut is retried, as a cut after
    ///   a whole first event is (the Anthropic and OpenAI wires' first events carry no
    ///   content).
    pub fn cuts_inside_an_event(self) -> Vec<NamedScenario> {
        let text_answer = Answer { text: &WORDS, calls: &[], finished: true };
        let whole = self.render(&text_answer);
        let half = |event: &String| event[..event.len() / 2].to_string();
        let mut events = self.render(&Answer { text: &WORDS[..2], calls: &[], finished: false });
        events.push(half(&whole[events.len()]));
        vec![
            named("cut_mid_event", vec![self.paced(&events)]),
            named("cut_in_first_event_then_ok", vec![self.paced(&[half(&whole[0])]), self.stream(&text_answer)]),
        ]
    }

    /// The provider's error body for an unknown model (HTTP 404) in its documented
    /// shape, and the kind it must be classified as.
    pub fn not_found(self) -> (u16, String, ProviderErrorKind) {
        let body = match self.0 {
            Dialect::AnthropicMessages => {
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-sonnet-4-5"}}"#.into()
            }
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => {
                let model = self.model().id;
                format!(
                    r#"{{"error":{{"message":"The model `{model}` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}}}"#
                )
            }
            Dialect::GoogleGemini => r#"{"error":{"code":404,"message":"models/gemini-2.5-flash is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}"#.into(),
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => r#"{"error":"model \"qwen3:4b\" not found, try pulling it first"}"#.into(),
        };
        (404, body, ProviderErrorKind::NotFound)
    }

    /// A rate-limit body (HTTP 429) in the provider's documented error shape.
    pub fn rate_limited(self) -> String {
        match self.0 {
            Dialect::AnthropicMessages => {
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}"#.into()
            }
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => r#"{"error":{"message":"Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 1s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#.into(),
            Dialect::GoogleGemini => r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#.into(),
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => r#"{"error":"too many requests, please try again later"}"#.into(),
        }
    }

    /// The scenarios of this wire.
    pub fn scenarios(self) -> Vec<NamedScenario> {
        let text_answer = Answer { text: &WORDS, calls: &[], finished: true };
        let final_answer = self.stream(&text_answer);
        let calls = self.calls();
        let tool_answer = self.stream(&Answer { text: &["Let me check."], calls: &calls, finished: true });
        let cut = self.stream(&Answer { text: &WORDS[..2], calls: &[], finished: false });
        let (status, not_found, _) = self.not_found();
        // The tools of the Anthropic scenarios: get_weather (20 ms) and get_time (10 ms).
        let with_tools = scenarios::all()
            .into_iter()
            .find(|s| s.name == "two_step_tool_loop")
            .map(|s| s.scenario.tools)
            .unwrap_or_default();
        let mut tool_loop = named("two_step_tool_loop", vec![tool_answer, final_answer.clone()]);
        tool_loop.scenario.tools = with_tools.clone();
        // The same two-step turn from a model without native tools: its first reply is
        // plain text in this wire's shape, calling the tool in a text protocol.
        let text_loop = |name, protocol: ToolProtocol, deltas: &[&str]| {
            let call = self.stream(&Answer { text: deltas, calls: &[], finished: true });
            let mut scenario = named(name, vec![call, final_answer.clone()]);
            scenario.scenario.tools = with_tools.clone();
            scenario.options.tool_protocol = Some(protocol);
            scenario
        };
        vec![
            named("text_stream", vec![final_answer.clone()]),
            tool_loop,
            text_loop("xml_tool_loop", ToolProtocol::Xml, &scenarios::XML_CALL_DELTAS),
            text_loop("json_tool_loop", ToolProtocol::Json, &scenarios::JSON_CALL_DELTAS),
            named("provider_error", vec![Reply::error(status, &[], &not_found)]),
            named(
                "rate_limited_then_ok",
                vec![Reply::error(429, &[("retry-after", "1")], &self.rate_limited()), final_answer],
            ),
            named("cut_stream", vec![cut]),
            named("text_in_small_chunks", vec![self.in_small_chunks(&text_answer)]),
        ]
    }

    /// The expected transcript file of `scenario`. How a body is split into chunks
    /// changes nothing the caller sees, and a cut inside an event reads as a cut
    /// between events.
    pub fn transcript_path(self, scenario: &str) -> PathBuf {
        let scenario = match scenario {
            "text_in_small_chunks" => "text_stream",
            "cut_mid_event" => "cut_stream",
            other => other,
        };
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("transcripts/wires")
            .join(self.name())
            .join(format!("{scenario}.txt"))
    }

    /// Checks a driver's run of `scenario` against the simulation: the same transcript
    /// (the expected file), and the server `server` received what the simulated
    /// provider did (count, method, path, key and every header the core set, body). Returns the differences.
    pub fn check_run(
        self,
        scenario: &NamedScenario,
        transcript: &[String],
        requests: &[RecordedRequest],
        server: &str,
    ) -> Vec<String> {
        let name = format!("{}/{}", self.name(), scenario.name);
        let mut failures = Vec::new();
        let path = self.transcript_path(scenario.name);
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| format!("{}: {e}", path.display()));
        let actual = transcript.join("\n") + "\n";
        if actual != expected {
            failures.push(format!("{name}: transcript differs\n--- expected\n{expected}--- actual\n{actual}"));
        }
        failures.extend(self.check_requests(scenario, requests, server));
        failures
    }

    /// Checks that the server `server` received what the simulated provider did for
    /// `scenario` (count, method, path, key and every header the core set, body).
    /// Returns the differences.
    pub fn check_requests(self, scenario: &NamedScenario, requests: &[RecordedRequest], server: &str) -> Vec<String> {
        let name = format!("{}/{}", self.name(), scenario.name);
        let mut failures = Vec::new();
        let sim = simulate(self.config(scenario, &self.base_url(server)), &scenario.scenario);
        if requests.len() != sim.requests.len() {
            failures.push(format!("{name}: {} requests, the simulation sent {}", requests.len(), sim.requests.len()));
        }
        for (i, (got, want)) in requests.iter().zip(&sim.requests).enumerate() {
            if got.method != want.method.as_str() || format!("{server}{}", got.path) != want.url {
                failures.push(format!("{name}: request {i} was {} {}, not {}", got.method, got.path, want.url));
            }
            match self.key_header() {
                Some((header, value)) if got.header(header) != Some(value.as_str()) => {
                    failures.push(format!("{name}: request {i} lacked the key in {header}"));
                }
                None if got.header("authorization").is_some() => {
                    failures.push(format!("{name}: request {i} sent an authorization header to a keyless provider"));
                }
                _ => {}
            }
            // Every header the core decided (accept, content-type, version headers …)
            // reaches the server as decided.
            for header in &want.headers {
                if got.header(&header.name) != Some(header.value.as_str()) {
                    // A secret's value is not printed, even a test key.
                    let sent =
                        if header.sensitive { "<redacted>" } else { got.header(&header.name).unwrap_or("absent") };
                    failures.push(format!("{name}: request {i} header {} was {sent:?}", header.name));
                }
            }
            if got.body != want.body {
                failures.push(format!(
                    "{name}: request {i} body differs:\n  sent {}\n  simulated {}",
                    String::from_utf8_lossy(&got.body),
                    String::from_utf8_lossy(&want.body)
                ));
            }
        }
        failures
    }
}
