//! Executing a machine's effects with threads: one thread per request and per tool run,
//! each held by its cancel handle so that a cancel effect (or dropping the executor)
//! stops it. Shared by the generate loop ([`crate::event_loop`]) and the agent loop
//! ([`crate::agent_handle`]), with the loops' one way of waiting ([`wait`]).
//!
//! The threads report on a bounded channel ([`INPUT_CAPACITY`]): a thread whose report
//! does not fit waits, so a request thread stops reading its response until the loop
//! catches up (and TCP slows the server down). A loop waits for its inputs, its control
//! messages (a cancel, a handle's command), room for the application's events and its
//! next deadline at once, with `crossbeam_channel`'s select; a deadline that passed is
//! acted on before the next input, so a flood cannot hold it off.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use crossbeam_channel::{Receiver, Select, Sender, TrySendError};
use omni_core::generate::{Effect, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind};
use omni_core::machine::{Machine, Report, INPUT_CAPACITY};

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

/// The work in flight of one machine.
pub(crate) struct Executor {
    http: Http,
    /// Cloned into every request and tool thread.
    inputs: Sender<TaskReport>,
    /// Reports made by the loop's own thread (a thread that could not start, a tool
    /// without a handler): kept here, since the loop must not wait on its own channel.
    immediate: VecDeque<TaskReport>,
    requests: BTreeMap<RequestId, RequestHandle>,
    runs: BTreeMap<ToolRunId, CancelToken>,
}

impl Executor {
    /// An executor and the receiver its threads report on.
    pub(crate) fn new(http: Http) -> (Self, Receiver<TaskReport>) {
        let (inputs, rx) = crossbeam_channel::bounded(INPUT_CAPACITY);
        let executor =
            Executor { http, inputs, immediate: VecDeque::new(), requests: BTreeMap::new(), runs: BTreeMap::new() };
        (executor, rx)
    }

    /// Executes every effect the machine has queued, and feeds the reports made on the
    /// way (which may queue more).
    pub(crate) fn drain(&mut self, machine: &mut impl Machine, tools: &Tools) {
        loop {
            while let Some(effect) = machine.poll_effect() {
                self.execute(effect, tools);
            }
            let Some(report) = self.immediate.pop_front() else { break };
            self.feed(machine, report, Instant::now());
        }
        // Places freed by this round's cancels go to queued runs only now, after the
        // cancels that follow them in the same round (see `tool_pool::rebalance`).
        crate::tool_pool::rebalance();
    }

