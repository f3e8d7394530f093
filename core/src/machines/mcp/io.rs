//! The MCP client's vocabulary: configuration, what a driver feeds in, what it must do,
//! what the application observes, and the errors of each.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::jsonrpc::RpcError;
use super::tools::{McpTool, ToolCallResult, ToolRejection};
use crate::data::depth::MAX_DEPTH;
use crate::wire::framing::DEFAULT_MAX_EVENT_BYTES;
use crate::wire::http::{Header, HttpRequest};

/// The default time a request may go without an answer (or, for a tool call, without
/// progress): 60 s, as omni's tools get.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The default hard maximum of one request, progress or not: 10 minutes (the spec asks for
/// one "regardless of progress notifications", `basic/patterns/cancellation.mdx`).
pub const DEFAULT_MAX_REQUEST_TIME: Duration = Duration::from_secs(10 * 60);

/// The default time the era probe waits before taking silence for a legacy server: 10 s.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How the client reaches the server; the driver moves the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process: messages are lines on its stdin and stdout.
    Stdio,
    /// Streamable HTTP: every message a POST to `url`.
    Http {
        /// The MCP endpoint.
        url: String,
        /// Headers the application adds to every request (a bearer token ...); secret
        /// ones stay secret as everywhere in omni.
        headers: Vec<Header>,
    },
}

/// The two protocol eras (`basic/versioning.mdx`, "Terminology").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Era {
    /// 2026-07-28 and later: no handshake, metadata on every request.
    Modern,
    /// 2025-11-25 and earlier: the `initialize` handshake.
    Legacy,
}

/// The client's own name and version, sent to servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's name.
    pub name: String,
    /// The client's version.
    pub version: String,
}

impl Default for ClientInfo {
    fn default() -> Self {
        Self { name: "omni".into(), version: env!("CARGO_PKG_VERSION").into() }
    }
}

/// Bounds on everything a server controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// The largest message: a stdio line, an SSE event, a JSON body (16 MiB, the core's
    /// event limit).
    pub max_message_bytes: usize,
    /// The most tools kept from one listing (10,000); the rest are dropped with a warning.
    pub max_tools: usize,
    /// The most pages one listing follows (1,000): a server whose cursors never end
    /// cannot keep the client listing.
    pub max_pages: usize,
    /// How deep a tool's schema may nest ([`MAX_DEPTH`], as omni's own schemas).
    pub max_schema_depth: usize,
    /// How large a tool's schema may be, as JSON (256 KiB).
    pub max_schema_bytes: usize,
    /// The most requests waiting for an answer, queued ones included (256).
    pub max_pending: usize,
    /// Unsolicited messages (notifications, answers to unknown ids, lines that are not
    /// messages) handled per second of the driver's clock (1,000); the rest are counted
    /// and dropped.
    pub max_unsolicited_per_second: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_tools: 10_000,
            max_pages: 1_000,
            max_schema_depth: MAX_DEPTH,
            max_schema_bytes: 256 * 1024,
            max_pending: 256,
            max_unsolicited_per_second: 1_000,
        }
    }
}

/// How a client talks to one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// stdio or HTTP.
    pub transport: McpTransport,
    /// Who the client says it is.
    pub client: ClientInfo,
    /// The era remembered from an earlier connection to the same server (the spec allows
    /// persisting it, re-probing when it fails); `None` probes.
    pub era: Option<Era>,
    /// A request's time without an answer; progress on a tool call resets it.
    pub request_timeout: Duration,
    /// A request's hard maximum, progress or not.
    pub max_request_time: Duration,
    /// How long the era probe waits before falling back to the legacy handshake.
    pub probe_timeout: Duration,
    /// Keep the tool list current: follow list changes (legacy notifications; in the
    /// modern era, a `subscriptions/listen` stream when the server offers `listChanged`).
    pub watch_tools: bool,
    /// The bounds.
    pub limits: McpLimits,
}

impl McpConfig {
    /// A configuration with the defaults for `transport`.
    pub fn new(transport: McpTransport) -> Self {
        Self {
            transport,
            client: ClientInfo::default(),
            era: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_request_time: DEFAULT_MAX_REQUEST_TIME,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            watch_tools: true,
            limits: McpLimits::default(),
        }
    }
}

