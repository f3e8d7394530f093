//! The cases. The model is tiny (SmolLM2 135M), so they assert structure, never words:
//! deltas arrive one by one, usage and stop reasons agree, history goes back, errors are
//! typed, a cancelled stream frees the server, a forced tool call runs through the loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omni_protocol::agent::AgentEvent;
use omni_protocol::generate::{GenerateError, GenerateEvent};
use omni_protocol::session::NodeId;
use omni_protocol::tool::ToolError;
use omni_protocol::ProviderErrorKind;
use omni_protocol::{
    Block, Context, Dialect, Message, Model, Options, Provider, Quirks, StopReason, StreamError, StreamEvent,
    ToolChoice,
};
use serde_json::json;

use super::drivers::{Clients, Driver, Request, Run, ToolDef};
use super::http_get;

/// The alias both servers are started with (`--alias`, `--model_alias`).
pub(crate) const MODEL_ID: &str = "smollm2";
pub(crate) const LLAMA_SERVER: &str = "llama-server";
pub(crate) const LLAMA_CPP_PYTHON: &str = "llama-cpp-python";

/// The two local servers as omni providers: OpenAI-compatible, no key.
pub(crate) fn providers(llama_server: &str, llama_cpp_python: &str) -> Vec<Provider> {
    let server = Provider::openai_compatible(LLAMA_SERVER, format!("{llama_server}/v1"), None);
    let python = Provider {
        // llama-cpp-python knows `max_tokens` only, and a schema only as `json_object`.
        quirks: Quirks { legacy_max_tokens: true, json_object_schema: true, ..Quirks::default() },
        ..Provider::openai_compatible(LLAMA_CPP_PYTHON, format!("{llama_cpp_python}/v1"), None)
    };
    vec![server, python]
}

fn request(provider: &str, dialect: Dialect, context: impl Into<Context>, max_tokens: u32) -> Request {
    Request {
        model: Model::new(provider, MODEL_ID, dialect),
        context: context.into(),
        options: Options { max_tokens: Some(max_tokens), temperature: Some(0.0), ..Options::default() },
        tool: None,
    }
}

/// Input tokens as the server counted them, cached or not (llama-server reuses its prompt
/// cache between requests, so the split varies from run to run).
fn prompt_tokens(run: &Run) -> u64 {
    let usage = run.response().usage;
    usage.input_tokens + usage.cache_read_tokens
}

/// The checks every successful text stream must pass.
fn assert_text_stream(run: &Run, step: u32, max_tokens: u32, dialect: Dialect) {
    let response = run.response();
    assert_eq!(run.retries(), 0, "a real server should need no retry: {:?}", run.events);
    let deltas = run.text_deltas(step);
    assert!(deltas.len() >= 2, "text should arrive incrementally, got {} delta(s)", deltas.len());
    assert_eq!(deltas.concat(), response.text(), "the deltas make up the text");
    assert!(!response.text().trim().is_empty(), "empty answer");
    let starts = run.step_events(step).filter(|e| matches!(e, StreamEvent::TextStart { .. })).count();
    let ends = run.step_events(step).filter(|e| matches!(e, StreamEvent::TextEnd { .. })).count();
    assert!(starts >= 1 && starts == ends, "text blocks start and end ({starts} starts, {ends} ends)");
    assert_eq!(run.done(step), response.stop_reason, "the step's Done and the response agree");
    assert_eq!(response.model, MODEL_ID, "the server reports the alias as the model");
    let usage = response.usage;
    assert!(usage.output_tokens > 0 && usage.output_tokens <= u64::from(max_tokens), "output usage {usage:?}");
    assert!(prompt_tokens(run) > 0, "input usage {usage:?}");
    // The stop reason agrees with the usage: the limit reached means `length`, except on
    // llama-server's /v1/responses, which reports `completed` at the limit (a known deviation).
    let at_limit = usage.output_tokens == u64::from(max_tokens);
    let expected = match (at_limit, dialect) {
        (false, _) | (true, Dialect::OpenaiResponses) => StopReason::Stop,
        (true, _) => StopReason::Length,
    };
    assert_eq!(response.stop_reason, Some(expected), "stop reason with usage {usage:?}");
}

