//! The MCP client: a sans-IO machine that speaks the Model Context Protocol to one server,
//! in both protocol eras, over stdio or streamable HTTP. Bytes and time in; messages to
//! send, events and deadlines out. The driver only moves bytes: it writes
//! [`McpEffect::WriteLine`] to a child's stdin and feeds its stdout as
//! [`McpInput::Stdout`], or sends [`McpEffect::HttpSend`] and feeds the response's head,
//! body and end.
//!
//! ```text
//!   new ──(era unknown)──► Probing ── DiscoverResult with our version ─────────────► Ready(Modern)
//!    │                     server/discover   (modern error without our version, but a
//!    │                        │               legacy version listed: ─┐)
//!    │                        │ any other error, an HTTP 4xx without a │
//!    │                        │ modern error body, or the probe timeout│
//!    │                        ▼                                        ▼
//!    ├──(era legacy)──────► Initializing ── InitializeResult ──► notifications/initialized ──► Ready(Legacy)
//!    │                     initialize           (legacy HTTP: a 404 on the session ─► Initializing again)
//!    └──(era modern)──────────────────────────────────────────────────────────────────► Ready(Modern)
//!
//!   any state ── stdout closed / handshake failed / no common version / close() ──► Closed
//! ```
//!
//! A remembered era whose first request is refused (a JSON-RPC error or an HTTP 4xx before
//! anything succeeded: `initialize` in the legacy era, the first listing in the modern one)
//! goes back to `Probing`, once.
//!
//! Tool calls and pings made before `Ready` wait in a queue (their deadlines run from when
//! they were made) and go out when the era is known: the era decides their shape. Once
//! ready, the client lists the tools (every page) and keeps the list current: legacy
//! servers send `notifications/tools/list_changed` unasked; modern ones only on a
//! `subscriptions/listen` stream, which the client opens when the server's
//! `capabilities.tools.listChanged` says it will use it.
//!
//! Every request has a deadline: the request timeout, which progress notifications on a
//! tool call push back, capped by a hard maximum from when it was made. A request that
//! runs out is cancelled as the transport requires (stdio: `notifications/cancelled`; HTTP:
//! the response stream closed, plus the notification for a legacy server, which does not
//! take a disconnect for a cancellation). Answers to cancelled or timed-out requests are
//! ignored quietly; answers to ids never used are counted and warned about.
//!
//! Everything a server controls is bounded ([`McpLimits`]): a line or event, the number of
//! tools, pages and pending requests, a schema's depth and size, and unsolicited messages
//! per second.
//!
//! # Driving it
//!
//! One loop, as for every machine: after each `handle_*` or command, execute every
//! [`poll_effect`](McpClient::poll_effect), deliver every
//! [`poll_event`](McpClient::poll_event), then wait for the next input or
//! [`poll_timeout`](McpClient::poll_timeout) and call
//! [`handle_timeout`](McpClient::handle_timeout) with a fresh `now`. What each transport's
//! driver does (omni-shell's `mcp` module does it once for every driver):
//!
//! - **stdio.** Spawn the server (command, arguments, environment, working directory from
//!   the application), then create the client (`McpTransport::Stdio`). A task reads the
//!   child's stdout in chunks and feeds each as [`McpInput::Stdout`] (any chunking: the
//!   machine splits lines and bounds them), and [`McpInput::StdoutClosed`] at end of file.
//!   [`McpEffect::WriteLine`] is written to stdin in order (one write per effect; a write
//!   that fails means the child is gone: close its stdout side too). stderr is the
//!   server's log, read into a bounded buffer the application can see, never an error.
//!   [`McpEffect::Shutdown`]: close stdin, wait a grace period, then terminate and kill,
//!   and reap the child so no zombie is left (also on drop).
//! - **Streamable HTTP.** [`McpEffect::HttpSend`] is a POST through the driver's existing
//!   HTTP transport (its proxy, TLS and secret-header rules apply; redirects are decided
//!   here, by omni's one rule: same origin, method kept, bounded); report its
//!   head as [`McpInput::HttpHead`] (status and headers), each body chunk as
//!   [`McpInput::HttpBody`] and the end as [`McpInput::HttpEnd`], or
//!   [`McpInput::HttpFailed`] if the transport fails. Exchanges run concurrently (a
//!   `subscriptions/listen` stream stays open for the connection's life). On
//!   [`McpEffect::HttpAbort`] drop the response (closing the stream is a modern server's
//!   cancellation); input for an aborted exchange is ignored, so a race is harmless.
//!   [`McpEffect::HttpForget`] (a legacy session's `DELETE` when the client closes) is
//!   sent with nobody waiting for its answer, for a bounded time. [`McpEffect::Shutdown`]
//!   aborts what is open.
//!
//! The application's operations are methods: [`call_tool`](McpClient::call_tool),
//! [`cancel`](McpClient::cancel), [`refresh_tools`](McpClient::refresh_tools),
//! [`ping`](McpClient::ping), [`close`](McpClient::close); each returns at once and its
//! outcome arrives as an event.
//!
//! This machine does not implement [`Machine`](crate::machines::Machine): that trait's
//! effects are the generate machine's ([`Effect`](crate::machines::common::Effect): HTTP
//! requests of a model call, tool runs) and its reports the same, while an MCP connection's
//! effects are lines for a child and POSTs of its own. It keeps the contract's shape
//! (`handle_input(input, now)`, `handle_timeout(now)`, `poll_effect`, `poll_event`,
//! `poll_timeout` with its [`Timer`]), as the session manager does.
//!
//! Its transcripts on a virtual clock are in `conformance/tests/mcp_machine.rs` (the core
//! reads no clock, even in tests). The current revision's messages are read from the specification repository, revision
//! `2026-07-28`; they are kept in `modern.rs`, the legacy ones in `legacy.rs`.

