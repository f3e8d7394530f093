//! The call loop: execute effects, feed inputs, deliver events, sleep until the next
//! deadline. No decisions are taken here.

use std::sync::Arc;
use std::time::Instant;

use futures_lite::future;
use omni_core::generate::{Generate, GenerateEvent, Input};
use smol::channel::{Receiver, Sender};

use crate::executor::{input_or_deadline, Executor, Handlers};
use crate::http::Connections;
use crate::spawn::Spawner;

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
    loop {
        while let Some(effect) = machine.poll_effect() {
            executor.execute(effect, &handlers);
        }
        while let Some(event) = machine.poll_event() {
            let end = matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. });
            // Fails only when the application dropped the stream; the cancel below follows.
            let _ = events.try_send(event);
            if end {
                return;
            }
        }
        // The stream dropped is checked first.
        let cancel = async {
            // Nothing is ever sent: this returns when the stream's sender is dropped.
            let _ = cancelled.recv().await;
            None
        };
        let wake = future::or(cancel, async { Some(input_or_deadline(&inputs, machine.poll_timeout()).await) }).await;
        match wake {
            None => machine.handle_input(Input::Cancel, Instant::now()),
            Some(Some(input)) => executor.feed(&mut machine, input),
            Some(None) => machine.handle_timeout(Instant::now()),
        }
    }
}