/// A streamed chat: deltas, usage, stop reason (this reply ends by itself, in about 12 tokens).
pub(crate) fn streamed_chat(clients: &Clients, driver: Driver, dialect: Dialect) {
    let req = request(LLAMA_SERVER, dialect, "Name three colors.", 64);
    let run = clients.run(driver, &req);
    assert_text_stream(&run, 0, 64, dialect);
    assert_eq!(run.response().stop_reason, Some(StopReason::Stop));
}

/// Three turns; each request carries the whole history back in the dialect's own format.
pub(crate) fn multi_turn(clients: &Clients, driver: Driver, dialect: Dialect) {
    let turns = ["My name is Ada. Greet me in one short sentence.", "What is my name?", "Say goodbye in one sentence."];
    let mut context = Context { system: Some("You are a helpful assistant.".into()), ..Context::default() };
    let mut previous: Option<(u64, u64)> = None;
    for turn in turns {
        context.messages.push(Message::user(turn));
        let run = clients.run(driver, &request(LLAMA_SERVER, dialect, context.clone(), 48));
        assert_text_stream(&run, 0, 48, dialect);
        let response = run.response();
        let prompt = prompt_tokens(&run);
        if let Some((previous_prompt, previous_output)) = previous {
            // The earlier prompt and answer are part of this prompt.
            assert!(
                prompt > previous_prompt + previous_output,
                "turn {turn:?}: {prompt} prompt tokens, previous turn {previous_prompt} + {previous_output}"
            );
        }
        previous = Some((prompt, response.usage.output_tokens));
        context.messages.push(response.message.clone());
    }
    assert_eq!(context.messages.len(), 6);
}

/// The output limit stops the reply and is reported as such.
pub(crate) fn max_tokens(clients: &Clients, driver: Driver, dialect: Dialect) {
    let req = request(LLAMA_SERVER, dialect, "Count from one to twenty in words, separated by commas.", 5);
    let run = clients.run(driver, &req);
    assert_text_stream(&run, 0, 5, dialect);
    assert_eq!(run.response().usage.output_tokens, 5, "the limit was reached");
}

/// A prompt longer than the server's context (-c 4096) is refused with 400: the error is
/// typed, not retried, and keeps the server's body.
pub(crate) fn rejected(clients: &Clients, driver: Driver, dialect: Dialect) {
    let prompt = "hello ".repeat(6000);
    let run = clients.run(driver, &request(LLAMA_SERVER, dialect, prompt, 16));
    let (error, partial) = run.outcome().expect_err("a prompt over the context size must fail");
    let GenerateError::Provider(error) = error else { panic!("expected a provider error, got {error:?}") };
    assert_eq!(error.status, Some(400), "{error:?}");
    assert_eq!(error.kind, ProviderErrorKind::ContextTooLong, "{error:?}");
    let body = error.body.as_deref().unwrap_or_default();
    assert!(body.contains("context"), "the body is kept: {body:?}");
    assert!(!error.message.is_empty());
    assert_eq!(run.retries(), 0, "a refused request is not retried");
    assert_eq!(partial.stop_reason, Some(StopReason::Error));
}

/// Dropping a stream mid-way closes its connection: the server stops generating (its slot
/// goes idle at once, where the reply would have gone on for hundreds of tokens) and serves
/// the next request.
pub(crate) fn cancel(clients: &Clients, driver: Driver, dialect: Dialect, base_url: &str) {
    // At temperature 0 this reply runs past 600 tokens: seconds of work for the server.
    let prompt = "Write a very long story about a dragon who learns to bake bread.";
    let req = request(LLAMA_SERVER, dialect, prompt, 1000);
    let run = clients.run_until(driver, &req, |events| {
        events
            .iter()
            .filter(|e| matches!(e, GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. }))
            .count()
            >= 3
    });
    assert!(
        !run.events.iter().any(|e| matches!(e, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. })),
        "the reply ended before the cancel: the case proves nothing"
    );
    wait_until_idle(base_url, Duration::from_secs(3));
    let next = clients.run(driver, &request(LLAMA_SERVER, dialect, "Say hi.", 16));
    assert!(next.outcome().is_ok(), "the server serves the next request: {:?}", next.outcome().err());
}

