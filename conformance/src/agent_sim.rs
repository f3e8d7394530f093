//! Pure simulation of the agent machine, modelled on [`crate::sim`]: a virtual clock
//! that jumps to the next scripted input or deadline, a scripted provider (the same
//! [`Reply`] / [`BodyStep`] scripts), scripted tools, application actions (prompt,
//! resume, cancel, set_state, subscribe) fired by events, and a transcript of every event.
//!
//! Actions fire on transcript lines, not at times, so that a driver running in real time
//! can place them exactly where the simulation does: the placement rule, which the
//! driver tests follow, is in [`crate::agent_script`]. The transcript lines do not depend
//! on timing, so the drivers are held to the same lines.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use omni_protocol::agent::{
    Agent, AgentCallbacks, AgentConfig, AgentEvent, AgentInput, AgentState, ErrorDecision, Prompt, RetryKind, Snapshot,
    StatePatch, Status, ToolDecision, TurnDecision, TurnEnd,
};
use omni_protocol::generate::{
    Effect, GenerateError, Report, RequestId, RetryPolicy, ToolDecl, ToolOutcome, ToolRunId, TransportError,
    TransportErrorKind,
};
use omni_protocol::{dialect::HttpRequest, Block, Message, Response, ToolResult, ToolSpec, ToolUse};
use serde_json::json;

use crate::agent_script::{action_line, ActionScript, When};
use crate::scenarios;
use crate::sim::{error_kind, BodyStep, Reply, ToolScript};

/// Something the application does when its trigger fires.
#[derive(Debug, Clone)]
pub enum Action {
    /// `prompt(text)`.
    Prompt(String),
    /// `prompt_with(prompt)`: content blocks and options for the turn.
    PromptWith(Box<Prompt>),
    /// `resume(decision)`.
    Resume(ToolDecision),
    /// `cancel()`.
    Cancel,
    /// `set_state(patch)`.
    SetState(Box<StatePatch>),
    /// A late subscriber: takes a snapshot and sees every later event.
    Subscribe,
}

impl Action {
    /// The name used in `refused <name>: ...` lines.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Prompt(_) => "prompt",
            Self::PromptWith(_) => "prompt_with",
            Self::Resume(_) => "resume",
            Self::Cancel => "cancel",
            Self::SetState(_) => "set_state",
            Self::Subscribe => "subscribe",
        }
    }

    /// The agent input of this action; `None` for [`Action::Subscribe`], which is not one.
    pub fn into_input(self) -> Option<AgentInput<'static>> {
        match self {
            Self::Prompt(text) => Some(AgentInput::Prompt(text)),
            Self::PromptWith(prompt) => Some(AgentInput::PromptWith(prompt)),
            Self::Resume(decision) => Some(AgentInput::Resume(decision)),
            Self::Cancel => Some(AgentInput::Cancel),
            Self::SetState(patch) => Some(AgentInput::SetState(patch)),
            Self::Subscribe => None,
        }
    }
}

/// A scenario: provider replies in order, tools by name, actions by trigger.
#[derive(Debug, Clone, Default)]
pub struct AgentScenario {
    /// Replies to successive requests.
    pub replies: Vec<Reply>,
    /// Tool behaviour by name.
    pub tools: BTreeMap<String, ToolScript>,
    /// Application actions and their triggers (see [`crate::agent_script`]).
    pub actions: Vec<(When, Action)>,
}

/// The outcome of a simulation.
#[derive(Debug, Clone, Default)]
pub struct AgentSimResult {
    /// Every event, one line each, with the lines of performed actions (`refused ...`,
    /// `subscribed`) right after their trigger line.
    pub transcript: Vec<String>,
    /// The events themselves.
    pub events: Vec<AgentEvent>,
    /// Every request the provider received.
    pub requests: Vec<HttpRequest>,
    /// Effects, one line each.
    pub effects: Vec<String>,
    /// What the agent told its telemetry (with `observe` on in its configuration).
    pub observations: Vec<omni_protocol::observe::Observation>,
    /// The late subscriber's snapshot and the index in `events` of the first event it sees.
    pub subscription: Option<(Snapshot, usize)>,
    /// Actions whose trigger never came.
    pub unfired: Vec<(When, Action)>,
    /// For each action performed on a trigger line (`<name> after <line>`): the virtual
    /// time from then to the next input or deadline already pending (body chunk, transport
    /// failure, tool result, deadline; response heads and body ends, which follow or come
    /// with a chunk, left out), i.e. how late a real driver may perform it. Actions with
    /// nothing pending are not listed.
    pub margins: Vec<(String, Duration)>,
    /// Virtual time at the end.
    pub elapsed: Duration,
}

