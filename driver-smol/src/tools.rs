//! Tools with async handlers (the core's [`AsyncTool`](omni_shell::AsyncTool)),
//! and running one handler with its panics caught.

use std::panic::AssertUnwindSafe;

use futures_lite::FutureExt;
use omni_core::generate::{ToolOutcome, ToolRunId};
use omni_core::tool::{outcome, panic_message};
use serde_json::Value;
use smol::channel::Sender;

use crate::http::TaskInput;

pub use omni_shell::AsyncTool as Tool;

/// A tool's handler as the driver runs it.
pub(crate) type Handler = omni_shell::AsyncHandler;

/// Runs one handler and reports its outcome; a panic (while building or polling the
/// handler's future) becomes [`ToolOutcome::Panicked`] instead of taking the task down.
pub(crate) async fn run(handler: Handler, id: ToolRunId, input: Value, inputs: Sender<TaskInput>) {
    // Calling the handler inside the async block puts its synchronous part under the catch too.
    let caught = AssertUnwindSafe(async move { handler(input).await }).catch_unwind().await;
    let outcome = match caught {
        Ok(result) => outcome(result),
        Err(payload) => ToolOutcome::Panicked(panic_message(&*payload)),
    };
    // The driver may be gone (the call ended); then nobody needs the answer.
    let _ = inputs.send(TaskInput::Tool { id, outcome }).await;
}
