//! Executing a machine's effects with smol tasks: every request and tool run is a
//! [`Task`] held in a map, and dropping a smol task cancels it (closing its connection or
//! stopping its handler). Shared by the call loop and the agent loop.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use omni_core::generate::{Effect, RequestId, ToolOutcome, ToolRunId};
use omni_core::machine::{Machine, Report};
use smol::channel::{self, Receiver, Sender};
use smol::{Task, Timer};

use crate::http::{self, Connections, TaskInput};
use crate::spawn::Spawner;
use crate::tools::{self, Handler};

/// Tool handlers by name.
pub(crate) type Handlers = BTreeMap<String, Handler>;

/// The work in flight of one machine.
pub(crate) struct Executor {
    http: Arc<Connections>,
    spawner: Spawner,
    inputs: Sender<TaskInput>,
    requests: BTreeMap<RequestId, Task<()>>,
    runs: BTreeMap<ToolRunId, Task<()>>,
}

impl Executor {
    /// An executor and the receiver of what its tasks report.
    pub(crate) fn new(http: Arc<Connections>, spawner: Spawner) -> (Executor, Receiver<TaskInput>) {
        let (inputs, rx) = channel::unbounded();
        (Executor { http, spawner, inputs, requests: BTreeMap::new(), runs: BTreeMap::new() }, rx)
    }

    /// Starts or stops work as the effect says.
    pub(crate) fn execute(&mut self, effect: Effect, handlers: &Handlers) {
        match effect {
            Effect::SendRequest { id, request } => {
                let task = self.spawner.spawn(http::send(self.http.clone(), id, request, self.inputs.clone()));
                self.requests.insert(id, task);
            }
            Effect::CancelRequest { id } => drop(self.requests.remove(&id)),
            Effect::RunTool { id, call } => match handlers.get(&call.name).cloned() {
                Some(handler) => {
                    let run = self.spawner.spawn(tools::run(handler, id, call.input, self.inputs.clone()));
                    self.runs.insert(id, run);
                }
                // The machine runs only tools declared with a handler; a mismatch is
                // reported rather than left to the tool deadline.
                None => {
                    let outcome = ToolOutcome::Err(format!("tool {:?} has no handler", call.name));
                    let _ = self.inputs.try_send(TaskInput::Tool { id, outcome });
                }
            },
            Effect::CancelTool { id } => drop(self.runs.remove(&id)),
        }
    }

    /// Feeds a task's report to the machine, forgetting work that has ended.
    pub(crate) fn feed(&mut self, machine: &mut impl Machine, input: TaskInput) {
        let now = Instant::now();
        let report = match input {
            TaskInput::Head { id, status, headers } => Report::ResponseHead { id, status, headers },
            TaskInput::Body { id, bytes } => return machine.handle_report(Report::Body { id, bytes: &bytes }, now),
            TaskInput::End { id } => {
                self.finished_request(id);
                Report::BodyEnd { id }
            }
            TaskInput::Failed { id, error } => {
                self.finished_request(id);
                Report::TransportFailed { id, error }
            }
            TaskInput::Tool { id, outcome } => {
                // Its task is returning: detach rather than drop, which would cancel it.
                if let Some(run) = self.runs.remove(&id) {
                    run.detach();
                }
                Report::ToolFinished { id, outcome }
            }
        };
        machine.handle_report(report, now)
    }

    fn finished_request(&mut self, id: RequestId) {
        if let Some(task) = self.requests.remove(&id) {
            task.detach();
        }
    }
}

/// Waits for an input, or for the deadline (forever without one). `None`: the deadline.
pub(crate) async fn input_or_deadline(inputs: &Receiver<TaskInput>, deadline: Option<Instant>) -> Option<TaskInput> {
    let input = async {
        match inputs.recv().await {
            Ok(input) => Some(input),
            // Cannot happen while the executor holds a sender; wait for something else.
            Err(_) => future::pending().await,
        }
    };
    let timer = async {
        match deadline {
            Some(at) => {
                Timer::at(at).await;
                None
            }
            None => future::pending().await,
        }
    };
    future::or(input, timer).await
}
