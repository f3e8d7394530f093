//! The call loop, written once for every async runtime: execute the machine's effects,
//! feed what the work in flight reports, deliver events, wake at the next deadline. No
//! decision is taken here; a driver only says how to run work and sleep in its runtime
//! ([`CallRuntime`]).
//!
//! Deadlines are looked at before every input, so a flood of input (keep-alives as fast
//! as the server can send) cannot hold off a stall or a timeout, and after
//! [`INPUT_BUDGET`] inputs the loop yields to the runtime. While the application's event
//! queue is full no input is taken (the request task then stops reading the response),
//! but a deadline or a cancel still gets in.

use std::future::Future;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_core::generate::{Effect, Generate, GenerateEvent, Input};

use crate::delivery::{Delivery, Outbox, INPUT_BUDGET};

/// What a driver gives the call loop: the work of one machine in its runtime (requests
/// and tool runs, each stopped when the runtime value is dropped) and its timer.
pub trait CallRuntime: Send {
    /// What the work in flight reports.
    type Input: Send;

    /// Starts or stops work as the effect says.
    fn execute(&mut self, effect: Effect);

    /// Feeds one report to the machine, forgetting work that has ended.
    fn feed(&mut self, machine: &mut Generate, input: Self::Input);

    /// The next report; pending while none can come.
    fn next_input(&mut self) -> impl Future<Output = Self::Input> + Send + '_;

    /// Resolves at `deadline`.
    fn sleep_until(deadline: Instant) -> impl Future<Output = ()> + Send;
}

/// What woke the loop.
enum Wake<I> {
    /// The stream was dropped.
    Cancel,
    Deadline,
    /// The application read: events may go out again.
    Read,
    Input(I),
}

/// Runs one call to its end. Leaving the loop drops `runtime`, which stops whatever still
/// runs; the last events wait until the application reads them.
pub async fn drive_call<R: CallRuntime>(
    mut machine: Generate,
    mut runtime: R,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let mut outbox = Outbox::new(events);
    let mut budget = INPUT_BUDGET;
    loop {
        while let Some(effect) = machine.poll_effect() {
            runtime.execute(effect);
        }
        while let Some(event) = machine.poll_event() {
            outbox.push(event);
        }
        if machine.is_done() {
            drop(runtime); // stops whatever still runs
            outbox.close().await; // the last events, whenever the application reads them
            return;
        }
        let waiting_for_reader = match outbox.flush() {
            Delivery::Done => false,
            Delivery::Full => true,
            Delivery::Gone => {
                // Refused only when the call has ended already: then there is nothing to cancel.
                let _ = machine.handle_input(Input::Cancel, Instant::now());
                continue;
            }
        };
        let deadline = machine.poll_timeout().map(|(at, _)| at);
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
            match deadline {
                Some(at) => R::sleep_until(at).await,
                None => future::pending().await,
            }
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
                Wake::Input(runtime.next_input().await)
            }
        };
        match future::or(cancel, future::or(other, timer)).await {
            Wake::Cancel => {
                let _ = machine.handle_input(Input::Cancel, Instant::now());
            }
            Wake::Deadline => machine.handle_timeout(Instant::now()),
            Wake::Read => {}
            Wake::Input(input) => {
                budget -= 1;
                runtime.feed(&mut machine, input);
            }
        }
    }
}
