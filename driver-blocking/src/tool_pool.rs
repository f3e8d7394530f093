//! The threads tool handlers run on, bounded for the whole process.
//!
//! A tool handler is plain blocking code, so each run needs a thread; a model asking for
//! thousands of parallel calls, or handlers that hang, must not turn into thousands of
//! threads. Two limits:
//!
//! - At most [`MAX_RUNNING_TOOLS`] runs execute at once; further runs wait in a queue (a
//!   queued run costs its input, not a thread) and start, in order, as slots free up. A
//!   run cancelled while queued (its tool timeout passed, the call was cancelled) never
//!   starts.
//! - A Rust thread cannot be killed. A run that was cancelled while its handler runs no
//!   longer counts against [`MAX_RUNNING_TOOLS`] (new work is not held up by a handler
//!   that ignores its [`CancelToken`](crate::CancelToken)), but its thread lives until
//!   the handler returns. At most [`MAX_TOOL_THREADS`] tool threads are alive at once,
//!   abandoned ones included: past that, new runs wait until an abandoned handler
//!   returns, and if none does, they end by their own tool timeout like any other run
//!   that took too long. So hung handlers cost at most that many threads, ever.
//!
//! A thread that finishes a run takes the next queued one, so a burst of short calls
//! reuses threads instead of starting one per call.
//!
//! ```text
//!   submit ─► queue ──(running < MAX_RUNNING_TOOLS and alive < MAX_TOOL_THREADS)──► thread
//!               │                                                    │ handler returns
//!               └─ cancelled while queued: dropped                   ▼
//!                                              next queued run on the same thread, or exit
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use crate::tools::CancelToken;

/// Tool runs executing at once in this process; more wait in a queue.
pub const MAX_RUNNING_TOOLS: usize = 64;
/// Tool threads alive at once in this process, counting those whose run was cancelled
/// but whose handler has not returned.
pub const MAX_TOOL_THREADS: usize = 256;

/// One run: the work and the token that says whether it is still wanted.
pub(crate) struct Job {
    pub(crate) token: CancelToken,
    pub(crate) work: Box<dyn FnOnce() + Send>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// The tokens of the runs the live threads are executing, one per thread.
    active: Vec<(u64, CancelToken)>,
    next_thread: u64,
    /// Batches of cancels under way ([`hold`]): no queued run starts until they are done.
    holds: usize,
}

impl State {
    fn running(&self) -> usize {
        self.active.iter().filter(|(_, token)| !token.is_cancelled()).count()
    }

    fn has_room(&self) -> bool {
        self.active.len() < MAX_TOOL_THREADS && self.running() < MAX_RUNNING_TOOLS
    }

    /// The next queued run still wanted, if there is room for it and no batch of cancels
    /// is under way.
    fn next_job(&mut self) -> Option<Job> {
        self.queue.retain(|job| !job.token.is_cancelled());
        if self.holds == 0 && self.has_room() {
            self.queue.pop_front()
        } else {
            None
        }
    }
}

static POOL: Mutex<State> = Mutex::new(State { queue: VecDeque::new(), active: Vec::new(), next_thread: 0, holds: 0 });

fn state() -> std::sync::MutexGuard<'static, State> {
    POOL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Queues `job` and starts what there is room for.
pub(crate) fn submit(job: Job) {
    let mut state = state();
    state.queue.push_back(job);
    dispatch(&mut state);
}

/// A cancel of a batch is about to free a place: nothing starts until [`release`] (a run
/// submitted meanwhile, by another thread, waits in the queue). Taken before the cancel,
/// and released once the batch is over (the end of the loop's poll that cancels, see
/// [`crate::runtime::after_poll`]), not after each cancel: a tool timeout cancels every
/// run of a call at once, and freeing places one cancel at a time would start the call's
/// own queued runs that the next cancels of the batch drop.
pub(crate) fn hold() {
    state().holds += 1;
}

/// The end of a [`hold`]; the last one gives the places freed to queued runs.
pub(crate) fn release() {
    let mut state = state();
    state.holds = state.holds.saturating_sub(1);
    dispatch(&mut state);
}

/// Starts a thread for each queued run there is room for. When the system refuses a
/// thread, the run goes back to the head of the queue: the next submit or finished run
/// tries again, and its tool timeout ends it if nothing does.
fn dispatch(state: &mut State) {
    while let Some(job) = state.next_job() {
        let id = state.next_thread;
        state.next_thread += 1;
        state.active.push((id, job.token.clone()));
        // Shared so that a refused spawn hands the job back instead of dropping it.
        let slot = Arc::new(Mutex::new(Some(job)));
        let taken = slot.clone();
        let spawned = thread::Builder::new().name("omni-tool".into()).spawn(move || {
            let job = taken.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(job) = job {
                work_loop(id, job);
            }
        });
        if spawned.is_err() {
            state.active.retain(|(thread, _)| *thread != id);
            if let Some(job) = slot.lock().unwrap_or_else(PoisonError::into_inner).take() {
                state.queue.push_front(job);
            }
            return;
        }
    }
}

/// Runs `job`, then queued runs as long as there is room, then ends.
fn work_loop(id: u64, mut job: Job) {
    loop {
        (job.work)();
        let mut state = state();
        state.active.retain(|(thread, _)| *thread != id);
        match state.next_job() {
            Some(next) => {
                state.active.push((id, next.token.clone()));
                job = next;
            }
            None => return,
        }
    }
}

/// Tool threads alive now (for tests and diagnostics).
pub fn live_tool_threads() -> usize {
    state().active.len()
}