mod era;
mod http;
mod inbound;
mod io;
mod jsonrpc;
mod legacy;
mod lines;
mod listing;
mod modern;
mod tools;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

pub use io::{
    CallError, ClientInfo, ConnectionError, Era, ExchangeId, McpConfig, McpEffect, McpError, McpEvent, McpInput,
    McpLimits, McpTransport, McpWarning, OpId, ServerInfo, DEFAULT_MAX_REQUEST_TIME, DEFAULT_PROBE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use jsonrpc::RpcError;
pub use tools::{Content, McpTool, ResourceBody, ToolCallResult, ToolRejection};

use self::http::Exchange;
use self::lines::LineSplitter;
use self::modern::ResultKind;
use crate::machines::timer::Timer;
use crate::wire::http::Header;

/// Where the connection is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// `server/discover` is out; the era is unknown.
    Probing,
    /// `initialize` is out.
    Initializing,
    /// Connected, in this era, at this protocol version.
    Ready {
        era: Era,
        version: String,
    },
    Closed,
}

/// What a request is for.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Probe,
    Initialize,
    ListPage,
    Call,
    Ping,
    /// The modern list-change subscription: long-lived, no deadline.
    Listen,
}

/// A request the client made and waits on.
#[derive(Debug)]
struct Pending {
    kind: Kind,
    method: &'static str,
    params: Map<String, Value>,
    /// When made: the hard maximum runs from here.
    made: Instant,
    deadline: Option<Instant>,
    /// Sent (else queued until the connection is ready).
    sent: bool,
    exchange: Option<ExchangeId>,
}

/// A tool listing in progress: the pages so far.
#[derive(Debug, Default)]
struct Listing {
    tools: Vec<McpTool>,
    param_headers: BTreeMap<String, Vec<modern::ParamHeader>>,
    names: BTreeSet<String>,
    cursors: BTreeSet<String>,
    pages: usize,
    dropped: usize,
    truncated: bool,
    /// A change was announced meanwhile: list again when this one ends.
    again: bool,
}

