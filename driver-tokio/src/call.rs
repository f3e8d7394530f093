//! Calls on tokio: the builder and the event stream are omni-shell's
//! ([`Call`](omni_shell::Call), [`TextStream`](omni_shell::TextStream)); this module runs
//! the generate machine in a tokio task.

use std::time::Instant;

use async_channel::{Receiver, Sender};
use omni_core::client::ClientConfig;
use omni_core::generate::{Effect, Generate, GenerateEvent};
use omni_shell::{CallRuntime, Handlers, StartCall};
use tokio::sync::mpsc;

use crate::client::Client;
use crate::executor::Executor;
use crate::http::TaskInput;
use crate::Error;

/// A call being set up; see [`omni_shell::Call`].
pub type Call = omni_shell::Call<Client>;
pub use omni_shell::TextStream;

impl StartCall for Client {
    fn client_config(&self) -> &ClientConfig {
        &self.inner.config
    }

    fn spawn_call(
        &self,
        machine: Generate,
        handlers: Handlers,
        events: Sender<GenerateEvent>,
        cancelled: Receiver<()>,
    ) -> Result<(), Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Setup("omni-tokio needs a running tokio runtime".into()))?;
        runtime.spawn(drive(machine, self.inner.http.clone(), handlers, events, cancelled));
        Ok(())
    }
}

/// One call's work in flight on tokio; dropping it aborts what still runs.
struct TokioCall {
    executor: Executor,
    inputs: mpsc::Receiver<TaskInput>,
    handlers: Handlers,
}

impl CallRuntime for TokioCall {
    type Input = TaskInput;

    fn execute(&mut self, effect: Effect) {
        self.executor.execute(effect, &self.handlers);
    }

    fn feed(&mut self, machine: &mut Generate, input: TaskInput) {
        self.executor.feed(machine, input);
    }

    async fn next_input(&mut self) -> TaskInput {
        match self.inputs.recv().await {
            Some(input) => input,
            // The executor holds a sender while it lives: never, in fact.
            None => std::future::pending().await,
        }
    }

    async fn sleep_until(deadline: Instant) {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
    }
}

/// Runs one call to its end in the one call loop of omni-shell.
async fn drive(
    machine: Generate,
    http: reqwest::Client,
    handlers: Handlers,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let (executor, inputs) = Executor::new(http);
    omni_shell::drive_call(machine, TokioCall { executor, inputs, handlers }, events, cancelled).await;
}
