//! The loop of one MCP connection, a task of its own: it runs the core's [`McpClient`]
//! as every loop runs its machine (effects out, events out, deadlines before input, one
//! input at a time), moving bytes between the machine and a child's pipes or the driver's
//! HTTP transport, and answering the handles' requests from the machine's events.
//!
//! It ends when the machine is closed (the application closed it, every handle is gone,
//! or the server went away): stdio children are shut down and reaped before it returns.

use std::collections::BTreeMap;
use std::time::Duration;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_protocol::generate::RequestId;
use omni_protocol::mcp::{CallError, ExchangeId, McpClient, McpEffect, McpEvent, McpInput, OpId, ToolCallResult};
use serde_json::Value;

use super::process::{self, Stdio, Stdout};
use super::shared::{Progress, Shared};
use super::McpFailure;
use crate::drive::{Next, Pacing};
use crate::executor::{Report, Running};
use crate::reports::{self, ReportReceiver, ReportSender};
use crate::runtime::{BodyBuffers, ResponseSink, Runtime, Stop, Task, Transport};

/// The most a request sent and forgotten (a legacy session's `DELETE`) may take.
const FORGET_WITHIN: Duration = Duration::from_secs(5);

/// Where a call's answer goes.
type CallReply = Sender<Result<ToolCallResult, McpFailure>>;

/// What a handle asks the loop.
pub(crate) enum Request {
    /// Call a tool; the answer goes to `reply`, progress to `progress` if given.
    Call { ticket: u64, name: String, arguments: Value, reply: CallReply, progress: Option<Sender<Progress>> },
    /// List the tools again; answered when the listing ends.
    Refresh(Sender<()>),
    /// Ping the server (legacy era).
    Ping(Sender<Result<(), McpFailure>>),
    /// Close the connection; answered once the server is shut down.
    Close(Sender<()>),
}

/// How the loop reaches the server.
pub(crate) enum Link<T> {
    Stdio(Stdio),
    Http(Http<T>),
}

/// The HTTP side: the driver's transport, and the exchanges in flight.
pub(crate) struct Http<T> {
    transport: T,
    reports: ReportSender,
    received: ReportReceiver,
    buffers: BodyBuffers,
    /// Kept so that the buffers' channel stays open (nothing gives buffers back: MCP
    /// bodies are small and few).
    _spares: Sender<Vec<u8>>,
}

impl<T> Http<T> {
    pub(crate) fn new(transport: T) -> Self {
        let (reports, received) = reports::channel();
        let (spares, buffers) = async_channel::bounded(1);
        Self { transport, reports, received, buffers: BodyBuffers::new(buffers), _spares: spares }
    }
}

/// What a call waits for.
struct Waiting {
    ticket: u64,
    reply: CallReply,
    progress: Option<Sender<Progress>>,
}

/// The loop's state besides the machine.
struct Loop<R: Runtime, T> {
    runtime: R,
    machine: McpClient,
    shared: std::sync::Arc<Shared>,
    link: Link<T>,
    exchanges: BTreeMap<ExchangeId, Running<R::Task>>,
    calls: BTreeMap<OpId, Waiting>,
    tickets: BTreeMap<u64, OpId>,
    pings: BTreeMap<OpId, Sender<Result<(), McpFailure>>>,
    refreshes: Vec<Sender<()>>,
    closers: Vec<Sender<()>>,
    /// Results held while a listing is in progress (see `deliver_events`).
    held: Vec<(CallReply, Result<ToolCallResult, McpFailure>)>,
    /// Answered with the first listing's end, or the connection's.
    ready: Option<Sender<Result<(), McpFailure>>>,
    grace: Duration,
}

/// What woke the loop.
enum Wake {
    Request(Option<Request>),
    Cancel(u64),
    Stdout(Stdout),
    Report(Report),
    Deadline,
}

