//! A call's loop, run where its events are read: the application's poll of its
//! [`TextStream`](crate::TextStream) executes the machine's effects, feeds it the next
//! report of the request and hands out the events that report made, on the application's
//! own thread. The events of a streamed reply are made where they are consumed: the
//! request's task only reads the socket and hands over pieces of body (one hand-off per
//! network read, never one per event), and no loop task sits between the two.
//!
//! What must happen while nobody reads is the *watchdog*'s, a small task of the call's
//! own that takes no input: it acts on a deadline when it comes (a stream left unread
//! still times out, and its connection is closed then), gives the machine the stream's
//! cancel at once (a [`CancelHandle`](crate::CancelHandle) closes the connection while
//! the stream is unread), and polls the tool runs, feeding their outcomes (a tool's work
//! goes on while the application does not read). The two take turns on one lock; the
//! reader holds it for one report's worth of decoding, the watchdog only when woken,
//! which is rare: a deadline, a cancel, a tool's progress.
//!
//! Both follow the order of [`crate::drive`]: effects first, then the events out, then a
//! deadline that passed, then an input. Backpressure is the reader's: a report is taken
//! only when every event of the last one has been handed out, so at most one report's
//! events wait, and a full report channel stops the request reading its socket.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use async_channel::Receiver;
use futures_lite::{future, Stream as _};
use omni_protocol::generate::{Generate, GenerateEvent, Input};

use crate::drive::{execute_effects, sleep_until, Next, Pacing};
use crate::executor::{Executor, Handlers};
use crate::machine::INPUT_CAPACITY;
use crate::runtime::{Runtime, Task, Transport};
use crate::telemetry::Observer;
use crate::Error;

/// A call's loop as its stream holds it, whatever the runtime and transport.
pub(crate) trait Drive: Send {
    /// Runs the loop until it has events for the application, moved into `out` (the
    /// events of one report), or the call is over (`Ready` with `out` left empty).
    /// `Pending` once there is nothing to do before the next report, a deadline or the
    /// watchdog's news: the reader is woken then.
    fn poll_events(&mut self, cx: &mut Context<'_>, out: &mut VecDeque<GenerateEvent>) -> Poll<()>;

    /// The stream is dropped: every request and tool run stops now.
    fn stop(&mut self);
}

/// A call's loop, shared by its stream and its watchdog.
pub(crate) type SharedCall = Arc<Mutex<dyn Drive>>;

/// Starts `machine`: its first effects executed at once (the request goes out now, not at
/// the first read), and its watchdog spawned on `runtime`. `cancelled` closes on the
/// stream's cancel (nothing is ever sent on it).
pub(crate) fn spawn_call<R: Runtime, T: Transport>(
    runtime: &R,
    transport: T,
    machine: Generate,
    handlers: Handlers,
    cancelled: Receiver<()>,
    observer: Option<Box<Observer>>,
) -> Result<SharedCall, Error> {
    let mut call = CallLoop {
        machine,
        executor: Executor::new(runtime.clone(), transport, handlers).observed(observer),
        pacing: Pacing::new(),
        over: false,
        cancelled: Box::pin(cancelled),
        cancel_seen: false,
        reader: None,
        watchdog: None,
        watched: None,
    };
    execute_effects(&mut call.machine, &mut call.executor);
    let call = Arc::new(Mutex::new(call));
    // Detached: it ends once the call is over or the stream dropped.
    runtime.spawn(watchdog(call.clone(), runtime.clone()))?.detach();
    Ok(call)
}

/// The call's loop, for one turn of the reader or the watchdog; a lock poisoned by a
/// panic is taken anyway, as the shell's other locks are.
pub(crate) fn lock<D: ?Sized>(call: &Mutex<D>) -> MutexGuard<'_, D> {
    call.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Keeps `cx`'s waker in `slot`, unless the one there wakes the same task.
fn remember(slot: &mut Option<Waker>, cx: &Context<'_>) {
    if !slot.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
        *slot = Some(cx.waker().clone());
    }
}

struct CallLoop<R: Runtime, T: Transport> {
    machine: Generate,
    executor: Executor<R, T>,
    pacing: Pacing,
    /// The call is over and its work stopped: the machine finished (and its last events
    /// were read) or the stream was dropped.
    over: bool,
    /// Closes on the stream's cancel.
    cancelled: Pin<Box<Receiver<()>>>,
    /// The cancel was given to the machine.
    cancel_seen: bool,
    /// The task reading the stream, when it waits: woken when the watchdog made events.
    reader: Option<Waker>,
    /// The watchdog, when it waits: woken when it must look again (a tool run started, a
    /// deadline came sooner than the one it sleeps until, the call is over).
    watchdog: Option<Waker>,
    /// The deadline the watchdog sleeps until.
    watched: Option<Instant>,
}

impl<R: Runtime, T: Transport> fmt::Debug for CallLoop<R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallLoop").field("over", &self.over).finish_non_exhaustive()
    }
}

/// What the watchdog is to do next.
enum Watch {
    /// Sleep until this deadline (or until woken, without one).
    Until(Option<Instant>),
    /// Forget the deadline slept until and look again (the timer fired).
    Rearm,
    /// Stop: nothing is left to watch.
    Over,
}

impl<R: Runtime, T: Transport> CallLoop<R, T> {
    fn now(&self) -> Instant {
        self.executor.runtime().now()
    }

