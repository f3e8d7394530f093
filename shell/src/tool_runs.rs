//! The tool runs of one loop, polled by the loop itself rather than spawned (see
//! [`crate::executor`]): each run's future boxed and held by its [`ToolRunId`], so that
//! dropping it (a cancel, or the executor's end) stops the run at once.
//!
//! Only the runs whose waker fired since the last poll are polled again: a model may ask
//! for hundreds of calls in one step (omni-blocking's tests ask for 300), and polling
//! every run on every wake-up of the loop (each body chunk, each finished run) would cost
//! the square of that. Each run has a waker of its own that records its id and wakes the
//! loop; a pass polls the recorded runs once each, in id order, so a run that keeps
//! waking itself cannot hold the loop.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use futures_lite::FutureExt;
use omni_core::data::tool::{outcome, panic_message};
use omni_core::machines::generate::{ToolOutcome, ToolRunId};
use serde_json::Value;

use crate::AsyncHandler;

/// One run: its handler's future with the panic caught.
type RunFuture = Pin<Box<dyn Future<Output = ToolOutcome> + Send>>;

/// The runs in flight of one loop.
#[derive(Default)]
pub(crate) struct ToolRuns {
    running: BTreeMap<ToolRunId, (RunFuture, Waker)>,
    woken: Arc<Woken>,
}

/// The runs woken since the last pass, and the loop's waker.
#[derive(Default)]
struct Woken {
    ids: Mutex<BTreeSet<ToolRunId>>,
    parent: Mutex<Option<Waker>>,
}

/// A run's waker: records the run, then wakes the loop.
struct RunWaker {
    id: ToolRunId,
    woken: Arc<Woken>,
}

impl Wake for RunWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.ids.lock().unwrap_or_else(PoisonError::into_inner).insert(self.id);
        if let Some(parent) = &*self.woken.parent.lock().unwrap_or_else(PoisonError::into_inner) {
            parent.wake_by_ref();
        }
    }
}

impl ToolRuns {
    /// Starts running `handler` on `input`; it is first polled by the next [`ToolRuns::poll`].
    pub(crate) fn start(&mut self, id: ToolRunId, handler: AsyncHandler, input: Value) {
        // Calling the handler inside the async block puts its synchronous part under the
        // catch too: a panic, while the handler's future is made or polled, becomes
        // `ToolOutcome::Panicked` (futures-lite's `catch_unwind`, so every runtime alike).
        let run = AssertUnwindSafe(async move { handler(input).await }).catch_unwind();
        let run: RunFuture = Box::pin(async move {
            match run.await {
                Ok(result) => outcome(result),
                Err(payload) => ToolOutcome::Panicked(panic_message(&*payload)),
            }
        });
        let waker = Waker::from(Arc::new(RunWaker { id, woken: self.woken.clone() }));
        self.running.insert(id, (run, waker));
        self.woken.ids.lock().unwrap_or_else(PoisonError::into_inner).insert(id);
    }

    /// Stops a run: its future is dropped here and now.
    pub(crate) fn cancel(&mut self, id: ToolRunId) {
        drop(self.running.remove(&id));
    }

    /// Polls the runs woken since the last pass, once each, and hands every finished
    /// run's outcome to `finished`. The loop is woken (through `cx`) when a run is.
    pub(crate) fn poll(&mut self, cx: &Context<'_>, mut finished: impl FnMut(ToolRunId, ToolOutcome)) {
        {
            let mut parent = self.woken.parent.lock().unwrap_or_else(PoisonError::into_inner);
            if !parent.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                *parent = Some(cx.waker().clone());
            }
        }
        let woken = std::mem::take(&mut *self.woken.ids.lock().unwrap_or_else(PoisonError::into_inner));
        for id in woken {
            // A run cancelled or finished since it was woken is gone.
            let Some((run, waker)) = self.running.get_mut(&id) else { continue };
            if let Poll::Ready(outcome) = run.as_mut().poll(&mut Context::from_waker(waker)) {
                self.running.remove(&id);
                finished(id, outcome);
            }
        }
    }
}
