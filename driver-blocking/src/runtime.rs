//! The shell's [`Runtime`] on plain threads: every task is a thread running its future
//! in a loop that parks until the next wake or the earliest deadline it sleeps for
//! ([`crate::sleep`]: no timer thread).
//!
//! A task's thread races its future against a stop channel held by the [`ThreadTask`]:
//! dropping the handle closes the channel, so the future is dropped at its next await.
//! Blocking code cannot await: a request's exchange, which blocks inside a poll, is
//! unblocked by the hook it gave its sink (`ResponseSink::on_stop`), which the shell runs
//! before it drops the task ([`crate::transport`]). [`after_poll`] defers work to
//! the end of the current poll of the task running on this thread, so a batch of effects
//! executed in one poll is acted on once (the tool pool frees places after a whole batch
//! of cancels, see [`crate::tool_pool::hold`]).
//!
//! Threads: one per call or agent loop, one per request (its exchange runs on it), none
//! per event and none per tool run (the loop polls the runs' futures itself; the
//! handlers run on the process's bounded tool pool, [`crate::tool_pool`]).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::thread;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_shell::{Error, Runtime, SetupError, Task};

use crate::sleep::{self, Sleep};

/// Runs the shell's tasks on threads of their own.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Threads;

thread_local! {
    /// Whether this thread runs a task.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
    /// Work deferred to the end of the current poll.
    static DEFERRED: RefCell<Vec<fn()>> = const { RefCell::new(Vec::new()) };
}

/// Runs `work` at the end of the current poll of this thread's task (at once outside a
/// task), in the order deferred.
pub(crate) fn after_poll(work: fn()) {
    if !IN_TASK.get() {
        return work();
    }
    DEFERRED.with(|deferred| deferred.borrow_mut().push(work));
}

fn run_deferred() {
    let work = DEFERRED.with(|deferred| std::mem::take(&mut *deferred.borrow_mut()));
    for work in work {
        work();
    }
}

/// A task on its own thread; dropping it stops the task.
pub(crate) struct ThreadTask {
    /// `None` once detached.
    stop: Option<Sender<()>>,
}

impl std::fmt::Debug for ThreadTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadTask").field("detached", &self.stop.is_none()).finish()
    }
}

impl Runtime for Threads {
    type Task = ThreadTask;

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, future: F) -> Result<ThreadTask, Error> {
        let (sender, stopped) = async_channel::bounded::<()>(1);
        let keep_open = sender.clone();
        thread::Builder::new()
            .name("omni-task".into())
            .spawn(move || run(future, stopped, keep_open))
            .map_err(|e| Error::Setup(SetupError::Thread(e)))?;
        Ok(ThreadTask { stop: Some(sender) })
    }

    fn run_blocking(&self, work: omni_shell::BlockingWork) -> impl Future<Output = ()> + Send + 'static {
        omni_shell::run_on_a_thread(work)
    }

    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static {
        Sleep::until(deadline)
    }
}

/// A task's thread: the future raced against the stop channel, deferred work run after
/// every poll. `_keep_open` keeps the channel open once the handle is detached.
fn run(future: impl Future<Output = ()>, stopped: Receiver<()>, _keep_open: Sender<()>) {
    IN_TASK.set(true);
    // The stop first: a task stopped before it ran never starts.
    let stop_or_end = future::or(
        async {
            // Nothing is ever sent: this returns when the handle closes the channel.
            let _ = stopped.recv().await;
        },
        future,
    );
    sleep::block_on(stop_or_end, run_deferred);
    IN_TASK.set(false);
}

impl Task for ThreadTask {
    fn detach(mut self) {
        self.stop = None;
    }
}

impl Drop for ThreadTask {
    fn drop(&mut self) {
        if let Some(sender) = self.stop.take() {
            sender.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn dropping_a_task_stops_it_and_detaching_lets_it_finish() {
        let (done, finished) = async_channel::bounded::<&str>(2);
        let runtime = Threads;
        let slow = runtime.sleep_until(Instant::now() + Duration::from_millis(100));
        let tx = done.clone();
        let stopped = runtime
            .spawn(async move {
                slow.await;
                let _ = tx.send("not stopped").await;
            })
            .expect("a thread");
        let later = runtime.sleep_until(Instant::now() + Duration::from_millis(50));
        runtime
            .spawn(async move {
                later.await;
                let _ = done.send("detached").await;
            })
            .expect("a thread")
            .detach();
        drop(stopped);
        assert_eq!(finished.recv_blocking().ok(), Some("detached"));
        assert_eq!(finished.recv_blocking().ok(), None, "the stopped task never sent, and both senders are gone");
    }

    #[test]
    fn blocking_work_holds_up_no_task_and_its_panic_is_an_error() {
        future::block_on(omni_conformance::blocking_work::holds_up_no_task(&Threads));
    }
}
