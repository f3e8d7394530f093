//! Pure simulation of the generate machine: a virtual clock that jumps to the next
//! deadline or scripted input, a scripted provider, scripted tools, and a transcript.
//!
//! The transcript lists only what the application observes (events), in a form that
//! does not depend on timing, so the same scenario run through a real driver against
//! the replay server must produce the same lines.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use omni_protocol::generate::{
    Effect, Generate, GenerateConfig, GenerateError, GenerateEvent, Input, Report, RequestId, ToolDecl, ToolOutcome,
    ToolRunId, TransportError, TransportErrorKind,
};
use omni_protocol::{dialect::HttpRequest, Response, StreamEvent};
use omni_shell::AsyncTool;

pub use omni_testkit::http::{BodyStep, Reply};

/// What a scripted tool does.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolScript {
    /// Answers after `delay`.
    Answer {
        /// How long the tool runs.
        delay: Duration,
        /// Its outcome.
        outcome: ToolOutcome,
    },
    /// Never answers.
    Hang,
}

/// How long a [`ToolScript::Hang`] tool waits in a real driver: longer than any test.
pub const HANG: Duration = Duration::from_secs(3600);

/// Plays a tool script in a real async driver: `sleep` is the runtime's timer. A tool
/// without script answers with an error naming it.
pub async fn play_tool<F: std::future::Future<Output = ()>>(
    name: &str,
    script: Option<ToolScript>,
    sleep: impl FnOnce(Duration) -> F,
) -> Result<omni_protocol::tool::ToolOutput, omni_protocol::tool::ToolError> {
    use omni_protocol::tool::{ToolError, ToolOutput};
    match script {
        Some(ToolScript::Answer { delay, outcome }) => {
            sleep(delay).await;
            match outcome {
                ToolOutcome::Ok(content) => Ok(ToolOutput::content(content)),
                ToolOutcome::Err(m) | ToolOutcome::Panicked(m) => Err(ToolError(m)),
            }
        }
        Some(ToolScript::Hang) => {
            sleep(HANG).await;
            Err(ToolError::from("a hanging tool woke up"))
        }
        None => Err(ToolError(format!("no script for {name}"))),
    }
}

/// A scenario tool for the async drivers: `decl`'s spec, its script played with the
/// runtime's `sleep` (no handler when `decl` has none), `decl`'s time limit.
pub fn scripted_async_tool<F, Fut>(decl: &ToolDecl, script: Option<ToolScript>, sleep: F) -> AsyncTool
where
    F: Fn(Duration) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let spec = decl.spec.clone();
    if !decl.executable {
        return AsyncTool::schema_only(spec.name, spec.description, spec.input_schema);
    }
    let name = spec.name.clone();
    let tool = AsyncTool::new(spec.name, spec.description, spec.input_schema, move |_input| {
        let (script, name, sleep) = (script.clone(), name.clone(), sleep.clone());
        async move { play_tool(&name, script, sleep).await }
    });
    match decl.timeout {
        Some(limit) => tool.timeout(limit),
        None => tool,
    }
}

/// The result of a simulation.
#[derive(Debug, Clone)]
pub struct SimResult {
    /// Observed events, one line each.
    pub transcript: Vec<String>,
    /// Every request the provider received.
    pub requests: Vec<HttpRequest>,
    /// Effects in order, one line each (cancellations included).
    pub effects: Vec<String>,
    /// The final response (or the partial one on failure).
    pub response: Option<Response>,
    /// The error on failure.
    pub error: Option<GenerateError>,
    /// Virtual time at the end.
    pub elapsed: Duration,
    /// What the machine told its telemetry (with `observe` on in its configuration).
    pub observations: Vec<omni_protocol::observe::Observation>,
}

#[derive(Debug)]
enum Scheduled {
    Head { id: RequestId, status: u16, headers: Vec<(String, String)> },
    Body { id: RequestId, bytes: Vec<u8> },
    End { id: RequestId },
    Transport { id: RequestId, kind: TransportErrorKind },
    Tool { id: ToolRunId, outcome: ToolOutcome },
    Cancel,
}