/// Polls llama-server's `/slots` until no slot is processing.
fn wait_until_idle(base_url: &str, limit: Duration) {
    let start = Instant::now();
    loop {
        let (status, body) = http_get(base_url, "/slots").expect("GET /slots");
        assert_eq!(status, 200, "GET /slots: {body}");
        let slots: serde_json::Value = serde_json::from_str(&body).expect("/slots is JSON");
        let busy: Vec<_> = slots
            .as_array()
            .map(|s| s.iter().filter(|s| s["is_processing"] == true).map(|s| &s["next_token"]).collect())
            .unwrap_or_default();
        if busy.is_empty() {
            return;
        }
        assert!(start.elapsed() < limit, "still generating {limit:?} after the drop: {busy:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn weather_tool(calls: Arc<AtomicUsize>) -> ToolDef {
    ToolDef {
        name: "get_weather",
        description: "Get the current weather for a city",
        schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        handler: Arc::new(move |input| {
            calls.fetch_add(1, Ordering::SeqCst);
            let city = input["city"].as_str().ok_or_else(|| ToolError::new("no city"))?;
            Ok(format!("It is 18 degrees and sunny in {city}."))
        }),
    }
}

/// llama-cpp-python: a grammar-forced tool call (tool_choice names the tool) runs through
/// the tool loop: the handler runs once, its result goes back, the model answers in text.
pub(crate) fn forced_tool_call(clients: &Clients, driver: Driver) {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut req = request(LLAMA_CPP_PYTHON, Dialect::OpenaiCompletions, "What is the weather in Paris?", 60);
    req.tool = Some(weather_tool(calls.clone()));
    req.options.tool_choice = Some(ToolChoice::Tool("get_weather".into()));
    let run = clients.run(driver, &req);
    let response = run.response();
    assert_eq!(run.retries(), 0, "{:?}", run.events);
    // Step 0: one tool call, its id and name set once (llama-cpp-python repeats them on every delta).
    let starts: Vec<_> = run
        .step_events(0)
        .filter_map(|e| match e {
            StreamEvent::ToolUseStart { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 1, "one tool call: {starts:?}");
    assert_eq!(starts[0].1, "get_weather");
    assert_eq!(run.done(0), Some(StopReason::ToolUse));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the handler ran once");
    let result = run
        .events
        .iter()
        .find_map(|e| match e {
            GenerateEvent::ToolResult { result, .. } => Some(result),
            _ => None,
        })
        .expect("a tool result event");
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.tool_use_id, starts[0].0);
    // The conversation the call added: the call, its result, the answer.
    let roles: Vec<_> = response.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles.len(), 3, "{:?}", response.messages);
    let tool_use = response.messages[0].tool_uses().next().expect("the first message calls the tool");
    assert!(tool_use.input["city"].is_string(), "the input is an object with a city: {:?}", tool_use.input);
    assert!(matches!(response.messages[1].content.first(), Some(Block::ToolResult(_))));
    // Step 1: the model answers in text, no tool forced any more.
    assert!(!run.text_deltas(1).is_empty(), "the model answers after the tool result");
    assert!(matches!(response.stop_reason, Some(StopReason::Stop | StopReason::Length)));
    assert!(!response.text().trim().is_empty());
}

/// The agent's two-step turn against llama-cpp-python: the forced tool call runs, its
/// result goes back with the forced choice released, the model answers, the turn commits.
pub(crate) fn agent_two_step_turn(clients: &Clients, driver: Driver) {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut req = request(LLAMA_CPP_PYTHON, Dialect::OpenaiCompletions, "unused", 60);
    req.tool = Some(weather_tool(calls.clone()));
    req.options.tool_choice = Some(ToolChoice::Tool("get_weather".into()));
    let (events, committed) = clients.run_agent_turn(driver, &req, "What is the weather in Paris?");
    let skeleton: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Status(s) => Some(format!("status {s:?}")),
            AgentEvent::Message(m) => Some(format!("message {:?}", m.role)),
            AgentEvent::ToolResult(r) => Some(format!("tool_result error={}", r.is_error)),
            AgentEvent::Step { stop_reason, .. } => Some(format!("step {stop_reason:?}")),
            AgentEvent::Turn { end, messages, .. } => Some(format!("turn {end:?} messages={}", messages.len())),
            AgentEvent::Stream(_) => None,
            other => Some(format!("{other:?}")),
        })
        .collect();
    // The answer may stop by itself or at the token limit.
    let answer_stop = skeleton.get(7).cloned().unwrap_or_default();
    assert!(matches!(answer_stop.as_str(), "step Stop" | "step Length"), "{skeleton:#?}");
    let expected = [
        "status Busy",
        "message User",
        "message Assistant",
        "step ToolUse",
        "tool_result error=false",
        "message User",
        "message Assistant",
        answer_stop.as_str(),
        "status Idle",
        "turn Stop messages=4",
    ];
    assert_eq!(skeleton, expected, "{events:#?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the handler ran once");
    assert_eq!(committed, 4, "the turn joined the history");
}