/// A scripted input, due at a virtual time (the session simulation's too).
#[derive(Debug)]
pub(crate) enum Scheduled {
    Head { id: RequestId, status: u16, headers: Vec<(String, String)> },
    Body { id: RequestId, bytes: Vec<u8> },
    End { id: RequestId },
    Transport { id: RequestId, kind: TransportErrorKind },
    Tool { id: ToolRunId, outcome: ToolOutcome },
}

impl Scheduled {
    pub(crate) fn request(&self) -> Option<RequestId> {
        match self {
            Self::Head { id, .. } | Self::Body { id, .. } | Self::End { id } => Some(*id),
            Self::Transport { id, .. } => Some(*id),
            Self::Tool { .. } => None,
        }
    }
}

pub(crate) type Queue = BTreeMap<(Duration, u64), Scheduled>;

impl Scheduled {
    /// The report a driver would feed for this input.
    pub(crate) fn report(&self) -> Report<'_> {
        match self {
            Self::Head { id, status, headers } => {
                Report::ResponseHead { id: *id, status: *status, headers: headers.clone() }
            }
            Self::Body { bytes, id } => Report::Body { id: *id, bytes },
            Self::End { id } => Report::BodyEnd { id: *id },
            Self::Transport { id, kind } => Report::TransportFailed {
                id: *id,
                error: TransportError { kind: *kind, message: format!("scripted {kind:?}") },
            },
            Self::Tool { id, outcome } => Report::ToolFinished { id: *id, outcome: outcome.clone() },
        }
    }
}

/// Puts `item` on `queue` at `at`, after whatever is due at the same time.
pub(crate) fn push(queue: &mut Queue, seq: &mut u64, at: Duration, item: Scheduled) {
    *seq += 1;
    queue.insert((at, *seq), item);
}

/// Schedules the parts of `reply` to request `id` from `now` on: the head at once, the
/// body as its steps say, a connection that fails when there is no reply.
pub(crate) fn schedule_reply(queue: &mut Queue, seq: &mut u64, now: Duration, id: RequestId, reply: Option<Reply>) {
    match reply {
        Some(Reply::Http { status, headers, body }) => {
            push(queue, seq, now, Scheduled::Head { id, status, headers });
            let mut at = now;
            for step in body {
                match step {
                    BodyStep::Bytes(bytes) => push(queue, seq, at, Scheduled::Body { id, bytes }),
                    BodyStep::Wait(d) => at += d,
                    BodyStep::Reset => {
                        push(queue, seq, at, Scheduled::Transport { id, kind: TransportErrorKind::Reset });
                        return;
                    }
                    BodyStep::Hang => return,
                }
            }
            push(queue, seq, at, Scheduled::End { id });
        }
        Some(Reply::ConnectFail) | None => {
            push(queue, seq, now, Scheduled::Transport { id, kind: TransportErrorKind::Connect })
        }
    }
}

/// The simulation's state besides the agent.
struct Sim<'s> {
    scenario: &'s AgentScenario,
    start: Instant,
    now: Duration,
    replies: VecDeque<Reply>,
    queue: Queue,
    seq: u64,
    result: AgentSimResult,
    /// Event lines; action lines are kept apart, keyed by how many event lines precede them.
    lines: Vec<String>,
    inserted: Vec<(usize, String)>,
    script: ActionScript,
    /// Actions due, with the number of event lines up to their trigger line.
    due: VecDeque<(Action, usize)>,
}

