//! The call loop, written once for every runtime: execute the machine's effects,
//! feed what the work in flight reports, deliver events, wake at the next deadline. No
//! decision is taken here; a driver only says how to run work, sleep and send a request
//! ([`Runtime`], [`Transport`]).
//!
//! Deadlines are looked at before every input, so a flood of input (keep-alives as fast
//! as the server can send) cannot hold off a stall or a timeout, and after
//! [`INPUT_BUDGET`] inputs the loop yields to the runtime. While the application's event
//! queue is full no input is taken (the request task then stops reading the response),
//! but a deadline or a cancel still gets in.

use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_core::generate::{Generate, GenerateEvent, Input};

use crate::delivery::{Delivery, Outbox, INPUT_BUDGET};
use crate::executor::{Executor, Handlers, Report};
use crate::runtime::{Runtime, Task, Transport};
use crate::Error;

/// What woke the loop.
enum Wake {
    /// The stream was dropped.
    Cancel,
    Deadline,
    /// The application read: events may go out again.
    Read,
    Input(Report),
}

/// Runs `machine` as a task of `runtime`: its effects executed with `handlers` over
/// `transport`, its events sent on `events` until it finishes, and an input of `Cancel`
/// once `cancelled` closes (the stream was dropped).
pub fn spawn_call<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    machine: Generate,
    handlers: Handlers,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) -> Result<(), Error> {
    let executor = Executor::new(runtime.clone(), transport, handlers);
    // Detached: the loop ends on its own once the machine finishes (a cancel included).
    runtime.spawn(drive_call(machine, executor, events, cancelled))?.detach();
    Ok(())
}

/// Runs one call to its end. Leaving the loop drops the executor, which stops whatever
/// still runs; the last events wait until the application reads them.
async fn drive_call<R: Runtime, T: Transport>(
    mut machine: Generate,
    mut executor: Executor<R, T>,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let runtime = executor.runtime().clone();
    let mut outbox = Outbox::new(events);
    let mut budget = INPUT_BUDGET;
    loop {
        while let Some(effect) = machine.poll_effect() {
            executor.execute(effect);
        }
        while let Some(event) = machine.poll_event() {
            outbox.push(event);
        }
        if machine.is_done() {
            drop(executor); // stops whatever still runs
            outbox.close().await; // the last events, whenever the application reads them
            return;
        }
        let waiting_for_reader = match outbox.flush() {
            Delivery::Done => false,
            Delivery::Full => true,
            Delivery::Gone => {
                // Refused only when the call has ended already: then there is nothing to cancel.
                let _ = machine.handle_input(Input::Cancel, runtime.now());
                continue;
            }
        };
        let deadline = machine.poll_timeout().map(|(at, _)| at);
        let now = runtime.now();
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
            sleep_until(&runtime, deadline).await;
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
                Wake::Input(executor.next_report().await)
            }
        };
        match future::or(cancel, future::or(other, timer)).await {
            Wake::Cancel => {
                let _ = machine.handle_input(Input::Cancel, runtime.now());
            }
            Wake::Deadline => machine.handle_timeout(runtime.now()),
            Wake::Read => {}
            Wake::Input(report) => {
                budget -= 1;
                executor.feed(&mut machine, report);
            }
        }
    }
}

/// Resolves at the deadline; never without one.
pub(crate) async fn sleep_until<R: Runtime>(runtime: &R, deadline: Option<Instant>) {
    match deadline {
        Some(at) => runtime.sleep_until(at).await,
        None => future::pending().await,
    }
}
