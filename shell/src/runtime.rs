//! What a driver gives the shell: a [`Runtime`] (where work runs, and time) and a
//! [`Transport`] (how one request goes out and its response comes back). Everything else
//! (executing effects, the drive loops, tool runs, delivering events) is the shell's, so
//! it is written once for every driver, in the manner of quinn's `runtime/{tokio,smol}.rs`.
//!
//! Both traits also fit a runtime made of threads (omni-blocking's): `spawn` starts a
//! thread that runs the future with `futures_lite::future::block_on`, its task handle
//! holding the sending end of a channel the thread's future races against (so dropping
//! the handle stops the future at its next await, and `detach` forgets the channel);
//! `sleep_until` is a future the thread parks for; and a transport's `send` is a future
//! that blocks inside its poll on the request's own thread, unblocked by the hook it gave
//! [`ResponseSink::on_stop`] (shutting its socket down) when the shell stops the request.

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_channel::Receiver;
use bytes::Bytes;
use omni_protocol::dialect::HttpRequest;
use omni_protocol::generate::{RequestId, TransportError};
use omni_protocol::session::{StoreError, StoreErrorKind};

use crate::executor::Report;
use crate::reports::ReportSender;
use crate::Error;

/// Where a driver's work runs, and its clock.
pub trait Runtime: Clone + fmt::Debug + Send + Sync + 'static {
    /// A running task (the shell spawns a loop per call or agent, and a task per
    /// request; tool runs are polled by their loop). Dropping it stops the task at its
    /// next await (a request's connection is closed); [`Task::detach`] lets a task that
    /// has finished (or must finish on its own) go without stopping it.
    type Task: Task;

    /// Starts `future` as a task of its own. Fails only when the runtime cannot run
    /// anything here (omni-tokio outside a tokio runtime, a thread that cannot start).
    fn spawn<F>(&self, future: F) -> Result<Self::Task, Error>
    where
        F: Future<Output = ()> + Send + 'static;

    /// Resolves at `deadline` (at once when it passed).
    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()> + Send + 'static;

    /// Runs `work`, which may block (a session store's write and its sync), where it
    /// holds up none of the runtime's tasks (tokio's blocking pool, smol's `unblock`, a
    /// thread); resolves once it has run. [`off_executor`] gives its result.
    fn run_blocking(&self, work: BlockingWork) -> impl Future<Output = ()> + Send + 'static;

    /// The time the machines are given (the system's monotonic clock unless a runtime
    /// has its own).
    #[allow(clippy::disallowed_methods)] // the shell's one clock, overridable per runtime
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// A fresh random number for retry jitter (the core has no randomness), drawn per
    /// client, per call and per agent so that they do not retry in lockstep.
    #[allow(clippy::disallowed_methods)] // the clock as one more source of entropy
    fn random_seed() -> u64 {
        RandomState::new().hash_one(Instant::now())
    }
}

/// A task started by [`Runtime::spawn`]; dropping it stops the task.
pub trait Task: Send + 'static {
    /// Lets the task run to its end without this handle.
    fn detach(self);
}

/// How a driver sends one request.
pub trait Transport: Clone + Send + Sync + 'static {
    /// Sends `request` and reports its response through `sink`: the head, each body chunk
    /// as it arrives, then the end or a failure. The sink is bounded: while the loop has
    /// not taken the last report the next one waits, so the transport stops reading and
    /// TCP slows the server down. Dropping the future stops the request and closes its
    /// connection (the shell does so on a cancel, after running the sink's
    /// [`on_stop`](ResponseSink::on_stop) hooks, for a future that blocks inside a poll).
    fn send(&self, request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static;
}

/// A request's end of the loop's bounded report channel (see [`Transport::send`]).
#[derive(Debug)]
pub struct ResponseSink {
    id: RequestId,
    reports: ReportSender,
    buffers: BodyBuffers,
    /// The head, until the next report takes it along.
    head: Mutex<Option<Report>>,
    stop: Stop,
}

/// What unblocks a request's blocking code, run when the shell stops the request.
type StopHook = Box<dyn FnOnce() + Send>;

/// A request's stop signal, shared by its sink and the executor's hold on its task:
/// `None` once stopped (a hook given later runs at once).
#[derive(Clone)]
pub(crate) struct Stop(Arc<Mutex<Option<Vec<StopHook>>>>);

impl Stop {
    pub(crate) fn new() -> Self {
        Self(Arc::new(Mutex::new(Some(Vec::new()))))
    }

    /// Runs the hooks, on this thread, once.
    pub(crate) fn stop(&self) {
        let hooks = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        for hook in hooks.into_iter().flatten() {
            hook();
        }
    }
}

impl fmt::Debug for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stop")
    }
}

/// Buffers for pieces of body, recycled: the loop gives back each piece's buffer once it
/// has decoded it (up to [`SPARE_BUFFERS`](crate::machine::SPARE_BUFFERS) wait), and a
/// transport reads (or copies) the next piece into one of them. Memory already in use is
/// written again, where a fresh allocation of every piece would have the kernel fault in
/// and zero new pages, often on another thread than the one that frees them.
#[derive(Debug, Clone)]
pub struct BodyBuffers(Receiver<Vec<u8>>);

impl BodyBuffers {
    pub(crate) fn new(spares: Receiver<Vec<u8>>) -> Self {
        Self(spares)
    }

    /// An empty buffer with room for [`BODY_CHUNK`](crate::machine::BODY_CHUNK) bytes: a
    /// recycled one when there is one.
    pub fn take(&self) -> Vec<u8> {
        match self.0.try_recv() {
            Ok(mut buffer) => {
                buffer.clear();
                buffer
            }
            Err(_) => Vec::with_capacity(crate::machine::BODY_CHUNK),
        }
    }

