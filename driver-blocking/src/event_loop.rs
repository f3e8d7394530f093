//! The generate loop: the generate machine on its own thread, executing its effects
//! with threads ([`crate::executor`]) and delivering its events through a channel.
//!
//! ```text
//!  request threads ──┐                                  ┌──► events channel ──► TextStream (Iterator)
//!  tool threads ─────┼─► inputs channel ─► machine loop ┤
//!  TextStream (cancel, drop) ─┘   recv_timeout(deadline) └──► effects: start/cancel requests and tools
//! ```
//!
//! Waiting for "the next input or the next deadline" is `recv_timeout` on the inputs
//! channel. The executor holds a sender of that channel (to hand to the threads it
//! starts), so the channel never disconnects while the loop runs; the application's
//! cancel arrives as an input, and a dropped stream shows as a failed event send.

use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use omni_core::generate::{Generate, GenerateEvent, Input};

use crate::executor::{wait, Executor, TaskReport, Tools, Wake};
use crate::transport::Http;

/// What the loop waits for.
#[derive(Debug)]
pub(crate) enum LoopInput {
    /// A request or tool thread reports.
    Task(TaskReport),
    /// The application cancels the call.
    Cancel,
}

impl From<TaskReport> for LoopInput {
    fn from(report: TaskReport) -> Self {
        LoopInput::Task(report)
    }
}

/// The tools of one call, by name.
pub(crate) type ToolSet = Arc<Tools>;

/// Starts the loop on its own thread: returns the events receiver and a sender for
/// the application's cancel.
pub(crate) fn spawn(
    machine: Generate,
    http: Http,
    tools: ToolSet,
) -> io::Result<(Receiver<GenerateEvent>, Sender<LoopInput>)> {
    let (input_tx, inputs) = mpsc::channel();
    let (events, event_rx) = mpsc::channel();
    let executor = Executor::new(http, input_tx.clone());
    thread::Builder::new()
        .name("omni-generate".into())
        .spawn(move || run(machine, executor, inputs, events, &tools))?;
    Ok((event_rx, input_tx))
}

fn run(
    mut machine: Generate,
    mut executor: Executor<LoopInput>,
    inputs: Receiver<LoopInput>,
    events: Sender<GenerateEvent>,
    tools: &Tools,
) {
    let mut app_gone = false;
    loop {
        executor.drain(&mut machine, tools);
        while let Some(event) = machine.poll_event() {
            // A failed send means the TextStream is gone: cancel below.
            app_gone = app_gone || events.send(event).is_err();
        }
        if machine.is_done() {
            break;
        }
        if app_gone {
            machine.handle_input(Input::Cancel, Instant::now());
            continue;
        }
        match wait(&inputs, machine.poll_timeout()) {
            Wake::Input(LoopInput::Task(report)) => executor.feed(&mut machine, report, Instant::now()),
            Wake::Input(LoopInput::Cancel) => machine.handle_input(Input::Cancel, Instant::now()),
            Wake::Deadline => machine.handle_timeout(Instant::now()),
            Wake::Disconnected => break,
        }
    }
    // The machine cancels what it started before it finishes; dropping the executor
    // stops anything left (a loop that ended otherwise).
}
