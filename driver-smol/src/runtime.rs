//! The driver: the shell's [`Runtime`] on smol (tasks on smol's global executor or on one
//! the application owns, smol's timer) with this crate's HTTP/1.1 client as its
//! [`Transport`](omni_shell::Transport).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use omni_protocol::transport::ProxyRules;
use omni_shell::{Driver, Error, Runtime, SetupError, Task};
use smol::{Executor, Timer};

use crate::transport::{Connections, Http1};

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
            Self::Global => smol::spawn(future),
            Self::Executor(executor) => executor.spawn(future),
        }))
    }

    fn run_blocking(&self, work: omni_shell::BlockingWork) -> impl Future<Output = ()> + Send + 'static {
        // smol's pool of threads for blocking work.
        smol::unblock(work)
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        let timer = Timer::at(deadline);
        async move {
            timer.await;
        }
    }
}

impl Driver for Smol {
    type Runtime = Self;
    type Transport = Http1;

    fn transport(root_certificates: &[Vec<u8>], proxies: ProxyRules) -> Result<Http1, Error> {
        Connections::new(root_certificates, proxies).map(Http1).map_err(SetupError::http_client)
    }

    fn spawn_process(command: std::process::Command) -> std::io::Result<omni_shell::mcp::ChildProcess> {
        crate::process::spawn(command)
    }
}

/// `client.on_executor(executor)`: the client's tasks on an executor the application drives.
impl From<Arc<Executor<'static>>> for Smol {
    fn from(executor: Arc<Executor<'static>>) -> Self {
        Self::Executor(executor)
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
            Self::Global => f.write_str("global smol executor"),
            Self::Executor(_) => f.write_str("application executor"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use smol::Executor;

    use super::Smol;

    /// On an executor run by this one thread, a timer fires on time while blocking work
    /// runs: the work is not on that thread.
    #[test]
    fn blocking_work_holds_up_no_task_and_its_panic_is_an_error() {
        let executor = Arc::new(Executor::new());
        let smol = Smol::Executor(executor.clone());
        smol::block_on(executor.run(omni_conformance::blocking_work::holds_up_no_task(&smol)));
    }
}
