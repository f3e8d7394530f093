//! The generate loop: the generate machine on its own thread, executing its effects
//! with threads ([`crate::executor`]) and delivering its events through a channel.
//!
//! ```text
//!  request threads ──┐                                         ┌──► events channel (bounded) ──► TextStream (Iterator)
//!  tool threads ─────┴─► inputs channel (bounded) ─► machine loop ┤
//!  TextStream, CancelHandle ─► control channel (cancel) ──┘      └──► effects: start/cancel requests and tools
//! ```
//!
//! The loop waits for an input, a cancel, room for its events and its next deadline at
//! once ([`wait`]). While the application leaves its events unread the loop takes no
//! input, so the request thread stops reading the response and TCP slows the server
//! down; a deadline or a cancel still gets in, and once the call is over its last events
//! (the terminal one included) wait for the application to read them. A deadline that
//! passed is acted on before the next input, so a flood cannot hold it off.

use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use omni_core::generate::{Generate, GenerateEvent, Input};
use omni_core::machine::EVENT_CAPACITY;

use crate::executor::{wait, Delivery, Executor, Outbox, TaskReport, Tools, Wake};
use crate::transport::Http;

/// The application cancels the call.
#[derive(Debug)]
pub(crate) struct Cancel;

/// The tools of one call, by name.
pub(crate) type ToolSet = Arc<Tools>;

/// Starts the loop on its own thread: returns the events receiver and a sender for
/// the application's cancel.
pub(crate) fn spawn(
    machine: Generate,
    http: Http,
    tools: ToolSet,
) -> io::Result<(Receiver<GenerateEvent>, Sender<Cancel>)> {
    // One cancel is enough: a sender finding the channel full knows one is on its way.
    let (cancel, control) = crossbeam_channel::bounded(1);
    let (events, event_rx) = crossbeam_channel::bounded(EVENT_CAPACITY);
    let (executor, inputs) = Executor::new(http);
    thread::Builder::new()
        .name("omni-generate".into())
        .spawn(move || run(machine, executor, inputs, control, Outbox::new(events), &tools))?;
    Ok((event_rx, cancel))
}

fn run(
    mut machine: Generate,
    mut executor: Executor,
    inputs: Receiver<TaskReport>,
    control: Receiver<Cancel>,
    mut outbox: Outbox<GenerateEvent>,
    tools: &Tools,
) {
    loop {
        executor.drain(&mut machine, tools);
        while let Some(event) = machine.poll_event() {
            outbox.push(event);
        }
        if machine.is_done() {
            break;
        }
        if outbox.flush() == Delivery::Gone {
            // Refused only when the call has ended already: then there is nothing to cancel.
            let _ = machine.handle_input(Input::Cancel, Instant::now());
            continue;
        }
        match wait(&control, &inputs, Some(&mut outbox), machine.poll_timeout().map(|(at, _)| at)) {
            Wake::Input(report) => executor.feed(&mut machine, report, Instant::now()),
            Wake::Delivered => {}
            // A cancel, the stream and every cancel handle gone, or the stream dropped.
            Wake::Control(_) | Wake::ReaderGone => {
                let _ = machine.handle_input(Input::Cancel, Instant::now());
            }
            Wake::Deadline => machine.handle_timeout(Instant::now()),
        }
    }
    // The machine cancels what it started before it finishes; dropping the executor
    // stops anything left, and the inputs' receiver releases threads waiting to report.
    drop(executor);
    drop(inputs);
    outbox.close();
}
