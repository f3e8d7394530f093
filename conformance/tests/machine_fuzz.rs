//! The generate and agent machines fuzzed against a small reference model of what they
//! should be doing (firezone's `tests/fuzz/{reference,transition}.rs` pattern): proptest
//! makes random sequences of transitions — a response head (200, 429 or 500, with or
//! without `retry-after`), the next bytes of a valid stream or garbage, a body end, a
//! transport failure, a tool outcome, a late answer to a settled or unknown id, a cancel,
//! agent prompts, resumes and state changes, time moving on to (or past) the deadline —
//! and after each one every effect and event is drained and checked:
//!
//! 1. the agent's committed history changes only at a `turn` event (by exactly the turn's
//!    messages, appended) or a `state` event (to what was set); a cancel or a final error
//!    leaves it as it was;
//! 2. every request and tool run is settled: answered (body end, transport failure, the
//!    whole of a valid stream, a tool outcome) or cancelled by the machine; when the
//!    machine is done (or idle) nothing is left unsettled, a cancel names only an id it
//!    issued and never twice, and an answer to a settled or unknown id changes nothing;
//! 3. nothing after a terminal event: after `Finished`/`Failed` the generate machine says
//!    nothing more; after an agent turn's `turn stop`, `error` or `cancelled` only `state`
//!    events come until the next prompt;
//! 4. after `handle_timeout(now)` the deadline is none or later than `now` (and no input
//!    leaves it in the past);
//! 5. nothing panics (any panic fails the case);
//! 6. time only moves forward in what the harness feeds;
//! 7. never stuck: a call or turn in flight (not paused) always has a deadline;
//! 8. every request carries a conversation a provider accepts (every tool call answered in
//!    the next message, every result answering a call, the user's turn last).
//!
//! The transitions are generated as choices (`pick` indexes) resolved against what is
//! outstanding when they are applied, so every generated sequence is valid and shrinks
//! well. `OMNI_MACHINE_FUZZ_CASES` sets the number of cases (512 by default).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use omni_conformance::agent_sim;
use omni_conformance::scenarios::{self, text_events, tool_events};
use omni_core::agent::{
    Agent, AgentCallbacks, AgentError, AgentEvent, AgentInput, ErrorDecision, StatePatch, Status, ToolDecision,
    TurnDecision, TurnEnd,
};
use omni_core::generate::{
    Effect, Generate, GenerateError, GenerateEvent, Input, Report, RequestId, RetryPolicy, ToolOutcome, ToolRunId,
    TransportError, TransportErrorKind,
};
use omni_core::tool::ToolOutput;
use omni_core::{Context, Message, Options, OutputSchema, Response, ToolResult, ToolResultContent, ToolUse};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;

// ---------------------------------------------------------------------------------------
// Transitions
// ---------------------------------------------------------------------------------------

/// One thing that happens to a machine.
#[derive(Debug, Clone)]
enum Step {
    /// The head of a request that has none yet.
    Head { pick: usize, status: u16, retry_after: Option<(&'static str, &'static str)>, body: usize },
    /// A whole answer at once: a 200 head, all of a valid stream, the body end.
    Reply { pick: usize, body: usize },
    /// The next `len` bytes of a headed request's planned body.
    Body { pick: usize, len: usize },
    /// Bytes that are no valid stream.
    Garbage { pick: usize, bytes: Vec<u8> },
    /// The body of a headed request ends (wherever its plan is).
    End { pick: usize },
    /// A request fails below HTTP.
    Fail { pick: usize, kind: u8 },
    /// A tool run ends.
    ToolDone { pick: usize, outcome: u8 },
    /// A report for an id that is settled or was never issued: must change nothing.
    Stale { pick: usize, what: u8 },
    /// The caller cancels.
    Cancel,
    /// Agent: a prompt (starts a turn when idle, else is staged).
    Prompt(u8),
    /// Agent: the decision for a paused call.
    Resume(u8),
    /// Agent: a state change (clears or keeps the history, changes the system prompt).
    SetState(u8),
    /// Agent: the last handle goes away (work in flight is cancelled, no more events).
    Terminate,
    /// Time moves on by this many ms, then `handle_timeout`.
    Tick(u32),
    /// Time jumps to the deadline plus this many ms (if there is one), then `handle_timeout`.
    ToDeadline(u32),
}

