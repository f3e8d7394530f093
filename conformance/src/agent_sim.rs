//! Pure simulation of the agent machine, modelled on [`crate::sim`]: a virtual clock
//! that jumps to the next scripted input or deadline, a scripted provider (the same
//! [`Reply`] / [`BodyStep`] scripts), scripted tools, scripted application actions
//! (prompt, resume, cancel, set_state, snapshot) and a transcript of every event.
//!
//! The transcript lines do not depend on timing, so the drivers can be held to the same
//! lines later.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use omni_core::agent::{
    Agent, AgentCallbacks, AgentConfig, AgentEvent, AgentInput, ErrorDecision, RetryKind, Snapshot, StatePatch, Status,
    ToolDecision, TurnDecision, TurnEnd,
};
use omni_core::generate::{
    Effect, GenerateError, RequestId, RetryPolicy, ToolDecl, ToolOutcome, ToolRunId, TransportError, TransportErrorKind,
};
use omni_core::{Block, HttpRequest, Message, Response, ToolResult, ToolSpec, ToolUse};
use serde_json::json;

use crate::scenarios;
use crate::sim::{error_kind, BodyStep, Reply, ToolScript};

/// Something the application does at a scripted time.
#[derive(Debug, Clone)]
pub enum Action {
    /// `prompt(text)`.
    Prompt(String),
    /// `resume(decision)`.
    Resume(ToolDecision),
    /// `cancel()`.
    Cancel,
    /// `set_state(patch)`.
    SetState(Box<StatePatch>),
    /// A late subscriber: takes a snapshot and sees every later event.
    Subscribe,
}

/// A scenario: provider replies in order, tools by name, actions by time.
#[derive(Debug, Clone, Default)]
pub struct AgentScenario {
    /// Replies to successive requests.
    pub replies: Vec<Reply>,
    /// Tool behaviour by name.
    pub tools: BTreeMap<String, ToolScript>,
    /// Application actions at virtual times.
    pub actions: Vec<(Duration, Action)>,
}

/// The outcome of a simulation.
#[derive(Debug, Clone, Default)]
pub struct AgentSimResult {
    /// Every event (and every refused action, as `refused ...`), one line each.
    pub transcript: Vec<String>,
    /// The events themselves.
    pub events: Vec<AgentEvent>,
    /// Every request the provider received.
    pub requests: Vec<HttpRequest>,
    /// Effects, one line each.
    pub effects: Vec<String>,
    /// The late subscriber's snapshot and the index in `events` of the first event it sees.
    pub subscription: Option<(Snapshot, usize)>,
    /// Virtual time at the end.
    pub elapsed: Duration,
}

#[derive(Debug)]
enum Scheduled {
    Head { id: RequestId, status: u16, headers: Vec<(String, String)> },
    Body { id: RequestId, bytes: Vec<u8> },
    End { id: RequestId },
    Transport { id: RequestId, kind: TransportErrorKind },
    Tool { id: ToolRunId, outcome: ToolOutcome },
    Action(Box<Action>),
}

impl Scheduled {
    fn request(&self) -> Option<RequestId> {
        match self {
            Scheduled::Head { id, .. } | Scheduled::Body { id, .. } | Scheduled::End { id } => Some(*id),
            Scheduled::Transport { id, .. } => Some(*id),
            _ => None,
        }
    }
}

type Queue = BTreeMap<(Duration, u64), Scheduled>;

