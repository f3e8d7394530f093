//! The agent scenarios every driver must pass, defined once: the simulation runs them on
//! a virtual clock (`tests/agent_sim.rs`), the drivers against the replay server, and
//! both must produce `conformance/transcripts/agent/<name>.txt`.
//!
//! Actions fire on events (see [`crate::agent_script`] for the placement rule). Where an
//! action must come before some later input, the scenario leaves at least [`HOLD`]
//! (400 ms) or a slow tool (300 ms) between the trigger's batch and that input, so a real
//! run has the same outcome: the cancel of `cancel_streaming` comes on a text delta that
//! the next one follows after `HOLD`, `late_subscriber` subscribes on a text start held
//! the same way, `set_state`'s refused call comes while a reply that takes `HOLD` to start
//! is pending, `staged_prompt` stages while `get_weather` runs (300 ms), and
//! `cancel_tools` cancels on the fast tool's result while the other one hangs.

use std::collections::BTreeMap;
use std::time::Duration;

use omni_protocol::agent::{AgentConfig, Prompt, StatePatch, ToolDecision};
use omni_protocol::generate::{RetryPolicy, ToolOutcome};
use omni_protocol::text_tools::ToolProtocol;
use omni_protocol::{Attachment, Block, Message, Source, ToolResult, ToolResultContent};

use crate::agent_script::When;
use crate::agent_sim::{config, Action, AgentScenario, ScriptedCallbacks};
use crate::scenarios::{paced, text_events, tool_events};
use crate::sim::{BodyStep, Reply, ToolScript};

/// One agent scenario with everything needed to run it.
#[derive(Debug, Clone)]
pub struct NamedAgentScenario {
    /// Short name; also the transcript's file name.
    pub name: &'static str,
    /// The agent's configuration: [`config`] plus the scenario's changes. Drivers point
    /// its provider at the replay server.
    pub config: AgentConfig,
    /// The application's callbacks.
    pub callbacks: ScriptedCallbacks,
    /// Replies, tools and actions.
    pub scenario: AgentScenario,
}

/// Pause in a reply that leaves an action triggered just before it time to act.
pub const HOLD: Duration = Duration::from_millis(400);

/// Gap between the events of a reply.
const GAP: Duration = Duration::from_millis(5);

/// How long `get_weather` runs: the margin of races between the two tools.
const WEATHER_RUN: u64 = 300;

/// The question of the tool scenarios.
const ASK: &str = "What is the weather in Paris?";

/// Prefix of a text delta's transcript line.
const TEXT_DELTA: &str = r#"  {"type":"text_delta""#;

/// Prefix of a text start's transcript line.
const TEXT_START: &str = r#"  {"type":"text_start""#;

fn text(words: &[&str]) -> Reply {
    paced(&text_events(words), GAP)
}