    /// Starts or stops work as the effect says. A thread that cannot start is reported
    /// as a failure, like any other.
    pub(crate) fn execute(&mut self, effect: Effect, tools: &Tools) {
        match effect {
            Effect::SendRequest { id, request } => {
                let tx = self.inputs.clone();
                let sink = move |event| tx.send(TaskReport::Http { id, event }).is_ok();
                match self.http.start(request, sink) {
                    Ok(handle) => {
                        self.requests.insert(id, handle);
                    }
                    Err(e) => {
                        let error = TransportError {
                            kind: TransportErrorKind::Other,
                            message: format!("could not start the request thread: {e}"),
                        };
                        self.immediate.push_back(TaskReport::Http { id, event: HttpEvent::Failed(error) });
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
                            let _ = tx.send(TaskReport::Tool { id, outcome });
                        })
                        .map_err(|e| ToolOutcome::Err(format!("could not start the tool thread: {e}")))
                    }
                    None => Err(omni_core::tool::no_handler(&call.name)),
                };
                match started {
                    Ok(()) => {
                        self.runs.insert(id, token);
                    }
                    Err(outcome) => self.immediate.push_back(TaskReport::Tool { id, outcome }),
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
}

impl Drop for Executor {
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

/// Events for the application, waiting in order while its bounded channel is full.
pub(crate) struct Outbox<E> {
    events: Sender<E>,
    pending: VecDeque<E>,
}

/// How much of an [`Outbox`] went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Everything is in the channel.
    Done,
    /// The channel is full: some events wait.
    Full,
    /// The application dropped the stream.
    Gone,
}

impl<E> Outbox<E> {
    pub(crate) fn new(events: Sender<E>) -> Self {
        Outbox { events, pending: VecDeque::new() }
    }

    pub(crate) fn push(&mut self, event: E) {
        self.pending.push_back(event);
    }

    /// Puts into the channel what fits now, in order, without waiting.
    pub(crate) fn flush(&mut self) -> Delivery {
        while let Some(event) = self.pending.pop_front() {
            match self.events.try_send(event) {
                Ok(()) => {}
                Err(TrySendError::Full(event)) => {
                    self.pending.push_front(event);
                    return Delivery::Full;
                }
                Err(TrySendError::Disconnected(_)) => return Delivery::Gone,
            }
        }
        Delivery::Done
    }

    /// Delivers everything left, waiting as long as the application takes to read it
    /// (or until it drops the stream): for the end of a call, once its work is stopped.
    pub(crate) fn close(self) {
        for event in self.pending {
            if self.events.send(event).is_err() {
                return;
            }
        }
    }
}

/// What a loop woke up for.
pub(crate) enum Wake<C> {
    /// A control message (a cancel, a handle's command); `None` once every sender of
    /// the control channel is gone.
    Control(Option<C>),
    /// A request or tool thread reported.
    Input(TaskReport),
    /// The oldest waiting event went out: the application read.
    Delivered,
    /// The application dropped its stream.
    ReaderGone,
    /// The machine's deadline passed.
    Deadline,
}

/// Waits for whichever comes first: a control message, room for the oldest event of
/// `outbox` (when one waits), an input (only when no event waits: an application that
/// does not read holds the inputs back), or `deadline`. A deadline already passed wins
/// over everything, so a steady flood of input cannot hold off a stall.
pub(crate) fn wait<C, E>(
    control: &Receiver<C>,
    inputs: &Receiver<TaskReport>,
    outbox: Option<&mut Outbox<E>>,
    deadline: Option<Instant>,
) -> Wake<C> {
    if deadline.is_some_and(|d| d <= Instant::now()) {
        return Wake::Deadline;
    }
    let mut select = Select::new();
    let control_op = select.recv(control);
    let waiting = match outbox {
        Some(Outbox { events, pending }) if !pending.is_empty() => Some((select.send(events), &*events, pending)),
        _ => None,
    };
    let input_op = if waiting.is_none() { Some(select.recv(inputs)) } else { None };
    let selected = match deadline {
        Some(deadline) => match select.select_deadline(deadline) {
            Ok(selected) => selected,
            Err(_) => return Wake::Deadline,
        },
        None => select.select(),
    };
    let index = selected.index();
    match waiting {
        _ if index == control_op => Wake::Control(selected.recv(control).ok()),
        Some((send_op, events, pending)) if index == send_op => {
            let Some(event) = pending.pop_front() else { return Wake::Delivered };
            match selected.send(events, event) {
                Ok(()) => Wake::Delivered,
                Err(_) => Wake::ReaderGone,
            }
        }
        _ => {
            debug_assert_eq!(Some(index), input_op);
            // The executor holds a sender while its loop runs; should every sender be
            // gone, the loop is told as if its control channel closed: it ends.
            selected.recv(inputs).map_or(Wake::Control(None), Wake::Input)
        }
    }
}

#[cfg(test)]
mod tests {
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
        type Event = ();
        fn poll_effect(&mut self) -> Option<Effect> {
            None
        }
        fn poll_event(&mut self) -> Option<()> {
            None
        }
        fn poll_timeout(&self) -> Option<(Instant, omni_core::timer::Timer)> {
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
        let (mut executor, inputs) = Executor::new(Http::new(&[], Default::default()).expect("http"));
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
        let report = executor.immediate.pop_front();
        assert!(matches!(report, Some(TaskReport::Tool { id: ToolRunId(2), outcome: ToolOutcome::Err(_) })));
    }

    fn report(n: u64) -> TaskReport {
        TaskReport::Tool { id: ToolRunId(n), outcome: ToolOutcome::Err(String::new()) }
    }

    #[test]
    fn a_passed_deadline_wakes_before_a_waiting_input() {
        let (control_tx, control) = crossbeam_channel::bounded::<()>(1);
        let (tx, inputs) = crossbeam_channel::bounded(1);
        tx.send(report(1)).expect("send");
        let none = None::<&mut Outbox<()>>;
        assert!(matches!(wait(&control, &inputs, none, Some(Instant::now())), Wake::Deadline));
        assert!(matches!(wait(&control, &inputs, None::<&mut Outbox<()>>, None), Wake::Input(_)));
        let later = Instant::now() + Duration::from_millis(20);
        assert!(matches!(wait(&control, &inputs, None::<&mut Outbox<()>>, Some(later)), Wake::Deadline));
        drop(control_tx);
        assert!(matches!(wait(&control, &inputs, None::<&mut Outbox<()>>, None), Wake::Control(None)));
    }

    #[test]
    fn waiting_events_hold_inputs_back_but_not_a_cancel() {
        let (control_tx, control) = crossbeam_channel::bounded(1);
        let (tx, inputs) = crossbeam_channel::bounded(1);
        let (events, app) = crossbeam_channel::bounded(1);
        let mut outbox = Outbox::new(events);
        outbox.push(1);
        outbox.push(2);
        assert_eq!(outbox.flush(), Delivery::Full, "the second event does not fit");
        tx.send(report(1)).expect("send");
        let soon = Some(Instant::now() + Duration::from_millis(50));
        assert!(matches!(wait(&control, &inputs, Some(&mut outbox), soon), Wake::Deadline), "no input is taken");
        control_tx.send("cancel").expect("send");
        assert!(matches!(wait(&control, &inputs, Some(&mut outbox), None), Wake::Control(Some("cancel"))));
        assert_eq!(app.recv().ok(), Some(1));
        assert!(matches!(wait(&control, &inputs, Some(&mut outbox), None), Wake::Delivered));
        assert!(matches!(wait(&control, &inputs, Some(&mut outbox), None), Wake::Input(_)), "nothing waits now");
        outbox.push(3);
        drop(app);
        assert_eq!(outbox.flush(), Delivery::Gone);
    }
}
