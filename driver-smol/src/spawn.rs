//! Where the driver's tasks run: smol's global executor, or one the application owns.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use smol::{Executor, Task};

/// Spawns the driver loop, HTTP exchanges and tool runs. Every task is held by a
/// [`Task`] handle, so dropping the handle cancels the work.
#[derive(Clone, Default)]
pub(crate) enum Spawner {
    /// `smol::spawn`: works even when the call starts outside any executor.
    #[default]
    Global,
    /// An executor the application drives (e.g. with `executor.run(..)`).
    Executor(Arc<Executor<'static>>),
}

impl Spawner {
    pub(crate) fn spawn<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> Task<T> {
        match self {
            Spawner::Global => smol::spawn(future),
            Spawner::Executor(executor) => executor.spawn(future),
        }
    }
}

impl fmt::Debug for Spawner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spawner::Global => f.write_str("global smol executor"),
            Spawner::Executor(_) => f.write_str("application executor"),
        }
    }
}