/// `retry-after` headers: short, longer than the policy allows, odd and hostile.
const RETRY_AFTER: &[(&str, &str)] = &[
    ("retry-after", "0"),
    ("retry-after", "1"),
    ("retry-after", "120"),
    ("retry-after-ms", "250"),
    ("retry-after", "-1"),
    ("retry-after", "1e30"),
    ("retry-after", "NaN"),
    ("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
];

fn step(agent: bool) -> BoxedStrategy<Step> {
    let pick = 0usize..4;
    let common = prop_oneof![
        6 => (pick.clone(), prop_oneof![6 => Just(200u16), 2 => Just(429), 2 => Just(500), 1 => Just(307)],
              proptest::option::weighted(0.3, proptest::sample::select(RETRY_AFTER)), 0usize..9)
            .prop_map(|(pick, status, retry_after, body)| Step::Head { pick, status, retry_after, body }),
        6 => (pick.clone(), 0usize..9).prop_map(|(pick, body)| Step::Reply { pick, body }),
        10 => (pick.clone(), prop_oneof![2 => 1usize..64, 1 => 64usize..600, 2 => Just(usize::MAX)])
            .prop_map(|(pick, len)| Step::Body { pick, len }),
        1 => (pick.clone(), proptest::collection::vec(any::<u8>(), 1..40))
            .prop_map(|(pick, bytes)| Step::Garbage { pick, bytes }),
        3 => pick.clone().prop_map(|pick| Step::End { pick }),
        1 => (pick.clone(), 0u8..5).prop_map(|(pick, kind)| Step::Fail { pick, kind }),
        5 => (pick.clone(), 0u8..6).prop_map(|(pick, outcome)| Step::ToolDone { pick, outcome }),
        2 => (0usize..8, 0u8..5).prop_map(|(pick, what)| Step::Stale { pick, what }),
        1 => Just(Step::Cancel),
        2 => prop_oneof![0u32..50, 0u32..3_000].prop_map(Step::Tick),
        2 => prop_oneof![Just(0u32), Just(1), 0u32..10_000].prop_map(Step::ToDeadline),
    ];
    if !agent {
        return common.boxed();
    }
    prop_oneof![
        12 => common,
        2 => any::<u8>().prop_map(Step::Prompt),
        1 => any::<u8>().prop_map(Step::Resume),
        1 => any::<u8>().prop_map(Step::SetState),
        1 => Just(Step::Terminate),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------

/// Valid Anthropic streams a 200 head may announce; the fifth is an in-stream error.
fn stream_bodies() -> Vec<Vec<u8>> {
    let weather = r#"{"city":"Paris"}"#;
    let bodies = [
        text_events(&["It is ", "sunny."]),
        tool_events(&[("toolu_1", "get_weather", weather), ("toolu_2", "get_time", weather)]),
        tool_events(&[("toolu_3", "ask_user", "{}")]),
        tool_events(&[("toolu_4", "get_weather", r#"{"town":1}"#), ("toolu_5", "nope", "{}")]),
        vec![
            text_events(&["x"])[0].clone(),
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n"
                .to_string(),
        ],
        tool_events(&[("toolu_6", "complete", "{}")]),
        text_events(&["{\"done\":", " true}"]),
        tool_events(&[("toolu_7", "get_time", weather)]),
    ];
    let mut bodies: Vec<Vec<u8>> = bodies.iter().map(|events| events.concat().into_bytes()).collect();
    // A hostile one: tool calls under stop reason `end_turn`.
    let calls = tool_events(&[("toolu_8", "get_weather", weather)]).concat();
    bodies.push(calls.replace(r#""stop_reason":"tool_use""#, r#""stop_reason":"end_turn""#).into_bytes());
    bodies
}

const ERROR_BODY: &[u8] = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;

// ---------------------------------------------------------------------------------------
// The reference model of effects
// ---------------------------------------------------------------------------------------

/// What the driver side knows of one request.
#[derive(Debug, Default)]
struct Request {
    /// The body the head announced (`None` until the head was sent).
    body: Option<Vec<u8>>,
    /// A valid stream (200) rather than an error body.
    stream: bool,
    /// Bytes of `body` sent.
    sent: usize,
    /// Body end or transport failure reported.
    answered: bool,
    /// The machine cancelled it.
    cancelled: bool,
    /// Garbage was sent: the stream is no longer valid.
    spoiled: bool,
}

impl Request {
    fn open(&self) -> bool {
        !self.answered && !self.cancelled
    }
    /// The machine has all it needs: an end, a failure, a cancel, or the whole of a valid stream.
    fn settled(&self) -> bool {
        !self.open() || (self.stream && !self.spoiled && self.body.as_ref().is_some_and(|b| self.sent == b.len()))
    }
}

#[derive(Debug, Default)]
struct Tool {
    answered: bool,
    cancelled: bool,
}

/// Every request and tool run the machine asked for, and what became of it.
#[derive(Debug, Default)]
struct Ledger {
    requests: BTreeMap<RequestId, Request>,
    tools: BTreeMap<ToolRunId, Tool>,
}

impl Ledger {
    fn effect(&mut self, effect: Effect) -> Result<(), String> {
        match effect {
            Effect::SendRequest { id, request } => {
                acceptable_history(&request.body).map_err(|e| format!("request {}: {e}", id.0))?;
                if self.requests.insert(id, Request::default()).is_some() {
                    return Err(format!("request id {} issued twice", id.0));
                }
            }
            Effect::CancelRequest { id } => {
                let request = self.requests.get_mut(&id).ok_or(format!("cancel of unknown request {}", id.0))?;
                if request.cancelled {
                    return Err(format!("request {} cancelled twice", id.0));
                }
                request.cancelled = true;
            }
            Effect::RunTool { id, .. } => {
                if self.tools.insert(id, Tool::default()).is_some() {
                    return Err(format!("tool run id {} issued twice", id.0));
                }
            }
            Effect::CancelTool { id } => {
                let tool = self.tools.get_mut(&id).ok_or(format!("cancel of unknown tool run {}", id.0))?;
                if tool.cancelled || tool.answered {
                    return Err(format!("tool run {} cancelled after it was settled", id.0));
                }
                tool.cancelled = true;
            }
        }
        Ok(())
    }

    /// Nothing the machine asked for is left hanging (called when it is done or idle).
    fn all_settled(&self) -> Result<(), String> {
        if let Some((id, r)) = self.requests.iter().find(|(_, r)| !r.settled()) {
            return Err(format!("request {} left neither answered nor cancelled: {r:?}", id.0));
        }
        if let Some((id, _)) = self.tools.iter().find(|(_, t)| !t.answered && !t.cancelled) {
            return Err(format!("tool run {} left neither answered nor cancelled", id.0));
        }
        Ok(())
    }

    fn nth<K: Copy, V>(map: &BTreeMap<K, V>, pick: usize, keep: impl Fn(&V) -> bool) -> Option<K> {
        let open: Vec<K> = map.iter().filter(|(_, v)| keep(v)).map(|(k, _)| *k).collect();
        (!open.is_empty()).then(|| open[pick % open.len()])
    }
}

/// Property 8: a request's conversation is one a provider accepts: it ends with the
/// user's turn, every tool call is answered by a result in the next (user) message, and
/// every result answers a call of the message before.
fn acceptable_history(body: &[u8]) -> Result<(), String> {
    let body: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let blocks = |m: &serde_json::Value, kind: &str, key: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|c| c.iter().filter(|b| b["type"] == kind).filter_map(|b| b[key].as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    if messages.last().is_none_or(|m| m["role"] != "user") {
        return Err("the conversation does not end with the user's turn".into());
    }
    for (i, message) in messages.iter().enumerate() {
        let calls = blocks(message, "tool_use", "id");
        let results = blocks(message, "tool_result", "tool_use_id");
        if !calls.is_empty() {
            let answered =
                messages.get(i + 1).map(|next| blocks(next, "tool_result", "tool_use_id")).unwrap_or_default();
            if let Some(call) = calls.iter().find(|c| !answered.contains(c)) {
                return Err(format!("message {i}: tool call {call} has no result in the next message"));
            }
        }
        if !results.is_empty() {
            let asked = i.checked_sub(1).map(|p| blocks(&messages[p], "tool_use", "id")).unwrap_or_default();
            if let Some(result) = results.iter().find(|r| !asked.contains(r)) {
                return Err(format!("message {i}: tool result {result} answers no call of the message before"));
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The machines under test
// ---------------------------------------------------------------------------------------

/// What the harness needs of a machine.
trait Subject {
    fn report(&mut self, report: Report<'_>, now: Instant);
    fn poll_effect(&mut self) -> Option<Effect>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    /// Feeds an application input; `Ok(false)` when the machine refused it (then nothing
    /// may change).
    fn application(&mut self, step: &Step, now: Instant) -> bool;
    /// Drains and checks the events of the last input.
    fn drain_events(&mut self) -> Result<(), String>;
    /// Done (generate) or idle with no turn in flight (agent): nothing may be outstanding.
    fn at_rest(&self) -> bool;
    /// Events drained so far.
    fn event_count(&self) -> usize;
    /// Waiting for the application (agent paused): nothing may be outstanding either.
    fn paused(&self) -> bool {
        false
    }
}

struct GenerateSubject {
    machine: Generate,
    terminal: bool,
    events: usize,
}

impl Subject for GenerateSubject {
    fn report(&mut self, report: Report<'_>, now: Instant) {
        self.machine.handle_input(Input::Report(report), now)
    }
    fn poll_effect(&mut self) -> Option<Effect> {
        self.machine.poll_effect()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now)
    }
    fn application(&mut self, step: &Step, now: Instant) -> bool {
        match step {
            Step::Cancel => {
                self.machine.handle_input(Input::Cancel, now);
                true
            }
            _ => false,
        }
    }
    fn drain_events(&mut self) -> Result<(), String> {
        while let Some(event) = self.machine.poll_event() {
            self.events += 1;
            if self.terminal {
                return Err(format!("event after the terminal one: {event:?}"));
            }
            if matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. }) {
                self.terminal = true;
            }
        }
        if self.terminal != self.machine.is_done() {
            return Err(format!("is_done() = {} but terminal event seen = {}", self.machine.is_done(), self.terminal));
        }
        if self.terminal && self.machine.poll_timeout().is_some() {
            return Err("a deadline after the terminal event".into());
        }
        // Never stuck: a call in flight always has a deadline (stall, backoff or tool limit).
        if !self.terminal && self.machine.poll_timeout().is_none() {
            return Err("a call in flight with no deadline: it could wait forever".into());
        }
        Ok(())
    }
    fn at_rest(&self) -> bool {
        self.terminal
    }
    fn event_count(&self) -> usize {
        self.events
    }
}

/// Agent callbacks whose decisions come from the case's choices, in turn.
#[derive(Debug, Clone, Default)]
struct FuzzCallbacks {
    choices: Vec<u8>,
    at: usize,
}

impl FuzzCallbacks {
    fn next(&mut self) -> u8 {
        let choice = self.choices.get(self.at % self.choices.len().max(1)).copied().unwrap_or(0);
        self.at += 1;
        choice
    }
}

fn decision(choice: u8) -> ToolDecision {
    match choice % 6 {
        0 | 1 => ToolDecision::Execute,
        2 => ToolDecision::Reject("no".into()),
        3 => ToolDecision::Result(Ok(ToolOutput::content(vec![ToolResultContent::Text { text: "given".into() }]))),
        4 => ToolDecision::Result(Err("given error".into())),
        _ => ToolDecision::Pause("ask".into()),
    }
}

impl AgentCallbacks for FuzzCallbacks {
    fn handle_turn(&mut self, _response: &Response) -> TurnDecision {
        if self.next() % 4 == 0 {
            TurnDecision::Continue("go on".into())
        } else {
            TurnDecision::Stop
        }
    }
    fn handle_tool_use(&mut self, _tool_use: &ToolUse) -> ToolDecision {
        let choice = self.next();
        decision(choice)
    }
    fn handle_tool_result(&mut self, result: ToolResult) -> ToolResult {
        result
    }
    fn handle_error(&mut self, _error: &GenerateError, _attempt: u32) -> ErrorDecision {
        if self.next() % 2 == 0 {
            ErrorDecision::Retry
        } else {
            ErrorDecision::Stop
        }
    }
}

struct AgentSubject {
    machine: Agent<FuzzCallbacks>,
    /// Reference: the committed history.
    committed: Vec<Message>,
    /// Reference: a turn is in flight (a prompt started it; a terminal event ended it).
    in_turn: bool,
    /// Reference: the status last announced.
    status: Status,
    /// History given by an accepted `set_state`, to be seen at its `state` event.
    patched: Option<Vec<Message>>,
    /// `terminate` was called: no event may follow.
    terminated: bool,
    /// Reference: the messages the turn in flight announced (`message` events).
    pending: Vec<Message>,
    events: usize,
}

impl Subject for AgentSubject {
    fn report(&mut self, report: Report<'_>, now: Instant) {
        // Driver reports are never refused.
        let refused = self.machine.handle_input(AgentInput::Report(report), now);
        assert!(refused.is_ok(), "a driver report was refused: {refused:?}");
    }
    fn poll_effect(&mut self) -> Option<Effect> {
        self.machine.poll_effect()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now)
    }
    fn application(&mut self, step: &Step, now: Instant) -> bool {
        let (input, patched) = match step {
            Step::Cancel => (AgentInput::Cancel, None),
            Step::Prompt(n) => (AgentInput::Prompt(format!("prompt {n}")), None),
            Step::Resume(n) => (AgentInput::Resume(decision(*n)), None),
            Step::Terminate => {
                self.machine.terminate(now);
                self.terminated = true;
                self.in_turn = false;
                return true;
            }
            Step::SetState(n) => {
                let messages = (n % 2 == 0).then(Vec::new);
                let patch = StatePatch {
                    system: Some(Some(format!("system {n}"))),
                    messages: messages.clone(),
                    ..StatePatch::default()
                };
                (AgentInput::SetState(Box::new(patch)), Some(messages.unwrap_or_else(|| self.committed.clone())))
            }
            _ => return false,
        };
        let starts = matches!(step, Step::Prompt(_)) && self.machine.status() == Status::Idle;
        let outcome = self.machine.handle_input(input, now);
        if self.terminated {
            assert_eq!(outcome, Err(AgentError::Terminated), "{step:?} after terminate");
        }
        let accepted = outcome.is_ok();
        if accepted && starts {
            self.in_turn = true;
        }
        if accepted {
            self.patched = patched;
        }
        accepted
    }
    fn drain_events(&mut self) -> Result<(), String> {
        while let Some(event) = self.machine.poll_event() {
            self.events += 1;
            if self.terminated {
                return Err(format!("event after terminate: {}", agent_sim::transcript_line(&event)));
            }
            match &event {
                AgentEvent::State => {
                    let Some(messages) = self.patched.take() else {
                        return Err("a state event without set_state".into());
                    };
                    self.committed = messages;
                    continue;
                }
                AgentEvent::Status(status) => self.status = *status,
                _ => {}
            }
            if !self.in_turn {
                return Err(format!(
                    "turn event {} after the turn's terminal event",
                    agent_sim::transcript_line(&event)
                ));
            }
            match event {
                AgentEvent::Message(message) => self.pending.push(message),
                AgentEvent::Turn { end, messages, .. } => {
                    if messages != self.pending {
                        return Err(format!(
                            "the turn commits {} messages, its message events announced {}",
                            messages.len(),
                            self.pending.len()
                        ));
                    }
                    self.pending.clear();
                    self.committed.extend(messages);
                    self.in_turn = end == TurnEnd::Continue;
                }
                AgentEvent::Error(_) | AgentEvent::Cancelled => {
                    self.pending.clear();
                    self.in_turn = false;
                }
                _ => {}
            }
        }
        if self.machine.messages() != self.committed.as_slice() {
            return Err(format!(
                "history is {} messages, the reference {}: it changed outside a turn end",
                self.machine.messages().len(),
                self.committed.len()
            ));
        }
        let snapshot = self.machine.snapshot();
        if !self.terminated && (snapshot.committed != self.committed || snapshot.pending != self.pending) {
            return Err(format!(
                "the snapshot ({} committed, {} pending) disagrees with the events ({} committed, {} pending)",
                snapshot.committed.len(),
                snapshot.pending.len(),
                self.committed.len(),
                self.pending.len()
            ));
        }
        if self.machine.status() != self.status {
            return Err(format!(
                "status() {:?} but the last status event said {:?}",
                self.machine.status(),
                self.status
            ));
        }
        if !self.in_turn && self.status != Status::Idle && !self.terminated {
            return Err(format!("status {:?} after the turn's terminal event", self.status));
        }
        if !self.in_turn && self.machine.poll_timeout().is_some() {
            return Err("a deadline with no turn in flight".into());
        }
        // Never stuck: a turn in flight waits for the application only when paused.
        if self.in_turn && self.status != Status::Paused && self.machine.poll_timeout().is_none() {
            return Err(format!("a turn in flight ({:?}) with no deadline: it could wait forever", self.status));
        }
        Ok(())
    }
    fn at_rest(&self) -> bool {
        !self.in_turn
    }
    fn paused(&self) -> bool {
        self.status == Status::Paused && !self.terminated
    }
    fn event_count(&self) -> usize {
        self.events
    }
}

// ---------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------

struct Harness<S> {
    subject: S,
    ledger: Ledger,
    bodies: Vec<Vec<u8>>,
    start: Instant,
    now: Instant,
}

fn kind(n: u8) -> TransportErrorKind {
    match n % 5 {
        0 => TransportErrorKind::Connect,
        1 => TransportErrorKind::Reset,
        2 => TransportErrorKind::Tls,
        3 => TransportErrorKind::ProxyAuth,
        _ => TransportErrorKind::Other,
    }
}

fn outcome(n: u8) -> ToolOutcome {
    match n % 3 {
        0 => ToolOutcome::Ok(vec![ToolResultContent::Text { text: format!("result {n}") }]),
        1 => ToolOutcome::Err(format!("error {n}")),
        _ => ToolOutcome::Panicked(format!("panic {n}")),
    }
}

impl<S: Subject> Harness<S> {
    fn new(subject: S, start: Instant) -> Self {
        Harness { subject, ledger: Ledger::default(), bodies: stream_bodies(), start, now: start }
    }

    /// Drains effects and events, then checks the invariants.
    fn settle(&mut self) -> Result<(), String> {
        while let Some(effect) = self.subject.poll_effect() {
            self.ledger.effect(effect)?;
        }
        self.subject.drain_events()?;
        if self.subject.at_rest() || self.subject.paused() {
            self.ledger.all_settled()?;
        }
        // One exchange at a time: a retry, a redirect or the next step starts only once the
        // request before it is settled.
        let open: Vec<u64> = self.ledger.requests.iter().filter(|(_, r)| !r.settled()).map(|(id, _)| id.0).collect();
        if open.len() > 1 {
            return Err(format!("requests {open:?} in flight at once"));
        }
        Ok(())
    }

    fn apply(&mut self, step: &Step) -> Result<(), String> {
        let now = self.now;
        match step {
            Step::Head { pick, status, retry_after, body } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| r.open() && r.body.is_none()) else {
                    return Ok(());
                };
                let mut headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
                if let Some((name, value)) = retry_after {
                    headers.push((name.to_string(), value.to_string()));
                }
                if (300..400).contains(status) {
                    // Followed when on the same origin (a new request), refused when not.
                    let location = if body % 2 == 0 { "/v1/elsewhere" } else { "http://other.invalid/v1" };
                    headers.push(("location".into(), location.into()));
                }
                let request = self.ledger.requests.get_mut(&id).expect("picked");
                request.stream = *status == 200;
                request.body = Some(if request.stream {
                    self.bodies[body % self.bodies.len()].clone()
                } else {
                    ERROR_BODY.to_vec()
                });
                self.subject.report(Report::ResponseHead { id, status: *status, headers }, now);
            }
            Step::Reply { pick, body } => {
                let head = Step::Head { pick: *pick, status: 200, retry_after: None, body: *body };
                self.apply(&head)?;
                let Some(id) = Ledger::nth(&self.ledger.requests, 0, |r| r.open() && r.body.is_some() && r.sent == 0)
                else {
                    return Ok(());
                };
                let request = self.ledger.requests.get_mut(&id).expect("picked");
                let bytes = request.body.clone().unwrap_or_default();
                request.sent = bytes.len();
                self.subject.report(Report::Body { id, bytes: &bytes }, now);
                self.settle()?;
                self.deadline_not_past(false)?;
                if self.ledger.requests.get(&id).is_some_and(Request::open) {
                    self.ledger.requests.get_mut(&id).expect("picked").answered = true;
                    self.subject.report(Report::BodyEnd { id }, now);
                }
            }
            Step::Body { pick, len } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| {
                    r.open() && r.body.as_ref().is_some_and(|b| r.sent < b.len())
                }) else {
                    return Ok(());
                };
                let request = self.ledger.requests.get_mut(&id).expect("picked");
                let body = request.body.as_deref().unwrap_or_default();
                let end = request.sent.saturating_add(*len).min(body.len());
                let bytes = body[request.sent..end].to_vec();
                request.sent = end;
                self.subject.report(Report::Body { id, bytes: &bytes }, now);
            }
            Step::Garbage { pick, bytes } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| r.open() && r.body.is_some()) else {
                    return Ok(());
                };
                self.ledger.requests.get_mut(&id).expect("picked").spoiled = true;
                self.subject.report(Report::Body { id, bytes }, now);
            }
            Step::End { pick } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| r.open() && r.body.is_some()) else {
                    return Ok(());
                };
                self.ledger.requests.get_mut(&id).expect("picked").answered = true;
                self.subject.report(Report::BodyEnd { id }, now);
            }
            Step::Fail { pick, kind: n } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, Request::open) else { return Ok(()) };
                self.ledger.requests.get_mut(&id).expect("picked").answered = true;
                let error = TransportError { kind: kind(*n), message: "fuzzed".into() };
                self.subject.report(Report::TransportFailed { id, error }, now);
            }
            Step::ToolDone { pick, outcome: n } => {
                let Some(id) = Ledger::nth(&self.ledger.tools, *pick, |t| !t.answered && !t.cancelled) else {
                    return Ok(());
                };
                self.ledger.tools.get_mut(&id).expect("picked").answered = true;
                self.subject.report(Report::ToolFinished { id, outcome: outcome(*n) }, now);
            }
            Step::Stale { pick, what } => return self.stale(*pick, *what),
            Step::Cancel | Step::Prompt(_) | Step::Resume(_) | Step::SetState(_) | Step::Terminate => {
                let before = self.subject.event_count();
                if !self.subject.application(step, now) {
                    // A refused input changes nothing.
                    if let Some(effect) = self.subject.poll_effect() {
                        return Err(format!("a refused {step:?} made an effect: {effect:?}"));
                    }
                    self.subject.drain_events()?;
                    if self.subject.event_count() != before {
                        return Err(format!("a refused {step:?} made events"));
                    }
                }
            }
            Step::Tick(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                return self.timeout();
            }
            Step::ToDeadline(ms) => {
                if let Some(deadline) = self.subject.poll_timeout() {
                    // Time never goes back, even when the deadline is (wrongly) in the past.
                    self.now = self.now.max(deadline + Duration::from_millis(u64::from(*ms)));
                }
                return self.timeout();
            }
        }
        self.settle()?;
        self.deadline_not_past(false)
    }

    fn timeout(&mut self) -> Result<(), String> {
        self.subject.handle_timeout(self.now);
        self.settle()?;
        self.deadline_not_past(true)
    }

    /// Property 4: after `handle_timeout(now)` the deadline is none or later than `now`;
    /// after any other input it is not in the past.
    fn deadline_not_past(&self, after_timeout: bool) -> Result<(), String> {
        match self.subject.poll_timeout() {
            Some(d) if d < self.now || (after_timeout && d == self.now) => Err(format!(
                "deadline at {:?} is not after now {:?} ({})",
                d.saturating_duration_since(self.start),
                self.now.saturating_duration_since(self.start),
                if after_timeout { "after handle_timeout" } else { "after an input" }
            )),
            _ => Ok(()),
        }
    }

    /// A report for a settled or unknown id: no effect, no event, same deadline.
    fn stale(&mut self, pick: usize, what: u8) -> Result<(), String> {
        let settled_request = Ledger::nth(&self.ledger.requests, pick, |r| !r.open());
        let settled_tool = Ledger::nth(&self.ledger.tools, pick, |t| t.answered || t.cancelled);
        let unknown = RequestId(1_000_000 + pick as u64);
        let report = match what % 5 {
            0 => Report::ResponseHead { id: settled_request.unwrap_or(unknown), status: 200, headers: Vec::new() },
            1 => Report::Body { id: settled_request.unwrap_or(unknown), bytes: b"data: {}\n\n" },
            2 => Report::BodyEnd { id: settled_request.unwrap_or(unknown) },
            3 => Report::TransportFailed {
                id: settled_request.unwrap_or(unknown),
                error: TransportError { kind: TransportErrorKind::Reset, message: "late".into() },
            },
            _ => Report::ToolFinished {
                id: settled_tool.unwrap_or(ToolRunId(1_000_000 + pick as u64)),
                outcome: outcome(what),
            },
        };
        let deadline = self.subject.poll_timeout();
        let events = self.subject.event_count();
        let described = format!("{report:?}");
        self.subject.report(report, self.now);
        if let Some(effect) = self.subject.poll_effect() {
            return Err(format!("a stale {described} made an effect: {effect:?}"));
        }
        self.subject.drain_events()?;
        if self.subject.event_count() != events || self.subject.poll_timeout() != deadline {
            return Err(format!("a stale {described} changed the machine"));
        }
        Ok(())
    }

    /// Runs the steps, then cancels whatever is still in flight and checks that
    /// everything was settled.
    fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        self.settle()?;
        for (i, step) in steps.iter().enumerate() {
            self.apply(step).map_err(|e| format!("after step {i} {step:?}: {e}"))?;
        }
        if !self.subject.at_rest() {
            self.apply(&Step::Cancel).map_err(|e| format!("after the final cancel: {e}"))?;
            if !self.subject.at_rest() {
                return Err("not at rest after the final cancel".into());
            }
        }
        self.ledger.all_settled()
    }
}