impl Scheduled {
    fn request(&self) -> Option<RequestId> {
        match self {
            Self::Head { id, .. } | Self::Body { id, .. } | Self::End { id } => Some(*id),
            Self::Transport { id, .. } => Some(*id),
            _ => None,
        }
    }
}

/// A scenario: replies in order, tools by name, an optional cancel time.
#[derive(Debug, Clone, Default)]
pub struct Scenario {
    /// Replies to successive requests.
    pub replies: Vec<Reply>,
    /// Tool behaviour by name.
    pub tools: BTreeMap<String, ToolScript>,
    /// When the caller cancels.
    pub cancel_at: Option<Duration>,
}

/// Runs a scenario on the virtual clock. Panics (failing the test) on a deadline that
/// repeats without progress, or when nothing is scheduled and no deadline is set.
pub fn simulate(config: GenerateConfig, scenario: &Scenario) -> SimResult {
    let start = Instant::now();
    let mut now = Duration::ZERO;
    let mut replies: VecDeque<Reply> = scenario.replies.iter().cloned().collect();
    let mut queue: BTreeMap<(Duration, u64), Scheduled> = BTreeMap::new();
    let mut seq = 0u64;
    let mut result = SimResult {
        transcript: Vec::new(),
        requests: Vec::new(),
        effects: Vec::new(),
        response: None,
        error: None,
        elapsed: Duration::ZERO,
        observations: Vec::new(),
    };
    let mut push = |queue: &mut BTreeMap<(Duration, u64), Scheduled>, at: Duration, item: Scheduled| {
        seq += 1;
        queue.insert((at, seq), item);
    };
    if let Some(at) = scenario.cancel_at {
        push(&mut queue, at, Scheduled::Cancel);
    }
    let mut machine = match Generate::new(config, start) {
        Ok(m) => m,
        Err(e) => {
            result.error = Some(e);
            return result;
        }
    };
    let mut last_deadline: Option<(Instant, usize)> = None;
    for _ in 0..1_000_000 {
        while let Some(effect) = machine.poll_effect() {
            match effect {
                Effect::Observe(observation) => result.observations.push(observation),
                Effect::SendRequest { id, request } => {
                    result.effects.push(format!("send #{} {} {}", id.0, request.method.as_str(), request.url));
                    result.requests.push(request);
                    match replies.pop_front() {
                        Some(Reply::Http { status, headers, body }) => {
                            push(&mut queue, now, Scheduled::Head { id, status, headers });
                            let mut at = now;
                            let mut ends = true;
                            for step in body {
                                match step {
                                    BodyStep::Bytes(bytes) => push(&mut queue, at, Scheduled::Body { id, bytes }),
                                    BodyStep::Wait(d) => at += d,
                                    BodyStep::Reset => {
                                        push(
                                            &mut queue,
                                            at,
                                            Scheduled::Transport { id, kind: TransportErrorKind::Reset },
                                        );
                                        ends = false;
                                        break;
                                    }
                                    BodyStep::Hang => {
                                        ends = false;
                                        break;
                                    }
                                }
                            }
                            if ends {
                                push(&mut queue, at, Scheduled::End { id });
                            }
                        }
                        Some(Reply::ConnectFail) | None => {
                            push(&mut queue, now, Scheduled::Transport { id, kind: TransportErrorKind::Connect })
                        }
                    }
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
        while let Some(event) = machine.poll_event() {
            result.transcript.push(transcript_line(&event));
            match event {
                GenerateEvent::Finished(response) => result.response = Some(*response),
                GenerateEvent::Failed { error, partial } => {
                    result.error = Some(*error);
                    result.response = Some(*partial);
                }
                _ => {}
            }
        }
        if machine.is_done() {
            result.elapsed = now;
            return result;
        }
        let next_input = queue.keys().next().map(|(at, _)| *at);
        let deadline = machine.poll_timeout().map(|(d, _)| d.saturating_duration_since(start));
        let input_first = match (next_input, deadline) {
            (Some(at), Some(d)) => at <= d,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => panic!("deadlock at {now:?}: no input scheduled and no deadline set"),
        };
        if input_first {
            let at = next_input.unwrap_or(now);
            now = now.max(at);
            let Some((_, item)) = queue.pop_first() else { unreachable!("a key was just seen") };
            let input = match &item {
                Scheduled::Head { id, status, headers } => {
                    Input::Report(Report::ResponseHead { id: *id, status: *status, headers: headers.clone() })
                }
                Scheduled::Body { id, bytes } => Input::Report(Report::Body { id: *id, bytes }),
                Scheduled::End { id } => Input::Report(Report::BodyEnd { id: *id }),
                Scheduled::Transport { id, kind } => Input::Report(Report::TransportFailed {
                    id: *id,
                    error: TransportError { kind: *kind, message: format!("scripted {kind:?}") },
                }),
                Scheduled::Tool { id, outcome } => {
                    Input::Report(Report::ToolFinished { id: *id, outcome: outcome.clone() })
                }
                Scheduled::Cancel => Input::Cancel,
            };
            // A refused input (a cancel after the end) is part of the story.
            if let Err(refused) = machine.handle_input(input, start + now) {
                result.transcript.push(format!("refused: {refused}"));
            }
        } else {
            let d = deadline.unwrap_or(now);
            now = now.max(d);
            let at = start + now;
            let before = result.transcript.len() + result.effects.len();
            if let Some((prev, count)) = last_deadline {
                assert!(
                    !(prev == at && count == before),
                    "deadline {now:?} repeats without progress: the machine is spinning"
                );
            }
            last_deadline = Some((at, before));
            machine.handle_timeout(at);
        }
    }
    panic!("the simulation did not end within a million steps");
}

/// One transcript line for an event: stable across runs and drivers.
pub fn transcript_line(event: &GenerateEvent) -> String {
    match event {
        GenerateEvent::Stream { step, event } => {
            let json = match event {
                // Usage inside done is covered by the final response; keep the line short.
                StreamEvent::Done { stop_reason, .. } => format!("done {}", json_str(stop_reason)),
                other => serde_json::to_string(other).unwrap_or_default(),
            };
            format!("step {step}: {json}")
        }
        GenerateEvent::Retry { step, attempt, error, .. } => {
            format!("step {step}: retry {attempt} after {}", error_kind(error))
        }
        GenerateEvent::OutputRetry { step, attempt, error } => format!("step {step}: output retry {attempt}: {error}"),
        GenerateEvent::ToolResult { step, result } => {
            format!("step {step}: tool_result {}", serde_json::to_string(result).unwrap_or_default())
        }
        GenerateEvent::Finished(r) => format!(
            "finished {} messages={} text={:?}",
            r.stop_reason.map(|s| json_str(&s)).unwrap_or_default(),
            r.messages.len(),
            r.text()
        ),
        GenerateEvent::Failed { error, partial } => {
            format!("failed {} messages={} text={:?}", error_kind(error), partial.messages.len(), partial.text())
        }
        other => format!("{other:?}"),
    }
}

fn json_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// A short, timing-independent name for an error.
pub fn error_kind(error: &GenerateError) -> String {
    match error {
        GenerateError::Provider(e) => {
            format!("provider {:?} {}", e.kind, e.status.map(|s| s.to_string()).unwrap_or_default())
                .trim_end()
                .to_string()
        }
        GenerateError::Stream(e) => format!("stream {}", e),
        GenerateError::Transport(t) => format!("transport {:?}", t.kind),
        GenerateError::Timeout(_) => "timeout".into(),
        GenerateError::Stalled(_) => "stalled".into(),
        GenerateError::ResponseTooLarge(_) => "too large".into(),
        GenerateError::Request(e) => format!("request {e}"),
        other => format!("{other}"),
    }
}
