//! Executing a machine's effects on a driver's [`Runtime`] and [`Transport`]: one task per
//! request and per tool run, each held by its handle so that a cancel effect (or dropping
//! the executor when the loop ends) stops it. Shared by the call loop and the agent loop.
//!
//! The tasks report on one bounded channel ([`INPUT_CAPACITY`]): a task whose report does
//! not fit waits, so a request stops reading its response until the loop catches up.
//! Reports the executor makes itself (a tool without a handler, work that could not be
//! started) wait in a small queue of their own, so the executor never waits on the channel
//! it is the reader of.

use std::collections::{BTreeMap, VecDeque};
use std::panic::AssertUnwindSafe;

use async_channel::{Receiver, Sender};
use bytes::Bytes;
use futures_lite::FutureExt;
use omni_core::data::tool::{no_handler, outcome, panic_message};
use omni_core::machines::generate::{Effect, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind};
use serde_json::Value;

use crate::machine::{self, Machine, INPUT_CAPACITY};
use crate::runtime::{ResponseSink, Runtime, Task, Transport};
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
    received: Receiver<Report>,
    /// Reports made here rather than by a task, taken before the channel's.
    ready: VecDeque<Report>,
    requests: BTreeMap<RequestId, R::Task>,
    runs: BTreeMap<ToolRunId, R::Task>,
}

impl<R: Runtime, T: Transport> Executor<R, T> {
    /// An executor that runs the tools of `handlers`.
    pub(crate) fn new(runtime: R, transport: T, handlers: Handlers) -> Self {
        let (reports, received) = async_channel::bounded(INPUT_CAPACITY);
        let (requests, runs, ready) = (BTreeMap::new(), BTreeMap::new(), VecDeque::new());
        Self { runtime, transport, handlers, reports, received, ready, requests, runs }
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
                Some(handler) => match self.runtime.spawn(run_tool(handler, id, call.input, self.reports.clone())) {
                    Ok(task) => drop(self.runs.insert(id, task)),
                    Err(error) => {
                        self.ready.push_back(Report::Tool { id, outcome: ToolOutcome::Err(error.to_string()) })
                    }
                },
                None => self.ready.push_back(Report::Tool { id, outcome: no_handler(&call.name) }),
            },
            Effect::CancelTool { id } => drop(self.runs.remove(&id)),
        }
    }

    /// The next report; pending while none can come.
    pub(crate) async fn next_report(&mut self) -> Report {
        if let Some(report) = self.ready.pop_front() {
            return report;
        }
        match self.received.recv().await {
            Ok(report) => report,
            // The executor holds a sender while it lives: never, in fact.
            Err(_) => std::future::pending().await,
        }
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
                self.finished(Work::Request(id));
                machine::Report::BodyEnd { id }
            }
            Report::Failed { id, error } => {
                self.finished(Work::Request(id));
                machine::Report::TransportFailed { id, error }
            }
            Report::Tool { id, outcome } => {
                self.finished(Work::Run(id));
                machine::Report::ToolFinished { id, outcome }
            }
        };
        machine.handle_report(report, now)
    }

    /// A task that sent its last report is returning: detached rather than dropped.
    fn finished(&mut self, work: Work) {
        let task = match work {
            Work::Request(id) => self.requests.remove(&id),
            Work::Run(id) => self.runs.remove(&id),
        };
        if let Some(task) = task {
            task.detach();
        }
    }
}

enum Work {
    Request(RequestId),
    Run(ToolRunId),
}

/// Runs one handler and reports its outcome. A panic, while the handler's future is made
/// or polled, becomes [`ToolOutcome::Panicked`] instead of taking the task down; caught
/// here (futures-lite's `catch_unwind`) so that every runtime reports it alike.
async fn run_tool(handler: AsyncHandler, id: ToolRunId, input: Value, reports: Sender<Report>) {
    // Calling the handler inside the async block puts its synchronous part under the catch too.
    let caught = AssertUnwindSafe(async move { handler(input).await }).catch_unwind().await;
    let outcome = match caught {
        Ok(result) => outcome(result),
        Err(payload) => ToolOutcome::Panicked(panic_message(&*payload)),
    };
    // The loop may be gone (the call ended); then nobody needs the answer.
    let _ = reports.send(Report::Tool { id, outcome }).await;
}
