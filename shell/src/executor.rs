//! Executing a machine's effects on a driver's [`Runtime`] and [`Transport`]. Shared by
//! the call loop and the agent loop.
//!
//! - A request is a task of its own, held by its handle so that a cancel effect (or
//!   dropping the executor when the loop ends) stops it: a transport may block inside a
//!   poll (omni-blocking's ureq exchange), which must not hold up the loop.
//! - A tool run is not a task: the executor holds each run's future (boxed, by
//!   [`ToolRunId`]) and polls the runs itself, concurrently, inside
//!   [`Executor::next_report`]. So a run costs no task (on omni-blocking, no thread that
//!   only waits for the tool pool's answer), and a cancel effect, or dropping the
//!   executor, drops the run's future at once, on the loop's task. The consequence for
//!   an [`AsyncTool`]: its future runs on the call's (or agent's) loop task, concurrently
//!   with the other runs and the loop itself; CPU-heavy or blocking work belongs on the
//!   runtime's blocking pool (`tokio::task::spawn_blocking`, `blocking::unblock`), as
//!   omni-blocking's tools do with their pool of threads.
//!
//! Requests report on one bounded channel ([`INPUT_CAPACITY`]): a request whose report
//! does not fit waits, so it stops reading its response until the loop catches up.
//! Reports the executor makes itself (a finished run, a tool without a handler, work that
//! could not be started) wait in a small queue of their own, so the executor never waits
//! on the channel it is the reader of.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::task::Poll;

use async_channel::{Receiver, Sender};
use bytes::Bytes;
use futures_lite::{future, StreamExt};
use omni_core::data::tool::no_handler;
use omni_core::machines::generate::{Effect, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind};

use crate::machine::{self, Machine, INPUT_CAPACITY};
use crate::runtime::{ResponseSink, Runtime, Task, Transport};
use crate::tool_runs::ToolRuns;
use crate::{handlers_by_name, AsyncHandler, AsyncTool};

/// Tool handlers by name.
pub(crate) type Handlers = BTreeMap<String, AsyncHandler>;

/// What the work in flight reports to its loop: the owned form of the machines'
/// [`Report`](omni_core::machines::generate::Report), so that it can cross a channel.
#[derive(Debug)]
pub(crate) enum Report {
    /// A response's status and headers.
    Head {
        /// Which request.
        id: RequestId,
        /// HTTP status.
        status: u16,
        /// Headers, names in any case.
        headers: Vec<(String, String)>,
    },
    /// Body bytes.
    Body {
        /// Which request.
        id: RequestId,
        /// The bytes, as read.
        bytes: Bytes,
    },
    /// The body ended.
    End {
        /// Which request.
        id: RequestId,
    },
    /// The request failed below HTTP.
    Failed {
        /// Which request.
        id: RequestId,
        /// What went wrong.
        error: TransportError,
    },
    /// A tool run finished.
    Tool {
        /// Which run.
        id: ToolRunId,
        /// Its outcome.
        outcome: ToolOutcome,
    },
}

/// The work in flight of one machine.
pub(crate) struct Executor<R: Runtime, T> {
    runtime: R,
    transport: T,
    handlers: Handlers,
    reports: Sender<Report>,
    /// Pinned: it is polled as a stream, keeping its listener between polls.
    received: Pin<Box<Receiver<Report>>>,
    /// Reports made here rather than by a request, taken before the channel's.
    ready: VecDeque<Report>,
    requests: BTreeMap<RequestId, R::Task>,
    runs: ToolRuns,
}

impl<R: Runtime, T: Transport> Executor<R, T> {
    /// An executor that runs the tools of `handlers`.
    pub(crate) fn new(runtime: R, transport: T, handlers: Handlers) -> Self {
        let (reports, received) = async_channel::bounded(INPUT_CAPACITY);
        let (requests, runs, ready) = (BTreeMap::new(), ToolRuns::default(), VecDeque::new());
        Self { runtime, transport, handlers, reports, received: Box::pin(received), ready, requests, runs }
    }

    pub(crate) fn runtime(&self) -> &R {
        &self.runtime
    }

    /// Runs later tool calls with these tools' handlers (an agent's `set_state`).
    pub(crate) fn set_tools(&mut self, tools: &[AsyncTool]) {
        self.handlers = handlers_by_name(tools);
    }

    /// Starts or stops work as the effect says.
    pub(crate) fn execute(&mut self, effect: Effect) {
        match effect {
            Effect::SendRequest { id, request } => {
                let send = self.transport.send(request, ResponseSink::new(id, self.reports.clone()));
                match self.runtime.spawn(send) {
                    Ok(task) => drop(self.requests.insert(id, task)),
                    Err(error) => {
                        let error = TransportError { kind: TransportErrorKind::Other, message: error.to_string() };
                        self.ready.push_back(Report::Failed { id, error });
                    }
                }
            }
            // Dropping a task stops it.
            Effect::CancelRequest { id } => drop(self.requests.remove(&id)),
            Effect::RunTool { id, call } => match self.handlers.get(&call.name).cloned() {
                Some(handler) => self.runs.start(id, handler, call.input),
                None => self.ready.push_back(Report::Tool { id, outcome: no_handler(&call.name) }),
            },
            // Dropping a run's future stops it.
            Effect::CancelTool { id } => self.runs.cancel(id),
        }
    }

    /// The next report; pending while none can come. Polls the tool runs (those woken),
    /// so a run makes progress only while the loop waits here: the loop does so whenever
    /// it has nothing else to do. Cancel-safe: dropped, it loses nothing.
    pub(crate) async fn next_report(&mut self) -> Report {
        future::poll_fn(|cx| {
            let ready = &mut self.ready;
            self.runs.poll(cx, |id, outcome| ready.push_back(Report::Tool { id, outcome }));
            if let Some(report) = ready.pop_front() {
                return Poll::Ready(report);
            }
            match self.received.as_mut().poll_next(cx) {
                Poll::Ready(Some(report)) => Poll::Ready(report),
                // The executor holds a sender while it lives: the channel never ends, in fact.
                Poll::Ready(None) | Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// Feeds a report to the machine, letting go of work that has ended.
    pub(crate) fn feed(&mut self, machine: &mut impl Machine, report: Report) {
        let now = self.runtime.now();
        let report = match report {
            Report::Head { id, status, headers } => machine::Report::ResponseHead { id, status, headers },
            Report::Body { id, bytes } => {
                return machine.handle_report(machine::Report::Body { id, bytes: &bytes }, now)
            }
            Report::End { id } => {
                self.finished(id);
                machine::Report::BodyEnd { id }
            }
            Report::Failed { id, error } => {
                self.finished(id);
                machine::Report::TransportFailed { id, error }
            }
            Report::Tool { id, outcome } => machine::Report::ToolFinished { id, outcome },
        };
        machine.handle_report(report, now)
    }

    /// A request that sent its last report is returning: detached rather than dropped.
    fn finished(&mut self, id: RequestId) {
        if let Some(task) = self.requests.remove(&id) {
            task.detach();
        }
    }
}