/// Runs a scenario until nothing is scheduled and no deadline is set (idle, or paused
/// with no resume scripted). Returns the result and the agent for inspection.
pub fn simulate_agent<C: AgentCallbacks>(mut agent: Agent<C>, scenario: &AgentScenario) -> (AgentSimResult, Agent<C>) {
    let start = Instant::now();
    let mut now = Duration::ZERO;
    let mut replies: VecDeque<Reply> = scenario.replies.iter().cloned().collect();
    let mut queue: Queue = BTreeMap::new();
    let mut seq = 0u64;
    let mut push = |queue: &mut Queue, at: Duration, item: Scheduled| {
        seq += 1;
        queue.insert((at, seq), item);
    };
    for (at, action) in &scenario.actions {
        push(&mut queue, *at, Scheduled::Action(Box::new(action.clone())));
    }
    let mut result = AgentSimResult::default();
    let mut last_deadline: Option<(Instant, usize)> = None;
    for _ in 0..1_000_000 {
        while let Some(effect) = agent.poll_effect() {
            match effect {
                Effect::SendRequest { id, request } => {
                    result.effects.push(format!("send #{}", id.0));
                    result.requests.push(request);
                    schedule_reply(&mut queue, &mut push, now, id, replies.pop_front());
                }
                Effect::CancelRequest { id } => {
                    result.effects.push(format!("cancel request #{}", id.0));
                    queue.retain(|_, s| s.request() != Some(id));
                }
                Effect::RunTool { id, call } => {
                    result.effects.push(format!("run tool #{} {} {}", id.0, call.name, call.input));
                    match scenario.tools.get(&call.name) {
                        Some(ToolScript::Answer { delay, outcome }) => {
                            push(&mut queue, now + *delay, Scheduled::Tool { id, outcome: outcome.clone() })
                        }
                        Some(ToolScript::Hang) => {}
                        None => push(
                            &mut queue,
                            now,
                            Scheduled::Tool { id, outcome: ToolOutcome::Err(format!("no script for {}", call.name)) },
                        ),
                    }
                }
                Effect::CancelTool { id } => {
                    result.effects.push(format!("cancel tool #{}", id.0));
                    queue.retain(|_, s| !matches!(s, Scheduled::Tool { id: t, .. } if *t == id));
                }
            }
        }
        while let Some(event) = agent.poll_event() {
            result.transcript.push(transcript_line(&event));
            result.events.push(event);
        }
        let next_input = queue.keys().next().map(|(at, _)| *at);
        let deadline = agent.poll_timeout().map(|d| d.saturating_duration_since(start));
        let input_first = match (next_input, deadline) {
            (Some(at), Some(d)) => at <= d,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => {
                result.elapsed = now;
                return (result, agent);
            }
        };
        if input_first {
            now = now.max(next_input.unwrap_or(now));
            let Some((_, item)) = queue.pop_first() else { unreachable!("a key was just seen") };
            let at = start + now;
            let outcome = match item {
                Scheduled::Head { id, status, headers } => {
                    driver(agent.handle_input(AgentInput::ResponseHead { id, status, headers }, at))
                }
                Scheduled::Body { id, bytes } => driver(agent.handle_input(AgentInput::Body { id, bytes: &bytes }, at)),
                Scheduled::End { id } => driver(agent.handle_input(AgentInput::BodyEnd { id }, at)),
                Scheduled::Transport { id, kind } => driver(agent.handle_input(
                    AgentInput::TransportFailed {
                        id,
                        error: TransportError { kind, message: format!("scripted {kind:?}") },
                    },
                    at,
                )),
                Scheduled::Tool { id, outcome } => {
                    driver(agent.handle_input(AgentInput::ToolFinished { id, outcome }, at))
                }
                Scheduled::Action(action) if matches!(*action, Action::Subscribe) => {
                    result.subscription = Some((agent.snapshot(), result.events.len()));
                    result.transcript.push("subscribed".into());
                    Ok(())
                }
                Scheduled::Action(action) => {
                    let name = action_name(&action);
                    let input = match *action {
                        Action::Prompt(text) => AgentInput::Prompt(text),
                        Action::Resume(d) => AgentInput::Resume(d),
                        Action::Cancel => AgentInput::Cancel,
                        Action::SetState(patch) => AgentInput::SetState(patch),
                        Action::Subscribe => unreachable!("handled above"),
                    };
                    agent.handle_input(input, at).map_err(|e| format!("refused {name}: {e}"))
                }
            };
            if let Err(line) = outcome {
                result.transcript.push(line);
            }
        } else {
            now = now.max(deadline.unwrap_or(now));
            let at = start + now;
            let before = result.transcript.len() + result.effects.len();
            if let Some((prev, count)) = last_deadline {
                assert!(!(prev == at && count == before), "deadline {now:?} repeats without progress");
            }
            last_deadline = Some((at, before));
            agent.handle_timeout(at);
        }
    }
    panic!("the simulation did not end within a million steps");
}

