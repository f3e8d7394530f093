//! A call's side of the drive loop ([`crate::drive`]): its events go to the application's
//! [`TextStream`](crate::TextStream) through a bounded [`Outbox`], in batches: every event
//! one input made (a body chunk is often hundreds of small deltas) crosses to the
//! application as one message, so the hand-off between the loop's task and the
//! application's (often two threads) costs once per network read, not once per event.
//! Dropping the stream cancels the call. While the stream's queue is full the loop takes
//! no input (the request then stops reading the response), but a deadline or the cancel
//! still gets in.

use std::convert::Infallible;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_core::machines::generate::{Generate, GenerateEvent, Input};

use crate::delivery::{Delivery, Outbox};
use crate::drive::{drive, Notice, Side};
use crate::executor::{Executor, Handlers};
use crate::runtime::{Runtime, Task, Transport};
use crate::Error;

/// Runs `machine` as a task of `runtime`: its effects executed with `handlers` over
/// `transport`, its events sent on `events` until it finishes, and an input of `Cancel`
/// once `cancelled` closes (the stream was dropped).
pub(crate) fn spawn_call<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    machine: Generate,
    handlers: Handlers,
    events: Sender<Vec<GenerateEvent>>,
    cancelled: Receiver<()>,
) -> Result<(), Error> {
    let executor = Executor::new(runtime.clone(), transport, handlers);
    let stream = Stream { machine, outbox: Outbox::new(events), cancelled };
    // Detached: the loop ends on its own once the machine finishes (a cancel included).
    runtime.spawn(drive(stream, executor))?.detach();
    Ok(())
}

/// The application's end of a call: its event stream.
struct Stream {
    machine: Generate,
    outbox: Outbox<Vec<GenerateEvent>>,
    /// Closes when the stream is dropped (nothing is ever sent on it).
    cancelled: Receiver<()>,
}

impl Side for Stream {
    type Machine = Generate;
    /// A call has no handle to command it: dropping its stream is its one command.
    type Command = Infallible;

    fn machine(&mut self) -> &mut Generate {
        &mut self.machine
    }

    fn deliver(&mut self) -> Delivery {
        let ready = self.machine.pending_events();
        if ready > 0 {
            let mut batch = Vec::with_capacity(ready);
            batch.extend(std::iter::from_fn(|| self.machine.poll_event()));
            self.outbox.push(batch);
        }
        self.outbox.flush()
    }

    async fn wait(&mut self) -> Notice<Infallible> {
        let Self { outbox, cancelled, .. } = self;
        // In this order: the stream dropped, then room for the events that wait.
        let dropped = async {
            let _ = cancelled.recv().await;
            Notice::Gone
        };
        let room = async {
            if !outbox.is_waiting() {
                future::pending().await
            } else if outbox.room().await {
                Notice::Room
            } else {
                Notice::Gone
            }
        };
        future::or(dropped, room).await
    }

    fn apply<R: Runtime, T: Transport>(&mut self, command: Infallible, _: &mut Executor<R, T>, _: Instant) {
        match command {}
    }

    fn gone(&mut self, now: Instant) {
        // Refused only when the call has ended already: then there is nothing to cancel.
        let _ = self.machine.handle_input(Input::Cancel, now);
    }

    fn finished(&mut self) -> bool {
        self.machine.is_done()
    }

    async fn close(self) {
        // The last events (the terminal one), whenever the application reads them.
        self.outbox.close().await;
    }
}
