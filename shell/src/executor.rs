//! Executing a machine's effects on a driver's [`Runtime`] and [`Transport`]. Shared by
//! the call loop and the agent loop.
//!
//! - A request is a task of its own, held by its handle so that a cancel effect (or
//!   dropping the executor when the loop ends) stops it: a transport may block inside a
//!   poll (omni-blocking's exchange), which must not hold up the loop; the request's
//!   [`ResponseSink::on_stop`] hooks run first, to unblock it.
//! - A tool run is not a task: the executor holds each run's future (boxed, by
//!   [`ToolRunId`]) and polls the runs itself, concurrently, inside
//!   [`Executor::next_report`] or [`Executor::poll_tools`]. So a run costs no task (on
//!   omni-blocking, no thread that only waits for the tool pool's answer), and a cancel
//!   effect, or dropping the executor, drops the run's future at once. The consequence
//!   for an [`AsyncTool`]: its future runs on the task that polls the runs (a call's
//!   watchdog, an agent's loop), concurrently with the other runs; CPU-heavy or
//!   blocking work belongs on the runtime's blocking pool (`tokio::task::spawn_blocking`,
//!   `blocking::unblock`), as omni-blocking's tools do with their pool of threads.
//!
//! Requests report on one bounded channel ([`INPUT_CAPACITY`]): a request whose report
//! does not fit waits, so it stops reading its response until the loop catches up.
//! Reports the executor makes itself (a finished run, a tool without a handler, work that
//! could not be started) wait in a small queue of their own, so the executor never waits
//! on the channel it is the reader of.

use std::collections::{BTreeMap, VecDeque};
use std::task::{Context, Poll};

use async_channel::Sender;
use bytes::Bytes;
use futures_lite::future;
use omni_protocol::generate::{Effect, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind};
use omni_protocol::tool::no_handler;

use crate::machine::{self, Machine, SPARE_BUFFERS};
use crate::reports::{ReportReceiver, ReportSender};
use crate::runtime::{BodyBuffers, ResponseSink, Runtime, Stop, Task, Transport};
use crate::telemetry::Observer;
use crate::tool_runs::ToolRuns;
use crate::{handlers_by_name, AsyncHandler, AsyncTool};

/// Tool handlers by name.
pub(crate) type Handlers = BTreeMap<String, AsyncHandler>;

/// What the work in flight reports to its loop: the owned form of the machines'
/// [`Report`](omni_protocol::generate::Report), so that it can cross a channel.
#[derive(Debug)]
pub(crate) enum Report {
    /// A response's status and headers.
    Head {
        /// Which request.
        id: RequestId,
        /// HTTP status.
        status: u16,
        /// Headers, names in any case.
        headers: Vec<(String, String)>,
    },
    /// Body bytes.
    Body {
        /// Which request.
        id: RequestId,
        /// The bytes, as read.
        bytes: Bytes,
    },
    /// The body ended.
    End {
        /// Which request.
        id: RequestId,
    },
    /// The request failed below HTTP.
    Failed {
        /// Which request.
        id: RequestId,
        /// What went wrong.
        error: TransportError,
    },
    /// A tool run finished.
    Tool {
        /// Which run.
        id: ToolRunId,
        /// Its outcome.
        outcome: ToolOutcome,
    },
}

/// Where the requests report, and the buffers their bodies are read into.
struct Channels {
    reports: ReportSender,
    /// Where decoded pieces' buffers go back to the transports, and where they take them.
    spares: Sender<Vec<u8>>,
    buffers: BodyBuffers,
    received: ReportReceiver,
}

impl Channels {
    fn new() -> Self {
        let (reports, received) = crate::reports::channel();
        let (spares, buffers) = async_channel::bounded(SPARE_BUFFERS);
        Self { reports, spares, buffers: BodyBuffers::new(buffers), received }
    }
}