fn schedule_reply(
    queue: &mut Queue,
    push: &mut impl FnMut(&mut Queue, Duration, Scheduled),
    now: Duration,
    id: RequestId,
    reply: Option<Reply>,
) {
    match reply {
        Some(Reply::Http { status, headers, body }) => {
            push(queue, now, Scheduled::Head { id, status, headers });
            let mut at = now;
            for step in body {
                match step {
                    BodyStep::Bytes(bytes) => push(queue, at, Scheduled::Body { id, bytes }),
                    BodyStep::Wait(d) => at += d,
                    BodyStep::Reset => {
                        push(queue, at, Scheduled::Transport { id, kind: TransportErrorKind::Reset });
                        return;
                    }
                    BodyStep::Hang => return,
                }
            }
            push(queue, at, Scheduled::End { id });
        }
        Some(Reply::ConnectFail) | None => {
            push(queue, now, Scheduled::Transport { id, kind: TransportErrorKind::Connect })
        }
    }
}

/// Driver inputs are never refused; a refusal would be a bug in the machine.
fn driver(outcome: Result<(), omni_core::agent::AgentError>) -> Result<(), String> {
    outcome.map_err(|e| format!("refused driver input: {e}"))
}

fn action_name(action: &Action) -> &'static str {
    match action {
        Action::Prompt(_) => "prompt",
        Action::Resume(_) => "resume",
        Action::Cancel => "cancel",
        Action::SetState(_) => "set_state",
        Action::Subscribe => "subscribe",
    }
}

/// One transcript line for an event: short and timing-independent.
pub fn transcript_line(event: &AgentEvent) -> String {
    match event {
        AgentEvent::Status(s) => format!("status {}", status_name(*s)),
        AgentEvent::Stream(e) => format!("  {}", serde_json::to_string(e).unwrap_or_default()),
        AgentEvent::Message(m) => format!("message {}", message_line(m)),
        AgentEvent::ToolResult(r) => format!("tool_result {}", result_line(r)),
        AgentEvent::Step { user, assistant, stop_reason, .. } => {
            format!("step {} user={} assistant={}", json_str(stop_reason), message_line(user), message_line(assistant))
        }
        AgentEvent::Turn { end, stop_reason, messages, usage } => format!(
            "turn {} {} messages={} usage={}/{}",
            match end {
                TurnEnd::Stop => "stop",
                TurnEnd::Continue => "continue",
            },
            json_str(stop_reason),
            messages.len(),
            usage.input_tokens,
            usage.output_tokens
        ),
        AgentEvent::Pause { tool_use, reason } => format!("pause {} {}: {reason}", tool_use.id, tool_use.name),
        AgentEvent::Retry { kind, attempt, error, .. } => format!(
            "retry {} {attempt} after {}",
            match kind {
                RetryKind::Request => "request",
                RetryKind::Step => "step",
            },
            error_kind(error)
        ),
        AgentEvent::Error(e) => format!("error {}", error_kind(e)),
        AgentEvent::Cancelled => "cancelled".into(),
        AgentEvent::State => "state".into(),
        other => format!("{other:?}"),
    }
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Idle => "idle",
        Status::Busy => "busy",
        Status::Paused => "paused",
    }
}

/// A message as `role[block, block]`.
pub fn message_line(m: &Message) -> String {
    let blocks: Vec<String> = m
        .content
        .iter()
        .map(|b| match b {
            Block::Text(t) => format!("{:?}", t.text),
            Block::Thinking(t) => format!("thinking {:?}", t.text),
            Block::Attachment(a) => format!("attachment {}", a.media_type),
            Block::ToolUse(t) => format!("{} {}{}", t.id, t.name, t.input),
            Block::ToolResult(r) => result_line(r),
        })
        .collect();
    format!("{}[{}]", json_str(&m.role), blocks.join(", "))
}

