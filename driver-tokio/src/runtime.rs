//! The driver: the shell's [`Runtime`] on tokio (tasks on the current tokio runtime, tokio's
//! timer) with reqwest as its [`Transport`](omni_shell::Transport).

use std::future::Future;
use std::time::Instant;

use omni_protocol::transport::ProxyRules;
use omni_shell::{Driver, Error, Runtime, SetupError, Task};
use tokio::task::JoinHandle;

use crate::transport::{self, Reqwest};

/// Runs the shell's tasks on the tokio runtime the application runs in: the one current
/// where a task is spawned, else the one current when the client was built. A call's
/// stream starts work (a redirect followed, a correction sent) from whatever thread polls
/// it, which need not be one of the runtime's.
#[derive(Debug, Clone)]
pub struct Tokio {
    built_in: Option<tokio::runtime::Handle>,
}

impl Default for Tokio {
    /// The runtime current here, if any, as the fallback for spawning.
    fn default() -> Self {
        Self { built_in: tokio::runtime::Handle::try_current().ok() }
    }
}

/// A tokio task that is aborted when dropped (tokio's own handle would let it run).
#[derive(Debug)]
pub struct TokioTask(Option<JoinHandle<()>>);

impl Runtime for Tokio {
    type Task = TokioTask;

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, future: F) -> Result<TokioTask, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| self.built_in.clone())
            .ok_or(Error::Setup(SetupError::NoRuntime { driver: "omni-tokio", runtime: "tokio" }))?;
        Ok(TokioTask(Some(runtime.spawn(future))))
    }

    fn run_blocking(&self, work: omni_shell::BlockingWork) -> impl Future<Output = ()> + Send + 'static {
        // tokio's blocking pool, on the runtime current here, else the client's (without
        // either the work is dropped unrun, which `off_executor` reports).
        let runtime = tokio::runtime::Handle::try_current().ok().or_else(|| self.built_in.clone());
        let work = runtime.map(|runtime| runtime.spawn_blocking(work));
        async move {
            if let Some(work) = work {
                let _ = work.await;
            }
        }
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline))
    }
}

impl Driver for Tokio {
    type Runtime = Self;
    type Transport = Reqwest;

    fn transport(root_certificates: &[Vec<u8>], proxies: ProxyRules) -> Result<Reqwest, Error> {
        transport::client(root_certificates, proxies).map(Reqwest).map_err(SetupError::http_client)
    }

    fn spawn_process(command: std::process::Command) -> std::io::Result<omni_shell::mcp::ChildProcess> {
        crate::process::spawn(command)
    }
}

impl Task for TokioTask {
    fn detach(mut self) {
        self.0.take();
    }
}

impl Drop for TokioTask {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tokio;

    /// On a current-thread runtime (one thread for every task), a timer fires on time
    /// while blocking work runs: the work is not on that thread.
    #[test]
    fn blocking_work_holds_up_no_task_and_its_panic_is_an_error() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
        runtime.block_on(omni_conformance::blocking_work::holds_up_no_task(&Tokio::default()));
    }
}