    /// Whether the stream's cancel came and is yet to be given to the machine (`cx`: to
    /// be woken when it comes).
    fn cancel_came(&mut self, cx: Option<&mut Context<'_>>) -> bool {
        !self.cancel_seen
            && match cx {
                Some(cx) => matches!(self.cancelled.as_mut().poll_next(cx), Poll::Ready(None)),
                None => self.cancelled.is_closed(),
            }
    }

    /// Gives the machine the stream's cancel.
    fn cancel(&mut self) {
        self.cancel_seen = true;
        // Refused only when the call has ended already: then there is nothing to cancel.
        let _ = self.machine.handle_input(Input::Cancel, self.now());
    }

    /// Ends the call: its work stopped (a machine that finished has cancelled it already,
    /// but a transport may still wait to report), the watchdog let go.
    fn finish(&mut self) {
        self.over = true;
        self.executor.stop();
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.wake();
        }
    }

    /// Wakes the watchdog when the reader changed what it watches: tool runs to poll, or
    /// a deadline sooner than the one it sleeps until.
    fn tell_watchdog(&mut self) {
        let deadline = self.machine.poll_timeout().map(|(at, _)| at);
        let sooner = match (deadline, self.watched) {
            (Some(deadline), Some(watched)) => deadline < watched,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if sooner || self.executor.runs_tools() {
            if let Some(watchdog) = self.watchdog.take() {
                watchdog.wake();
            }
        }
    }

    /// The watchdog's turn: the cancel, the tool runs and their outcomes, a deadline that
    /// passed; the reader woken when any of them made events.
    fn poll_watch(&mut self, cx: &mut Context<'_>) -> Poll<Watch> {
        if self.over || self.machine.is_done() {
            return Poll::Ready(Watch::Over);
        }
        remember(&mut self.watchdog, cx);
        let (mut acted, mut kept) = (false, false);
        loop {
            execute_effects(&mut self.machine, &mut self.executor);
            self.executor.poll_tools(cx);
            if let Some(report) = self.executor.take_ready() {
                self.executor.feed(&mut self.machine, report);
                acted = true;
                continue;
            }
            let now = self.now();
            let due = self.machine.poll_timeout().is_some_and(|(at, _)| at <= now);
            let cancel = self.cancel_came(Some(cx));
            if !due && !cancel {
                break;
            }
            if !kept && self.machine.pending_events() == 0 {
                // What has arrived is kept: the reports that wait for the reader (at most
                // a channel's worth, once) are decoded before the call may end.
                kept = true;
                for _ in 0..INPUT_CAPACITY {
                    let Some(report) = self.executor.take_arrived() else { break };
                    self.executor.feed(&mut self.machine, report);
                    execute_effects(&mut self.machine, &mut self.executor);
                }
                continue;
            }
            if cancel {
                self.cancel();
            } else {
                self.machine.handle_timeout(now);
            }
            acted = true;
        }
        if acted {
            if let Some(reader) = self.reader.take() {
                reader.wake();
            }
        }
        if self.machine.is_done() {
            // The last events wait for the reader; the work stops now.
            self.executor.stop();
            return Poll::Ready(Watch::Over);
        }
        let deadline = self.machine.poll_timeout().map(|(at, _)| at);
        if deadline == self.watched {
            return Poll::Pending;
        }
        self.watched = deadline;
        Poll::Ready(Watch::Until(deadline))
    }
}

impl<R: Runtime, T: Transport> Drive for CallLoop<R, T> {
    fn poll_events(&mut self, cx: &mut Context<'_>, out: &mut VecDeque<GenerateEvent>) -> Poll<()> {
        loop {
            execute_effects(&mut self.machine, &mut self.executor);
            if self.machine.pending_events() > 0 {
                out.extend(std::iter::from_fn(|| self.machine.poll_event()));
                // Handing events out is giving the application its turn.
                self.pacing = Pacing::new();
                // The application may not come back for a while: what was just started
                // (tool runs, a sooner deadline) is the watchdog's meanwhile.
                self.tell_watchdog();
                return Poll::Ready(());
            }
            if self.over {
                return Poll::Ready(());
            }
            if self.machine.is_done() {
                self.finish();
                return Poll::Ready(());
            }
            if self.cancel_came(None) {
                self.cancel();
                continue;
            }
            let now = self.now();
            match self.pacing.before_wait(&mut self.machine, now) {
                Next::Again => continue,
                Next::Wait(_) => {
                    if let Poll::Ready(report) = self.executor.poll_report(cx) {
                        self.executor.feed(&mut self.machine, report);
                        continue;
                    }
                }
                // A flood of input that makes no event: the application's runtime runs
                // something else, then the reader comes back.
                Next::Yield => cx.waker().wake_by_ref(),
            }
            remember(&mut self.reader, cx);
            self.tell_watchdog();
            return Poll::Pending;
        }
    }

    fn stop(&mut self) {
        self.finish();
    }
}

/// The call's watchdog task: sleeps until the machine's next deadline, or until woken by
/// the cancel, a tool run or the reader, and takes its turn then (see the module's doc).
async fn watchdog<R: Runtime, T: Transport>(call: Arc<Mutex<CallLoop<R, T>>>, runtime: R) {
    let mut deadline = None;
    loop {
        let watched = future::poll_fn(|cx| lock(&call).poll_watch(cx));
        let timer = async {
            sleep_until(&runtime, deadline).await;
            Watch::Rearm
        };
        match future::or(watched, timer).await {
            Watch::Until(next) => deadline = next,
            Watch::Rearm => {
                deadline = None;
                lock(&call).watched = None;
            }
            Watch::Over => return,
        }
    }
}
