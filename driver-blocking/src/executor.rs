//! Executing a machine's effects with threads: one thread per request and per tool run,
//! each held by its cancel handle so that a cancel effect (or dropping the executor)
//! stops it. Shared by the generate loop ([`crate::event_loop`]) and the agent loop
//! ([`crate::agent_handle`]), which differ only in what else arrives on their inputs channel.
//!
//! The threads report on the loop's inputs channel (any message type that a
//! [`TaskReport`] converts into), so the loop waits for everything with one
//! `recv_timeout` ([`wait`]).

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Instant;

use omni_core::generate::{Effect, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind};
use omni_core::machine::{Machine, Report};

use crate::tools::{CancelToken, Tool};
use crate::transport::{Http, HttpEvent, RequestHandle};

/// Tools by name.
pub(crate) type Tools = BTreeMap<String, Tool>;

/// What a request or tool thread reports to its loop.
#[derive(Debug)]
pub(crate) enum TaskReport {
    /// Progress of a request.
    Http { id: RequestId, event: HttpEvent },
    /// A tool run ended.
    Tool { id: ToolRunId, outcome: ToolOutcome },
}

/// The work in flight of one machine. `I` is the loop's input message.
pub(crate) struct Executor<I> {
    http: Http,
    /// Cloned into every request and tool thread.
    inputs: Sender<I>,
    requests: BTreeMap<RequestId, RequestHandle>,
    runs: BTreeMap<ToolRunId, CancelToken>,
}

impl<I: From<TaskReport> + Send + 'static> Executor<I> {
    /// An executor whose threads report on `inputs`.
    pub(crate) fn new(http: Http, inputs: Sender<I>) -> Self {
        Executor { http, inputs, requests: BTreeMap::new(), runs: BTreeMap::new() }
    }

    /// Executes every effect the machine has queued.
    pub(crate) fn drain(&mut self, machine: &mut impl Machine, tools: &Tools) {
        while let Some(effect) = machine.poll_effect() {
            self.execute(effect, tools);
        }
        crate::tool_pool::rebalance();
    }

    /// Starts or stops work as the effect says. A thread that cannot start is reported
    /// as a failure on the inputs channel, like any other.
    pub(crate) fn execute(&mut self, effect: Effect, tools: &Tools) {
        match effect {
            Effect::SendRequest { id, request } => {
                let tx = self.inputs.clone();
                let sink = move |event| tx.send(I::from(TaskReport::Http { id, event })).is_ok();
                match self.http.start(request, sink) {
                    Ok(handle) => {
                        self.requests.insert(id, handle);
                    }
                    Err(e) => {
                        let error = TransportError {
                            kind: TransportErrorKind::Other,
                            message: format!("could not start the request thread: {e}"),
                        };
                        self.report(TaskReport::Http { id, event: HttpEvent::Failed(error) });
                    }
                }
            }
            Effect::CancelRequest { id } => {
                if let Some(request) = self.requests.remove(&id) {
                    request.cancel();
                }
            }
            Effect::RunTool { id, call } => {
                let token = CancelToken::default();
                let started = match tools.get(&call.name) {
                    Some(tool) => {
                        let tx = self.inputs.clone();
                        tool.spawn(call.input, token.clone(), move |outcome| {
                            // The loop may be gone (call over, agent stopped): nobody needs the answer.
                            let _ = tx.send(I::from(TaskReport::Tool { id, outcome }));
                        })
                        .map_err(|e| format!("could not start the tool thread: {e}"))
                    }
                    // The machine runs only tools declared with a handler; a mismatch is
                    // reported rather than left to the tool deadline.
                    None => Err(format!("tool {:?} has no handler", call.name)),
                };
                match started {
                    Ok(()) => {
                        self.runs.insert(id, token);
                    }
                    Err(message) => self.report(TaskReport::Tool { id, outcome: ToolOutcome::Err(message) }),
                }
            }
            Effect::CancelTool { id } => {
                if let Some(token) = self.runs.remove(&id) {
                    token.cancel();
                }
            }
        }
    }

    /// Feeds a thread's report to the machine, forgetting work that has ended (a
    /// long-lived agent must not accumulate finished requests and runs).
    pub(crate) fn feed(&mut self, machine: &mut impl Machine, report: TaskReport, now: Instant) {
        let report = match report {
            TaskReport::Http { id, event } => match event {
                HttpEvent::Head { status, headers } => Report::ResponseHead { id, status, headers },
                HttpEvent::Body(bytes) => return machine.handle_report(Report::Body { id, bytes: &bytes }, now),
                HttpEvent::End => {
                    self.requests.remove(&id);
                    Report::BodyEnd { id }
                }
                HttpEvent::Failed(error) => {
                    self.requests.remove(&id);
                    Report::TransportFailed { id, error }
                }
            },
            TaskReport::Tool { id, outcome } => {
                self.runs.remove(&id);
                Report::ToolFinished { id, outcome }
            }
        };
        machine.handle_report(report, now)
    }

    fn report(&self, report: TaskReport) {
        // The loop holds the receiver while the executor lives: this cannot fail.
        let _ = self.inputs.send(I::from(report));
    }
}