/// Runs a scenario until nothing is scheduled and no deadline is set (idle, or paused
/// with no resume due). Returns the result and the agent for inspection.
pub fn simulate_agent<C: AgentCallbacks>(mut agent: Agent<C>, scenario: &AgentScenario) -> (AgentSimResult, Agent<C>) {
    let mut sim = Sim {
        scenario,
        start: Instant::now(),
        now: Duration::ZERO,
        replies: scenario.replies.iter().cloned().collect(),
        queue: BTreeMap::new(),
        seq: 0,
        result: AgentSimResult::default(),
        lines: Vec::new(),
        inserted: Vec::new(),
        script: ActionScript::new(scenario.actions.clone()),
        due: VecDeque::new(),
    };
    let start_actions = sim.script.start();
    sim.due.extend(start_actions.into_iter().map(|action| (action, 0)));
    sim.apply_due(&mut agent);
    let mut last_deadline: Option<(Instant, usize)> = None;
    for _ in 0..1_000_000 {
        sim.run_effects(&mut agent);
        let next_input = sim.queue.keys().next().map(|(at, _)| *at);
        let deadline = agent.poll_timeout().map(|(d, _)| d.saturating_duration_since(sim.start));
        let input_first = match (next_input, deadline) {
            (Some(at), Some(d)) => at <= d,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return (sim.finish(), agent),
        };
        if input_first {
            sim.now = sim.now.max(next_input.unwrap_or(sim.now));
            let Some((_, item)) = sim.queue.pop_first() else { unreachable!("a key was just seen") };
            let at = sim.start + sim.now;
            let outcome = agent.handle_input(AgentInput::Report(item.report()), at);
            // Driver inputs are never refused; a refusal would be a bug in the machine.
            if let Err(e) = outcome {
                sim.inserted.push((sim.lines.len(), format!("refused driver input: {e}")));
            }
        } else {
            sim.now = sim.now.max(deadline.unwrap_or(sim.now));
            let at = sim.start + sim.now;
            let before = sim.lines.len() + sim.result.effects.len();
            if let Some((prev, count)) = last_deadline {
                assert!(!(prev == at && count == before), "deadline {:?} repeats without progress", sim.now);
            }
            last_deadline = Some((at, before));
            agent.handle_timeout(at);
        }
        sim.run_effects(&mut agent);
        sim.drain_batch(&mut agent);
        sim.apply_due(&mut agent);
    }
    panic!("the simulation did not end within a million steps");
}

