//! The agent's scenarios on the virtual clock. Each test asserts the exact sequence of
//! events (streaming deltas left out: `skeleton`) inline, and the whole transcript,
//! deltas included, against `conformance/transcripts/agent/<name>.txt` (the drivers will
//! be held to the same files).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use omni_conformance::agent_sim::{self, simulate_agent, Action, AgentScenario, AgentSimResult, ScriptedCallbacks};
use omni_conformance::fixtures::check_or_bless;
use omni_conformance::scenarios::{paced, text_events, tool_events};
use omni_conformance::sim::{Reply, ToolScript};
use omni_core::agent::{Agent, AgentError, AgentEvent, NoCallbacks, StatePatch, Status, ToolDecision};
use omni_core::generate::ToolOutcome;
use omni_core::{Message, Role, ToolResultContent};

const GAP: Duration = Duration::from_millis(5);

fn text(words: &[&str]) -> Reply {
    paced(&text_events(words), GAP)
}

fn calls(calls: &[(&str, &str)]) -> Reply {
    let calls: Vec<(&str, &str, &str)> = calls.iter().map(|(id, name)| (*id, *name, r#"{"city":"Paris"}"#)).collect();
    paced(&tool_events(&calls), GAP)
}

fn answer(text: &str, ms: u64) -> ToolScript {
    ToolScript::Answer {
        delay: Duration::from_millis(ms),
        outcome: ToolOutcome::Ok(vec![ToolResultContent::Text { text: text.into() }]),
    }
}

fn tools() -> BTreeMap<String, ToolScript> {
    [("get_weather", answer("sunny", 150)), ("get_time", answer("12:00", 10)), ("complete", answer("ok", 1))]
        .into_iter()
        .map(|(n, s)| (n.to_string(), s))
        .collect()
}

fn at(ms: u64, action: Action) -> (Duration, Action) {
    (Duration::from_millis(ms), action)
}

fn prompt(text: &str) -> Action {
    Action::Prompt(text.into())
}

fn scenario(replies: Vec<Reply>, actions: Vec<(Duration, Action)>) -> AgentScenario {
    AgentScenario { replies, tools: tools(), actions }
}

fn run(
    name: &str,
    callbacks: ScriptedCallbacks,
    scenario: AgentScenario,
) -> (AgentSimResult, Agent<ScriptedCallbacks>) {
    run_with(name, agent_sim::config(), callbacks, scenario)
}

fn run_with(
    name: &str,
    config: omni_core::agent::AgentConfig,
    callbacks: ScriptedCallbacks,
    scenario: AgentScenario,
) -> (AgentSimResult, Agent<ScriptedCallbacks>) {
    let agent = Agent::new(config, callbacks).expect("a valid configuration");
    let (result, agent) = simulate_agent(agent, &scenario);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts/agent").join(format!("{name}.txt"));
    if let Err(diff) = check_or_bless(&path, &(result.transcript.join("\n") + "\n")) {
        panic!("{diff}\nfull transcript:\n{}", result.transcript.join("\n"));
    }
    (result, agent)
}

/// The transcript without streaming deltas.
fn skeleton(result: &AgentSimResult) -> Vec<&str> {
    result.transcript.iter().map(String::as_str).filter(|l| !l.starts_with("  ")).collect()
}

fn decide(tool: &str, decision: ToolDecision) -> ScriptedCallbacks {
    ScriptedCallbacks { decisions: [(tool.to_string(), decision)].into_iter().collect(), ..Default::default() }
}

const USER: &str = r#"user["What is the weather in Paris?"]"#;
const TOOLS_CALL: &str =
    r#"assistant["Let me check.", toolu_1 get_weather{"city":"Paris"}, toolu_2 get_time{"city":"Paris"}]"#;
const WEATHER_CALL: &str = r#"assistant["Let me check.", toolu_1 get_weather{"city":"Paris"}]"#;

#[test]
fn chat_turn_yields_exactly_the_documented_events() {
    let (r, agent) = run(
        "chat_turn",
        ScriptedCallbacks::default(),
        scenario(vec![text(&["Hello", " there."])], vec![at(0, prompt("Hi"))]),
    );
    assert_eq!(
        r.transcript,
        [
            "status busy",
            r#"message user["Hi"]"#,
            r#"  {"type":"text_start","index":0}"#,
            r#"  {"type":"text_delta","index":0,"delta":"Hello"}"#,
            r#"  {"type":"text_delta","index":0,"delta":" there."}"#,
            r#"  {"type":"text_end","index":0,"text":"Hello there."}"#,
            r#"message assistant["Hello there."]"#,
            r#"step stop user=user["Hi"] assistant=assistant["Hello there."]"#,
            "status idle",
            "turn stop stop messages=2 usage=20/2",
        ]
    );
    assert_eq!(agent.messages().len(), 2);
    assert_eq!(agent.status(), Status::Idle);
    // The request carried the system prompt and every tool.
    let body = String::from_utf8_lossy(&r.requests[0].body).into_owned();
    assert!(body.contains("You are a helpful assistant.") && body.contains("complete"), "{body}");
}

#[test]
fn two_step_tool_turn_runs_tools_in_parallel_and_answers_in_call_order() {
    let (r, agent) = run(
        "two_step_tool_turn",
        ScriptedCallbacks::default(),
        scenario(
            vec![calls(&[("toolu_1", "get_weather"), ("toolu_2", "get_time")]), text(&["Sunny, noon."])],
            vec![at(0, prompt("What is the weather in Paris?"))],
        ),
    );
    let results = r#"user[toolu_1 "sunny", toolu_2 "12:00"]"#;
    assert_eq!(
        skeleton(&r),
        [
            "status busy".to_string(),
            format!("message {USER}"),
            format!("message {TOOLS_CALL}"),
            format!("step tool_use user={USER} assistant={TOOLS_CALL}"),
            r#"tool_result toolu_2 "12:00""#.into(),
            r#"tool_result toolu_1 "sunny""#.into(),
            format!("message {results}"),
            r#"message assistant["Sunny, noon."]"#.into(),
            format!(r#"step stop user={results} assistant=assistant["Sunny, noon."]"#),
            "status idle".into(),
            "turn stop stop messages=4 usage=40/31".into(),
        ]
    );
    assert_eq!(
        r.effects[1..3],
        [r#"run tool #1 get_weather {"city":"Paris"}"#, r#"run tool #2 get_time {"city":"Paris"}"#]
    );
    assert_eq!(agent.messages().len(), 4);
    assert_eq!(agent.callbacks().log.iter().filter(|l| l.starts_with("handle_tool_use")).count(), 2);
}

fn paused(name: &str, resume: ToolDecision) -> (AgentSimResult, Agent<ScriptedCallbacks>) {
    run(
        name,
        decide("get_weather", ToolDecision::Pause("needs approval".into())),
        scenario(
            vec![calls(&[("toolu_1", "get_weather")]), text(&["Done."])],
            vec![at(0, prompt("What is the weather in Paris?")), at(1000, Action::Resume(resume))],
        ),
    )
}

fn paused_skeleton(result_line: &str) -> Vec<String> {
    let results = format!("user[{result_line}]");
    vec![
        "status busy".to_string(),
        format!("message {USER}"),
        format!("message {WEATHER_CALL}"),
        format!("step tool_use user={USER} assistant={WEATHER_CALL}"),
        "status paused".into(),
        "pause toolu_1 get_weather: needs approval".into(),
        "status busy".into(),
        format!("tool_result {result_line}"),
        format!("message {results}"),
        r#"message assistant["Done."]"#.into(),
        format!(r#"step stop user={results} assistant=assistant["Done."]"#),
        "status idle".into(),
        "turn stop stop messages=4 usage=40/31".into(),
    ]
}

#[test]
fn pause_then_resume_with_execute_runs_the_tool() {
    let (r, agent) = paused("pause_resume_execute", ToolDecision::Execute);
    assert_eq!(skeleton(&r), paused_skeleton(r#"toolu_1 "sunny""#));
    assert!(r.effects.iter().any(|e| e.starts_with("run tool #1 get_weather")));
    assert_eq!(agent.status(), Status::Idle);
}

#[test]
fn pause_then_resume_with_reject_sends_the_reason() {
    let (r, _) = paused("pause_resume_reject", ToolDecision::Reject("not today".into()));
    assert_eq!(skeleton(&r), paused_skeleton(r#"toolu_1 error "not today""#));
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
}

#[test]
fn pause_then_resume_with_a_result_sends_it() {
    let (r, _) = paused("pause_resume_result", ToolDecision::Result(Ok("cloudy".into())));
    assert_eq!(skeleton(&r), paused_skeleton(r#"toolu_1 "cloudy""#));
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
}

fn decided(name: &str, decision: ToolDecision) -> AgentSimResult {
    run(
        name,
        decide("get_weather", decision),
        scenario(
            vec![calls(&[("toolu_1", "get_weather"), ("toolu_2", "get_time")]), text(&["Done."])],
            vec![at(0, prompt("What is the weather in Paris?"))],
        ),
    )
    .0
}

#[test]
fn a_rejected_call_is_not_run_and_the_model_sees_the_reason() {
    let r = decided("reject", ToolDecision::Reject("weather is off limits".into()));
    let sk = skeleton(&r);
    // Decided in order: the rejection is known at once, get_time runs.
    assert_eq!(
        sk[4..7],
        [
            r#"tool_result toolu_1 error "weather is off limits""#,
            r#"tool_result toolu_2 "12:00""#,
            r#"message user[toolu_1 error "weather is off limits", toolu_2 "12:00"]"#,
        ]
    );
    assert_eq!(
        r.effects.iter().filter(|e| e.starts_with("run tool")).collect::<Vec<_>>(),
        [r#"run tool #1 get_time {"city":"Paris"}"#]
    );
    assert!(String::from_utf8_lossy(&r.requests[1].body).contains("weather is off limits"));
}

#[test]
fn a_provided_result_replaces_the_run() {
    let r = decided("provided_result", ToolDecision::Result(Ok("rainy".into())));
    assert_eq!(
        skeleton(&r)[4..7],
        [
            r#"tool_result toolu_1 "rainy""#,
            r#"tool_result toolu_2 "12:00""#,
            r#"message user[toolu_1 "rainy", toolu_2 "12:00"]"#,
        ]
    );
}

#[test]
fn a_tool_without_handler_ends_the_turn_with_stop_reason_tool_use() {
    let (r, agent) = run(
        "tool_without_handler",
        ScriptedCallbacks::default(),
        scenario(vec![calls(&[("toolu_1", "ask_user")])], vec![at(0, prompt("What is the weather in Paris?"))]),
    );
    let call = r#"assistant["Let me check.", toolu_1 ask_user{"city":"Paris"}]"#;
    assert_eq!(
        skeleton(&r),
        [
            "status busy".to_string(),
            format!("message {USER}"),
            format!("message {call}"),
            format!("step tool_use user={USER} assistant={call}"),
            "status idle".into(),
            "turn stop tool_use messages=2 usage=20/30".into(),
        ]
    );
    assert_eq!(r.requests.len(), 1);
    assert!(agent.messages().last().is_some_and(|m| m.tool_uses().count() == 1), "the call is the application's");
    assert_eq!(
        agent.callbacks().log,
        ["handle_tool_use toolu_1 ask_user", r#"handle_turn tool_use "Let me check." messages=2"#]
    );
}

#[test]
fn a_prompt_staged_during_a_tool_run_overrides_the_stop() {
    let (r, agent) = run(
        "staged_prompt",
        ScriptedCallbacks::default(),
        scenario(
            vec![calls(&[("toolu_1", "get_weather")]), text(&["Sunny."]), text(&["Rainy."])],
            vec![
                at(0, prompt("What is the weather in Paris?")),
                at(60, prompt("first thought")),
                at(80, prompt("And in Rome?")),
            ],
        ),
    );
    let results = r#"user[toolu_1 "sunny"]"#;
    assert_eq!(
        skeleton(&r)[5..],
        [
            format!("message {results}"),
            r#"message assistant["Sunny."]"#.to_string(),
            format!(r#"step stop user={results} assistant=assistant["Sunny."]"#),
            "turn continue stop messages=4 usage=40/31".into(),
            r#"message user["And in Rome?"]"#.into(),
            r#"message assistant["Rainy."]"#.into(),
            r#"step stop user=user["And in Rome?"] assistant=assistant["Rainy."]"#.into(),
            "status idle".into(),
            "turn stop stop messages=2 usage=20/1".into(),
        ]
    );
    assert_eq!(agent.messages().len(), 6, "both turns committed; the first staged prompt was replaced");
    assert!(
        agent.callbacks().log.contains(&r#"handle_turn stop "Sunny." messages=4"#.to_string()),
        "observed, overridden"
    );
    // The new turn's request carries the whole committed history.
    let body = String::from_utf8_lossy(&r.requests[2].body).into_owned();
    assert!(body.contains("sunny") && body.contains("And in Rome?") && !body.contains("first thought"), "{body}");
}

#[test]
fn handle_turn_continues_an_autonomous_agent_until_it_calls_complete() {
    let callbacks = ScriptedCallbacks {
        continue_until: Some(("complete".into(), "Continue.".into())),
        ..ScriptedCallbacks::default()
    };
    let (r, agent) = run(
        "autonomous",
        callbacks,
        scenario(
            vec![
                text(&["Step one."]),
                paced(&tool_events(&[("toolu_9", "complete", r#"{"summary":"ok"}"#)]), GAP),
                text(&["Finished."]),
            ],
            vec![at(0, prompt("Research the weather."))],
        ),
    );
    let call = r#"assistant["Let me check.", toolu_9 complete{"summary":"ok"}]"#;
    assert_eq!(
        skeleton(&r),
        [
            "status busy".to_string(),
            r#"message user["Research the weather."]"#.into(),
            r#"message assistant["Step one."]"#.into(),
            r#"step stop user=user["Research the weather."] assistant=assistant["Step one."]"#.into(),
            "turn continue stop messages=2 usage=20/1".into(),
            r#"message user["Continue."]"#.into(),
            format!("message {call}"),
            format!(r#"step tool_use user=user["Continue."] assistant={call}"#),
            r#"tool_result toolu_9 "ok""#.into(),
            r#"message user[toolu_9 "ok"]"#.into(),
            r#"message assistant["Finished."]"#.into(),
            r#"step stop user=user[toolu_9 "ok"] assistant=assistant["Finished."]"#.into(),
            "status idle".into(),
            "turn stop stop messages=4 usage=40/31".into(),
        ]
    );
    assert!(agent.callbacks().completed);
    assert_eq!(agent.messages().len(), 6);
}

#[test]
fn max_steps_caps_the_requests_of_a_turn() {
    let mut config = agent_sim::config();
    config.options.max_steps = Some(2);
    let (r, agent) = run_with(
        "max_steps",
        config,
        ScriptedCallbacks::default(),
        scenario(
            vec![calls(&[("toolu_1", "get_weather")]), calls(&[("toolu_2", "get_weather")])],
            vec![at(0, prompt("What is the weather in Paris?"))],
        ),
    );
    assert_eq!(r.requests.len(), 2);
    let sk = skeleton(&r);
    assert_eq!(sk[sk.len() - 2..], ["status idle", "turn stop tool_use messages=4 usage=40/60"]);
    assert_eq!(r.effects.iter().filter(|e| e.starts_with("run tool")).count(), 1, "the second step's call is not run");
    assert_eq!(agent.messages().len(), 4);
}

fn assert_discarded(r: &AgentSimResult, agent: &Agent<ScriptedCallbacks>, history: usize) {
    let sk = skeleton(r);
    assert_eq!(sk[sk.len() - 2..], ["status idle", "cancelled"]);
    assert_eq!(agent.messages().len(), history, "history unchanged");
    assert_eq!(agent.snapshot().pending, Vec::<Message>::new());
}

#[test]
fn cancel_while_streaming_discards_the_turn() {
    let (r, agent) = run(
        "cancel_streaming",
        ScriptedCallbacks::default(),
        scenario(vec![text(&["It ", "is ", "sunny."])], vec![at(0, prompt("Hi")), at(12, Action::Cancel)]),
    );
    assert_eq!(
        r.transcript,
        [
            "status busy",
            r#"message user["Hi"]"#,
            r#"  {"type":"text_start","index":0}"#,
            r#"  {"type":"text_delta","index":0,"delta":"It "}"#,
            "status idle",
            "cancelled",
        ]
    );
    assert!(r.effects.contains(&"cancel request #0".to_string()));
    assert_discarded(&r, &agent, 0);
}

#[test]
fn cancel_while_paused_discards_the_turn() {
    let (r, agent) = run(
        "cancel_paused",
        decide("get_weather", ToolDecision::Pause("needs approval".into())),
        scenario(
            vec![calls(&[("toolu_1", "get_weather")])],
            vec![
                at(0, prompt("What is the weather in Paris?")),
                at(500, Action::Cancel),
                at(600, Action::Resume(ToolDecision::Execute)),
            ],
        ),
    );
    assert_eq!(
        skeleton(&r)[4..],
        [
            "status paused",
            "pause toolu_1 get_weather: needs approval",
            "status idle",
            "cancelled",
            "refused resume: the agent is not paused: nothing to resume"
        ]
    );
    assert_eq!(agent.messages().len(), 0);
    assert!(agent.snapshot().pending.is_empty());
}

#[test]
fn cancel_while_tools_run_cancels_them_and_discards_the_turn() {
    let mut scenario = scenario(
        vec![calls(&[("toolu_1", "get_weather"), ("toolu_2", "get_time")])],
        vec![at(0, prompt("What is the weather in Paris?")), at(100, Action::Cancel), at(200, Action::Cancel)],
    );
    scenario.tools.insert("get_weather".into(), ToolScript::Hang);
    let (r, agent) = run("cancel_tools", ScriptedCallbacks::default(), scenario);
    assert_eq!(
        skeleton(&r)[4..],
        [
            r#"tool_result toolu_2 "12:00""#,
            "status idle",
            "cancelled",
            "refused cancel: the agent is idle: nothing to cancel",
        ]
    );
    assert!(r.effects.contains(&"cancel tool #1".to_string()), "{:?}", r.effects);
    assert_eq!(agent.messages().len(), 0);
}

#[test]
fn a_hung_tool_times_out_after_the_default_five_seconds() {
    let mut scenario = scenario(
        vec![calls(&[("toolu_1", "get_weather")]), text(&["Sorry."])],
        vec![at(0, prompt("What is the weather in Paris?"))],
    );
    scenario.tools.insert("get_weather".into(), ToolScript::Hang);
    let (r, _) = run("tool_timeout", ScriptedCallbacks::default(), scenario);
    assert!(skeleton(&r).contains(&r#"tool_result toolu_1 error "the tool timed out after 5s""#), "{:?}", r.transcript);
    assert!(r.effects.contains(&"cancel tool #1".to_string()));
    assert!(r.elapsed >= Duration::from_secs(5));
}

const SERVER_ERROR: &str = r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#;

#[test]
fn an_error_with_retry_then_success() {
    let callbacks = ScriptedCallbacks { retries: 2, ..ScriptedCallbacks::default() };
    let (r, agent) = run(
        "error_retry",
        callbacks,
        scenario(vec![Reply::error(500, &[], SERVER_ERROR), text(&["Hello."])], vec![at(0, prompt("Hi"))]),
    );
    assert_eq!(
        skeleton(&r),
        [
            "status busy",
            r#"message user["Hi"]"#,
            "retry step 1 after provider Server 500",
            r#"message assistant["Hello."]"#,
            r#"step stop user=user["Hi"] assistant=assistant["Hello."]"#,
            "status idle",
            "turn stop stop messages=2 usage=20/1",
        ]
    );
    assert_eq!(
        agent.callbacks().log,
        ["handle_error provider Server 500 attempt 1", r#"handle_turn stop "Hello." messages=2"#]
    );
    assert!(r.elapsed >= Duration::from_millis(250), "backed off: {:?}", r.elapsed);
}

#[test]
fn a_final_error_discards_the_turn() {
    let (r, agent) = run(
        "error_stop",
        ScriptedCallbacks::default(),
        scenario(vec![Reply::error(500, &[], SERVER_ERROR)], vec![at(0, prompt("Hi"))]),
    );
    assert_eq!(skeleton(&r), ["status busy", r#"message user["Hi"]"#, "status idle", "error provider Server 500"]);
    assert!(agent.messages().is_empty());
}

#[test]
fn set_state_is_refused_while_busy_and_checked_when_idle() {
    let bad = StatePatch { messages: Some(vec![Message::user("dangling")]), ..StatePatch::default() };
    let good = StatePatch {
        messages: Some(vec![Message::user("Hi"), Message::assistant("Hello.")]),
        system: Some(Some("Be brief.".into())),
        ..StatePatch::default()
    };
    let (r, agent) = run(
        "set_state",
        ScriptedCallbacks::default(),
        scenario(
            vec![text(&["Hello."])],
            vec![
                at(0, prompt("Hi")),
                at(1, Action::SetState(Box::new(good.clone()))),
                at(1000, Action::SetState(Box::new(bad))),
                at(1001, Action::SetState(Box::new(good))),
            ],
        ),
    );
    let sk = skeleton(&r);
    assert_eq!(sk[2], "refused set_state: the agent is busy: its state can change only while idle");
    assert_eq!(
        sk[sk.len() - 2..],
        ["refused set_state: invalid messages: the history must end with an assistant message", "state"]
    );
    assert_eq!(agent.messages().len(), 2);
    assert_eq!(agent.config().system.as_deref(), Some("Be brief."));
}

#[test]
fn a_late_subscriber_gets_a_snapshot_then_every_later_event() {
    let (r, agent) = run(
        "late_subscriber",
        ScriptedCallbacks::default(),
        scenario(
            vec![calls(&[("toolu_1", "get_weather")]), text(&["It ", "is ", "sunny."])],
            vec![at(0, prompt("What is the weather in Paris?")), at(200, Action::Subscribe)],
        ),
    );
    let (snapshot, first) = r.subscription.clone().expect("subscribed");
    assert_eq!(snapshot.status, Status::Busy);
    assert_eq!(snapshot.pending.len(), 3, "prompt, tool call, results");
    let partial = snapshot.partial.clone().expect("a message streaming");
    assert_eq!(partial.role, Role::Assistant);
    // Snapshot plus later events rebuild exactly what the agent committed.
    let mut messages = snapshot.pending.clone();
    let mut text = partial.text();
    for event in &r.events[first..] {
        match event {
            AgentEvent::Message(m) => messages.push(m.clone()),
            AgentEvent::Stream(omni_core::StreamEvent::TextDelta { delta, .. }) => text.push_str(delta),
            _ => {}
        }
    }
    assert_eq!(messages, agent.messages());
    assert_eq!(text, "It is sunny.");
}

#[test]
fn bad_initial_messages_are_refused() {
    let mut config = agent_sim::config();
    config.messages = vec![Message::user("Hi")];
    assert!(matches!(Agent::new(config.clone(), NoCallbacks), Err(AgentError::InvalidMessages(_))));
    let call = omni_core::Block::ToolUse(omni_core::ToolUse {
        id: "t".into(),
        name: "get_time".into(),
        input: serde_json::json!({}),
        signature: None,
    });
    config.messages = vec![Message::user("Hi"), Message::new(Role::Assistant, vec![call])];
    assert!(matches!(Agent::new(config.clone(), NoCallbacks), Err(AgentError::InvalidMessages(_))));
    config.messages = vec![Message::user("Hi"), Message::assistant("Hello.")];
    assert!(Agent::new(config, NoCallbacks).is_ok());
}

#[test]
fn handle_tool_result_changes_what_the_model_sees() {
    let callbacks = ScriptedCallbacks { result_prefix: Some("checked: ".into()), ..ScriptedCallbacks::default() };
    let (r, _) = run(
        "tool_result_callback",
        callbacks,
        scenario(
            vec![calls(&[("toolu_1", "get_weather")]), text(&["Done."])],
            vec![at(0, prompt("What is the weather in Paris?"))],
        ),
    );
    assert_eq!(
        skeleton(&r)[4..6],
        [r#"tool_result toolu_1 "checked: sunny""#, r#"message user[toolu_1 "checked: sunny"]"#]
    );
    assert!(String::from_utf8_lossy(&r.requests[1].body).contains("checked: sunny"));
}

#[test]
fn unknown_tools_and_invalid_input_get_error_results() {
    let reply = paced(
        &tool_events(&[
            ("toolu_1", "teleport", r#"{"city":"Paris"}"#),
            ("toolu_2", "get_weather", r#"{"town":"Paris"}"#),
        ]),
        GAP,
    );
    let (r, _) = run(
        "invalid_calls",
        ScriptedCallbacks::default(),
        scenario(vec![reply, text(&["Sorry."])], vec![at(0, prompt("What is the weather in Paris?"))]),
    );
    let sk = skeleton(&r);
    assert_eq!(sk[4], r#"tool_result toolu_1 error "unknown tool \"teleport\"""#);
    assert!(sk[5].starts_with(r#"tool_result toolu_2 error "invalid input for tool \"get_weather\""#), "{}", sk[5]);
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
}

#[test]
fn request_retries_of_the_inner_machine_are_forwarded() {
    let mut config = agent_sim::config();
    config.retry = omni_core::generate::RetryPolicy { seed: 7, ..Default::default() };
    let (r, agent) = run_with(
        "request_retry",
        config,
        ScriptedCallbacks::default(),
        scenario(vec![Reply::error(500, &[], SERVER_ERROR), text(&["Hello."])], vec![at(0, prompt("Hi"))]),
    );
    assert_eq!(skeleton(&r)[2], "retry request 1 after provider Server 500");
    assert!(!agent.callbacks().log.iter().any(|l| l.starts_with("handle_error")), "handled inside the step");
    assert_eq!(r.effects[..2], ["send #0", "send #1"]);
}

#[test]
fn stale_ids_are_ignored_and_terminate_cancels_work() {
    use omni_core::agent::AgentInput;
    use omni_core::generate::{Effect, RequestId, ToolRunId};
    let now = std::time::Instant::now();
    let mut agent = Agent::new(agent_sim::config(), ScriptedCallbacks::default()).expect("agent");
    agent.handle_input(AgentInput::Prompt("Hi".into()), now).expect("prompt");
    assert!(matches!(agent.poll_effect(), Some(Effect::SendRequest { id: RequestId(0), .. })));
    while agent.poll_event().is_some() {}
    agent.handle_input(AgentInput::BodyEnd { id: RequestId(7) }, now).expect("ignored");
    let done = AgentInput::ToolFinished { id: ToolRunId(0), outcome: ToolOutcome::Err("late".into()) };
    agent.handle_input(done, now).expect("ignored");
    assert_eq!(agent.poll_event(), None);
    assert_eq!(agent.status(), Status::Busy);
    agent.terminate(now);
    assert_eq!(agent.poll_effect(), Some(Effect::CancelRequest { id: RequestId(0) }));
    assert_eq!(agent.callbacks().log, ["terminate"]);
    assert_eq!(agent.handle_input(AgentInput::Prompt("again".into()), now), Err(AgentError::Terminated));
    assert_eq!(agent.poll_timeout(), None);
}

#[test]
fn structured_output_is_refused_by_the_agent() {
    let mut config = agent_sim::config();
    config.options.output = Some(omni_core::OutputSchema { name: "x".into(), schema: serde_json::json!({}) });
    assert!(matches!(Agent::new(config, NoCallbacks), Err(AgentError::InvalidOptions(_))));
}

#[test]
fn a_prompt_while_paused_is_staged_for_the_turn_end() {
    let (r, agent) = run(
        "staged_while_paused",
        decide("get_weather", ToolDecision::Pause("needs approval".into())),
        scenario(
            vec![calls(&[("toolu_1", "get_weather")]), text(&["Sunny."]), text(&["Rainy."])],
            vec![
                at(0, prompt("What is the weather in Paris?")),
                at(500, prompt("And in Rome?")),
                at(1000, Action::Resume(ToolDecision::Execute)),
            ],
        ),
    );
    let sk = skeleton(&r);
    assert_eq!(sk[4..7], ["status paused", "pause toolu_1 get_weather: needs approval", "status busy"]);
    assert!(sk.contains(&"turn continue stop messages=4 usage=40/31"), "{sk:?}");
    assert_eq!(sk[sk.len() - 1], "turn stop stop messages=2 usage=20/1");
    assert_eq!(agent.messages().len(), 6);
}

#[test]
fn cancel_during_a_step_retry_wait_discards_the_turn() {
    let callbacks = ScriptedCallbacks { retries: 5, ..ScriptedCallbacks::default() };
    let (r, agent) = run(
        "cancel_backoff",
        callbacks,
        scenario(vec![Reply::error(500, &[], SERVER_ERROR)], vec![at(0, prompt("Hi")), at(100, Action::Cancel)]),
    );
    assert_eq!(
        skeleton(&r),
        ["status busy", r#"message user["Hi"]"#, "retry step 1 after provider Server 500", "status idle", "cancelled"]
    );
    assert_eq!(r.requests.len(), 1, "the retry was never sent");
    assert!(agent.messages().is_empty());
}
