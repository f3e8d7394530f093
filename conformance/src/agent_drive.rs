//! Running an agent scenario ([`crate::agent_scenarios`]) through a real driver against
//! the replay server, and holding it to the simulation's transcript file. The driver
//! tests implement [`AgentDriver`] (a few lines over their handle, blocking on async
//! calls where needed); the reading, the action placement
//! ([`crate::agent_script`]) and the checks are here, once.

use std::path::Path;
use std::time::Duration;

use omni_protocol::agent::{AgentError, AgentEvent, Snapshot, StateChange, StatePatch};
use omni_shell::Error;
use omni_shell::{AgentBuilder, Launch};

use crate::agent_scenarios::NamedAgentScenario;
use crate::agent_script::{action_line, check_late_subscriber, ActionScript};
use crate::agent_sim::{transcript_line, Action, ScriptedCallbacks};
use crate::replay::ReplayServer;

/// Longest wait for the next expected event: generous (a loaded machine, the 5 s tool
/// timeout), and a run that misses an event fails instead of hanging.
const EVENT_LIMIT: Duration = Duration::from_secs(20);

/// How long a finished run is watched for stray extra events.
const QUIET: Duration = Duration::from_millis(300);

/// A driver's agent handle as the harness uses it.
pub trait AgentDriver {
    /// Performs one action. [`Action::Subscribe`] subscribes a second, late subscriber
    /// whose snapshot and events the driver keeps for [`AgentDriver::late`].
    fn perform(&mut self, action: Action) -> Result<(), AgentError>;
    /// The main subscriber's next event, or `None` after `limit`.
    fn next_event(&mut self, limit: Duration) -> Option<AgentEvent>;
    /// The late subscriber's snapshot and the events it has received so far.
    fn late(&mut self, limit: Duration) -> Option<(Snapshot, Vec<AgentEvent>)>;
}

/// A scenario's `set_state` patch as a driver handle takes it (the scenarios change the
/// system prompt and the history only).
pub fn state_change<T>(patch: &StatePatch) -> StateChange<T> {
    assert!(
        patch.model.is_none() && patch.tools.is_none() && patch.options.is_none(),
        "the driver harness maps only system and messages"
    );
    let mut change = StateChange::new();
    change = match &patch.system {
        Some(Some(system)) => change.system(system.clone()),
        Some(None) => change.no_system(),
        None => change,
    };
    match &patch.messages {
        Some(messages) => change.messages(messages.clone()),
        None => change,
    }
}

/// A handle call's outcome as the scenario records it: the agent's refusal, or success.
pub fn refusal(outcome: Result<(), Error>) -> Result<(), AgentError> {
    match outcome {
        Ok(()) => Ok(()),
        Err(Error::Agent(e)) => Err(e),
        Err(other) => panic!("not an agent refusal: {other}"),
    }
}

/// A driver's agent builder set up as the scenario says: history, tools (the driver's,
/// built from the scenario's scripts), options, limits, callbacks and system prompt.
pub fn configure<L: Launch<T>, T>(
    builder: AgentBuilder<L, T>,
    named: &NamedAgentScenario,
    tools: impl IntoIterator<Item = T>,
) -> AgentBuilder<L, T, ScriptedCallbacks> {
    let config = &named.config;
    // A scenario's tool time limit goes through the builder's own setter, so that every
    // driver's run shows the setter at work (the tool_timeout transcript says its limit).
    let mut options = config.options.clone();
    let tool_timeout = options.tool_timeout.take();
    let builder = builder
        .messages(config.messages.clone())
        .tools(tools)
        .options(options)
        .error_backoff(config.error_backoff)
        .output_retries(config.output_retries)
        .callbacks(named.callbacks.clone());
    let builder = match tool_timeout {
        Some(limit) => builder.tool_timeout(limit),
        None => builder,
    };
    match &config.system {
        Some(system) => builder.system(system.clone()),
        None => builder,
    }
}

