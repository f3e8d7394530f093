//! Calls on smol: the builder and the event stream are omni-shell's
//! ([`Call`](omni_shell::Call), [`TextStream`](omni_shell::TextStream)); this module runs
//! the generate machine in a smol task.

use async_channel::{Receiver, Sender};
use omni_core::client::ClientConfig;
use omni_core::generate::{Generate, GenerateEvent};
use omni_shell::{Handlers, StartCall};

use crate::client::Client;
use crate::driver::drive;
use crate::Error;

/// A call being set up; see [`omni_shell::Call`].
pub type Call = omni_shell::Call<Client>;
pub use omni_shell::TextStream;

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
        let inner = &self.inner;
        let task = drive(machine, inner.http.clone(), inner.spawner.clone(), handlers, events, cancelled);
        // Detached: the driver ends on its own once the machine finishes (a cancel included).
        inner.spawner.spawn(task).detach();
        Ok(())
    }
}