/// Counts of what the client set aside, for diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McpStats {
    /// Answers to ids never used.
    pub unknown_responses: u64,
    /// Lines or events that were not messages.
    pub malformed: u64,
    /// Lines past the limit.
    pub too_long: u64,
    /// Unsolicited messages dropped past the per-second budget.
    pub dropped: u64,
}

/// How many recently cancelled or timed-out ids are remembered, so that their late
/// answers are dropped quietly rather than counted as unknown.
const FORGOTTEN_IDS: usize = 1024;

/// The MCP client machine for one server.
#[derive(Debug)]
pub struct McpClient {
    config: McpConfig,
    state: State,
    next_id: u64,
    pending: BTreeMap<u64, Pending>,
    deadlines: BTreeSet<(Instant, u64)>,
    /// Ids whose answers no longer matter, oldest first.
    forgotten: VecDeque<u64>,
    effects: VecDeque<McpEffect>,
    events: VecDeque<McpEvent>,
    lines: LineSplitter,
    exchanges: BTreeMap<ExchangeId, Exchange>,
    next_exchange: u64,
    /// The legacy HTTP session.
    session: Option<String>,
    tools: std::sync::Arc<[McpTool]>,
    /// The `x-mcp-header` annotations of the listed tools (streamable HTTP only).
    param_headers: BTreeMap<String, Vec<modern::ParamHeader>>,
    listing: Option<Listing>,
    /// The modern subscription's request id.
    listen: Option<u64>,
    window: Option<Instant>,
    window_used: usize,
    warned_flood: bool,
    stats: McpStats,
    /// The remembered era was checked again (a probe after it failed); once is enough.
    reprobed: bool,
    /// A request succeeded in the era we are in.
    confirmed: bool,
}

impl McpClient {
    /// A client that starts connecting at `now`: it probes the era, or starts with the
    /// remembered one.
    pub fn new(config: McpConfig, now: Instant) -> Self {
        let lines = LineSplitter::new(config.limits.max_message_bytes);
        let era = config.era;
        let mut client = Self {
            config,
            state: State::Probing,
            next_id: 1,
            pending: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            forgotten: VecDeque::new(),
            effects: VecDeque::new(),
            events: VecDeque::new(),
            lines,
            exchanges: BTreeMap::new(),
            next_exchange: 1,
            session: None,
            tools: std::sync::Arc::from([]),
            param_headers: BTreeMap::new(),
            listing: None,
            listen: None,
            window: None,
            window_used: 0,
            warned_flood: false,
            stats: McpStats::default(),
            reprobed: false,
            confirmed: false,
        };
        match era {
            None => {
                let timeout = client.config.probe_timeout;
                client.request(Kind::Probe, modern::DISCOVER, Map::new(), now, Some(timeout));
            }
            Some(Era::Legacy) => client.start_legacy(now),
            Some(Era::Modern) => {
                // Remembered: no probe. What the server is comes with the first answers.
                let info = ServerInfo {
                    era: Era::Modern,
                    protocol_version: modern::VERSION.into(),
                    implementation: None,
                    capabilities: json!({ "tools": {} }),
                    instructions: None,
                };
                client.become_ready(info, now);
            }
        }
        client
    }

    /// The era, once known.
    pub fn era(&self) -> Option<Era> {
        match &self.state {
            State::Ready { era, .. } => Some(*era),
            _ => None,
        }
    }

    /// The current tool list (empty until the first listing ends).
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// Whether a tool listing is in progress (the first one, a refresh, or one a list
    /// change started): a driver may hold a call's result until it ends, so that a tool
    /// that changed the list is answered with the new list in place.
    pub fn is_listing(&self) -> bool {
        self.listing.is_some()
    }

    /// What was set aside so far.
    pub fn stats(&self) -> McpStats {
        self.stats
    }