fn result_line(r: &ToolResult) -> String {
    format!("{}{} {:?}", r.tool_use_id, if r.is_error { " error" } else { "" }, r.text_content())
}

fn json_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// Scripted callbacks: fixed tool decisions by name, optional continuation until a
/// completion tool was called, optional step retries, and a log of every call.
#[derive(Debug, Clone, Default)]
pub struct ScriptedCallbacks {
    /// Decision per tool name (default: execute).
    pub decisions: BTreeMap<String, ToolDecision>,
    /// `(completion tool, continue text)`: continue every turn until that tool was called.
    pub continue_until: Option<(String, String)>,
    /// How many step failures to retry.
    pub retries: u32,
    /// Prefix added to every result's text (to show `handle_tool_result` at work).
    pub result_prefix: Option<String>,
    /// True once the completion tool was called.
    pub completed: bool,
    /// Every callback call, one line each.
    pub log: Vec<String>,
}

impl AgentCallbacks for ScriptedCallbacks {
    fn handle_turn(&mut self, response: &Response) -> TurnDecision {
        let stop = response.stop_reason.map(|s| json_str(&s)).unwrap_or_default();
        self.log.push(format!("handle_turn {stop} {:?} messages={}", response.text(), response.messages.len()));
        match &self.continue_until {
            Some((_, text)) if !self.completed => TurnDecision::Continue(text.clone()),
            _ => TurnDecision::Stop,
        }
    }

    fn handle_tool_use(&mut self, tool_use: &ToolUse) -> ToolDecision {
        self.log.push(format!("handle_tool_use {} {}", tool_use.id, tool_use.name));
        if self.continue_until.as_ref().is_some_and(|(tool, _)| *tool == tool_use.name) {
            self.completed = true;
        }
        self.decisions.get(&tool_use.name).cloned().unwrap_or(ToolDecision::Execute)
    }

    fn handle_tool_result(&mut self, mut result: ToolResult) -> ToolResult {
        self.log.push(format!("handle_tool_result {}", result.tool_use_id));
        if let Some(prefix) = &self.result_prefix {
            for part in &mut result.content {
                if let omni_core::ToolResultContent::Text { text } = part {
                    text.insert_str(0, prefix);
                }
            }
        }
        result
    }

    fn terminate(&mut self) {
        self.log.push("terminate".into());
    }

    fn handle_error(&mut self, error: &GenerateError, attempt: u32) -> ErrorDecision {
        self.log.push(format!("handle_error {} attempt {attempt}", error_kind(error)));
        if attempt <= self.retries {
            ErrorDecision::Retry
        } else {
            ErrorDecision::Stop
        }
    }
}

/// The agent configuration of the scenarios: the scenario model and provider, the
/// `get_weather` and `get_time` tools (with handlers), `ask_user` (no handler) and
/// `complete` (with a handler), no HTTP retries unless asked, fixed jitter seeds.
pub fn config() -> AgentConfig {
    let mut config = AgentConfig::new(scenarios::model(), scenarios::provider("http://replay.invalid/v1"));
    config.api_key = Some("sk-replay".into());
    config.system = Some("You are a helpful assistant.".into());
    config.tools = scenarios::tools();
    let any_object = json!({"type": "object"});
    for (name, executable) in [("ask_user", false), ("complete", true)] {
        let spec =
            ToolSpec { name: name.into(), description: format!("{name} tool"), input_schema: any_object.clone() };
        config.tools.push(ToolDecl::new(spec, executable));
    }
    config.retry = RetryPolicy { seed: 7, ..RetryPolicy::none() };
    config.error_backoff = RetryPolicy { seed: 11, ..RetryPolicy::default() };
    config
}
