//! Calls on tokio: the builder and the event stream are omni-async's
//! ([`Call`](omni_async::Call), [`TextStream`](omni_async::TextStream)); this module runs
//! the generate machine in a tokio task.

use std::time::Instant;

use async_channel::{Receiver, Sender};
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
async fn drive(
    mut machine: Generate,
    http: reqwest::Client,
    handlers: Handlers,
    events: Sender<GenerateEvent>,
    cancelled: Receiver<()>,
) {
    let (mut executor, mut inputs) = Executor::new(http);
    loop {
        while let Some(effect) = machine.poll_effect() {
            executor.execute(effect, &handlers);
        }
        while let Some(event) = machine.poll_event() {
            let end = matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. });
            // Fails only when the application dropped the stream; the cancel below follows.
            let _ = events.try_send(event);
            if end {
                return; // dropping the executor stops whatever still runs
            }
        }
        let deadline = machine.poll_timeout();
        tokio::select! {
            biased;
            // Nothing is ever sent: this returns when the stream is dropped.
            _ = cancelled.recv() => machine.handle_input(Input::Cancel, Instant::now()),
            Some(input) = inputs.recv() => executor.feed(&mut machine, input),
            _ = sleep_until(deadline), if deadline.is_some() => machine.handle_timeout(Instant::now()),
        }
    }
}