impl Sim<'_> {
    /// Executes the agent's effects: schedules replies and tool results, drops cancelled ones.
    fn run_effects<C: AgentCallbacks>(&mut self, agent: &mut Agent<C>) {
        while let Some(effect) = agent.poll_effect() {
            match effect {
                Effect::Observe(observation) => self.result.observations.push(observation),
                Effect::SendRequest { id, request } => {
                    self.result.effects.push(format!("send #{}", id.0));
                    self.result.requests.push(request);
                    let reply = self.replies.pop_front();
                    self.schedule_reply(id, reply);
                }
                Effect::CancelRequest { id } => {
                    self.result.effects.push(format!("cancel request #{}", id.0));
                    self.queue.retain(|_, s| s.request() != Some(id));
                }
                Effect::RunTool { id, call } => {
                    self.result.effects.push(format!("run tool #{} {} {}", id.0, call.name, call.input));
                    match self.scenario.tools.get(&call.name) {
                        Some(ToolScript::Answer { delay, outcome }) => {
                            self.push(self.now + *delay, Scheduled::Tool { id, outcome: outcome.clone() })
                        }
                        Some(ToolScript::Hang) => {}
                        None => {
                            let outcome = ToolOutcome::Err(format!("no script for {}", call.name));
                            self.push(self.now, Scheduled::Tool { id, outcome })
                        }
                    }
                }
                Effect::CancelTool { id } => {
                    self.result.effects.push(format!("cancel tool #{}", id.0));
                    self.queue.retain(|_, s| !matches!(s, Scheduled::Tool { id: t, .. } if *t == id));
                }
            }
        }
    }

    /// Writes the events of one input, collecting the actions they make due.
    fn drain_batch<C: AgentCallbacks>(&mut self, agent: &mut Agent<C>) {
        while let Some(event) = agent.poll_event() {
            let line = transcript_line(&event);
            let due = self.script.after_line(&line);
            self.lines.push(line);
            self.result.events.push(event);
            self.due.extend(due.into_iter().map(|action| (action, self.lines.len())));
        }
    }

    /// Applies the due actions in order, each after the batch before it.
    fn apply_due<C: AgentCallbacks>(&mut self, agent: &mut Agent<C>) {
        while let Some((action, position)) = self.due.pop_front() {
            if let Some(trigger) = position.checked_sub(1).and_then(|i| self.lines.get(i)) {
                let pending =
                    self.queue.iter().find(|(_, s)| !matches!(s, Scheduled::Head { .. } | Scheduled::End { .. }));
                let deadline = agent.poll_timeout().map(|(d, _)| d.saturating_duration_since(self.start));
                if let Some(next) = pending.map(|((at, _), _)| *at).into_iter().chain(deadline).min() {
                    self.result
                        .margins
                        .push((format!("{} after {trigger}", action.name()), next.saturating_sub(self.now)));
                }
            }
            let outcome = match action.clone().into_input() {
                Some(input) => agent.handle_input(input, self.start + self.now),
                None => {
                    self.result.subscription = Some((agent.snapshot(), self.result.events.len()));
                    Ok(())
                }
            };
            if let Some(line) = action_line(&action, &outcome) {
                self.inserted.push((position, line));
            }
            self.run_effects(agent);
            self.drain_batch(agent);
        }
    }

    fn push(&mut self, at: Duration, item: Scheduled) {
        push(&mut self.queue, &mut self.seq, at, item);
    }

    fn schedule_reply(&mut self, id: RequestId, reply: Option<Reply>) {
        schedule_reply(&mut self.queue, &mut self.seq, self.now, id, reply);
    }

    /// The result, with every action line placed after its trigger line.
    fn finish(mut self) -> AgentSimResult {
        // Stable: lines of one trigger stay in the order their actions were applied.
        self.inserted.sort_by_key(|(position, _)| *position);
        let mut inserted = self.inserted.into_iter().peekable();
        let mut transcript = Vec::with_capacity(self.lines.len() + inserted.len());
        for (written, line) in std::iter::once(None).chain(self.lines.into_iter().map(Some)).enumerate() {
            transcript.extend(line);
            while let Some((_, action_line)) = inserted.next_if(|(position, _)| *position == written) {
                transcript.push(action_line);
            }
        }
        self.result.transcript = transcript;
        self.result.unfired = self.script.unfired();
        self.result.elapsed = self.now;
        self.result
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
        AgentEvent::Turn { end, stop_reason, messages, usage, output } => format!(
            "turn {} {} messages={} usage={}/{}{}",
            match end {
                TurnEnd::Stop => "stop",
                TurnEnd::Continue => "continue",
            },
            json_str(stop_reason),
            messages.len(),
            usage.input_tokens,
            usage.output_tokens,
            match output.as_deref() {
                None => String::new(),
                Some(Ok(value)) => format!(" output={value}"),
                Some(Err(error)) => format!(" output_error={error:?}"),
            }
        ),
        AgentEvent::OutputRetry { attempt, error } => format!("output_retry {attempt}: {error}"),
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
        AgentEvent::Cancelled(_) => "cancelled".into(),
        AgentEvent::State(_) => "state".into(),
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
    /// `(step, system prompt)`: `handle_step` sets this system prompt before that step.
    pub system_at_step: Option<(u32, String)>,
    /// Every callback call, one line each (shared by clones: a driver's agent gets a
    /// clone, and its log is read here after the agent is gone).
    pub log: CallbackLog,
}

/// The lines [`ScriptedCallbacks`] write, one per callback call, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct CallbackLog(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl CallbackLog {
    /// Adds a line.
    pub fn push(&self, line: String) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

// Drivers move the callbacks into a task or a thread.
const _: fn() = || {
    fn send_static<T: Send + 'static>() {}
    send_static::<ScriptedCallbacks>();
    send_static::<AgentScenario>();
};

impl AgentCallbacks for ScriptedCallbacks {
    fn init(&mut self, config: &mut AgentConfig) -> Result<(), String> {
        self.log.push(format!("init tools={} messages={}", config.tools.len(), config.messages.len()));
        Ok(())
    }

    fn handle_turn(&mut self, response: &Response) -> TurnDecision {
        let stop = response.stop_reason.map(|s| json_str(&s)).unwrap_or_default();
        self.log.push(format!("handle_turn {stop} {:?} messages={}", response.text(), response.messages.len()));
        match &self.continue_until {
            // Content blocks (`ContinueWith`), to show that form at work through every driver.
            Some((_, text)) if !self.completed => TurnDecision::ContinueWith(Box::new(Prompt::text(text.clone()))),
            _ => TurnDecision::Stop,
        }
    }

    fn handle_step(&mut self, step: u32, state: &AgentState) -> Option<StatePatch> {
        self.log.push(format!("handle_step {step} messages={}", state.messages.len()));
        let (at, system) = self.system_at_step.as_ref()?;
        (*at == step).then(|| StatePatch { system: Some(Some(system.clone())), ..StatePatch::default() })
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
                if let omni_protocol::ToolResultContent::Text { text } = part {
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
