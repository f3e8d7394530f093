//! The shell's [`Runtime`] on smol: tasks on smol's global executor or on one the
//! application owns, smol's timer.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use omni_shell::{Error, Runtime, Task};
use smol::{Executor, Timer};

/// Where the driver's tasks run (the call and agent loops, HTTP exchanges, tool runs).
#[derive(Clone, Default)]
pub enum Smol {
    /// `smol::spawn`: works even when a call starts outside any executor.
    #[default]
    Global,
    /// An executor the application drives (e.g. with `executor.run(..)`).
    Executor(Arc<Executor<'static>>),
}

/// A smol task: dropping it cancels the task.
#[derive(Debug)]
pub struct SmolTask(smol::Task<()>);

impl Runtime for Smol {
    type Task = SmolTask;

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, future: F) -> Result<SmolTask, Error> {
        Ok(SmolTask(match self {
            Smol::Global => smol::spawn(future),
            Smol::Executor(executor) => executor.spawn(future),
        }))
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        let timer = Timer::at(deadline);
        async move {
            timer.await;
        }
    }
}

impl Task for SmolTask {
    fn detach(self) {
        self.0.detach();
    }
}

impl fmt::Debug for Smol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Smol::Global => f.write_str("global smol executor"),
            Smol::Executor(_) => f.write_str("application executor"),
        }
    }
}
