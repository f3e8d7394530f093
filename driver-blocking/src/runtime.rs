//! The shell's [`Runtime`] on plain threads: every task is a thread running its future
//! in a loop that parks until the next wake or the earliest deadline it sleeps for
//! ([`crate::sleep`]: no timer thread).
//!
//! A task's thread races its future against a stop channel held by the [`ThreadTask`]:
//! dropping the handle closes the channel, so the future is dropped at its next await.
//! Blocking code cannot await: a future that blocks inside a poll (a ureq exchange)
//! registers with [`on_stop`] what unblocks it (shutting its sockets down), and dropping
//! the handle runs that at once, on the dropping thread. [`after_poll`] defers work to
//! the end of the current poll of the task running on this thread, so a batch of effects
//! executed in one poll is acted on once (the tool pool frees places after a whole batch
//! of cancels, see [`crate::tool_pool::hold`]).
//!
//! Threads: one per call or agent loop, one per request (its exchange runs on it), none
//! per event and none per tool run (the loop polls the runs' futures itself; the
//! handlers run on the process's bounded tool pool, [`crate::tool_pool`]).

use std::cell::RefCell;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_shell::{Error, Runtime, SetupError, Task};

use crate::sleep::{self, Sleep};

/// Runs the shell's tasks on threads of their own.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Threads;

/// What unblocks a task's blocking code, run when its handle is dropped.
type StopHook = Box<dyn FnOnce() + Send>;

/// A task's stop signal, shared by its handle and its thread.
#[derive(Default)]
struct Stop {
    /// `None` once stopped: hooks registered later run at once.
    hooks: Mutex<Option<Vec<StopHook>>>,
}

impl Stop {
    fn new() -> Self {
        Self { hooks: Mutex::new(Some(Vec::new())) }
    }

    fn stop(&self) {
        let hooks = self.hooks.lock().unwrap_or_else(PoisonError::into_inner).take();
        for hook in hooks.into_iter().flatten() {
            hook();
        }
    }
}

thread_local! {
    /// The stop signal of the task this thread runs.
    static CURRENT: RefCell<Option<Arc<Stop>>> = const { RefCell::new(None) };
    /// Work deferred to the end of the current poll.
    static DEFERRED: RefCell<Vec<fn()>> = const { RefCell::new(Vec::new()) };
}

/// Runs `hook` when the task running on this thread is stopped (its handle dropped), on
/// the thread that drops it; at once when it already was. Outside a task, never.
pub(crate) fn on_stop(hook: impl FnOnce() + Send + 'static) {
    let Some(stop) = CURRENT.with(|current| current.borrow().clone()) else { return };
    let mut hooks = stop.hooks.lock().unwrap_or_else(PoisonError::into_inner);
    match hooks.as_mut() {
        Some(hooks) => hooks.push(Box::new(hook)),
        None => {
            drop(hooks);
            hook();
        }
    }
}

/// Runs `work` at the end of the current poll of this thread's task (at once outside a
/// task), in the order deferred.
pub(crate) fn after_poll(work: fn()) {
    if CURRENT.with(|current| current.borrow().is_none()) {
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
    stop: Option<(Sender<()>, Arc<Stop>)>,
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
        let stop = Arc::new(Stop::new());
        let (task_stop, keep_open) = (stop.clone(), sender.clone());
        thread::Builder::new()
            .name("omni-task".into())
            .spawn(move || run(future, stopped, task_stop, keep_open))
            .map_err(|e| Error::Setup(SetupError::Thread(e)))?;
        Ok(ThreadTask { stop: Some((sender, stop)) })
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
fn run(future: impl Future<Output = ()>, stopped: Receiver<()>, stop: Arc<Stop>, _keep_open: Sender<()>) {
    CURRENT.with(|current| *current.borrow_mut() = Some(stop));
    // The stop first: a task stopped before it ran never starts.
    let stop_or_end = future::or(
        async {
            // Nothing is ever sent: this returns when the handle closes the channel.
            let _ = stopped.recv().await;
        },
        future,
    );
    sleep::block_on(stop_or_end, run_deferred);
    CURRENT.with(|current| current.borrow_mut().take());
}

impl Task for ThreadTask {
    fn detach(mut self) {
        self.stop = None;
    }
}

impl Drop for ThreadTask {
    fn drop(&mut self) {
        if let Some((sender, stop)) = self.stop.take() {
            // The hooks first: the future must not see the stop (and drop itself) before
            // what unblocks it has run.
            stop.stop();
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

    #[test]
    fn a_stop_hook_unblocks_blocking_code_at_once() {
        // Each carries one message: room for one, so no sender ever waits.
        let (hook_ran, wait) = std::sync::mpsc::sync_channel::<()>(1);
        let (entered, blocked) = std::sync::mpsc::sync_channel::<()>(1);
        let (left, ended) = std::sync::mpsc::sync_channel(1);
        let task = Threads
            .spawn(async move {
                on_stop(move || {
                    let _ = hook_ran.send(());
                });
                let _ = entered.send(());
                // Blocking inside a poll: only the hook can end this before a minute.
                let _ = left.send(wait.recv_timeout(Duration::from_secs(60)));
            })
            .expect("a thread");
        blocked.recv_timeout(Duration::from_secs(5)).expect("the task runs");
        drop(task);
        let woken = ended.recv_timeout(Duration::from_secs(5)).expect("the blocked code returned");
        assert_eq!(woken, Ok(()), "woken by the hook, not by its own timeout");
    }
}
