//! Executing a machine's effects with tokio tasks: one task per request and per tool
//! run, each held by its abort handle so that a cancel effect (or dropping the
//! executor) stops it. Shared by the call loop and the agent loop.
//!
//! The tasks report on a bounded channel ([`INPUT_CAPACITY`]): a task whose report does
//! not fit waits, so a request task stops reading its response until the loop catches up
//! (and TCP slows the server down).

use std::collections::BTreeMap;
use std::time::Instant;

use omni_core::generate::{Effect, RequestId, ToolOutcome, ToolRunId};
use omni_core::tool::{no_handler, outcome, panic_message};
use omni_shell::delivery::INPUT_CAPACITY;
use omni_shell::machine::{Machine, Report};
use tokio::sync::mpsc::{self, Receiver, Sender};
use tokio::task::AbortHandle;

use crate::http::{self, TaskInput};
use crate::tools::Handler;

/// Tool handlers by name.
pub(crate) type Handlers = BTreeMap<String, Handler>;

/// The work in flight of one machine.
pub(crate) struct Executor {
    http: reqwest::Client,
    inputs: Sender<TaskInput>,
    requests: BTreeMap<RequestId, AbortHandle>,
    runs: BTreeMap<ToolRunId, AbortHandle>,
}

impl Executor {
    /// An executor and the receiver of what its tasks report.
    pub(crate) fn new(http: reqwest::Client) -> (Executor, Receiver<TaskInput>) {
        let (inputs, rx) = mpsc::channel(INPUT_CAPACITY);
        (Executor { http, inputs, requests: BTreeMap::new(), runs: BTreeMap::new() }, rx)
    }

    /// Starts or stops work as the effect says.
    pub(crate) fn execute(&mut self, effect: Effect, handlers: &Handlers) {
        match effect {
            Effect::SendRequest { id, request } => {
                let task = tokio::spawn(http::send(self.http.clone(), id, request, self.inputs.clone()));
                self.requests.insert(id, task.abort_handle());
            }
            Effect::CancelRequest { id } => {
                if let Some(task) = self.requests.remove(&id) {
                    task.abort();
                }
            }
            Effect::RunTool { id, call } => {
                let Some(handler) = handlers.get(&call.name).cloned() else {
                    // From a task: the channel may be full, and the loop is the one reading it.
                    let outcome = no_handler(&call.name);
                    let tx = self.inputs.clone();
                    tokio::spawn(async move { tx.send(TaskInput::Tool { id, outcome }).await });
                    return;
                };
                // The handler runs in its own task so that a panic is caught as a JoinError.
                let run = tokio::spawn(handler(call.input));
                self.runs.insert(id, run.abort_handle());
                let tx = self.inputs.clone();
                tokio::spawn(async move {
                    let outcome = match run.await {
                        Ok(result) => outcome(result),
                        Err(e) if e.is_panic() => ToolOutcome::Panicked(panic_message(&*e.into_panic())),
                        Err(_) => return, // cancelled
                    };
                    let _ = tx.send(TaskInput::Tool { id, outcome }).await;
                });
            }
            Effect::CancelTool { id } => {
                if let Some(run) = self.runs.remove(&id) {
                    run.abort();
                }
            }
        }
    }

    /// Feeds a task's report to the machine, forgetting work that has ended.
    pub(crate) fn feed(&mut self, machine: &mut impl Machine, input: TaskInput) {
        let now = Instant::now();
        let report = match input {
            TaskInput::Head { id, status, headers } => Report::ResponseHead { id, status, headers },
            TaskInput::Body { id, bytes } => return machine.handle_report(Report::Body { id, bytes: &bytes }, now),
            TaskInput::End { id } => {
                self.requests.remove(&id);
                Report::BodyEnd { id }
            }
            TaskInput::Failed { id, error } => {
                self.requests.remove(&id);
                Report::TransportFailed { id, error }
            }
            TaskInput::Tool { id, outcome } => {
                self.runs.remove(&id);
                Report::ToolFinished { id, outcome }
            }
        };
        machine.handle_report(report, now)
    }
}

impl Drop for Executor {
    /// Whatever still runs when the loop ends is stopped.
    fn drop(&mut self) {
        self.requests.values().chain(self.runs.values()).for_each(AbortHandle::abort);
    }
}

/// Sleeps until the deadline, or forever without one.
pub(crate) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}
