//! The call's work on smol: requests and tool runs as smol tasks, and smol's timer, for
//! the one call loop of omni-shell ([`omni_shell::drive_call`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use omni_core::generate::{Effect, Generate, GenerateEvent};
use omni_shell::{CallRuntime, Handlers};
use smol::channel::{Receiver, Sender};
use smol::Timer;

use crate::executor::{next_input, Executor};
use crate::http::{Connections, TaskInput};
use crate::spawn::Spawner;

/// One call's work in flight; dropping it cancels what still runs.
struct SmolCall {
    executor: Executor,
    inputs: Receiver<TaskInput>,
    handlers: Handlers,
}

impl CallRuntime for SmolCall {
    type Input = TaskInput;

    fn execute(&mut self, effect: Effect) {
        self.executor.execute(effect, &self.handlers);
    }

    fn feed(&mut self, machine: &mut Generate, input: TaskInput) {
        self.executor.feed(machine, input);
    }

    fn next_input(&mut self) -> impl Future<Output = TaskInput> + Send + '_ {
        next_input(&self.inputs)
    }

    async fn sleep_until(deadline: Instant) {
        Timer::at(deadline).await;
    }
}

/// Runs one call to its end.
pub(crate) async fn drive(
    machine: Generate,
    http: Arc<Connections>,
    spawner: Spawner,
    handlers: Handlers,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let (executor, inputs) = Executor::new(http, spawner);
    omni_shell::drive_call(machine, SmolCall { executor, inputs, handlers }, events, cancelled).await;
}
