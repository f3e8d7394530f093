//! The driver loop: execute effects, feed inputs, deliver events, sleep until the next
//! deadline. No decisions are taken here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use omni_core::generate::{Effect, Generate, GenerateEvent, Input, RequestId, ToolRunId};
use smol::channel::{self, Receiver, Sender};
use smol::{Task, Timer};

use crate::http::{self, TaskInput};
use crate::spawn::Spawner;
use crate::tools::{self, Handler};

/// What woke the loop.
enum Wake {
    /// The application dropped its stream.
    Cancelled,
    Input(TaskInput),
    Deadline,
}

/// Runs one call to its end. Every request and tool run is a [`Task`] held in a map:
/// removing it (a cancel effect) or leaving the loop drops it, and dropping a smol task
/// cancels it, closing its connection or stopping its handler.
pub(crate) async fn drive(
    mut machine: Generate,
    tls: Arc<rustls::ClientConfig>,
    spawner: Spawner,
    handlers: BTreeMap<String, Handler>,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let (inputs_tx, inputs) = channel::unbounded::<TaskInput>();
    let mut requests: BTreeMap<RequestId, Task<()>> = BTreeMap::new();
    let mut runs: BTreeMap<ToolRunId, Task<()>> = BTreeMap::new();
    loop {
        while let Some(effect) = machine.poll_effect() {
            match effect {
                Effect::SendRequest { id, request } => {
                    let task = spawner.spawn(http::send(tls.clone(), id, request, inputs_tx.clone()));
                    requests.insert(id, task);
                }
                Effect::CancelRequest { id } => drop(requests.remove(&id)),
                Effect::RunTool { id, call } => {
                    // The machine asks only for tools declared executable, i.e. with a handler.
                    let Some(handler) = handlers.get(&call.name).cloned() else { continue };
                    runs.insert(id, spawner.spawn(tools::run(handler, id, call.input, inputs_tx.clone())));
                }
                Effect::CancelTool { id } => drop(runs.remove(&id)),
            }
        }
        while let Some(event) = machine.poll_event() {
            let end = matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. });
            // Fails only when the application dropped the stream; the cancel below follows.
            let _ = events.try_send(event);
            if end {
                return; // dropping `requests` and `runs` cancels whatever still runs
            }
        }
        let wake = next_wake(&cancelled, &inputs, machine.poll_timeout()).await;
        let now = Instant::now();
        match wake {
            Wake::Cancelled => machine.handle_input(Input::Cancel, now),
            Wake::Input(input) => feed(&mut machine, input, now),
            Wake::Deadline => machine.handle_timeout(now),
        }
    }
}

/// Waits for the first of: the stream dropped (checked first), an input, the deadline.
async fn next_wake(cancelled: &Receiver<()>, inputs: &Receiver<TaskInput>, deadline: Option<Instant>) -> Wake {
    let cancel = async {
        // Nothing is ever sent: this returns when the stream's sender is dropped.
        let _ = cancelled.recv().await;
        Wake::Cancelled
    };
    let input = async {
        match inputs.recv().await {
            Ok(input) => Wake::Input(input),
            // Cannot happen while the loop holds a sender; wait for something else.
            Err(_) => future::pending().await,
        }
    };
    let timer = async {
        match deadline {
            Some(at) => {
                Timer::at(at).await;
                Wake::Deadline
            }
            None => future::pending().await,
        }
    };
    future::or(cancel, future::or(input, timer)).await
}

fn feed(machine: &mut Generate, input: TaskInput, now: Instant) {
    match input {
        TaskInput::Head { id, status, headers } => {
            machine.handle_input(Input::ResponseHead { id, status, headers }, now)
        }
        TaskInput::Body { id, bytes } => machine.handle_input(Input::Body { id, bytes: &bytes }, now),
        TaskInput::End { id } => machine.handle_input(Input::BodyEnd { id }, now),
        TaskInput::Failed { id, error } => machine.handle_input(Input::TransportFailed { id, error }, now),
        TaskInput::Tool { id, outcome } => machine.handle_input(Input::ToolFinished { id, outcome }, now),
    }
}
