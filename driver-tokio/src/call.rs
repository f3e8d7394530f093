//! Calls on tokio: the builder and the event stream are omni-async's
//! ([`Call`](omni_async::Call), [`TextStream`](omni_async::TextStream)); this module runs
//! the generate machine in a tokio task.

use std::time::Instant;

use async_channel::{Receiver, Sender};
use omni_async::delivery::{Delivery, Outbox, INPUT_BUDGET};
use omni_async::{Handlers, StartCall};
use omni_core::client::ClientConfig;
use omni_core::generate::{Generate, GenerateEvent, Input};

use crate::client::Client;
use crate::executor::{sleep_until, Executor};
use crate::Error;

/// A call being set up; see [`omni_async::Call`].
pub type Call = omni_async::Call<Client>;
pub use omni_async::TextStream;

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

/// The driver loop: execute effects, feed inputs, deliver events, sleep until the next
/// deadline. No decisions are taken here.
///
/// Deadlines are looked at before every input, so a flood of input (keep-alives as fast
/// as the server can send) cannot hold off a stall or a timeout. While the application's
/// event queue is full no input is taken (the request task then stops reading the
/// response), but a deadline or a cancel still gets in.
async fn drive(
    mut machine: Generate,
    http: reqwest::Client,
    handlers: Handlers,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let (mut executor, mut inputs) = Executor::new(http);
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
            drop(executor); // stops whatever still runs
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
            tokio::task::yield_now().await;
        }
        // An input that is there when the loop wakes goes first; the check above then
        // comes between it and the next one.
        tokio::select! {
            biased;
            // Nothing is ever sent: this returns when the stream is dropped.
            _ = cancelled.recv() => machine.handle_input(Input::Cancel, Instant::now()),
            read = outbox.room(), if waiting_for_reader => if !read {
                machine.handle_input(Input::Cancel, Instant::now());
            },
            Some(input) = inputs.recv(), if !waiting_for_reader => {
                budget -= 1;
                executor.feed(&mut machine, input);
            }
            _ = sleep_until(deadline), if deadline.is_some() => machine.handle_timeout(Instant::now()),
        }
    }
}
