//! The agent's scenarios on the virtual clock. Each test asserts the exact sequence of
//! events (streaming deltas left out: `skeleton`) inline, and the whole transcript,
//! deltas included, against `conformance/transcripts/agent/<name>.txt` (the drivers will
//! be held to the same files).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use omni_conformance::agent_scenarios::{self, by_name};
use omni_conformance::agent_script::{check_late_subscriber, rebuild};
use omni_conformance::agent_sim::{self, simulate_agent, AgentSimResult, ScriptedCallbacks};
use omni_conformance::fixtures::check_or_bless;
use omni_protocol::agent::{Agent, AgentError, AgentEvent, NoCallbacks, Status, ToolDecision};
use omni_protocol::generate::ToolOutcome;
use omni_protocol::{Message, Role};

/// Runs the named scenario and checks its transcript file.
fn run(name: &str) -> (AgentSimResult, Agent<ScriptedCallbacks>) {
    let named = by_name(name);
    let agent = Agent::new(named.config, named.callbacks, std::time::Instant::now()).expect("a valid configuration");
    let (result, mut agent) = simulate_agent(agent, &named.scenario);
    assert!(result.unfired.is_empty(), "actions never triggered: {:?}", result.unfired);
    let path = transcripts().join(format!("{name}.txt"));
    if let Err(diff) = check_or_bless(&path, &(result.transcript.join("\n") + "\n")) {
        panic!("{diff}\nfull transcript:\n{}", result.transcript.join("\n"));
    }
    // The application goes away: every callback the scenario made, `init` to `terminate`,
    // is the log every driver's run must write too.
    agent.terminate(std::time::Instant::now());
    let log = agent.callbacks().log.lines();
    if let Err(diff) = check_or_bless(&callbacks_path(name), &(log.join("\n") + "\n")) {
        panic!("{diff}\ncallbacks:\n{}", log.join("\n"));
    }
    (result, agent)
}

fn callbacks_path(name: &str) -> std::path::PathBuf {
    omni_conformance::agent_drive::callbacks_path(name)
}

fn transcripts() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts/agent")
}

/// The transcript without streaming deltas.
fn skeleton(result: &AgentSimResult) -> Vec<&str> {
    result.transcript.iter().map(String::as_str).filter(|l| !l.starts_with("  ")).collect()
}

const USER: &str = r#"user["What is the weather in Paris?"]"#;
const TOOLS_CALL: &str =
    r#"assistant["Let me check.", toolu_1 get_weather{"city":"Paris"}, toolu_2 get_time{"city":"Paris"}]"#;
const WEATHER_CALL: &str = r#"assistant["Let me check.", toolu_1 get_weather{"city":"Paris"}]"#;

