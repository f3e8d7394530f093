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
use omni_protocol::generate::{ToolOutcome, ToolRunId};
use omni_protocol::tool::{outcome, panic_message};
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
    /// Starts running `handler` on `input`, inside `span` when observed (so the tool's own
    /// `tracing` output nests under its `execute_tool` span); it is first polled by the
    /// next [`ToolRuns::poll`].
    pub(crate) fn start(&mut self, id: ToolRunId, handler: AsyncHandler, input: Value, span: Option<tracing::Span>) {
        // Calling the handler inside the async block puts its synchronous part under the
        // catch too: a panic, while the handler's future is made or polled, becomes
        // `ToolOutcome::Panicked` (futures-lite's `catch_unwind`, so every runtime alike).
        let run = AssertUnwindSafe(async move { handler(input).await }).catch_unwind();
        let run = async move {
            match run.await {
                Ok(result) => outcome(result),
                Err(payload) => ToolOutcome::Panicked(panic_message(&*payload)),
            }
        };
        let run: RunFuture = match span {
            Some(span) => Box::pin(tracing::Instrument::instrument(run, span)),
            None => Box::pin(run),
        };
        let waker = Waker::from(Arc::new(RunWaker { id, woken: self.woken.clone() }));
        self.running.insert(id, (run, waker));
        self.woken.ids.lock().unwrap_or_else(PoisonError::into_inner).insert(id);
    }

    /// Whether no run is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Stops a run: its future is dropped here and now.
    pub(crate) fn cancel(&mut self, id: ToolRunId) {
        drop(self.running.remove(&id));
    }

    /// Polls the runs woken since the last pass, once each, and hands every finished
    /// run's outcome to `finished`. The loop is woken (through `cx`) when a run is.
    pub(crate) fn poll(&mut self, cx: &Context<'_>, mut finished: impl FnMut(ToolRunId, ToolOutcome)) {
        // The loop polls here for every report (each body chunk): no locks when no run is in flight.
        if self.running.is_empty() {
            return;
        }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use omni_protocol::tool::{ToolError, ToolOutput};
    use serde_json::json;

    use super::*;
    use crate::ToolFuture;

    /// A run that counts its polls and stays pending until `release`, keeping its waker
    /// in `wakers`; `dropped` is set when its future is dropped.
    struct Probe {
        polls: Arc<AtomicUsize>,
        release: Arc<AtomicBool>,
        wakers: Arc<Mutex<Vec<Waker>>>,
        dropped: Arc<AtomicBool>,
    }

    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl Probe {
        fn new() -> Self {
            Self { polls: Arc::default(), release: Arc::default(), wakers: Arc::default(), dropped: Arc::default() }
        }

        fn handler(&self) -> AsyncHandler {
            let (polls, release, wakers, dropped) =
                (self.polls.clone(), self.release.clone(), self.wakers.clone(), self.dropped.clone());
            Arc::new(move |_| -> ToolFuture {
                let (polls, release, wakers) = (polls.clone(), release.clone(), wakers.clone());
                let guard = SetOnDrop(dropped.clone());
                Box::pin(async move {
                    let _guard = guard;
                    std::future::poll_fn(|cx| {
                        polls.fetch_add(1, Ordering::SeqCst);
                        if release.load(Ordering::SeqCst) {
                            return Poll::Ready(Ok::<_, ToolError>(ToolOutput::text("done")));
                        }
                        wakers.lock().unwrap().push(cx.waker().clone());
                        Poll::Pending
                    })
                    .await
                })
            })
        }
    }

    /// One pass of `runs`, with a waker that counts how often the loop is woken.
    fn pass(runs: &mut ToolRuns, loop_wakes: &Arc<Counter>) -> Vec<(ToolRunId, ToolOutcome)> {
        let waker = Waker::from(loop_wakes.clone());
        let mut finished = Vec::new();
        runs.poll(&Context::from_waker(&waker), |id, outcome| finished.push((id, outcome)));
        finished
    }

    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn only_woken_runs_are_polled_again_and_a_cancel_drops_the_future_at_once() {
        let probes: Vec<Probe> = (0..100).map(|_| Probe::new()).collect();
        let mut runs = ToolRuns::default();
        for (i, probe) in probes.iter().enumerate() {
            runs.start(ToolRunId(i as u64), probe.handler(), json!({}), None);
        }
        let loop_wakes = Arc::new(Counter::default());
        assert!(pass(&mut runs, &loop_wakes).is_empty());
        assert!(probes.iter().all(|p| p.polls.load(Ordering::SeqCst) == 1), "each new run polled once");
        assert!(pass(&mut runs, &loop_wakes).is_empty());
        let polls: usize = probes.iter().map(|p| p.polls.load(Ordering::SeqCst)).sum();
        assert_eq!(polls, 100, "a pass with nothing woken polls nothing");

        // Run 7 is released and woken: the loop is woken, and only run 7 is polled.
        probes[7].release.store(true, Ordering::SeqCst);
        probes[7].wakers.lock().unwrap().pop().expect("run 7's waker").wake();
        assert_eq!(loop_wakes.0.load(Ordering::SeqCst), 1, "a run's wake wakes the loop");
        let finished = pass(&mut runs, &loop_wakes);
        assert_eq!(finished, vec![(ToolRunId(7), ToolOutcome::Ok(ToolOutput::text("done").0))]);
        let polls: usize = probes.iter().map(|p| p.polls.load(Ordering::SeqCst)).sum();
        assert_eq!(polls, 101, "only the woken run was polled");

        // A cancel drops the future here and now, without a poll.
        assert!(!probes[3].dropped.load(Ordering::SeqCst));
        runs.cancel(ToolRunId(3));
        assert!(probes[3].dropped.load(Ordering::SeqCst), "the cancelled run's future is dropped");
        // Woken after its cancel, it is not polled again.
        probes[3].wakers.lock().unwrap().pop().expect("run 3's waker").wake();
        assert!(pass(&mut runs, &loop_wakes).is_empty());
        assert_eq!(probes[3].polls.load(Ordering::SeqCst), 1);
        // The rest go with the runs.
        drop(runs);
        assert!(probes.iter().all(|p| p.dropped.load(Ordering::SeqCst)));
    }
}