/// The work in flight of one machine.
pub(crate) struct Executor<R: Runtime, T> {
    runtime: R,
    transport: T,
    handlers: Handlers,
    /// The requests' channels, made with the first request: a machine that never sends
    /// one (an idle session among thousands) costs none of their room.
    channels: Option<Channels>,
    /// Reports made here rather than by a request, taken before the channel's.
    ready: VecDeque<Report>,
    requests: BTreeMap<RequestId, Running<R::Task>>,
    runs: ToolRuns,
    /// The loop's spans and metrics, when anyone listens.
    observer: Option<Box<Observer>>,
}

/// A request's task and its stop signal: dropped, it runs the hooks, then stops the task.
/// (An MCP connection's HTTP exchanges are held the same way.)
pub(crate) struct Running<T: Task> {
    pub(crate) stop: Stop,
    /// `None` once detached.
    pub(crate) task: Option<T>,
}

impl<T: Task> Running<T> {
    /// Lets a request that sent its last report return: detached rather than stopped.
    pub(crate) fn finish(mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

impl<T: Task> Drop for Running<T> {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.stop.stop();
        }
    }
}

impl<R: Runtime, T: Transport> Executor<R, T> {
    /// An executor that runs the tools of `handlers`.
    pub(crate) fn new(runtime: R, transport: T, handlers: Handlers) -> Self {
        let (requests, runs, ready) = (BTreeMap::new(), ToolRuns::default(), VecDeque::new());
        Self { runtime, transport, handlers, channels: None, ready, requests, runs, observer: None }
    }

    /// The executor reports what the machine observes, and its tool runs, to `observer`.
    pub(crate) fn observed(mut self, observer: Option<Box<Observer>>) -> Self {
        self.observer = observer;
        self
    }

    pub(crate) fn runtime(&self) -> &R {
        &self.runtime
    }

    /// Runs later tool calls with these tools' handlers (an agent's `set_state`).
    /// New tools' handlers join (or replace, by name) those held: a handler the model is
    /// no longer offered is never called (the machine runs only the tools it offers), and
    /// one registered but not offered stays available to a later change.
    pub(crate) fn set_tools(&mut self, tools: &[AsyncTool]) {
        self.handlers.extend(handlers_by_name(tools));
    }

    /// The next turn's spans go under `parent` (the span current where its prompt was
    /// sent), when it is a span at all.
    pub(crate) fn trace_under(&mut self, parent: tracing::Span) {
        if let Some(observer) = &mut self.observer {
            observer.trace_under(parent);
        }
    }

    /// Starts or stops work as the effect says.
    pub(crate) fn execute(&mut self, effect: Effect) {
        match effect {
            Effect::SendRequest { id, request } => {
                let channels = self.channels.get_or_insert_with(Channels::new);
                let stop = Stop::new();
                let sink = ResponseSink::new(id, channels.reports.clone(), channels.buffers.clone(), stop.clone());
                let send = self.transport.send(request, sink);
                match self.runtime.spawn(send) {
                    Ok(task) => drop(self.requests.insert(id, Running { stop, task: Some(task) })),
                    Err(error) => {
                        let error = TransportError { kind: TransportErrorKind::Other, message: error.to_string() };
                        self.ready.push_back(Report::Failed { id, error });
                    }
                }
            }
            // Dropping a task stops it.
            Effect::CancelRequest { id } => drop(self.requests.remove(&id)),
            Effect::RunTool { id, call } => match self.handlers.get(&call.name).cloned() {
                Some(handler) => {
                    let span = self.observer.as_mut().map(|observer| observer.tool_started(id, &call));
                    self.runs.start(id, handler, call.input, span)
                }
                None => self.ready.push_back(Report::Tool { id, outcome: no_handler(&call.name) }),
            },
            // Dropping a run's future stops it.
            Effect::CancelTool { id } => {
                self.runs.cancel(id);
                if let Some(observer) = &mut self.observer {
                    observer.tool_finished(id, None);
                }
            }
            Effect::Observe(observation) => {
                if let Some(observer) = &mut self.observer {
                    observer.observe(observation, self.runtime.now());
                }
            }
        }
    }