/// Drives the connection to its end.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<R: Runtime, T: Transport>(
    runtime: R,
    machine: McpClient,
    shared: std::sync::Arc<Shared>,
    link: Link<T>,
    requests: Receiver<Request>,
    cancels: Receiver<u64>,
    ready: Sender<Result<(), McpFailure>>,
    grace: Duration,
) {
    let mut state = Loop {
        runtime: runtime.clone(),
        machine,
        shared,
        link,
        exchanges: BTreeMap::new(),
        calls: BTreeMap::new(),
        tickets: BTreeMap::new(),
        pings: BTreeMap::new(),
        refreshes: Vec::new(),
        closers: Vec::new(),
        held: Vec::new(),
        ready: Some(ready),
        grace,
    };
    // The same pacing as every loop's (`crate::drive`): deadlines before input, and a
    // yield to the runtime after a budget of wake-ups.
    let mut pacing = Pacing::new();
    let mut gone = false;
    loop {
        state.execute_effects();
        state.deliver_events();
        if state.machine.is_closed() {
            break;
        }
        let now = runtime.now();
        let deadline = match pacing.next(state.machine.poll_timeout().map(|(at, _)| at), now) {
            Next::Again => {
                state.machine.handle_timeout(now);
                continue;
            }
            Next::Yield => {
                future::yield_now().await;
                continue;
            }
            Next::Wait(deadline) => deadline,
        };
        let wake = state.wait(&requests, &cancels, gone, deadline).await;
        let now = runtime.now();
        match wake {
            Wake::Request(Some(request)) => state.apply(request, now),
            Wake::Request(None) => {
                // Every handle is gone, and every tool made from them: nobody can use
                // the connection any more.
                gone = true;
                state.machine.close(now);
            }
            Wake::Cancel(ticket) => {
                if let Some(op) = state.tickets.remove(&ticket) {
                    state.calls.remove(&op);
                    let _ = state.machine.cancel(op, now);
                }
            }
            Wake::Stdout(Stdout::Bytes(bytes)) => {
                state.machine.handle_input(McpInput::Stdout(&bytes), now);
                if let Link::Stdio(stdio) = &mut state.link {
                    stdio.recycle(bytes);
                }
            }
            Wake::Stdout(Stdout::Closed) => state.machine.handle_input(McpInput::StdoutClosed, now),
            Wake::Report(report) => state.feed(report),
            Wake::Deadline => state.machine.handle_timeout(now),
        }
    }
    // No request is taken any more, and those already queued are answered: a handle
    // never waits for a loop that is gone.
    requests.close();
    cancels.close();
    while let Ok(request) = requests.try_recv() {
        match request {
            Request::Call { reply, .. } => drop(reply.try_send(Err(McpFailure::Closed))),
            Request::Ping(reply) => drop(reply.try_send(Err(McpFailure::Closed))),
            Request::Refresh(reply) => drop(reply),
            Request::Close(reply) => state.closers.push(reply),
        }
    }
    state.finish().await;
}

impl<R: Runtime, T: Transport> Loop<R, T> {
    fn execute_effects(&mut self) {
        while let Some(effect) = self.machine.poll_effect() {
            match effect {
                McpEffect::WriteLine(line) => self.write_line(line),
                McpEffect::HttpSend { exchange, request } => self.send(exchange, request),
                McpEffect::HttpAbort { exchange } => drop(self.exchanges.remove(&exchange)),
                McpEffect::HttpForget { request } => self.forget(request),
                // The loop ends once the machine is closed, and shuts the child down then.
                McpEffect::Shutdown => {}
                // A later revision's effect this loop does not know: nothing to do.
                _ => {}
            }
        }
    }

    /// Queues a line for the child's stdin. A queue that is full (the server stopped
    /// reading) or closed (a write failed: the child is gone) ends the connection, as
    /// the end of its stdout would.
    fn write_line(&mut self, line: Vec<u8>) {
        let Link::Stdio(stdio) = &mut self.link else { return };
        if !stdio.send(line) {
            let now = self.runtime.now();
            self.machine.handle_input(McpInput::StdoutClosed, now);
        }
    }