/// The id of an operation the application started (a tool call, a ping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// The id of one HTTP exchange (a POST and its response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId(pub u64);

/// What the driver feeds in: bytes and ends, never interpreted by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpInput<'a> {
    /// Bytes the child wrote to its stdout, in any chunking.
    Stdout(&'a [u8]),
    /// The child's stdout ended (it exited or closed it).
    StdoutClosed,
    /// An exchange's response head.
    HttpHead {
        /// Which exchange.
        exchange: ExchangeId,
        /// The status code.
        status: u16,
        /// The headers, names in any case.
        headers: &'a [(&'a str, &'a str)],
    },
    /// A piece of an exchange's response body.
    HttpBody {
        /// Which exchange.
        exchange: ExchangeId,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// An exchange's body ended.
    HttpEnd {
        /// Which exchange.
        exchange: ExchangeId,
    },
    /// An exchange failed in the transport (connection refused, reset, TLS ...).
    HttpFailed {
        /// Which exchange.
        exchange: ExchangeId,
        /// What the transport said.
        reason: &'a str,
    },
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpEffect {
    /// Write these bytes (one message and its `\n`) to the child's stdin.
    WriteLine(Vec<u8>),
    /// Send this POST; report its head, body and end with `exchange`.
    HttpSend {
        /// The exchange's id.
        exchange: ExchangeId,
        /// The request.
        request: HttpRequest,
    },
    /// Stop reading this exchange and close its connection (over HTTP, closing a
    /// response stream is how a request is cancelled).
    HttpAbort {
        /// Which exchange.
        exchange: ExchangeId,
    },
    /// Send this request and expect nothing back: the legacy HTTP session's `DELETE`
    /// when the client closes ("Clients that no longer need a particular session SHOULD
    /// send an HTTP DELETE", `basic/transports.mdx`). It may outlive the client; the
    /// driver bounds how long it waits.
    HttpForget {
        /// The request.
        request: HttpRequest,
    },
    /// The client is done with the server: a stdio child's stdin is closed, then the
    /// child waited for, terminated, killed.
    Shutdown,
}

/// Who the server is, once connected.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// The era it speaks.
    pub era: Era,
    /// The protocol version in use.
    pub protocol_version: String,
    /// Its self-reported identity (`name`, `version` ...), for display only.
    pub implementation: Option<Value>,
    /// Its capabilities.
    pub capabilities: Value,
    /// Its guidance for models, if any.
    pub instructions: Option<String>,
}

/// What the application observes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum McpEvent {
    /// The era is known and the server ready.
    Connected(ServerInfo),
    /// A complete tool list (after every page), replacing the previous one.
    Tools {
        /// The tools kept (shared with the client's own list: no copy).
        tools: std::sync::Arc<[McpTool]>,
        /// How many were dropped (bad schema, duplicate, past the limit); each told in a
        /// warning, the ones past the limit in one.
        dropped: usize,
    },
    /// Progress of a tool call.
    Progress {
        /// Which call.
        op: OpId,
        /// The progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// A human-readable message.
        message: Option<String>,
    },
    /// A tool call ended.
    CallDone {
        /// Which call.
        op: OpId,
        /// The tool's result (its own failure is `is_error` in it), or why there is none.
        result: Result<ToolCallResult, CallError>,
    },
    /// A ping was answered (legacy era).
    Pong {
        /// Which ping.
        op: OpId,
        /// Whether it was.
        result: Result<(), CallError>,
    },
    /// A log message from the server (`notifications/message`).
    Log {
        /// Its level (`info`, `error` ...).
        level: String,
        /// Its data.
        data: Value,
    },
    /// Something was wrong with what the server sent; the client went on.
    Warning(McpWarning),
    /// The connection is over: `None` after [`close`](super::McpClient::close), else why.
    Closed(Option<ConnectionError>),
}