    /// True once the connection is over.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Calls tool `name` with `arguments` (a JSON object, or null for none).
    pub fn call_tool(&mut self, name: &str, arguments: Value, now: Instant) -> Result<OpId, McpError> {
        self.admit()?;
        let mut params = Map::new();
        params.insert("name".into(), name.into());
        match arguments {
            Value::Null => {}
            args @ Value::Object(_) => {
                params.insert("arguments".into(), args);
            }
            _ => return Err(McpError::ArgumentsNotObject),
        }
        let timeout = self.config.request_timeout;
        Ok(OpId(self.request(Kind::Call, "tools/call", params, now, Some(timeout))))
    }

    /// Pings the server (legacy era only: the modern revision removed `ping`).
    pub fn ping(&mut self, now: Instant) -> Result<OpId, McpError> {
        self.admit()?;
        if self.era() != Some(Era::Legacy) {
            return Err(McpError::PingUnsupported);
        }
        let timeout = self.config.request_timeout;
        Ok(OpId(self.request(Kind::Ping, legacy::PING, Map::new(), now, Some(timeout))))
    }

    /// Cancels a tool call or ping: it ends with [`CallError::Cancelled`] at once, and the
    /// server is told as its transport requires.
    pub fn cancel(&mut self, op: OpId, now: Instant) -> Result<(), McpError> {
        match self.pending.get(&op.0) {
            Some(p) if matches!(p.kind, Kind::Call | Kind::Ping) => {}
            _ => return Err(McpError::UnknownOp(op)),
        }
        self.abandon(op.0, "cancelled by the client", CallError::Cancelled, now);
        Ok(())
    }

    /// Lists the tools again (at once, or after the listing in progress).
    pub fn refresh_tools(&mut self, now: Instant) -> Result<(), McpError> {
        match &self.state {
            State::Closed => Err(McpError::Closed),
            State::Ready { .. } => {
                self.start_listing(now);
                Ok(())
            }
            // Connecting: the first listing follows anyway.
            State::Probing | State::Initializing => Ok(()),
        }
    }

    /// Ends the connection: every pending operation ends cancelled, open HTTP exchanges
    /// are aborted, and the driver shuts the server down ([`McpEffect::Shutdown`]).
    pub fn close(&mut self, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        self.shut(None, CallError::Cancelled, now);
    }