#[test]
fn chat_turn_yields_exactly_the_documented_events() {
    let (r, agent) = run("chat_turn");
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
    let (r, agent) = run("two_step_tool_turn");
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
    assert_eq!(agent.callbacks().log.lines().iter().filter(|l| l.starts_with("handle_tool_use")).count(), 2);
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
    let (r, agent) = run("pause_resume_execute");
    assert_eq!(skeleton(&r), paused_skeleton(r#"toolu_1 "sunny""#));
    assert!(r.effects.iter().any(|e| e.starts_with("run tool #1 get_weather")));
    assert_eq!(agent.status(), Status::Idle);
}

#[test]
fn pause_then_resume_with_reject_sends_the_reason() {
    let (r, _) = run("pause_resume_reject");
    assert_eq!(skeleton(&r), paused_skeleton(r#"toolu_1 error "not today""#));
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
}

#[test]
fn pause_then_resume_with_a_result_sends_it() {
    let (r, _) = run("pause_resume_result");
    assert_eq!(skeleton(&r), paused_skeleton(r#"toolu_1 "cloudy""#));
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
}

#[test]
fn a_rejected_call_is_not_run_and_the_model_sees_the_reason() {
    let (r, _) = run("reject");
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
    let (r, _) = run("provided_result");
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
    let (r, agent) = run("tool_without_handler");
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
        agent.callbacks().log.lines(),
        [
            "init tools=4 messages=0",
            "handle_step 1 messages=0",
            "handle_tool_use toolu_1 ask_user",
            r#"handle_turn tool_use "Let me check." messages=2"#,
            "terminate"
        ]
    );
}

#[test]
fn a_prompt_after_unanswered_calls_answers_them_with_errors_first() {
    let (r, agent) = run("unanswered_then_prompt");
    let next = r#"user[toolu_1 error "no result: the application did not answer this call", "Never mind."]"#;
    assert!(skeleton(&r).contains(&format!("message {next}").as_str()), "{:#?}", r.transcript);
    assert_eq!(r.requests.len(), 2);
    // The second request carries the call and its result, in Anthropic's form.
    let body: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
    let messages = body["messages"].as_array().expect("messages");
    let last = &messages[messages.len() - 1]["content"];
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last[0]["tool_use_id"], "toolu_1");
    assert_eq!(last[0]["is_error"], true);
    assert_eq!(last[1]["text"], "Never mind.");
    assert_eq!(agent.messages().len(), 4);
    assert_eq!(agent.status(), Status::Idle);
}

#[test]
fn a_prompt_staged_during_a_tool_run_overrides_the_stop() {
    let (r, agent) = run("staged_prompt");
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
        agent.callbacks().log.lines().contains(&r#"handle_turn stop "Sunny." messages=4"#.to_string()),
        "observed, overridden"
    );
    // The new turn's request carries the whole committed history.
    let body = String::from_utf8_lossy(&r.requests[2].body).into_owned();
    assert!(body.contains("sunny") && body.contains("And in Rome?") && !body.contains("first thought"), "{body}");
}

#[test]
fn handle_turn_continues_an_autonomous_agent_until_it_calls_complete() {
    let (r, agent) = run("autonomous");
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
    let (r, agent) = run("max_steps");
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
    let (r, agent) = run("cancel_streaming");
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
    let (r, agent) = run("cancel_paused");
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
    let (r, agent) = run("cancel_tools");
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
fn a_hung_tool_times_out_after_its_time_limit() {
    let (r, _) = run("tool_timeout");
    assert!(skeleton(&r).contains(&r#"tool_result toolu_1 error "the tool timed out after 5s""#), "{:?}", r.transcript);
    assert!(r.effects.contains(&"cancel tool #1".to_string()));
    assert!(r.elapsed >= Duration::from_secs(5));
}

#[test]
fn an_error_with_retry_then_success() {
    let (r, agent) = run("error_retry");
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
        agent.callbacks().log.lines(),
        [
            "init tools=4 messages=0",
            "handle_step 1 messages=0",
            "handle_error provider Server 500 attempt 1",
            r#"handle_turn stop "Hello." messages=2"#,
            "terminate"
        ]
    );
    assert!(r.elapsed >= Duration::from_millis(250), "backed off: {:?}", r.elapsed);
}

#[test]
fn a_final_error_discards_the_turn() {
    let (r, agent) = run("error_stop");
    assert_eq!(skeleton(&r), ["status busy", r#"message user["Hi"]"#, "status idle", "error provider Server 500"]);
    assert!(agent.messages().is_empty());
}

#[test]
fn set_state_is_refused_while_busy_and_checked_when_idle() {
    let (r, agent) = run("set_state");
    let sk = skeleton(&r);
    // Refused on `status busy`, in the state after the prompt's whole batch.
    assert_eq!(
        sk[0..3],
        [
            "status busy",
            "refused set_state: the agent is busy: its state can change only while idle",
            r#"message user["Hi"]"#
        ]
    );
    assert_eq!(
        sk[sk.len() - 2..],
        ["refused set_state: invalid messages: the history must end with an assistant message", "state"]
    );
    assert_eq!(agent.messages().len(), 2);
    assert_eq!(agent.config().system.as_deref(), Some("Be brief."));
}

#[test]
fn a_late_subscriber_gets_a_snapshot_then_every_later_event() {
    let (r, agent) = run("late_subscriber");
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
            AgentEvent::Message(m) => messages.push((**m).clone()),
            AgentEvent::Stream(omni_protocol::StreamEvent::TextDelta { delta, .. }) => text.push_str(delta),
            _ => {}
        }
    }
    assert_eq!(messages, agent.messages());
    assert_eq!(text, "It is sunny.");
    // The drivers' check: the snapshot is what the events before the subscription built.
    let point = check_late_subscriber(&[], &r.events, &snapshot, &r.events[first..]).expect("consistent");
    assert_eq!(point, first);
    let subscribed = r.transcript.iter().position(|l| l == "subscribed").expect("a subscribed line");
    assert_eq!(r.transcript[subscribed - 1], r#"  {"type":"text_start","index":0}"#);
    // A snapshot taken one event earlier does not match.
    let early = rebuild(&[], &r.events[..first - 1]);
    assert!(check_late_subscriber(&[], &r.events, &early, &r.events[first..]).is_err());
}

#[test]
fn every_scenario_has_a_unique_name_and_a_transcript() {
    let names: Vec<&str> = agent_scenarios::all().iter().map(|s| s.name).collect();
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    let files: BTreeSet<String> = std::fs::read_dir(transcripts())
        .expect("the transcripts directory")
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".txt").map(str::to_string))
        .collect();
    assert_eq!(files, unique.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>());
}

/// Drivers perform actions in real time, a little after their trigger: every scenario
/// leaves them at least 300 ms before anything else happens.
#[test]
fn every_triggered_action_has_a_real_time_margin() {
    for named in agent_scenarios::all() {
        let agent =
            Agent::new(named.config, named.callbacks, std::time::Instant::now()).expect("a valid configuration");
        let (result, _) = simulate_agent(agent, &named.scenario);
        for (action, margin) in &result.margins {
            println!("{}: {action}: {margin:?}", named.name);
            assert!(*margin >= Duration::from_millis(300), "{}: {action}: only {margin:?}", named.name);
        }
    }
}

#[test]
fn triggers_count_matching_lines_and_fire_each_action_once_in_order() {
    use omni_conformance::agent_script::{action_line, ActionScript, When};
    use omni_conformance::agent_sim::Action;
    let mut script = ActionScript::new(vec![
        (When::after("pause ", 2), Action::Cancel),
        (When::Start, Action::Prompt("Hi".into())),
        (When::after("status", 1), Action::Subscribe),
        (When::after("status", 1), Action::Resume(ToolDecision::Execute)),
        (When::after("pause ", 1), Action::Prompt("again".into())),
    ]);
    let names = |actions: Vec<Action>| actions.iter().map(Action::name).collect::<Vec<_>>();
    assert_eq!(names(script.start()), ["prompt"]);
    assert!(script.start().is_empty(), "each action fires once");
    assert_eq!(names(script.after_line("message user[]")), Vec::<&str>::new());
    assert_eq!(names(script.after_line("status busy")), ["subscribe", "resume"], "listed order");
    assert!(script.after_line("status idle").is_empty());
    assert_eq!(names(script.after_line("pause toolu_1 x: why")), ["prompt"]);
    assert_eq!(script.unfired().len(), 1);
    assert_eq!(names(script.after_line("pause toolu_2 x: why")), ["cancel"]);
    assert!(script.unfired().is_empty());
    assert_eq!(action_line(&Action::Subscribe, &Ok(())).as_deref(), Some("subscribed"));
    assert_eq!(action_line(&Action::Cancel, &Ok(())), None);
    assert_eq!(
        action_line(&Action::Cancel, &Err(AgentError::Idle)).as_deref(),
        Some("refused cancel: the agent is idle: nothing to cancel")
    );
}

#[test]
fn bad_initial_messages_are_refused() {
    let mut config = agent_sim::config();
    config.messages = vec![Message::user("Hi")];
    assert!(matches!(
        Agent::new(config.clone(), NoCallbacks, std::time::Instant::now()),
        Err(AgentError::InvalidMessages(_))
    ));
    let call = omni_protocol::Block::ToolUse(omni_protocol::ToolUse {
        invalid: None,
        id: "t".into(),
        name: "get_time".into(),
        input: serde_json::json!({}),
        signature: None,
    });
    // Calls left open (a turn that ended at `max_steps`, kept by a session) are taken:
    // the next prompt answers each with an error result ahead of its text, as it does
    // after such a turn in memory (session_machine.rs checks the request).
    config.messages = vec![Message::user("Hi"), Message::new(Role::Assistant, vec![call])];
    assert!(Agent::new(config.clone(), NoCallbacks, std::time::Instant::now()).is_ok());
    config.messages = vec![Message::user("Hi"), Message::assistant("Hello.")];
    assert!(Agent::new(config, NoCallbacks, std::time::Instant::now()).is_ok());
}

#[test]
fn two_tools_with_one_name_are_refused() {
    let mut config = agent_sim::config();
    let twin = config.tools[0].clone();
    config.tools.push(twin);
    match Agent::new(config, NoCallbacks, std::time::Instant::now()) {
        Err(AgentError::InvalidTool(why)) => assert_eq!(why, r#"two tools are named "get_weather""#),
        other => panic!("{other:?}"),
    }
}

#[test]
fn handle_tool_result_changes_what_the_model_sees() {
    let (r, _) = run("tool_result_callback");
    assert_eq!(
        skeleton(&r)[4..6],
        [r#"tool_result toolu_1 "checked: sunny""#, r#"message user[toolu_1 "checked: sunny"]"#]
    );
    assert!(String::from_utf8_lossy(&r.requests[1].body).contains("checked: sunny"));
}

#[test]
fn unknown_tools_and_invalid_input_get_error_results() {
    let (r, _) = run("invalid_calls");
    let sk = skeleton(&r);
    assert_eq!(sk[4], r#"tool_result toolu_1 error "unknown tool \"teleport\"""#);
    assert!(sk[5].starts_with(r#"tool_result toolu_2 error "invalid input for tool \"get_weather\""#), "{}", sk[5]);
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
}

#[test]
fn request_retries_of_the_inner_machine_are_forwarded() {
    let (r, agent) = run("request_retry");
    assert_eq!(skeleton(&r)[2], "retry request 1 after provider Server 500");
    assert!(!agent.callbacks().log.lines().iter().any(|l| l.starts_with("handle_error")), "handled inside the step");
    assert_eq!(r.effects[..2], ["send #0", "send #1"]);
}

#[test]
fn stale_ids_are_ignored_and_terminate_cancels_work() {
    use omni_protocol::agent::AgentInput;
    use omni_protocol::generate::{Effect, Report, RequestId, ToolRunId};
    let now = std::time::Instant::now();
    let mut agent =
        Agent::new(agent_sim::config(), ScriptedCallbacks::default(), std::time::Instant::now()).expect("agent");
    agent.handle_input(omni_protocol::agent::AgentInput::Prompt("Hi".into()), now).expect("prompt");
    assert!(matches!(agent.poll_effect(), Some(Effect::SendRequest { id: RequestId(0), .. })));
    while agent.poll_event().is_some() {}
    agent.handle_input(AgentInput::Report(Report::BodyEnd { id: RequestId(7) }), now).expect("ignored");
    let done = AgentInput::Report(Report::ToolFinished { id: ToolRunId(0), outcome: ToolOutcome::Err("late".into()) });
    agent.handle_input(done, now).expect("ignored");
    assert_eq!(agent.poll_event(), None);
    assert_eq!(agent.status(), Status::Busy);
    agent.terminate(now);
    assert_eq!(agent.poll_effect(), Some(Effect::CancelRequest { id: RequestId(0) }));
    assert_eq!(agent.callbacks().log.lines(), ["init tools=4 messages=0", "handle_step 1 messages=0", "terminate"]);
    assert_eq!(
        agent.handle_input(omni_protocol::agent::AgentInput::Prompt("again".into()), now),
        Err(AgentError::Terminated)
    );
    assert_eq!(agent.poll_timeout(), None);
}

#[test]
fn an_invalid_structured_reply_gets_a_correction_that_joins_the_turn() {
    let (r, agent) = run("structured_output");
    let correction = "Your previous reply could not be used: the reply is not valid JSON";
    let sk = skeleton(&r);
    assert!(sk.iter().any(|l| l.starts_with("output_retry 1: the reply is not valid JSON")), "{sk:#?}");
    let at = sk.iter().position(|l| l.starts_with("output_retry 1")).expect("retried");
    assert!(sk[at + 1].starts_with(&format!("message user[\"{correction}")), "{}", sk[at + 1]);
    assert_eq!(sk.last().copied(), Some(r#"turn stop stop messages=4 usage=40/2 output={"answer":42}"#));
    // The turn, correction included, is the committed history.
    let roles: Vec<Role> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User, Role::Assistant]);
    assert!(agent.messages()[2].text().starts_with(correction));
    // handle_turn saw the value.
    assert!(
        agent.callbacks().log.lines().iter().any(|l| l.starts_with("handle_turn stop")),
        "{:?}",
        agent.callbacks().log.lines()
    );
}

#[test]
fn structured_output_gives_up_after_the_corrections_allowed() {
    let (r, agent) = run("structured_output_gives_up");
    let last = skeleton(&r).last().copied().unwrap_or_default().to_string();
    assert!(
        last.starts_with("turn stop stop messages=4 usage=40/2 output_error=\"the reply does not match the schema"),
        "{last}"
    );
    assert_eq!(skeleton(&r).iter().filter(|l| l.starts_with("output_retry")).count(), 1);
    assert_eq!(agent.messages().len(), 4);
}

#[test]
fn an_unusable_output_schema_is_refused_up_front() {
    let mut config = agent_sim::config();
    let schema = serde_json::json!({"type": "no such type"});
    config.options.output = Some(omni_protocol::OutputSchema { name: "x".into(), schema });
    assert!(matches!(Agent::new(config, NoCallbacks, std::time::Instant::now()), Err(AgentError::InvalidOptions(_))));
}

#[test]
fn a_prompt_while_paused_is_staged_for_the_turn_end() {
    let (r, agent) = run("staged_while_paused");
    let sk = skeleton(&r);
    assert_eq!(sk[4..7], ["status paused", "pause toolu_1 get_weather: needs approval", "status busy"]);
    assert!(sk.contains(&"turn continue stop messages=4 usage=40/31"), "{sk:?}");
    assert_eq!(sk[sk.len() - 1], "turn stop stop messages=2 usage=20/1");
    assert_eq!(agent.messages().len(), 6);
}

#[test]
fn cancel_during_a_step_retry_wait_discards_the_turn() {
    let (r, agent) = run("cancel_backoff");
    assert_eq!(
        skeleton(&r),
        ["status busy", r#"message user["Hi"]"#, "retry step 1 after provider Server 500", "status idle", "cancelled"]
    );
    assert_eq!(r.requests.len(), 1, "the retry was never sent");
    assert!(agent.messages().is_empty());
}

#[test]
fn a_forced_tool_choice_holds_only_until_the_model_called_a_tool() {
    let mut named = by_name("two_step_tool_turn");
    named.config.options.tool_choice = Some(omni_protocol::ToolChoice::Tool("get_weather".into()));
    let agent = Agent::new(named.config, named.callbacks, std::time::Instant::now()).expect("a valid configuration");
    let (r, _) = simulate_agent(agent, &named.scenario);
    let choice = |i: usize| {
        let body: serde_json::Value = serde_json::from_slice(&r.requests[i].body).expect("JSON body");
        body.get("tool_choice").cloned()
    };
    assert_eq!(r.requests.len(), 2);
    assert_eq!(choice(0), Some(serde_json::json!({"type": "tool", "name": "get_weather"})));
    assert_eq!(choice(1), None, "the step after the calls leaves the choice to the model");
}

#[test]
fn a_text_protocol_turn_runs_the_tool_as_a_native_one_does() {
    let (r, agent) = run("xml_tool_turn");
    let lines = skeleton(&r);
    assert!(lines.iter().any(|l| l.starts_with("step tool_use")), "{lines:#?}");
    assert!(lines.contains(&r#"tool_result call_0_0 "sunny""#), "{lines:#?}");
    assert_eq!(lines.last().copied(), Some("turn stop stop messages=4 usage=40/6"), "{lines:#?}");
    assert_eq!(r.effects[1], r#"run tool #1 get_weather {"city":"Paris"}"#);
    // The next request carries no native tools: the call and its result went back as text.
    let second: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
    assert!(second.get("tools").is_none(), "{second}");
    assert!(second.to_string().contains("<tool_result tool=\\\"get_weather\\\">"), "{second}");
    assert_eq!(agent.messages().len(), 4);
}

/// Issue 23, A and B, in an agent's turn: a call the parser rejects is neither paused for
/// (the callbacks pause every call) nor run; the model gets the parser's reason and sees
/// the call as it wrote it in the next request.
#[test]
fn a_call_the_parser_rejects_is_never_paused_for_nor_run() {
    let (r, agent) = run("xml_malformed_call_turn");
    let lines = skeleton(&r);
    assert!(!lines.iter().any(|l| l.starts_with("pause")), "{lines:#?}");
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")), "{:?}", r.effects);
    let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
    assert!(second.contains("`</get_weather>` where `</tool_call>` was due"), "{second}");
    assert!(second.matches("</get_weather>\\n</get_weather>").count() >= 2, "the call as written: {second}");
    assert!(lines.last().is_some_and(|l| l.starts_with("turn stop stop")), "{lines:#?}");
    assert_eq!(agent.messages().len(), 4);
}

/// Issue 23, C, in an agent's turn: the correction joins the turn as a message, and the
/// model's second try runs.
#[test]
fn an_unread_call_gets_a_correction_in_the_turn() {
    let (r, agent) = run("xml_unread_call_turn");
    let lines = skeleton(&r);
    assert!(lines.iter().any(|l| l.contains("could not be read, so no tool was run")), "{lines:#?}");
    assert!(r.effects.iter().any(|e| e.starts_with("run tool")), "{:?}", r.effects);
    assert_eq!(r.requests.len(), 3);
    assert!(lines.last().is_some_and(|l| l.starts_with("turn stop stop messages=6")), "{lines:#?}");
    assert_eq!(agent.messages().len(), 6);
}

/// Issue 23, E and D in an agent's turn: a hermes call runs and its result goes back as
/// `<tool_response>`; mentions of the xml opener stay text and the call after them runs.
#[test]
fn hermes_calls_and_calls_after_mentions_run_in_a_turn() {
    let (r, _) = run("hermes_tool_turn");
    assert_eq!(r.effects.iter().filter(|e| e.starts_with("run tool")).count(), 1, "{:?}", r.effects);
    let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
    assert!(second.contains("<tool_response>"), "{second}");
    let (r, _) = run("xml_mentions_turn");
    let runs: Vec<&String> = r.effects.iter().filter(|e| e.starts_with("run tool")).collect();
    assert_eq!(runs.len(), 1, "{:?}", r.effects);
    assert!(runs[0].contains(r#"get_weather {"city":"Paris"}"#), "{runs:?}");
}

#[test]
fn a_text_protocol_call_waits_for_approval_as_a_native_one_does() {
    let (r, agent) = run("json_pause_resume");
    let lines = skeleton(&r);
    assert!(lines.contains(&"pause call_0_0 get_weather: needs approval"), "{lines:#?}");
    assert!(lines.contains(&r#"tool_result call_0_0 "sunny""#), "{lines:#?}");
    assert!(lines.last().is_some_and(|l| l.starts_with("turn stop stop messages=4")), "{lines:#?}");
    assert_eq!(agent.messages().len(), 4);
}

#[test]
fn a_prompt_of_blocks_sends_them_and_its_options_hold_for_its_turn_only() {
    let (r, agent) = run("prompt_with_blocks_and_options");
    assert_eq!(r.requests.len(), 2);
    let first: serde_json::Value = serde_json::from_slice(&r.requests[0].body).expect("JSON body");
    let second: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
    assert_eq!(first["temperature"], 0.5, "the prompt's option: {first}");
    assert!(second.get("temperature").is_none(), "the next turn has the agent's options: {second}");
    let content = &first["messages"][0]["content"];
    assert_eq!(content[0]["text"], "What is in this image?", "{first}");
    assert_eq!(content[1]["type"], "image", "the attachment went as an image block: {first}");
    assert_eq!(agent.state().options.temperature, None, "the agent's own options are back");
}

#[test]
fn a_prompt_may_answer_the_open_call_with_the_applications_own_result() {
    let (r, _) = run("own_tool_result");
    let second: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
    let user = &second["messages"][2];
    assert_eq!(user["content"][0]["type"], "tool_result", "{second}");
    assert_eq!(user["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(user["content"][0]["content"], "blue", "the application's result, not an error: {second}");
    assert!(user["content"][0].get("is_error").is_none_or(|e| e == false), "{second}");
    assert_eq!(user["content"][1]["text"], "Go on.");
}

#[test]
fn a_tool_result_for_no_open_call_or_while_busy_is_refused() {
    let named = by_name("chat_turn");
    let now = std::time::Instant::now();
    let mut agent = Agent::new(named.config, named.callbacks, now).expect("a valid configuration");
    let stray = omni_protocol::agent::Prompt::new(vec![omni_protocol::Block::ToolResult(
        omni_protocol::ToolResult::text("toolu_9", "ask_user", "blue"),
    )]);
    let refused = agent.handle_input(omni_protocol::agent::AgentInput::PromptWith(Box::new(stray.clone())), now);
    assert!(matches!(refused, Err(AgentError::InvalidMessages(_))), "{refused:?}");
    agent.handle_input(omni_protocol::agent::AgentInput::Prompt("Hi".into()), now).expect("a turn starts");
    while agent.poll_effect().is_some() {}
    let busy = agent.handle_input(omni_protocol::agent::AgentInput::PromptWith(Box::new(stray)), now);
    assert_eq!(busy, Err(AgentError::Busy));
    let bad = omni_protocol::agent::Prompt::text("x")
        .options(omni_protocol::Options { temperature: Some(9.0), ..omni_protocol::Options::default() });
    assert!(matches!(
        agent.handle_input(omni_protocol::agent::AgentInput::PromptWith(Box::new(bad)), now),
        Err(AgentError::InvalidOptions(_))
    ));
}

#[test]
fn set_state_while_paused_is_refused_as_paused_not_busy() {
    let (r, _) = run("set_state_while_paused");
    assert!(
        r.transcript.iter().any(|l| l.starts_with("refused set_state: the agent is paused")),
        "{:#?}",
        r.transcript
    );
}

#[test]
fn the_cancelled_event_carries_what_the_turn_had_produced() {
    let (r, _) = run("cancel_streaming");
    let response = r
        .events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Cancelled(response) => Some(response),
            _ => None,
        })
        .expect("a cancelled event");
    assert_eq!(response.stop_reason, Some(omni_protocol::StopReason::Cancelled));
    assert_eq!(response.messages.first().map(|m| m.role), Some(Role::User), "the turn's prompt: {response:?}");
    assert!(!response.message.text().is_empty(), "the reply streamed so far: {response:?}");
}

#[test]
fn the_state_event_carries_the_new_state() {
    let (r, _) = run("set_state");
    let states: Vec<&omni_protocol::agent::AgentState> = r
        .events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::State(state) => Some(&**state),
            _ => None,
        })
        .collect();
    assert_eq!(states.len(), 1, "one accepted change");
    assert_eq!(states[0].system.as_deref(), Some("Be brief."));
    assert_eq!(states[0].messages.len(), 2);
}

#[test]
fn an_agent_takes_its_own_output_validator_as_a_call_does() {
    let mut named = by_name("structured_output");
    let schema = named.config.options.output.take().expect("the scenario's schema").schema;
    let validator = omni_protocol::schema::JsonSchemaValidator::new(schema.clone()).expect("compiles");
    named.config.output_validator = Some(std::sync::Arc::new(validator));
    let agent = Agent::new(named.config, named.callbacks, std::time::Instant::now()).expect("a valid configuration");
    let (r, _) = simulate_agent(agent, &named.scenario);
    let first: serde_json::Value = serde_json::from_slice(&r.requests[0].body).expect("JSON body");
    assert!(first.to_string().contains("answer"), "the validator's schema is sent: {first}");
    let turn = r.events.iter().find_map(|e| match e {
        AgentEvent::Turn { output, .. } => Some(output.clone()),
        _ => None,
    });
    assert_eq!(turn, Some(Some(Box::new(Ok(serde_json::json!({"answer": 42}))))), "{:#?}", r.transcript);
}

#[test]
fn handle_step_sees_the_step_and_changes_the_system_prompt_for_the_next_steps() {
    let (r, agent) = run("step_changes_system");
    let system = |i: usize| {
        let body: serde_json::Value = serde_json::from_slice(&r.requests[i].body).expect("JSON body");
        body["system"].clone()
    };
    assert_eq!(system(0), "You are a helpful assistant.");
    assert_eq!(system(1), "Answer in three words.", "changed before step 2");
    assert_eq!(agent.state().system.as_deref(), Some("Answer in three words."));
    let steps: Vec<String> =
        agent.callbacks().log.lines().into_iter().filter(|l| l.starts_with("handle_step")).collect();
    assert_eq!(steps, ["handle_step 1 messages=0", "handle_step 2 messages=0"]);
    assert!(r.transcript.contains(&"state".to_string()), "the change is a state event: {:#?}", r.transcript);
}

#[test]
fn provider_hooks_shape_an_agents_steps_as_they_shape_a_call() {
    let mut named = by_name("chat_turn");
    named.config.provider = named
        .config
        .provider
        .clone()
        .body_hook(|body, _| {
            body.insert("trace".into(), serde_json::json!("agent"));
        })
        .url_hook(|url, _| url.push_str("?beta=1"))
        // The provider's text arrives upper-cased: each event passes the hook first.
        .event_hook(|kind, event| {
            if kind == "content_block_delta" {
                if let Some(text) = event["delta"]["text"].as_str().map(str::to_uppercase) {
                    event["delta"]["text"] = serde_json::Value::String(text);
                }
            }
        });
    let agent = Agent::new(named.config, named.callbacks, std::time::Instant::now()).expect("a valid configuration");
    let (r, agent) = simulate_agent(agent, &named.scenario);
    assert!(r.requests[0].url.ends_with("/messages?beta=1"), "{}", r.requests[0].url);
    let body: serde_json::Value = serde_json::from_slice(&r.requests[0].body).expect("JSON body");
    assert_eq!(body["trace"], "agent");
    assert_eq!(agent.messages().last().map(Message::text).as_deref(), Some("HELLO THERE."));
}

#[test]
fn replaced_tools_apply_at_once_when_idle_later_mid_turn_and_never_when_invalid() {
    use omni_protocol::agent::AgentInput;
    use omni_protocol::generate::{Effect, ToolDecl};
    use omni_protocol::ToolSpec;
    let decl = |name: &str| {
        let spec = ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
        };
        ToolDecl::new(spec, true)
    };
    let names =
        |agent: &Agent<ScriptedCallbacks>| -> Vec<String> { agent.state().tools.into_iter().map(|t| t.name).collect() };
    let now = std::time::Instant::now();
    let mut agent = Agent::new(agent_sim::config(), ScriptedCallbacks::default(), now).expect("agent");
    // Idle: at once.
    agent.handle_input(AgentInput::ReplaceTools(vec![decl("a"), decl("b")]), now).expect("taken");
    assert_eq!(names(&agent), ["a", "b"]);
    // Two tools of one name: refused, nothing changed.
    let refused = agent.handle_input(AgentInput::ReplaceTools(vec![decl("c"), decl("c")]), now);
    assert!(matches!(refused, Err(AgentError::InvalidTool(_))), "{refused:?}");
    assert_eq!(names(&agent), ["a", "b"]);
    // Mid-turn: staged; the step in flight keeps the tools it was sent with.
    agent.handle_input(AgentInput::Prompt("Hi".into()), now).expect("prompt");
    assert!(matches!(agent.poll_effect(), Some(Effect::SendRequest { .. })));
    while agent.poll_effect().is_some() {}
    agent.handle_input(AgentInput::ReplaceTools(vec![decl("d")]), now).expect("staged");
    assert_eq!(names(&agent), ["a", "b"], "not before the next step");
    agent.terminate(now);
    while agent.poll_effect().is_some() {}
    assert_eq!(agent.handle_input(AgentInput::ReplaceTools(vec![decl("e")]), now), Err(AgentError::Terminated));
}

/// Observing changes nothing: every agent scenario run with telemetry on gives the same
/// transcript and effects as with it off (nothing observed then); with it on, turns and
/// inferences open and close in pairs.
#[test]
fn observing_an_agent_changes_nothing_it_does() {
    use omni_protocol::observe::{Observation, Observe};
    for off in agent_scenarios::all() {
        let mut on = by_name(off.name);
        on.config.observe = Observe::Content;
        let name = off.name;
        let run = |named: agent_scenarios::NamedAgentScenario| {
            let agent = Agent::new(named.config, named.callbacks, std::time::Instant::now()).expect("valid");
            simulate_agent(agent, &named.scenario).0
        };
        let (off, on) = (run(off), run(on));
        assert_eq!(off.transcript, on.transcript, "{name}");
        assert_eq!(off.effects, on.effects, "{name}");
        assert!(off.observations.is_empty(), "{name}: observed while off");
        let count = |kind: fn(&Observation) -> bool| on.observations.iter().filter(|o| kind(o)).count();
        let turns = count(|o| matches!(o, Observation::TurnStarted));
        let turns_ended = count(|o| matches!(o, Observation::TurnEnded { .. }));
        let inferences = count(|o| matches!(o, Observation::InferenceStarted(_)));
        let inferences_ended = count(|o| matches!(o, Observation::InferenceEnded(_)));
        assert!(turns_ended == turns || turns_ended + 1 == turns, "{name}: {:?}", on.observations);
        assert!(inferences_ended == inferences || inferences_ended + 1 == inferences, "{name}: {:?}", on.observations);
    }
}