/// Why an operation has no result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallError {
    /// No answer within the timeout (`hard`: the hard maximum, progress or not).
    Timeout {
        /// The hard maximum ran out, rather than the timeout since the last progress.
        hard: bool,
    },
    /// The application cancelled it.
    Cancelled,
    /// The server answered with a JSON-RPC error (an unknown tool, bad arguments ...).
    Rpc(RpcError),
    /// The connection ended before the answer.
    Closed,
    /// The HTTP exchange ended or failed without an answer.
    NoAnswer(String),
    /// An HTTP error status without a JSON-RPC error in its body.
    Http {
        /// The status.
        status: u16,
        /// The start of its body.
        body: String,
    },
    /// The answer was larger than the limit.
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The server needs input the client did not offer (`resultType: "input_required"`).
    InputRequired,
    /// A `resultType` this client does not know (the spec: invalid).
    UnknownResultType(String),
    /// The legacy HTTP session expired (404); the client initializes again.
    SessionExpired,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout { hard: true } => f.write_str("no answer within the request's hard maximum"),
            Self::Timeout { hard: false } => f.write_str("no answer within the request timeout"),
            Self::Cancelled => f.write_str("cancelled"),
            Self::Rpc(e) => write!(f, "server error {}: {}", e.code, e.message),
            Self::Closed => f.write_str("the connection closed before the answer"),
            Self::NoAnswer(why) => write!(f, "no answer: {why}"),
            Self::Http { status, body } => write!(f, "HTTP {status}: {body}"),
            Self::TooLarge { limit } => write!(f, "the answer is larger than {limit} bytes"),
            Self::InputRequired => f.write_str("the server needs input the client does not offer"),
            Self::UnknownResultType(t) => write!(f, "unknown resultType {t:?}"),
            Self::SessionExpired => f.write_str("the server ended the session"),
        }
    }
}

/// Why the connection failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConnectionError {
    /// A modern server refused the probe for a modern reason (a header, a capability).
    Refused(RpcError),
    /// The server speaks none of this client's versions (it listed these).
    NoCommonVersion {
        /// The versions it supports.
        supported: Vec<String>,
    },
    /// The legacy handshake failed.
    Handshake(CallError),
    /// The server's stdout ended.
    ServerClosed,
}

/// A command the client refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpError {
    /// The connection is closed.
    Closed,
    /// Too many requests wait for answers.
    TooManyPending {
        /// The limit.
        limit: usize,
    },
    /// Tool arguments must be a JSON object.
    ArgumentsNotObject,
    /// No such operation is running.
    UnknownOp(OpId),
    /// `ping` exists only in the legacy era (and the era is known only once connected).
    PingUnsupported,
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("the MCP connection is closed"),
            Self::TooManyPending { limit } => write!(f, "{limit} MCP requests already wait for answers"),
            Self::ArgumentsNotObject => f.write_str("tool arguments must be a JSON object"),
            Self::UnknownOp(op) => write!(f, "no MCP operation {}", op.0),
            Self::PingUnsupported => f.write_str("ping needs a connected legacy-era server"),
        }
    }
}

impl std::error::Error for McpError {}

/// Something a server sent that the client set aside.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum McpWarning {
    /// A line or event that is not JSON (its start, lossily decoded).
    NotJson {
        /// Its first bytes.
        excerpt: String,
    },
    /// JSON that is not a JSON-RPC message.
    NotJsonRpc {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A line longer than the limit, skipped.
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The server's stdout ended inside a line that was not a message.
    CutLine,
    /// An answer to an id the client never used (or no longer waits for).
    UnknownResponse,
    /// Unsolicited messages past the per-second budget were dropped (this many so far).
    Flood {
        /// Dropped since the connection began.
        dropped: u64,
    },
    /// A listed tool was dropped.
    ToolDropped {
        /// Its name, when it had one.
        name: Option<String>,
        /// Why.
        reason: ToolRejection,
    },
    /// The listing stopped at the limit of tools or pages.
    ToolsTruncated {
        /// The tools kept.
        kept: usize,
    },
    /// A tool listing failed; the previous list stands.
    ToolsRefreshFailed(CallError),
    /// The server sent a request the client does not serve (it was answered with an error,
    /// or, in the modern era, where servers must not send requests, ignored).
    ServerRequestRefused {
        /// Its method.
        method: String,
    },
    /// The list-change subscription ended; tool changes are no longer followed.
    SubscriptionEnded,
}
