//! Executing a machine's effects with smol tasks: every request and tool run is a
//! [`Task`] held in a map, and dropping a smol task cancels it (closing its connection or
//! stopping its handler). Shared by the call loop and the agent loop.
//!
//! The tasks report on a bounded channel ([`INPUT_CAPACITY`]): a task whose report does
//! not fit waits, so a request task stops reading its response until the loop catches up
//! (and TCP slows the server down).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use omni_core::generate::{Effect, RequestId, ToolRunId};
use omni_shell::delivery::INPUT_CAPACITY;
use omni_shell::machine::{Machine, Report};
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
        let (inputs, rx) = channel::bounded(INPUT_CAPACITY);
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
                // From a task: the channel may be full, and the loop is the one reading it.
                None => {
                    let outcome = omni_core::tool::no_handler(&call.name);
                    let tx = self.inputs.clone();
                    self.spawner.spawn(async move { tx.send(TaskInput::Tool { id, outcome }).await }).detach();
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
/// A deadline already passed wins over a waiting input, so a flood of input (keep-alives
/// as fast as the server sends) cannot hold off a stall or a timeout.
pub(crate) async fn input_or_deadline(inputs: &Receiver<TaskInput>, deadline: Option<Instant>) -> Option<TaskInput> {
    if deadline.is_some_and(|at| at <= Instant::now()) {
        return None;
    }
    let timer = async {
        wait_until(deadline).await;
        None
    };
    future::or(async { Some(next_input(inputs).await) }, timer).await
}

/// The next input (waits forever once the channel is closed: cannot happen while the
/// executor holds a sender).
pub(crate) async fn next_input<T>(inputs: &Receiver<T>) -> T {
    match inputs.recv().await {
        Ok(input) => input,
        Err(_) => future::pending().await,
    }
}

/// Resolves at the deadline; never without one.
pub(crate) async fn wait_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => drop(Timer::at(at).await),
        None => future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn report(n: u64) -> TaskInput {
        TaskInput::End { id: RequestId(n) }
    }

    #[test]
    fn a_passed_deadline_wins_over_a_waiting_input() {
        let (tx, inputs) = channel::bounded(4);
        tx.try_send(report(1)).expect("room");
        let now = Instant::now();
        assert!(smol::block_on(input_or_deadline(&inputs, Some(now))).is_none(), "the deadline first");
        assert!(smol::block_on(input_or_deadline(&inputs, None)).is_some(), "then the input");
        let later = Instant::now() + Duration::from_millis(20);
        assert!(smol::block_on(input_or_deadline(&inputs, Some(later))).is_none(), "nothing else came");
        tx.try_send(report(2)).expect("room");
        let far = Instant::now() + Duration::from_secs(60);
        assert!(smol::block_on(input_or_deadline(&inputs, Some(far))).is_some(), "an input before its deadline");
    }
}