fn calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<(&str, &str, &str)> = calls.iter().map(|(id, name)| (*id, *name, r#"{"city":"Paris"}"#)).collect();
    paced(&tool_events(&calls), GAP)
}

/// `reply` with a pause of `wait` after its chunk number `chunk` (0-based; with [`paced`],
/// one chunk per event).
fn hold_after(reply: Reply, chunk: usize, wait: Duration) -> Reply {
    let Reply::Http { status, headers, body } = reply else { return reply };
    let mut steps = Vec::with_capacity(body.len() + 1);
    let mut chunks = 0;
    for step in body {
        let is_bytes = matches!(step, BodyStep::Bytes(_));
        steps.push(step);
        if is_bytes {
            if chunks == chunk {
                steps.push(BodyStep::Wait(wait));
            }
            chunks += 1;
        }
    }
    Reply::Http { status, headers, body: steps }
}

/// `reply` whose body starts after `wait`.
fn delayed(reply: Reply, wait: Duration) -> Reply {
    let Reply::Http { status, headers, mut body } = reply else { return reply };
    body.insert(0, BodyStep::Wait(wait));
    Reply::Http { status, headers, body }
}

fn answer(text: &str, ms: u64) -> ToolScript {
    ToolScript::Answer {
        delay: Duration::from_millis(ms),
        outcome: ToolOutcome::Ok(vec![ToolResultContent::Text { text: text.into() }]),
    }
}

/// `get_weather` (slow), `get_time` (fast) and `complete` answer; `ask_user` has no handler.
fn tools() -> BTreeMap<String, ToolScript> {
    [("get_weather", answer("sunny", WEATHER_RUN)), ("get_time", answer("12:00", 10)), ("complete", answer("ok", 1))]
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect()
}

fn start(text: &str) -> (When, Action) {
    (When::Start, Action::Prompt(text.into()))
}

fn on(prefix: &str, nth: usize, action: Action) -> (When, Action) {
    (When::after(prefix, nth), action)
}

fn decide(tool: &str, decision: ToolDecision) -> ScriptedCallbacks {
    ScriptedCallbacks { decisions: [(tool.to_string(), decision)].into_iter().collect(), ..Default::default() }
}

const SERVER_ERROR: &str = r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#;

fn server_error() -> Reply {
    Reply::error(500, &[], SERVER_ERROR)
}

/// A prompt of text and a small PNG, with a temperature for its turn only.
fn image_prompt() -> Prompt {
    let png = Attachment {
        source: Source::Base64 { data: "iVBORw0KGgo=".into() },
        media_type: "image/png".into(),
        name: None,
    };
    Prompt::new(vec![Block::text("What is in this image?"), Block::Attachment(png)])
        .options(omni_protocol::Options { temperature: Some(0.5), ..omni_protocol::Options::default() })
}

/// A scenario with the default configuration, callbacks and tools.
fn named(name: &'static str, replies: Vec<Reply>, actions: Vec<(When, Action)>) -> NamedAgentScenario {
    NamedAgentScenario {
        name,
        config: config(),
        callbacks: ScriptedCallbacks::default(),
        scenario: AgentScenario { replies, tools: tools(), actions },
    }
}

/// `get_weather` pauses for approval; the resume comes on the pause.
fn paused(name: &'static str, resume: ToolDecision) -> NamedAgentScenario {
    NamedAgentScenario {
        callbacks: decide("get_weather", ToolDecision::Pause("needs approval".into())),
        ..named(
            name,
            vec![calls(&[("toolu_1", "get_weather")]), text(&["Done."])],
            vec![start(ASK), on("pause ", 1, Action::Resume(resume))],
        )
    }
}

/// `get_weather` is decided by the callbacks, `get_time` runs.
fn decided(name: &'static str, decision: ToolDecision) -> NamedAgentScenario {
    NamedAgentScenario {
        callbacks: decide("get_weather", decision),
        ..named(
            name,
            vec![calls(&[("toolu_1", "get_weather"), ("toolu_2", "get_time")]), text(&["Done."])],
            vec![start(ASK)],
        )
    }
}

/// Every agent scenario, in a fixed order.
pub fn all() -> Vec<NamedAgentScenario> {
    let pause = || decide("get_weather", ToolDecision::Pause("needs approval".into()));
    let good = StatePatch {
        messages: Some(vec![Message::user("Hi"), Message::assistant("Hello.")]),
        system: Some(Some("Be brief.".into())),
        ..StatePatch::default()
    };
    let bad = StatePatch { messages: Some(vec![Message::user("dangling")]), ..StatePatch::default() };
    // A model without native tools: its replies are plain text calling the tools in a text
    // protocol; the turn, the tool runs and an approval go as with native calls.
    let text_protocol = |name, protocol: ToolProtocol, deltas: &[&str], callbacks: ScriptedCallbacks, actions| {
        let mut scenario = named(name, vec![text(deltas), text(&["Sunny."])], actions);
        scenario.config.options.tool_protocol = Some(protocol);
        scenario.callbacks = callbacks;
        scenario
    };
    let mut list = vec![
        text_protocol(
            "xml_tool_turn",
            ToolProtocol::Xml,
            &crate::scenarios::XML_CALL_DELTAS,
            ScriptedCallbacks::default(),
            vec![start(ASK)],
        ),
        // A call the parser rejects is answered with the parser's reason, never run, never
        // paused for: the callbacks would pause every call (issue 23, A).
        text_protocol(
            "xml_malformed_call_turn",
            ToolProtocol::Xml,
            &crate::scenarios::XML_MALFORMED_DELTAS,
            pause(),
            vec![start(ASK)],
        ),
        // A call broken before its tool's name: a correction with the layout, then the
        // model's second try runs (issue 23, C).
        {
            let mut corrected = text_protocol(
                "xml_unread_call_turn",
                ToolProtocol::Xml,
                &crate::scenarios::XML_UNREAD_DELTAS,
                ScriptedCallbacks::default(),
                vec![start(ASK)],
            );
            corrected.scenario.replies.insert(1, text(&crate::scenarios::XML_CALL_DELTAS));
            corrected
        },
        // The format open-weight models are trained on (issue 23, E), and mentions of the
        // opener before a real call (D), in an agent's turn.
        text_protocol(
            "hermes_tool_turn",
            ToolProtocol::Hermes,
            &crate::scenarios::HERMES_CALL_DELTAS,
            ScriptedCallbacks::default(),
            vec![start(ASK)],
        ),
        text_protocol(
            "xml_mentions_turn",
            ToolProtocol::Xml,
            &crate::scenarios::XML_MENTION_DELTAS,
            ScriptedCallbacks::default(),
            vec![start(ASK)],
        ),
        text_protocol(
            "json_pause_resume",
            ToolProtocol::Json,
            &crate::scenarios::JSON_CALL_DELTAS,
            pause(),
            vec![start(ASK), on("pause ", 1, Action::Resume(ToolDecision::Execute))],
        ),
        named("chat_turn", vec![text(&["Hello", " there."])], vec![start("Hi")]),
        // A prompt of blocks (text and an image) with options for its turn only; the next
        // turn goes back to the agent's options.
        named(
            "prompt_with_blocks_and_options",
            vec![text(&["A red square."]), text(&["Still red."])],
            vec![
                (When::Start, Action::PromptWith(Box::new(image_prompt()))),
                on("turn stop", 1, Action::Prompt("And now?".into())),
            ],
        ),
        // The application runs the tool without a handler itself and answers its call in
        // the next prompt, with a tool-result block.
        named(
            "own_tool_result",
            vec![calls(&[("toolu_1", "ask_user")]), text(&["Blue it is."])],
            vec![
                start(ASK),
                on(
                    "turn stop",
                    1,
                    Action::PromptWith(Box::new(Prompt::new(vec![
                        Block::ToolResult(ToolResult::text("toolu_1", "ask_user", "blue")),
                        Block::text("Go on."),
                    ]))),
                ),
            ],
        ),
        // handle_step changes the system prompt before the second step.
        NamedAgentScenario {
            callbacks: ScriptedCallbacks {
                system_at_step: Some((2, "Answer in three words.".into())),
                ..ScriptedCallbacks::default()
            },
            ..named(
                "step_changes_system",
                vec![calls(&[("toolu_1", "get_weather")]), text(&["Sunny in Paris."])],
                vec![start(ASK)],
            )
        },
        // While paused, set_state is refused as paused (not busy); the turn goes on.
        NamedAgentScenario {
            callbacks: pause(),
            ..named(
                "set_state_while_paused",
                vec![calls(&[("toolu_1", "get_weather")]), text(&["Done."])],
                vec![
                    start(ASK),
                    on(
                        "pause ",
                        1,
                        Action::SetState(Box::new(StatePatch { system: Some(None), ..StatePatch::default() })),
                    ),
                    on("pause ", 1, Action::Resume(ToolDecision::Execute)),
                ],
            )
        },
        named(
            "two_step_tool_turn",
            vec![calls(&[("toolu_1", "get_weather"), ("toolu_2", "get_time")]), text(&["Sunny, noon."])],
            vec![start(ASK)],
        ),
        paused("pause_resume_execute", ToolDecision::Execute),
        paused("pause_resume_reject", ToolDecision::Reject("not today".into())),
        paused("pause_resume_result", ToolDecision::Result(Ok("cloudy".into()))),
        decided("reject", ToolDecision::Reject("weather is off limits".into())),
        decided("provided_result", ToolDecision::Result(Ok("rainy".into()))),
        named("tool_without_handler", vec![calls(&[("toolu_1", "ask_user")])], vec![start(ASK)]),
        // The next prompt answers the call left open, or no provider would take the history.
        named(
            "unanswered_then_prompt",
            vec![calls(&[("toolu_1", "ask_user")]), text(&["Fine."])],
            vec![start(ASK), on("turn stop", 1, Action::Prompt("Never mind.".into()))],
        ),
        // Both prompts are staged while get_weather runs; the last one wins.
        named(
            "staged_prompt",
            vec![calls(&[("toolu_1", "get_weather")]), text(&["Sunny."]), text(&["Rainy."])],
            vec![
                start(ASK),
                on("step tool_use", 1, Action::Prompt("first thought".into())),
                on("step tool_use", 1, Action::Prompt("And in Rome?".into())),
            ],
        ),
        NamedAgentScenario {
            callbacks: pause(),
            ..named(
                "staged_while_paused",
                vec![calls(&[("toolu_1", "get_weather")]), text(&["Sunny."]), text(&["Rainy."])],
                vec![
                    start(ASK),
                    on("pause ", 1, Action::Prompt("And in Rome?".into())),
                    on("pause ", 1, Action::Resume(ToolDecision::Execute)),
                ],
            )
        },
        NamedAgentScenario {
            callbacks: ScriptedCallbacks {
                continue_until: Some(("complete".into(), "Continue.".into())),
                ..ScriptedCallbacks::default()
            },
            ..named(
                "autonomous",
                vec![
                    text(&["Step one."]),
                    paced(&tool_events(&[("toolu_9", "complete", r#"{"summary":"ok"}"#)]), GAP),
                    text(&["Finished."]),
                ],
                vec![start("Research the weather.")],
            )
        },
        {
            let mut s = named(
                "max_steps",
                vec![calls(&[("toolu_1", "get_weather")]), calls(&[("toolu_2", "get_weather")])],
                vec![start(ASK)],
            );
            s.config.options.max_steps = Some(2);
            s
        },
        named(
            "cancel_streaming",
            vec![hold_after(text(&["It ", "is ", "sunny."]), 2, HOLD)],
            vec![start("Hi"), on(TEXT_DELTA, 1, Action::Cancel)],
        ),
        NamedAgentScenario {
            callbacks: pause(),
            ..named(
                "cancel_paused",
                vec![calls(&[("toolu_1", "get_weather")])],
                vec![
                    start(ASK),
                    on("pause ", 1, Action::Cancel),
                    on("cancelled", 1, Action::Resume(ToolDecision::Execute)),
                ],
            )
        },
        {
            let mut s = named(
                "cancel_tools",
                vec![calls(&[("toolu_1", "get_weather"), ("toolu_2", "get_time")])],
                vec![start(ASK), on("tool_result toolu_2", 1, Action::Cancel), on("cancelled", 1, Action::Cancel)],
            );
            s.scenario.tools.insert("get_weather".into(), ToolScript::Hang);
            s
        },
        NamedAgentScenario {
            callbacks: ScriptedCallbacks { retries: 5, ..ScriptedCallbacks::default() },
            ..named("cancel_backoff", vec![server_error()], vec![start("Hi"), on("retry step", 1, Action::Cancel)])
        },
        {
            // get_weather hangs until the agent's 5 s tool timeout (the drivers set it with
            // the builder's `tool_timeout`, see `agent_drive::configure`).
            let mut s =
                named("tool_timeout", vec![calls(&[("toolu_1", "get_weather")]), text(&["Sorry."])], vec![start(ASK)]);
            s.scenario.tools.insert("get_weather".into(), ToolScript::Hang);
            s.config.options.tool_timeout = Some(std::time::Duration::from_secs(5));
            s
        },
        NamedAgentScenario {
            callbacks: ScriptedCallbacks { retries: 2, ..ScriptedCallbacks::default() },
            ..named("error_retry", vec![server_error(), text(&["Hello."])], vec![start("Hi")])
        },
        named("error_stop", vec![server_error()], vec![start("Hi")]),
        named(
            "set_state",
            vec![delayed(text(&["Hello."]), HOLD)],
            vec![
                start("Hi"),
                on("status busy", 1, Action::SetState(Box::new(good.clone()))),
                on("turn stop", 1, Action::SetState(Box::new(bad))),
                on("turn stop", 1, Action::SetState(Box::new(good))),
            ],
        ),
        named(
            "late_subscriber",
            vec![calls(&[("toolu_1", "get_weather")]), hold_after(text(&["It ", "is ", "sunny."]), 1, HOLD)],
            vec![start(ASK), on(TEXT_START, 2, Action::Subscribe)],
        ),
        NamedAgentScenario {
            callbacks: ScriptedCallbacks { result_prefix: Some("checked: ".into()), ..ScriptedCallbacks::default() },
            ..named(
                "tool_result_callback",
                vec![calls(&[("toolu_1", "get_weather")]), text(&["Done."])],
                vec![start(ASK)],
            )
        },
        named(
            "invalid_calls",
            vec![
                paced(
                    &tool_events(&[
                        ("toolu_1", "teleport", r#"{"city":"Paris"}"#),
                        ("toolu_2", "get_weather", r#"{"town":"Paris"}"#),
                    ]),
                    GAP,
                ),
                text(&["Sorry."]),
            ],
            vec![start(ASK)],
        ),
    ];
    // Structured output: a reply that is not the value asked for gets a correction.
    let answer_schema = omni_protocol::OutputSchema {
        name: "answer".into(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {"answer": {"type": "integer"}},
            "required": ["answer"],
            "additionalProperties": false
        }),
    };
    let mut structured =
        named("structured_output", vec![text(&["Forty-two."]), text(&[r#"{"answer": 42}"#])], vec![start("Answer?")]);
    structured.config.options.output = Some(answer_schema.clone());
    list.push(structured);
    let mut gives_up = named(
        "structured_output_gives_up",
        vec![text(&["Forty-two."]), text(&[r#"{"answer": "42"}"#])],
        vec![start("Answer?")],
    );
    gives_up.config.options.output = Some(answer_schema);
    gives_up.config.output_retries = 1;
    list.push(gives_up);
    let mut request_retry = named("request_retry", vec![server_error(), text(&["Hello."])], vec![start("Hi")]);
    request_retry.config.retry = RetryPolicy { seed: 7, ..RetryPolicy::default() };
    list.push(request_retry);
    list
}

/// The scenario called `name`.
///
/// # Panics
/// When there is none: scenario names are fixed, so that is a bug in the caller.
pub fn by_name(name: &str) -> NamedAgentScenario {
    all().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no agent scenario named {name:?}"))
}

// Drivers move scenarios into tasks and threads.
const _: fn() = || {
    fn send_static<T: Send + 'static>() {}
    send_static::<NamedAgentScenario>();
};
