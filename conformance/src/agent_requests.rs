//! What an agent's requests carry, through a driver's public API against omni-testkit's
//! mock provider (issue 26): the simulation checks the requests the machine makes; this
//! checks that the drivers send the same. One script, one check of the recorded
//! requests; each driver runs the same three turns with its own agent handle:
//!
//! 1. `prompt_with("first", temperature 0.1)`: the model calls `lookup`, then answers.
//!    Request 1 has the agent's system prompt `S0`, the turn's temperature 0.1 and the
//!    tool; request 2 (step 2) the system prompt [`StepSystem`]'s `handle_step` set, and
//!    still 0.1.
//! 2. `prompt_with("second", max_steps 1)`: the model calls `lookup` again; the turn ends
//!    after that one step (one request), with the agent's own temperature 0.5 (the last
//!    turn's options do not stay) and `handle_step`'s system prompt (it does stay).
//! 3. After `set_state` of model (`mock-model-2`), tools (`search` only) and options
//!    (temperature 0.9), `prompt("third")`: request 4 carries all three; the provider's
//!    event hook upper-cases the streamed text, and the reply the agent keeps is
//!    `THIRD ANSWER`.

use omni_protocol::agent::{AgentCallbacks, AgentEvent, AgentState, Prompt, StatePatch};
use omni_protocol::tool::ToolError;
use omni_protocol::{Block, Dialect, Message, Model, Options, Provider, Role};
use omni_shell::{AgentBuilder, AsyncTool, Error, Launch, StateChange, Subscription};
use omni_testkit::http::RecordedRequest;
use omni_testkit::{MockProvider, Turn, PROVIDER_ID};
use serde_json::{json, Value};

/// The system prompt the agent starts with.
pub const SYSTEM: &str = "S0";
/// The system prompt `handle_step` sets before step 2.
pub const STEP_SYSTEM: &str = "S-step2";
/// The reply the agent must keep from turn 3 (the event hook upper-cased it).
pub const HOOKED_REPLY: &str = "THIRD ANSWER";

/// The mock (OpenAI Chat Completions, whose request bodies show system prompt, options,
/// tools and model plainly) with the four replies of the three turns.
pub fn mock() -> MockProvider {
    let mock = MockProvider::start(Dialect::OpenaiCompletions).expect("a loopback port");
    mock.push(Turn::tool_call("lookup", json!({"q": "one"})));
    mock.push(Turn::text("done one"));
    mock.push(Turn::tool_call("lookup", json!({"q": "two"})));
    mock.push(Turn::text("third ").then_text("answer"));
    mock
}

/// The mock's provider with an event hook that upper-cases streamed text.
pub fn hooked_provider(mock: &MockProvider) -> Provider {
    let mut provider = mock.provider();
    provider.hooks.add_event(|_, chunk: &mut Value| {
        if let Some(text) = chunk.pointer_mut("/choices/0/delta/content") {
            if let Some(upper) = text.as_str().map(str::to_uppercase) {
                *text = upper.into();
            }
        }
    });
    provider
}

/// The agent's options: temperature 0.5.
pub fn agent_options() -> Options {
    Options { temperature: Some(0.5), ..Options::default() }
}

/// Turn 1's prompt: temperature 0.1 for this turn only.
pub fn first_prompt() -> Prompt {
    let mut prompt = Prompt::new(vec![Block::text("first")]);
    prompt.options = Some(Options { temperature: Some(0.1), ..Options::default() });
    prompt
}

/// Turn 2's prompt: one step at most.
pub fn second_prompt() -> Prompt {
    let mut prompt = Prompt::new(vec![Block::text("second")]);
    prompt.options = Some(Options { max_steps: Some(1), ..Options::default() });
    prompt
}

/// The model `set_state` switches to before turn 3.
pub fn second_model() -> Model {
    Model::new(PROVIDER_ID, "mock-model-2", Dialect::OpenaiCompletions)
}

/// The options `set_state` sets before turn 3.
pub fn third_options() -> Options {
    Options { temperature: Some(0.9), ..Options::default() }
}

/// Sets [`STEP_SYSTEM`] before every step 2.
#[derive(Debug, Default)]
pub struct StepSystem;

impl AgentCallbacks for StepSystem {
    fn handle_step(&mut self, step: u32, _: &AgentState) -> Option<StatePatch> {
        (step == 2).then(|| StatePatch { system: Some(Some(STEP_SYSTEM.into())), ..StatePatch::default() })
    }
}

