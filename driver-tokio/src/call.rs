//! Calls on tokio: the builder, the event stream and the call loop are omni-shell's; this
//! module names the runtime and transport they run on.

use async_channel::{Receiver, Sender};
use omni_core::client::ClientConfig;
use omni_core::generate::{Generate, GenerateEvent};
use omni_shell::{Handlers, StartCall};

use crate::client::Client;
use crate::runtime::Tokio;
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
        omni_shell::spawn_call(&Tokio, self.inner.http.clone(), machine, handlers, events, cancelled)
    }
}