    /// The next report; pending while none can come. Polls the tool runs (those woken):
    /// a run makes progress while the loop waits here, which it does whenever it has
    /// nothing else to do. Cancel-safe: dropped, it loses nothing.
    pub(crate) async fn next_report(&mut self) -> Report {
        future::poll_fn(|cx| {
            self.poll_tools(cx);
            self.poll_report(cx)
        })
        .await
    }

    /// Polls the tool runs woken since the last time; their outcomes wait in the
    /// executor's own queue, for [`Executor::poll_report`] or [`Executor::take_ready`].
    pub(crate) fn poll_tools(&mut self, cx: &mut Context<'_>) {
        let ready = &mut self.ready;
        self.runs.poll(cx, |id, outcome| ready.push_back(Report::Tool { id, outcome }));
    }

    /// The next report the executor made itself (a tool's outcome, work that could not
    /// start), without looking at the requests' channel.
    pub(crate) fn take_ready(&mut self) -> Option<Report> {
        self.ready.pop_front()
    }

    /// The next report: the executor's own first, then the requests' channel (woken
    /// through `cx` when one comes). Tool runs are not polled here.
    pub(crate) fn poll_report(&mut self, cx: &mut Context<'_>) -> Poll<Report> {
        if let Some(report) = self.ready.pop_front() {
            return Poll::Ready(report);
        }
        match &mut self.channels {
            Some(channels) => channels.received.poll_recv(cx),
            // No request was ever sent: none will report until one is.
            None => Poll::Pending,
        }
    }

    /// A report that has arrived on the requests' channel, without waiting.
    pub(crate) fn take_arrived(&mut self) -> Option<Report> {
        self.channels.as_mut()?.received.try_recv()
    }

    /// Whether a tool run is in flight.
    pub(crate) fn runs_tools(&self) -> bool {
        !self.runs.is_empty()
    }

    /// Stops every request and tool run now (their tasks and futures dropped here, the
    /// reports channel closed), as dropping the executor would.
    pub(crate) fn stop(&mut self) {
        self.requests.clear();
        self.runs = ToolRuns::default();
        if let Some(channels) = &mut self.channels {
            channels.received.close();
        }
    }

    /// Feeds a report to the machine, letting go of work that has ended.
    pub(crate) fn feed(&mut self, machine: &mut impl Machine, report: Report) {
        let now = self.runtime.now();
        let report = match report {
            Report::Head { id, status, headers } => machine::Report::ResponseHead { id, status, headers },
            Report::Body { id, bytes } => {
                machine.handle_report(machine::Report::Body { id, bytes: &bytes }, now);
                // Decoded: its buffer may take the next piece (when nothing else holds it).
                if let (Ok(buffer), Some(channels)) = (bytes.try_into_mut(), &self.channels) {
                    let _ = channels.spares.try_send(Vec::from(buffer));
                }
                return;
            }
            Report::End { id } => {
                self.finished(id);
                machine::Report::BodyEnd { id }
            }
            Report::Failed { id, error } => {
                self.finished(id);
                machine::Report::TransportFailed { id, error }
            }
            Report::Tool { id, outcome } => {
                if let Some(observer) = &mut self.observer {
                    observer.tool_finished(id, Some(&outcome));
                }
                machine::Report::ToolFinished { id, outcome }
            }
        };
        machine.handle_report(report, now)
    }