/// The text of the last assistant message in `messages`.
pub fn last_reply(messages: &[Message]) -> String {
    messages.iter().rev().find(|m| m.role == Role::Assistant).map(Message::text).unwrap_or_default()
}

fn body(request: &RecordedRequest) -> Value {
    request.json().unwrap_or(Value::Null)
}

fn system(body: &Value) -> Option<&str> {
    let first = body.pointer("/messages/0")?;
    (first["role"] == "system").then(|| first["content"].as_str()).flatten()
}

fn tools(body: &Value) -> Vec<&str> {
    let listed = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    listed.iter().filter_map(|t| t.pointer("/function/name")?.as_str()).collect()
}

/// What each request must have carried; every difference, named.
pub fn check(requests: &[RecordedRequest]) -> Result<(), String> {
    let mut failures = Vec::new();
    let mut expect = |what: &str, ok: bool, got: &dyn std::fmt::Debug| {
        if !ok {
            failures.push(format!("{what}: got {got:?}"));
        }
    };
    expect("four requests", requests.len() == 4, &requests.len());
    let bodies: Vec<Value> = requests.iter().map(body).collect();
    let get = |i: usize| bodies.get(i).cloned().unwrap_or(Value::Null);
    let (one, two, three, four) = (get(0), get(1), get(2), get(3));
    expect("request 1: the agent's system prompt", system(&one) == Some(SYSTEM), &system(&one));
    expect("request 1: the prompt's temperature", one["temperature"] == json!(0.1), &one["temperature"]);
    expect("request 1: the agent's tool", tools(&one) == ["lookup"], &tools(&one));
    expect("request 2: handle_step's system prompt", system(&two) == Some(STEP_SYSTEM), &system(&two));
    expect("request 2: the prompt's temperature, still", two["temperature"] == json!(0.1), &two["temperature"]);
    expect("request 3: the agent's temperature again", three["temperature"] == json!(0.5), &three["temperature"]);
    expect("request 3: handle_step's system prompt stays", system(&three) == Some(STEP_SYSTEM), &system(&three));
    expect("request 4: set_state's model", four["model"] == "mock-model-2", &four["model"]);
    expect("request 4: set_state's tools", tools(&four) == ["search"], &tools(&four));
    expect("request 4: set_state's options", four["temperature"] == json!(0.9), &four["temperature"]);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The tools' specs: (name, description, schema). `lookup` is the agent's first tool,
/// `search` the one `set_state` puts in its place.
pub fn tool_specs() -> [(&'static str, &'static str, Value); 2] {
    let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    [("lookup", "Looks a word up.", schema.clone()), ("search", "Searches.", schema)]
}

/// Waits for the end of the turn in flight.
async fn turn_ends(events: &mut Subscription<AgentEvent>) {
    while let Some(event) = events.next_event().await {
        if matches!(event, AgentEvent::Turn { .. }) {
            return;
        }
    }
    panic!("the agent stopped before its turn ended");
}

/// The three turns through an async driver's agent handle (omni-tokio's and omni-smol's
/// are omni-shell's); `client` has [`hooked_provider`] registered. Checks the requests
/// and the hooked reply.
pub async fn run<L>(client: L, mock: &MockProvider)
where
    L: Launch<AsyncTool, Handle<StepSystem> = omni_shell::Agent<StepSystem>, Error = Error>,
{
    let [lookup, search] = tool_specs().map(|(name, description, schema)| {
        AsyncTool::new(name, description, schema, |_| async { Ok::<_, ToolError>("found") })
    });
    let agent = AgentBuilder::new(client, mock.model().into())
        .system(SYSTEM)
        .tools([lookup])
        .options(agent_options())
        .callbacks(StepSystem)
        .start()
        .expect("the agent starts");
    let (_, mut events) = agent.subscribe().await.expect("subscribe");
    agent.prompt_with(first_prompt()).await.expect("turn 1");
    turn_ends(&mut events).await;
    agent.prompt_with(second_prompt()).await.expect("turn 2");
    turn_ends(&mut events).await;
    let change = StateChange::new().model(second_model()).tools([search]).options(third_options());
    agent.set_state(change).await.expect("an idle agent takes the change");
    agent.prompt("third").await.expect("turn 3");
    turn_ends(&mut events).await;
    let messages = agent.messages().await.expect("the history");
    assert_eq!(last_reply(&messages), HOOKED_REPLY, "the event hook's change is in the reply");
    check(&mock.requests()).unwrap_or_else(|failures| panic!("{failures}"));
}