// ---------------------------------------------------------------------------------------
// Configurations and the tests
// ---------------------------------------------------------------------------------------

/// Knobs of a case's configuration.
#[derive(Debug, Clone)]
struct Knobs {
    max_retries: u32,
    timeout_ms: Option<u64>,
    stall_ms: u64,
    tool_timeout_ms: Option<u64>,
    max_steps: Option<u32>,
    max_response_bytes: u64,
    /// Ask for structured output (an object): text answers are corrected, `{}`-less ones fail.
    structured: bool,
    /// Honour any `retry-after`, however long (instead of the default 60 s at most).
    patient: bool,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    let limits = (
        0u32..3,
        proptest::option::weighted(0.3, 500u64..20_000),
        prop_oneof![2 => Just(120_000u64), 1 => 100u64..10_000],
        proptest::option::weighted(0.5, 100u64..10_000),
        proptest::option::weighted(0.5, 1u32..4),
        prop_oneof![4 => Just(u64::MAX), 1 => 50u64..2_000],
    );
    (limits, proptest::bool::weighted(0.2), proptest::bool::weighted(0.2)).prop_map(
        |((max_retries, timeout_ms, stall_ms, tool_timeout_ms, max_steps, max_response_bytes), structured, patient)| {
            Knobs {
                max_retries,
                timeout_ms,
                stall_ms,
                tool_timeout_ms,
                max_steps,
                max_response_bytes,
                structured,
                patient,
            }
        },
    )
}

