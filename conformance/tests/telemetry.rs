//! Spans after the OpenTelemetry GenAI conventions, through every driver's public API:
//! the checks of `omni_conformance::telemetry_suite`, run by omni-tokio, omni-smol and
//! omni-blocking, and the attribute names checked against the conventions' own crate.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use omni_conformance::telemetry_suite::{self as suite, Settings, TelemetryDriver, PROMPT, TOOL_ANSWER};
use omni_protocol::agent::AgentEvent;
use omni_protocol::session::SessionEvent;
use omni_protocol::tool::ToolError;
use omni_protocol::{Context, Options};
use omni_shell::{AsyncTool, Driver};
use omni_testkit::MockProvider;
use serde_json::json;

fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio")
    })
}

fn context(system: Option<&str>) -> Context {
    let mut context = Context::from_prompt(PROMPT);
    context.system = system.map(str::to_string);
    context
}

fn schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}})
}

/// An async driver: the shell's client and its runtime's `block_on`.
struct Async<D: Driver> {
    client: Option<omni_shell::Client<D>>,
    block_on: fn(std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>),
    enter: fn() -> Option<tokio::runtime::EnterGuard<'static>>,
}

impl<D: Driver> Async<D> {
    fn run<T: Send>(&self, future: impl Future<Output = T> + Send) -> T {
        let mut out = None;
        (self.block_on)(Box::pin(async { out = Some(future.await) }));
        out.expect("ran to its end")
    }

    fn client(&self) -> &omni_shell::Client<D> {
        self.client.as_ref().expect("client_for first")
    }
}

fn lookup() -> AsyncTool {
    AsyncTool::new("lookup", "Looks up the weather", schema(), |_| async {
        tracing::info!(target: "omni_test_tool", "inside the tool");
        Ok::<_, ToolError>(TOOL_ANSWER)
    })
}

impl<D: Driver> TelemetryDriver for Async<D> {
    fn client_for(&mut self, mock: &MockProvider, settings: Settings) {
        let _inside = (self.enter)();
        self.client = Some(settings.apply(mock, omni_shell::Client::<D>::builder()).build().expect("client"));
    }

    fn call(&mut self, root: &tracing::Span, system: Option<&str>, options: Options) -> Result<String, String> {
        let _inside = (self.enter)();
        let stream = {
            let _root = root.enter();
            let model = format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID);
            self.client().call(model, context(system)).options(options).tool(lookup()).stream()
        };
        let stream = stream.map_err(|e| e.to_string())?;
        self.run(stream.response()).map(|r| r.text()).map_err(|e| e.to_string())
    }

    fn agent_turn(&mut self, root: &tracing::Span, prompt_under: Option<&tracing::Span>) {
        let _inside = (self.enter)();
        let model = format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID);
        let agent = {
            let _root = root.enter();
            self.client().agent(model).tool(lookup()).start().expect("agent")
        };
        self.run(async {
            let (_, mut events) = agent.subscribe().await.expect("subscribed");
            let prompt = agent.prompt(PROMPT);
            match prompt_under {
                Some(span) => tracing::Instrument::instrument(prompt, span.clone()).await,
                None => prompt.await,
            }
            .expect("prompted");
            while let Some(event) = events.next_event().await {
                if matches!(event, AgentEvent::Turn { .. }) {
                    break;
                }
            }
        });
    }

    fn session_turn(&mut self, root: &tracing::Span) -> String {
        let _inside = (self.enter)();
        let model = format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID);
        let store = Arc::new(omni_store::MemoryStore::new());
        let builder = self.client().agent(model).tool(lookup()).session(store);
        self.run(async {
            let session = {
                let _root = root.enter();
                builder.create()
            }
            .await
            .expect("session");
            let (_, mut events) = session.subscribe().await.expect("subscribed");
            session.prompt(PROMPT).await.expect("prompted");
            while let Some(event) = events.next_event().await {
                if matches!(event, SessionEvent::Agent(AgentEvent::Turn { .. })) {
                    break;
                }
            }
            session.id().to_string()
        })
    }
}

#[test]
fn tokio_spans_follow_the_conventions() {
    let mut driver = Async::<omni_tokio::Tokio> {
        client: None,
        block_on: |future| tokio_runtime().block_on(future),
        enter: || Some(tokio_runtime().enter()),
    };
    suite::all(&mut driver);
}

#[test]
fn smol_spans_follow_the_conventions() {
    let mut driver =
        Async::<omni_smol::Smol> { client: None, block_on: |future| smol::block_on(future), enter: || None };
    suite::all(&mut driver);
}

/// omni-blocking: its own handles, its tools' closures on its pool of threads.
#[derive(Default)]
struct Blocking {
    client: Option<omni_blocking::Client>,
}

fn blocking_lookup() -> omni_blocking::Tool {
    omni_blocking::Tool::new("lookup", "Looks up the weather", schema(), |_| {
        tracing::info!(target: "omni_test_tool", "inside the tool");
        Ok::<_, ToolError>(TOOL_ANSWER)
    })
}