    /// A buffer of exactly [`BODY_CHUNK`](crate::machine::BODY_CHUNK) bytes to read into,
    /// holding whatever it held before: only the part never written is zeroed, where
    /// zeroing a whole recycled buffer before every read cost a 64 KiB `memset` per read.
    pub fn take_for_read(&self) -> Vec<u8> {
        let mut buffer = self.0.try_recv().unwrap_or_default();
        buffer.resize(crate::machine::BODY_CHUNK, 0);
        buffer
    }
}

impl ResponseSink {
    pub(crate) fn new(id: RequestId, reports: ReportSender, buffers: BodyBuffers, stop: Stop) -> Self {
        Self { id, reports, buffers, head: Mutex::new(None), stop }
    }

    /// Runs `hook` when the shell stops this request (a cancel, or its loop ending), on
    /// the thread that stops it and before the request's future is dropped; at once when
    /// it already was; never once the shell has taken its end or failure. For a
    /// transport that blocks inside a poll (omni-blocking's): the hook unblocks it, e.g.
    /// by shutting its socket down, where dropping the future could not.
    pub fn on_stop(&self, hook: impl FnOnce() + Send + 'static) {
        let mut hooks = self.stop.0.lock().unwrap_or_else(PoisonError::into_inner);
        match hooks.as_mut() {
            Some(hooks) => hooks.push(Box::new(hook)),
            None => {
                drop(hooks);
                hook();
            }
        }
    }

    /// Where the next pieces of body should be read (or copied) into: see [`BodyBuffers`].
    pub fn buffers(&self) -> BodyBuffers {
        self.buffers.clone()
    }

    /// The status and headers arrived. False once nobody listens (the call ended, or the
    /// request was stopped): the transport then stops.
    ///
    /// The head is held until the next report (the first piece of body, the end or a
    /// failure) and goes with it: the reader of a call's events is woken once for both
    /// rather than once for a head that makes no event. Nothing the application sees
    /// comes sooner for it, and a server that stalls after its head is still caught by
    /// the stall limit, which runs from the request.
    pub async fn head(&self, status: u16, headers: Vec<(String, String)>) -> bool {
        let mut held = self.head.lock().unwrap_or_else(PoisonError::into_inner);
        *held = Some(Report::Head { id: self.id, status, headers });
        self.listened()
    }

    /// Body bytes arrived; false once nobody listens.
    pub async fn body(&self, bytes: impl Into<Bytes>) -> bool {
        self.listened()
            && self.send_head().await
            && self.reports.send(Report::Body { id: self.id, bytes: bytes.into() }).await
    }

    /// Whether the loop still listens to this request: neither ended nor stopped it (a
    /// transport that never waits, reading a server that never stops, learns it here).
    fn listened(&self) -> bool {
        !self.reports.is_closed() && self.stop.0.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// The body ended.
    pub async fn end(self) {
        // Fails only when the loop is gone, and then nobody needs to know.
        if self.send_head().await {
            let _ = self.reports.send(Report::End { id: self.id }).await;
        }
    }

    /// The request failed below HTTP.
    pub async fn fail(self, error: TransportError) {
        if self.send_head().await {
            let _ = self.reports.send(Report::Failed { id: self.id, error }).await;
        }
    }

    /// Sends the head held by [`ResponseSink::head`], if any; false once nobody listens.
    async fn send_head(&self) -> bool {
        let head = self.head.lock().unwrap_or_else(PoisonError::into_inner).take();
        match head {
            Some(head) => self.reports.send(head).await,
            None => true,
        }
    }
}

/// Blocking work for [`Runtime::run_blocking`].
pub type BlockingWork = Box<dyn FnOnce() + Send>;

/// A store's call run off the executor ([`off_executor`]), a panic in the store made the
/// call's error: the one way the shell calls a store.
pub(crate) fn store_call<R: Runtime, T: Send + 'static>(
    runtime: &R,
    call: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
    let done = off_executor(runtime, call);
    async move {
        done.await.unwrap_or_else(|panic| {
            Err(StoreError::new(StoreErrorKind::Io, "store", format!("the store panicked: {panic}")))
        })
    }
}

/// `work`'s result, or the message of its panic, run by `runtime` where it holds up none
/// of its tasks ([`Runtime::run_blocking`]).
pub fn off_executor<R: Runtime, T: Send + 'static>(
    runtime: &R,
    work: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Result<T, String>> + Send + 'static {
    let (done, result) = async_channel::bounded(1);
    let work: BlockingWork = Box::new(move || {
        let _ = done.try_send(catch_panic(work));
    });
    let runtime = runtime.clone();
    async move {
        runtime.run_blocking(work).await;
        // Empty when the runtime could not run it (its sender dropped unrun).
        result.try_recv().unwrap_or_else(|_| Err("the runtime could not run the blocking work".into()))
    }
}

/// [`Runtime::run_blocking`] for a runtime made of threads: `work` on a thread of its own.
pub fn run_on_a_thread(work: BlockingWork) -> impl Future<Output = ()> + Send + 'static {
    let (done, ran) = async_channel::bounded::<()>(1);
    // Closed when the thread ends, or at once when it cannot start.
    let _ = std::thread::Builder::new().name("omni-blocking-work".into()).spawn(move || {
        work();
        drop(done);
    });
    async move {
        let _ = ran.recv().await;
    }
}

/// `work`'s result, or the message of its panic.
fn catch_panic<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
        .map_err(|payload| omni_protocol::tool::panic_message(&*payload))
}