    /// A request that sent its last report is returning: detached rather than dropped.
    fn finished(&mut self, id: RequestId) {
        if let Some(running) = self.requests.remove(&id) {
            running.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    // A test of the loop on the shell's thread runtime: it waits on the clock itself.
    #![allow(clippy::disallowed_methods)]

    use std::future::Future;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use omni_protocol::generate::GenerateEvent;
    use omni_protocol::tool::ToolError;
    use omni_protocol::transport::ProxyRules;
    use omni_protocol::{dialect::HttpRequest, StreamEvent};
    use serde_json::json;

    use crate::runtime::{ResponseSink, Runtime, Transport};
    use crate::threads::{within, Threads};
    use crate::{AsyncTool, Client, Driver, Error};

    /// Quick tool calls before the slow one: their results wait for the application while
    /// the slow one runs on.
    const QUICK: usize = 16;

    fn sse(event: &str, data: serde_json::Value) -> String {
        format!("event: {event}\ndata: {data}\n\n")
    }

    /// Anthropic replies: first `QUICK` calls of the tool `quick` and one of `slow`, then "done".
    #[derive(Debug, Clone, Default)]
    struct ToolsThenDone(Arc<AtomicUsize>);

    impl Transport for ToolsThenDone {
        fn send(&self, _: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
            let first = self.0.fetch_add(1, Ordering::SeqCst) == 0;
            let start = json!({"type": "message_start", "message": {"id": "m", "type": "message",
                "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 1, "output_tokens": 1}}});
            let mut body = sse("message_start", start);
            let block = json!({"type": "text", "text": ""});
            body +=
                &sse("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": block}));
            let delta = json!({"type": "text_delta", "text": "done"});
            body += &sse("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": delta}));
            body += &sse("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
            let calls = if first { QUICK + 1 } else { 0 };
            for i in 1..=calls {
                let name = if i <= QUICK { "quick" } else { "slow" };
                let block = json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}});
                body += &sse(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": block}),
                );
                body += &sse("content_block_stop", json!({"type": "content_block_stop", "index": i}));
            }
            let stop = if first { "tool_use" } else { "end_turn" };
            let end = json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 2}});
            body += &sse("message_delta", end);
            body += &sse("message_stop", json!({"type": "message_stop"}));
            async move {
                let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
                if sink.head(200, headers).await && sink.body(body.into_bytes()).await {
                    sink.end().await;
                }
            }
        }
    }

    #[derive(Debug)]
    struct Replies;

    impl Driver for Replies {
        type Runtime = Threads;
        type Transport = ToolsThenDone;

        fn transport(_roots: &[Vec<u8>], _proxies: ProxyRules) -> Result<ToolsThenDone, Error> {
            Ok(ToolsThenDone::default())
        }
    }

    #[test]
    fn tool_runs_go_on_while_the_application_does_not_read() {
        let client = Client::<Replies>::builder().api_key("anthropic", "sk-test").no_proxy().build().expect("client");
        let quick = AsyncTool::new("quick", "", json!({"type": "object"}), |_| async { Ok::<_, ToolError>("q") });
        let finished = Arc::new(AtomicBool::new(false));
        let marker = finished.clone();
        let slow = AsyncTool::new("slow", "", json!({"type": "object"}), move |_| {
            let (marker, later) = (marker.clone(), Threads.sleep_until(Instant::now() + Duration::from_millis(100)));
            async move {
                later.await;
                marker.store(true, Ordering::SeqCst);
                Ok::<_, ToolError>("s")
            }
        });
        let mut stream =
            client.call("anthropic:claude-sonnet-4-5", "go").tools([quick, slow]).stream().expect("started");
        // Read the first step; then no more: the quick results fill the call's event queue
        // while the slow run still waits for its timer.
        loop {
            match within(stream.next()).expect("the first step") {
                GenerateEvent::Stream { step: 0, event: StreamEvent::Done { .. } } => break,
                _ => continue,
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !finished.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the slow run stopped while its call's events were unread");
            std::thread::sleep(Duration::from_millis(5));
        }
        let response = within(stream.response()).expect("the call ends once read");
        assert_eq!(response.text(), "done");
    }
}