    fn send(&mut self, exchange: ExchangeId, request: omni_protocol::dialect::HttpRequest) {
        let Link::Http(http) = &mut self.link else { return };
        let stop = Stop::new();
        let sink = ResponseSink::new(RequestId(exchange.0), http.reports.clone(), http.buffers.clone(), stop.clone());
        let send = http.transport.send(request, sink);
        match self.runtime.spawn(send) {
            Ok(task) => drop(self.exchanges.insert(exchange, Running { stop, task: Some(task) })),
            Err(error) => {
                let now = self.runtime.now();
                let reason = error.to_string();
                self.machine.handle_input(McpInput::HttpFailed { exchange, reason: &reason }, now);
            }
        }
    }

    /// Sends `request` on a task of its own that nobody waits for, given
    /// [`FORGET_WITHIN`] at most (a server that never answers holds nothing for long).
    fn forget(&mut self, request: omni_protocol::dialect::HttpRequest) {
        let Link::Http(http) = &mut self.link else { return };
        // A channel of its own: the head and end fit, and nobody reads them.
        let (reports, received) = reports::channel();
        let sink = ResponseSink::new(RequestId(0), reports, http.buffers.clone(), Stop::new());
        let send = http.transport.send(request, sink);
        let deadline = self.runtime.now() + FORGET_WITHIN;
        let sleep = self.runtime.sleep_until(deadline);
        let task = async move {
            let _received = received;
            future::or(send, sleep).await;
        };
        if let Ok(task) = self.runtime.spawn(task) {
            task.detach();
        }
    }

    /// Feeds an HTTP report to the machine.
    fn feed(&mut self, report: Report) {
        let now = self.runtime.now();
        match report {
            Report::Head { id, status, headers } => {
                let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                let exchange = ExchangeId(id.0);
                self.machine.handle_input(McpInput::HttpHead { exchange, status, headers: &headers }, now);
            }
            Report::Body { id, bytes } => {
                self.machine.handle_input(McpInput::HttpBody { exchange: ExchangeId(id.0), bytes: &bytes }, now)
            }
            Report::End { id } => {
                self.finished(ExchangeId(id.0));
                self.machine.handle_input(McpInput::HttpEnd { exchange: ExchangeId(id.0) }, now);
            }
            Report::Failed { id, error } => {
                self.finished(ExchangeId(id.0));
                let exchange = ExchangeId(id.0);
                self.machine.handle_input(McpInput::HttpFailed { exchange, reason: &error.message }, now);
            }
            Report::Tool { .. } => {}
        }
    }

    /// An exchange that sent its last report is returning: detached, not stopped.
    fn finished(&mut self, exchange: ExchangeId) {
        if let Some(running) = self.exchanges.remove(&exchange) {
            running.finish();
        }
    }

    fn apply(&mut self, request: Request, now: std::time::Instant) {
        match request {
            Request::Call { ticket, name, arguments, reply, progress } => {
                match self.machine.call_tool(&name, arguments, now) {
                    Ok(op) => {
                        self.tickets.insert(ticket, op);
                        self.calls.insert(op, Waiting { ticket, reply, progress });
                    }
                    Err(refused) => drop(reply.try_send(Err(McpFailure::Refused(refused)))),
                }
            }
            Request::Refresh(reply) => match self.machine.refresh_tools(now) {
                Ok(()) => self.refreshes.push(reply),
                Err(_) => drop(reply),
            },
            Request::Ping(reply) => match self.machine.ping(now) {
                Ok(op) => drop(self.pings.insert(op, reply)),
                Err(refused) => drop(reply.try_send(Err(McpFailure::Refused(refused)))),
            },
            Request::Close(reply) => {
                self.closers.push(reply);
                self.machine.close(now);
            }
        }
    }