    /// Feeds what the transport reported. Never refused: input for an unknown exchange or
    /// after the end is ignored.
    pub fn handle_input(&mut self, input: McpInput<'_>, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        match input {
            McpInput::Stdout(bytes) => self.on_stdout(bytes, now),
            McpInput::StdoutClosed => self.on_stdout_closed(now),
            McpInput::HttpHead { exchange, status, headers } => self.on_head(exchange, status, headers, now),
            McpInput::HttpBody { exchange, bytes } => self.on_body(exchange, bytes, now),
            McpInput::HttpEnd { exchange } => self.on_end(exchange, now),
            McpInput::HttpFailed { exchange, reason } => self.on_failed(exchange, reason, now),
        }
    }

    /// Acts on the deadlines that have passed by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now || self.state == State::Closed {
                break;
            }
            self.deadlines.pop_first();
            let Some(p) = self.pending.get(&id) else { continue };
            let hard = p.made.checked_add(self.config.max_request_time).is_some_and(|hard| at >= hard);
            match p.kind {
                Kind::Probe => {
                    // Silence is a legacy server's answer too (`stdio.mdx`).
                    self.abandon_quietly(id);
                    self.start_legacy(now);
                }
                _ => self.abandon(id, "timeout", CallError::Timeout { hard }, now),
            }
        }
    }

    /// The next effect to execute.
    pub fn poll_effect(&mut self) -> Option<McpEffect> {
        self.effects.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<McpEvent> {
        self.events.pop_front()
    }

    /// The next deadline and why.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        self.deadlines.first().map(|&(at, _)| (at, Timer::McpRequest))
    }

    // ---- requests ----------------------------------------------------------------------

    fn admit(&self) -> Result<(), McpError> {
        if self.state == State::Closed {
            return Err(McpError::Closed);
        }
        let limit = self.config.limits.max_pending;
        if self.pending.len() >= limit {
            return Err(McpError::TooManyPending { limit });
        }
        Ok(())
    }

    /// Makes a request; sends it now if the connection allows, else queues it.
    fn request(
        &mut self,
        kind: Kind,
        method: &'static str,
        params: Map<String, Value>,
        now: Instant,
        timeout: Option<Duration>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let deadline = timeout.and_then(|t| deadline(now, now, t, self.config.max_request_time));
        if let Some(at) = deadline {
            self.deadlines.insert((at, id));
        }
        // Before the era is known only the request that finds it out may go.
        let sendable = matches!(
            (&self.state, &kind),
            (State::Ready { .. }, _) | (State::Probing, Kind::Probe) | (State::Initializing, Kind::Initialize)
        );
        self.pending.insert(id, Pending { kind, method, params, made: now, deadline, sent: false, exchange: None });
        if sendable {
            self.send(id);
        }
        id
    }

    /// Puts request `id` on the wire, shaped for the era.
    fn send(&mut self, id: u64) {
        let era = match &self.state {
            State::Ready { era, .. } => Some(*era),
            State::Probing => Some(Era::Modern),
            State::Initializing => Some(Era::Legacy),
            State::Closed => None,
        };
        let Some(era) = era else { return };
        let Some(p) = self.pending.get_mut(&id) else { return };
        p.sent = true;
        let mut params = p.params.clone();
        let (method, kind) = (p.method, p.kind.clone());
        let mut meta = match era {
            Era::Modern => modern::request_meta(&self.config.client.name, &self.config.client.version),
            Era::Legacy => Map::new(),
        };
        if kind == Kind::Call {
            // The request's own id is its progress token: unique among active requests.
            meta.insert("progressToken".into(), id.into());
        }
        if !meta.is_empty() {
            params.insert("_meta".into(), Value::Object(meta));
        }
        let name = params.get("name").and_then(Value::as_str).map(str::to_owned);
        let mirrored = match (&kind, era, &name) {
            (Kind::Call, Era::Modern, Some(name)) => self
                .param_headers
                .get(name)
                .map(|headers| modern::param_header_values(headers, params.get("arguments")))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let body = jsonrpc::request(id, method, Value::Object(params));
        let purpose = http::Purpose::Request(id);
        let exchange = self.send_bytes(body, era, method, name.as_deref(), mirrored, purpose);
        if let Some(p) = self.pending.get_mut(&id) {
            p.exchange = exchange;
        }
    }

    /// Sends a notification (never answered).
    fn notify(&mut self, method: &'static str, params: Value) {
        let era = self.era().unwrap_or(Era::Legacy);
        let body = jsonrpc::notification(method, params);
        self.send_bytes(body, era, method, None, Vec::new(), http::Purpose::Notification);
    }

    /// Writes a message on the transport: a line, or a POST (whose exchange is returned).
    fn send_bytes(
        &mut self,
        mut body: Vec<u8>,
        era: Era,
        method: &str,
        name: Option<&str>,
        mirrored: Vec<(String, String)>,
        purpose: http::Purpose,
    ) -> Option<ExchangeId> {
        match &self.config.transport {
            McpTransport::Stdio => {
                body.push(b'\n');
                self.effects.push_back(McpEffect::WriteLine(body));
                None
            }
            McpTransport::Http { url, headers } => {
                let version = match &self.state {
                    State::Ready { version, .. } => Some(version.as_str()),
                    State::Probing => Some(modern::VERSION),
                    State::Initializing | State::Closed => None,
                };
                let mut request = http::post(url, headers, body, era, version, method, name, self.session.as_deref());
                for (header, value) in mirrored {
                    request.set_header(Header::new(header, value));
                }
                Some(self.open_exchange(Exchange::new(purpose, request.clone()), request))
            }
        }
    }

    /// Forgets request `id` without a word to anyone (a probe that timed out or failed).
    fn abandon_quietly(&mut self, id: u64) {
        if let Some(p) = self.pending.remove(&id) {
            if let Some(at) = p.deadline {
                self.deadlines.remove(&(at, id));
            }
            if let Some(exchange) = p.exchange {
                self.abort_exchange(exchange);
            }
            self.forget(id);
        }
    }

    /// Gives up on request `id`: tells the server (if it was sent) and reports `error`.
    fn abandon(&mut self, id: u64, reason: &str, error: CallError, now: Instant) {
        let Some(p) = self.pending.get(&id) else { return };
        let (sent, exchange, kind) = (p.sent, p.exchange, p.kind.clone());
        self.abandon_quietly(id);
        if sent {
            let tell = match (&self.config.transport, self.era()) {
                (McpTransport::Stdio, _) => true,
                // A modern server takes the closed stream for the cancellation; a legacy
                // one does not ("Disconnection SHOULD NOT be interpreted as the client
                // cancelling its request", 2025-11-25 `transports.mdx`).
                (McpTransport::Http { .. }, era) => era == Some(Era::Legacy) && exchange.is_some(),
            };
            // `initialize` itself "MUST NOT be cancelled by clients" (2025-11-25
            // `cancellation.mdx`).
            if tell && kind != Kind::Initialize {
                self.notify("notifications/cancelled", json!({ "requestId": id, "reason": reason }));
            }
        }
        self.finish(id, kind, Err(error), now);
    }

    fn forget(&mut self, id: u64) {
        if self.forgotten.len() == FORGOTTEN_IDS {
            self.forgotten.pop_front();
        }
        self.forgotten.push_back(id);
    }

    /// Reports the end of request `id` (already removed from `pending`).
    fn finish(&mut self, id: u64, kind: Kind, outcome: Result<Map<String, Value>, CallError>, now: Instant) {
        match kind {
            Kind::Call => {
                let result = outcome.and_then(|r| match modern::result_kind(&r) {
                    ResultKind::Complete => Ok(tools::read_result(r)),
                    ResultKind::InputRequired => Err(CallError::InputRequired),
                    ResultKind::Unknown(t) => Err(CallError::UnknownResultType(t)),
                });
                self.events.push_back(McpEvent::CallDone { op: OpId(id), result });
            }
            Kind::Ping => self.events.push_back(McpEvent::Pong { op: OpId(id), result: outcome.map(drop) }),
            Kind::ListPage => self.on_page(outcome, now),
            Kind::Probe => self.on_probe(outcome, now),
            Kind::Initialize => self.on_initialized(outcome, now),
            Kind::Listen => {
                // The server ended the subscription (gracefully or not), or it failed.
                self.listen = None;
                if self.state != State::Closed {
                    self.events.push_back(McpEvent::Warning(McpWarning::SubscriptionEnded));
                }
            }
        }
    }
}

/// A request's next deadline: `timeout` from `now`, capped by `max` from when it was
/// `made`. A duration too large for the clock means no limit of that kind (a configured
/// `Duration::MAX` is "never", not a panic).
fn deadline(made: Instant, now: Instant, timeout: Duration, max: Duration) -> Option<Instant> {
    match (now.checked_add(timeout), made.checked_add(max)) {
        (Some(soft), Some(hard)) => Some(soft.min(hard)),
        (one, other) => one.or(other),
    }
}

/// The first bytes of a line that was not a message, for a warning.
fn excerpt(bytes: &[u8]) -> String {
    let cut = bytes.len().min(80);
    String::from_utf8_lossy(&bytes[..cut]).into_owned()
}