impl<I> Drop for Executor<I> {
    /// Whatever still runs when the loop ends is stopped: connections are shut down
    /// and tool runs see their [`CancelToken`] tripped.
    fn drop(&mut self) {
        for (_, request) in std::mem::take(&mut self.requests) {
            request.cancel();
        }
        for (_, token) in std::mem::take(&mut self.runs) {
            token.cancel();
        }
        crate::tool_pool::rebalance();
    }
}

/// What a loop woke up for.
pub(crate) enum Wake<I> {
    /// A message arrived.
    Input(I),
    /// The machine's deadline passed.
    Deadline,
    /// Every sender is gone.
    Disconnected,
}

/// Waits for the next message or until `deadline`. A deadline that passed while
/// messages kept arriving fires before the next message, so a steady trickle of
/// keep-alives cannot hold off a stall.
pub(crate) fn wait<I>(inputs: &Receiver<I>, deadline: Option<Instant>) -> Wake<I> {
    let Some(deadline) = deadline else {
        return inputs.recv().map_or(Wake::Disconnected, Wake::Input);
    };
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Wake::Deadline;
    }
    match inputs.recv_timeout(left) {
        Ok(input) => Wake::Input(input),
        Err(RecvTimeoutError::Timeout) => Wake::Deadline,
        Err(RecvTimeoutError::Disconnected) => Wake::Disconnected,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use omni_conformance::replay::ReplayServer;
    use omni_conformance::scenarios::{paced, text_events};
    use omni_core::{HttpRequest, Method, ToolUse};
    use serde_json::json;

    use super::*;
    use crate::tools::Tool;

    /// Records what it is told, as one word per report.
    #[derive(Default)]
    struct Recorder(Vec<&'static str>);

    impl Machine for Recorder {
        fn poll_effect(&mut self) -> Option<Effect> {
            None
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _now: Instant) {}
        fn handle_report(&mut self, report: Report<'_>, _now: Instant) {
            self.0.push(match report {
                Report::ResponseHead { .. } => "head",
                Report::Body { .. } => "body",
                Report::BodyEnd { .. } => "end",
                Report::TransportFailed { .. } => "failed",
                Report::ToolFinished { .. } => "tool",
            });
        }
    }

    fn next(inputs: &Receiver<TaskReport>) -> TaskReport {
        inputs.recv_timeout(Duration::from_secs(5)).expect("a report")
    }

    #[test]
    fn finished_requests_and_tool_runs_are_forgotten() {
        let server = ReplayServer::start(vec![paced(&text_events(&["Hi"]), Duration::from_millis(1))]).expect("server");
        let (tx, inputs) = mpsc::channel();
        let mut executor = Executor::<TaskReport>::new(Http::new(&[], Default::default()).expect("http"), tx);
        let echo = Tool::new("echo", "", json!({}), Ok);
        let tools: Tools = [("echo".to_string(), echo)].into_iter().collect();
        let mut machine = Recorder::default();
        let request = HttpRequest {
            method: Method::Post,
            url: format!("{}/v1/messages", server.base_url()),
            headers: Vec::new(),
            body: b"{}".to_vec(),
        };
        executor.execute(Effect::SendRequest { id: RequestId(1), request }, &tools);
        let call = ToolUse { id: "t".into(), name: "echo".into(), input: json!({}), signature: None };
        executor.execute(Effect::RunTool { id: ToolRunId(1), call }, &tools);
        assert_eq!((executor.requests.len(), executor.runs.len()), (1, 1));
        while !(executor.requests.is_empty() && executor.runs.is_empty()) {
            executor.feed(&mut machine, next(&inputs), Instant::now());
        }
        let http: Vec<&str> = machine.0.iter().copied().filter(|r| *r != "tool").collect();
        assert_eq!((http.first(), http.last()), (Some(&"head"), Some(&"end")), "{:?}", machine.0);
        assert_eq!(machine.0.iter().filter(|r| **r == "tool").count(), 1);

        // A tool without a handler is reported as failed, never left to its deadline.
        let call = ToolUse { id: "u".into(), name: "missing".into(), input: json!({}), signature: None };
        executor.execute(Effect::RunTool { id: ToolRunId(2), call }, &tools);
        assert!(executor.runs.is_empty());
        assert!(matches!(next(&inputs), TaskReport::Tool { id: ToolRunId(2), outcome: ToolOutcome::Err(_) }));
    }

    #[test]
    fn a_passed_deadline_wakes_before_a_waiting_input() {
        let (tx, inputs) = mpsc::channel();
        tx.send(1).expect("send");
        assert!(matches!(wait(&inputs, Some(Instant::now())), Wake::Deadline));
        assert!(matches!(wait(&inputs, None), Wake::Input(1)));
        let later = Instant::now() + Duration::from_millis(20);
        assert!(matches!(wait(&inputs, Some(later)), Wake::Deadline));
        drop(tx);
        assert!(matches!(wait(&inputs, None), Wake::Disconnected::<i32>));
    }
}