fn options(knobs: &Knobs) -> Options {
    Options {
        timeout: knobs.timeout_ms.map(Duration::from_millis),
        tool_timeout: knobs.tool_timeout_ms.map(Duration::from_millis),
        max_steps: knobs.max_steps,
        output: knobs.structured.then(|| OutputSchema { name: "answer".into(), schema: json!({"type": "object"}) }),
        ..Options::default()
    }
}

fn retry(knobs: &Knobs) -> RetryPolicy {
    let max_retry_after = if knobs.patient { Duration::MAX } else { RetryPolicy::default().max_retry_after };
    RetryPolicy { max_retries: knobs.max_retries, max_retry_after, seed: 7, ..RetryPolicy::default() }
}

fn cases() -> u32 {
    std::env::var("OMNI_MACHINE_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512)
}

fn runner() -> TestRunner {
    TestRunner::new(Config { cases: cases(), failure_persistence: None, ..Config::default() })
}

fn check(result: Result<(), String>) -> Result<(), TestCaseError> {
    result.map_err(TestCaseError::fail)
}

#[test]
fn generate_machine_against_its_reference() {
    let strategy = (knobs(), proptest::collection::vec(step(false), 0..60));
    runner()
        .run(&strategy, |(knobs, steps)| {
            let mut config = scenarios::config(&scenarios::all()[0], "http://fuzz.invalid/v1");
            config.context = Context::from_prompt("What is the weather in Paris?");
            config.options = options(&knobs);
            config.retry = retry(&knobs);
            config.stall_timeout = Duration::from_millis(knobs.stall_ms);
            config.max_response_bytes = knobs.max_response_bytes;
            let start = Instant::now();
            let machine = Generate::new(config, start).expect("a valid configuration");
            let subject = GenerateSubject { machine, terminal: false, events: 0 };
            check(Harness::new(subject, start).run(&steps))
        })
        .unwrap();
}

#[test]
fn agent_machine_against_its_reference() {
    let strategy =
        (knobs(), proptest::collection::vec(any::<u8>(), 1..16), proptest::collection::vec(step(true), 0..60));
    runner()
        .run(&strategy, |(knobs, choices, steps)| {
            let mut config = agent_sim::config();
            config.options = options(&knobs);
            config.retry = retry(&knobs);
            config.stall_timeout = Duration::from_millis(knobs.stall_ms);
            config.max_response_bytes = knobs.max_response_bytes;
            let machine = Agent::new(config, FuzzCallbacks { choices, at: 0 }).expect("a valid configuration");
            let subject = AgentSubject {
                machine,
                committed: Vec::new(),
                in_turn: false,
                status: Status::Idle,
                patched: None,
                terminated: false,
                pending: Vec::new(),
                events: 0,
            };
            // Every case starts with a prompt, so that most of the steps find a turn.
            let mut steps = steps;
            steps.insert(0, Step::Prompt(0));
            check(Harness::new(subject, Instant::now()).run(&steps))
        })
        .unwrap();
}