/// llama-cpp-python answers `tool_choice: "auto"` with `stream: true` with 200 and an empty
/// body: omni reports an incomplete stream, never an empty success.
pub(crate) fn auto_tool_choice_empty_body(clients: &Clients, driver: Driver) {
    let mut req = request(LLAMA_CPP_PYTHON, Dialect::OpenaiCompletions, "What is the weather in Paris?", 60);
    req.tool = Some(weather_tool(Arc::new(AtomicUsize::new(0))));
    req.options.tool_choice = Some(ToolChoice::Auto);
    let run = clients.run(driver, &req);
    let (error, _) = run.outcome().expect_err("an empty body is not a success");
    assert!(matches!(error, GenerateError::Stream(StreamError::Incomplete)), "{error:?}");
}

/// llama-cpp-python's plain text stream (spaced JSON, LF line ends, no usage).
pub(crate) fn python_chat(clients: &Clients, driver: Driver) {
    let req = request(LLAMA_CPP_PYTHON, Dialect::OpenaiCompletions, "Name three colors.", 48);
    let run = clients.run(driver, &req);
    let response = run.response();
    assert_eq!(run.retries(), 0);
    let deltas = run.text_deltas(0);
    assert!(deltas.len() >= 2, "text should arrive incrementally, got {} delta(s)", deltas.len());
    assert_eq!(deltas.concat(), response.text());
    assert!(matches!(response.stop_reason, Some(StopReason::Stop | StopReason::Length)));
    assert_eq!(response.model, MODEL_ID);
}

/// Structured output on a real server: the schema goes out as `response_format`, the
/// server constrains the reply with a grammar, and the call parses and validates it.
pub(crate) fn structured_output(clients: &Clients, driver: Driver, provider: &str) {
    let mut req = request(provider, Dialect::OpenaiCompletions, "Pick one primary color.", 48);
    req.options.output = Some(color_schema());
    let run = clients.run(driver, &req);
    let response = run.response();
    assert_eq!(run.retries(), 0);
    let color = response.output.as_ref().and_then(|v| v["color"].as_str());
    assert!(matches!(color, Some("red" | "green" | "blue")), "{:?} from {:?}", response.output_error, response.text());
}

/// An agent turn with structured output on a real server: the turn event carries the value.
pub(crate) fn agent_structured_output(clients: &Clients, driver: Driver) {
    let mut req = request(LLAMA_CPP_PYTHON, Dialect::OpenaiCompletions, "unused", 48);
    req.options.output = Some(color_schema());
    let (events, committed) = clients.run_agent_turn(driver, &req, "Pick one primary color.");
    let output = events.iter().find_map(|e| match e {
        AgentEvent::Turn { output, .. } => Some(output.as_deref().cloned()),
        _ => None,
    });
    let Some(Some(Ok(value))) = output else { panic!("no value in the turn: {events:#?}") };
    assert!(matches!(value["color"].as_str(), Some("red" | "green" | "blue")), "{value}");
    assert_eq!(committed, 2, "no correction was needed: the server's grammar constrains the reply");
}

fn color_schema() -> omni_protocol::OutputSchema {
    omni_protocol::OutputSchema {
        name: "color".into(),
        schema: json!({
            "type": "object",
            "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]}},
            "required": ["color"],
            "additionalProperties": false
        }),
    }
}