impl TelemetryDriver for Blocking {
    fn client_for(&mut self, mock: &MockProvider, settings: Settings) {
        self.client = Some(settings.apply(mock, omni_blocking::Client::builder()).build().expect("client"));
    }

    fn call(&mut self, root: &tracing::Span, system: Option<&str>, options: Options) -> Result<String, String> {
        let client = self.client.as_ref().expect("client_for first");
        let model = format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID);
        let stream = {
            let _root = root.enter();
            client.call(model, context(system)).options(options).tool(blocking_lookup()).stream()
        };
        let stream = stream.map_err(|e| e.to_string())?;
        stream.response().map(|r| r.text()).map_err(|e| e.to_string())
    }

    fn agent_turn(&mut self, root: &tracing::Span, prompt_under: Option<&tracing::Span>) {
        let client = self.client.as_ref().expect("client_for first");
        let model = format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID);
        let agent = {
            let _root = root.enter();
            client.agent(model).tool(blocking_lookup()).start().expect("agent")
        };
        let (_, events) = agent.subscribe().expect("subscribed");
        {
            let _prompt = prompt_under.map(tracing::Span::enter);
            agent.prompt(PROMPT).expect("prompted");
        }
        for event in events {
            if matches!(event, AgentEvent::Turn { .. }) {
                break;
            }
        }
    }

    fn session_turn(&mut self, root: &tracing::Span) -> String {
        let client = self.client.as_ref().expect("client_for first");
        let model = format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID);
        let store = Arc::new(omni_store::MemoryStore::new());
        let session = {
            let _root = root.enter();
            client.agent(model).tool(blocking_lookup()).session(store).create().expect("session")
        };
        let (_, events) = session.subscribe().expect("subscribed");
        session.prompt(PROMPT).expect("prompted");
        for event in events {
            if matches!(event, SessionEvent::Agent(AgentEvent::Turn { .. })) {
                break;
            }
        }
        session.id().to_string()
    }
}

#[test]
fn blocking_spans_follow_the_conventions() {
    suite::all(&mut Blocking::default());
}

/// Every attribute omni declares is one the conventions name (the
/// `opentelemetry-semantic-conventions` crate's constants), but for the `otel.*` fields
/// `tracing-opentelemetry` reads and the events' own fields.
#[test]
#[allow(deprecated)]
fn every_attribute_is_a_conventions_name() {
    use opentelemetry_semantic_conventions::attribute as a;
    let known = [
        a::GEN_AI_OPERATION_NAME,
        a::GEN_AI_PROVIDER_NAME,
        a::GEN_AI_REQUEST_MODEL,
        a::GEN_AI_REQUEST_MAX_TOKENS,
        a::GEN_AI_REQUEST_TEMPERATURE,
        a::GEN_AI_REQUEST_TOP_P,
        a::GEN_AI_REQUEST_TOP_K,
        a::GEN_AI_REQUEST_FREQUENCY_PENALTY,
        a::GEN_AI_REQUEST_PRESENCE_PENALTY,
        a::GEN_AI_REQUEST_SEED,
        a::GEN_AI_REQUEST_STOP_SEQUENCES,
        a::GEN_AI_CONVERSATION_ID,
        a::SERVER_ADDRESS,
        a::SERVER_PORT,
        a::GEN_AI_RESPONSE_ID,
        a::GEN_AI_RESPONSE_MODEL,
        a::GEN_AI_RESPONSE_FINISH_REASONS,
        a::GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        a::GEN_AI_USAGE_INPUT_TOKENS,
        a::GEN_AI_USAGE_OUTPUT_TOKENS,
        a::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        a::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        a::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        a::ERROR_TYPE,
        a::GEN_AI_INPUT_MESSAGES,
        a::GEN_AI_OUTPUT_MESSAGES,
        a::GEN_AI_SYSTEM_INSTRUCTIONS,
        a::GEN_AI_TOOL_DEFINITIONS,
        a::GEN_AI_TOOL_NAME,
        a::GEN_AI_TOOL_CALL_ID,
        a::GEN_AI_TOOL_TYPE,
        a::GEN_AI_TOOL_CALL_ARGUMENTS,
        a::GEN_AI_TOOL_CALL_RESULT,
    ];
    for name in suite::CHAT_ATTRIBUTES.iter().chain(suite::TOOL_ATTRIBUTES).chain(suite::AGENT_ATTRIBUTES) {
        assert!(known.contains(name), "{name} is not a GenAI conventions attribute");
    }
    use omni_shell::telemetry::instruments;
    use opentelemetry_semantic_conventions::metric as m;
    assert_eq!(instruments::TOKEN_USAGE, m::GEN_AI_CLIENT_TOKEN_USAGE);
    assert_eq!(instruments::OPERATION_DURATION, m::GEN_AI_CLIENT_OPERATION_DURATION);
    assert_eq!(instruments::TIME_TO_FIRST_CHUNK, m::GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK);
    assert_eq!(omni_shell::TokenType::Input.as_str(), "input");
    assert_eq!(omni_shell::TokenType::Output.as_str(), "output");
}