    /// Hands the machine's events to the handles that wait for them.
    fn deliver_events(&mut self) {
        // A listing ended in this pass: held results go, even if another listing began
        // (a server announcing changes without end cannot hold a result for long).
        let mut listed = false;
        while let Some(event) = self.machine.poll_event() {
            match event {
                McpEvent::Connected(info) => self.shared.connected(info),
                McpEvent::Tools { tools, dropped } => {
                    listed = true;
                    self.shared.set_tools(tools, dropped);
                    self.refreshes.clear();
                    if let Some(ready) = self.ready.take() {
                        let _ = ready.try_send(Ok(()));
                    }
                }
                McpEvent::Progress { op, progress, total, message } => {
                    if let Some(sink) = self.calls.get(&op).and_then(|w| w.progress.as_ref()) {
                        // Bounded: progress nobody reads in time is dropped, never queued
                        // without end.
                        let _ = sink.try_send(Progress { progress, total, message });
                    }
                }
                McpEvent::CallDone { op, result } => {
                    if let Some(waiting) = self.calls.remove(&op) {
                        self.tickets.remove(&waiting.ticket);
                        // A tool that changed the list (the server said so before its
                        // answer) is answered once the new list is in: an agent then
                        // offers it from its very next step.
                        self.held.push((waiting.reply, result.map_err(McpFailure::Call)));
                    }
                }
                McpEvent::Pong { op, result } => {
                    if let Some(reply) = self.pings.remove(&op) {
                        let _ = reply.try_send(result.map_err(McpFailure::Call));
                    }
                }
                McpEvent::Log { level, data } => self.shared.server_message(level, data),
                McpEvent::Warning(warning) => {
                    if matches!(warning, omni_protocol::mcp::McpWarning::ToolsRefreshFailed(_)) {
                        listed = true;
                        self.refreshes.clear();
                        // The first listing failed: connected, with no tools (the warning
                        // says why).
                        if let Some(ready) = self.ready.take() {
                            let _ = ready.try_send(Ok(()));
                        }
                    }
                    self.shared.warn(warning);
                }
                McpEvent::Closed(reason) => {
                    listed = true;
                    if let Some(ready) = self.ready.take() {
                        let failure = reason.clone().map_or(McpFailure::Closed, McpFailure::Connection);
                        let _ = ready.try_send(Err(failure));
                    }
                    self.shared.closed(reason);
                }
                _ => {}
            }
        }
        if listed || !self.machine.is_listing() {
            for (reply, result) in self.held.drain(..) {
                let _ = reply.try_send(result);
            }
        }
    }

    /// Waits for the next thing to do: a handle's request first, then input, then the
    /// deadline.
    async fn wait(
        &mut self,
        requests: &Receiver<Request>,
        cancels: &Receiver<u64>,
        gone: bool,
        deadline: Option<std::time::Instant>,
    ) -> Wake {
        let runtime = self.runtime.clone();
        let request = async {
            if gone {
                future::pending().await
            } else {
                Wake::Request(requests.recv().await.ok())
            }
        };
        let cancel = async {
            match cancels.recv().await {
                Ok(ticket) => Wake::Cancel(ticket),
                // The handles hold a sender as long as requests can come.
                Err(_) => future::pending().await,
            }
        };
        let input = async {
            match &mut self.link {
                Link::Stdio(stdio) => Wake::Stdout(stdio.next().await),
                Link::Http(http) => Wake::Report(future::poll_fn(|cx| http.received.poll_recv(cx)).await),
            }
        };
        let timer = async {
            crate::drive::sleep_until(&runtime, deadline).await;
            Wake::Deadline
        };
        future::or(future::or(request, cancel), future::or(input, timer)).await
    }

    /// The connection is over: every waiter answered, HTTP exchanges stopped, a child
    /// shut down and reaped.
    async fn finish(mut self) {
        self.exchanges.clear();
        if let Link::Http(http) = &mut self.link {
            http.received.close();
        }
        for (_, waiting) in std::mem::take(&mut self.calls) {
            let _ = waiting.reply.try_send(Err(McpFailure::Call(CallError::Closed)));
        }
        for (_, reply) in std::mem::take(&mut self.pings) {
            let _ = reply.try_send(Err(McpFailure::Call(CallError::Closed)));
        }
        if let Some(ready) = self.ready.take() {
            let _ = ready.try_send(Err(McpFailure::Closed));
        }
        if let Link::Stdio(stdio) = &mut self.link {
            // Closing stdin is the first step of the shutdown.
            stdio.close_stdin();
            if let Some(control) = stdio.control.take() {
                process::shut_down(self.runtime.clone(), control, self.grace).await;
            }
        }
        self.shared.finished();
        for closer in self.closers.drain(..) {
            let _ = closer.try_send(());
        }
    }
}