/// A session turn against llama-server, kept in SQLite, loaded back: the turn joins the
/// tree (a user and an assistant node) and the store, in that order, and the loaded session
/// has the same path, messages and model.
pub(crate) fn session_turn_in_sqlite(clients: &Clients, driver: Driver) {
    let dir = omni_conformance::session_drive::TempDir::new(&format!("real-session-{driver}"));
    std::fs::create_dir_all(&dir.0).expect("a directory");
    let store = Arc::new(omni_store::SqliteStore::open(dir.0.join("sessions.db")).expect("the database opens"));
    let req = request(LLAMA_SERVER, Dialect::OpenaiCompletions, "unused", 24);
    let (events, snapshot, state) = clients.run_session_turn(driver, &req, "Say hello.", store);
    let lines: Vec<String> = events.iter().filter_map(omni_conformance::session_scenarios::event_line).collect();
    let reply = snapshot.tree.messages().last().map(Message::text).unwrap_or_default();
    assert!(!reply.is_empty(), "the model answered: {lines:#?}");
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("turn stop"), "{lines:#?}");
    assert!(lines[1].starts_with(r#"tree +[0 user["Say hello."], 1<0 assistant["#), "{lines:#?}");
    assert!(lines[1].ends_with("path=0/1"), "{lines:#?}");
    assert_eq!(&lines[2..], ["store nodes(2) saved", "store state saved"], "{lines:#?}");
    assert_eq!(snapshot.tree.path(), [NodeId(0), NodeId(1)], "the loaded path");
    assert_eq!(snapshot.agent.committed, snapshot.tree.messages(), "the agent's history is the path");
    assert_eq!(state.model.as_deref(), Some(format!("{LLAMA_SERVER}:{MODEL_ID}").as_str()), "the model kept");
}

/// llama-server without grammar-forced tool calls, asked through a text protocol to call
/// a tool. A 135M model may or may not write a well-formed call: the suite says which, and
/// either way the call ends well: a call read (the handler runs, its result goes back),
/// text, or a call the tool loop answers with its error (a call the parser rejected never
/// runs); never an error of omni's.
pub(crate) fn text_protocol_tool_call(
    clients: &Clients,
    driver: Driver,
    protocol: omni_protocol::text_tools::ToolProtocol,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut req = request(LLAMA_SERVER, Dialect::OpenaiCompletions, "What is the weather in Paris? Use the tool.", 80);
    req.tool = Some(weather_tool(calls.clone()));
    let name = match &protocol {
        omni_protocol::text_tools::ToolProtocol::Xml => "xml",
        omni_protocol::text_tools::ToolProtocol::Json => "json",
        omni_protocol::text_tools::ToolProtocol::Hermes => "hermes",
        _ => "other",
    };
    req.options.tool_protocol = Some(protocol);
    req.options.max_steps = Some(2);
    let run = clients.run(driver, &req);
    // Finished, whatever the model wrote: a text protocol never fails the call.
    let response = run.response();
    // Each call read: its id, and whether it is a well-formed call of the tool.
    let ends: std::collections::HashMap<String, bool> = run
        .events
        .iter()
        .filter_map(|e| match e {
            GenerateEvent::Stream { event: StreamEvent::ToolUseEnd { tool_use, input_error, .. }, .. } => {
                Some((tool_use.id.clone(), input_error.is_none() && tool_use.name == "get_weather"))
            }
            _ => None,
        })
        .collect();
    let results: Vec<(String, bool)> = run
        .events
        .iter()
        .filter_map(|e| match e {
            GenerateEvent::ToolResult { result, .. } => Some((result.tool_use_id.clone(), result.is_error)),
            _ => None,
        })
        .collect();
    let well_formed = ends.values().filter(|ok| **ok).count();
    eprintln!(
        "real-server: {name} protocol [{driver}]: {} call(s) read, {well_formed} well-formed, {} answered; stop {:?}; text {:?}",
        ends.len(),
        results.len(),
        response.stop_reason,
        response.text().chars().take(120).collect::<String>()
    );
    for (id, is_error) in &results {
        let ok = ends.get(id).copied().unwrap_or_else(|| panic!("a result for a call never read: {id}"));
        // A well-formed call runs unless its input fails the schema; any other never does.
        assert!(ok || *is_error, "call {id}: a call the parser rejected is answered with its error, never run");
    }
    let ran = results.iter().filter(|(_, is_error)| !is_error).count();
    assert_eq!(calls.load(Ordering::SeqCst), ran, "the handler ran once per well-formed call answered");
}
