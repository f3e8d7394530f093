//! The call loop: execute effects, feed inputs, deliver events, sleep until the next
//! deadline. No decisions are taken here.
//!
//! Deadlines are looked at before every input, so a flood of input (keep-alives as fast
//! as the server can send) cannot hold off a stall or a timeout. While the application's
//! event queue is full no input is taken (the request task then stops reading the
//! response), but a deadline or a cancel still gets in.

use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use omni_async::delivery::{Delivery, Outbox, INPUT_BUDGET};
use omni_core::generate::{Generate, GenerateEvent, Input};
use smol::channel::{Receiver, Sender};

use crate::executor::{next_input, wait_until, Executor, Handlers};
use crate::http::{Connections, TaskInput};
use crate::spawn::Spawner;

/// What woke the loop.
enum Wake {
    /// The stream was dropped.
    Cancel,
    Deadline,
    /// The application read: events may go out again.
    Read,
    Input(TaskInput),
}

/// Runs one call to its end. Leaving the loop drops the executor, which cancels
/// whatever still runs.
pub(crate) async fn drive(
    mut machine: Generate,
    http: Arc<Connections>,
    spawner: Spawner,
    handlers: Handlers,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let (mut executor, inputs) = Executor::new(http, spawner);
    let mut outbox = Outbox::new(events);
    let mut budget = INPUT_BUDGET;
    loop {
        while let Some(effect) = machine.poll_effect() {
            executor.execute(effect, &handlers);
        }
        while let Some(event) = machine.poll_event() {
            outbox.push(event);
        }
        if machine.is_done() {
            drop(executor); // cancels whatever still runs
            outbox.close().await; // the last events, whenever the application reads them
            return;
        }
        let waiting_for_reader = match outbox.flush() {
            Delivery::Done => false,
            Delivery::Full => true,
            Delivery::Gone => {
                machine.handle_input(Input::Cancel, Instant::now());
                continue;
            }
        };
        let deadline = machine.poll_timeout();
        let now = Instant::now();
        if deadline.is_some_and(|d| d <= now) {
            machine.handle_timeout(now);
            continue;
        }
        if budget == 0 {
            budget = INPUT_BUDGET;
            future::yield_now().await;
        }
        // In this order: the stream dropped, the reader or an input, then the deadline (an
        // input that is there when the loop wakes goes first; the check above then comes
        // between it and the next one).
        let cancel = async {
            // Nothing is ever sent: this returns when the stream's sender is dropped.
            let _ = cancelled.recv().await;
            Wake::Cancel
        };
        let timer = async {
            wait_until(deadline).await;
            Wake::Deadline
        };
        let other = async {
            if waiting_for_reader {
                if outbox.room().await {
                    Wake::Read
                } else {
                    Wake::Cancel
                }
            } else {
                Wake::Input(next_input(&inputs).await)
            }
        };
        match future::or(cancel, future::or(other, timer)).await {
            Wake::Cancel => machine.handle_input(Input::Cancel, Instant::now()),
            Wake::Deadline => machine.handle_timeout(Instant::now()),
            Wake::Read => {}
            Wake::Input(input) => {
                budget -= 1;
                executor.feed(&mut machine, input);
            }
        }
    }
}