/// Where the simulation keeps the callback log of `name` (every callback it made, `init`
/// to `terminate`).
pub fn callbacks_path(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts/agent/callbacks").join(format!("{name}.txt"))
}

/// After a driver's run of `named` and its agent dropped: the callbacks it made, `init` to
/// `terminate`, are the simulation's. Waits (up to 10 s) for `terminate`, which the agent's
/// loop calls once it sees the last handle gone.
pub fn check_callbacks(named: &NamedAgentScenario) -> Result<(), String> {
    let log = &named.callbacks.log;
    for _ in 0..1_000 {
        if log.lines().last().is_some_and(|l| l == "terminate") {
            break;
        }
        #[allow(clippy::disallowed_methods)] // a test's wait on the test's thread
        std::thread::sleep(Duration::from_millis(10));
    }
    let path = callbacks_path(named.name);
    let want = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let got = log.lines().join("\n") + "\n";
    if got != want {
        return Err(format!("{}: callbacks differ\n--- simulation\n{want}--- driver\n{got}", named.name));
    }
    Ok(())
}

/// The simulation's transcript of `name`.
pub fn expected(name: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts/agent").join(format!("{name}.txt"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs `named` through `driver` (already started against `server` with the scenario's
/// configuration, callbacks and tools, and subscribed once) and checks the transcript,
/// the triggers, the late subscriber and the key on every request.
pub fn run_agent_scenario(
    named: &NamedAgentScenario,
    driver: &mut dyn AgentDriver,
    server: &ReplayServer,
) -> Result<(), String> {
    let want = expected(named.name);
    let mut script = ActionScript::new(named.scenario.actions.clone());
    let mut transcript = Vec::new();
    let mut events = Vec::new();
    for action in script.start() {
        perform(driver, action, &mut transcript);
    }
    while transcript.len() < want.len() {
        let Some(event) = driver.next_event(EVENT_LIMIT) else {
            return Err(diff(named.name, &want, &transcript, "no further event"));
        };
        let line = transcript_line(&event);
        transcript.push(line.clone());
        events.push(event);
        for action in script.after_line(&line) {
            perform(driver, action, &mut transcript);
        }
    }
    if let Some(extra) = driver.next_event(QUIET) {
        transcript.push(transcript_line(&extra));
        return Err(diff(named.name, &want, &transcript, "an extra event"));
    }
    if transcript != want {
        return Err(diff(named.name, &want, &transcript, "different events"));
    }
    // A cancelled turn's event carries what it had produced: its prompt at least.
    for event in &events {
        if let AgentEvent::Cancelled(response) = event {
            let prompt = response.messages.first().map(|m| m.role);
            if response.stop_reason != Some(omni_protocol::StopReason::Cancelled)
                || prompt != Some(omni_protocol::Role::User)
            {
                return Err(format!("{}: the cancelled event lacks the turn: {response:?}", named.name));
            }
        }
    }
    if !script.unfired().is_empty() {
        return Err(format!("{}: actions never fired: {:?}", named.name, script.unfired()));
    }
    if let Some((snapshot, seen)) = driver.late(QUIET) {
        check_late_subscriber(&named.config.messages, &events, &snapshot, &seen)
            .map_err(|e| format!("{}: late subscriber: {e}", named.name))?;
    }
    if server.requests().iter().any(|r| r.header("x-api-key") != Some("sk-replay")) {
        return Err(format!("{}: a request lacked the key", named.name));
    }
    Ok(())
}

fn perform(driver: &mut dyn AgentDriver, action: Action, transcript: &mut Vec<String>) {
    let outcome = driver.perform(action.clone());
    transcript.extend(action_line(&action, &outcome));
}

fn diff(name: &str, want: &[String], got: &[String], what: &str) -> String {
    format!("{name}: {what}\n  expected {want:#?}\n  actual {got:#?}")
}
