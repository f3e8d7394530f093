//! MCP servers' tools in omni: a connection to one server ([`McpServer`]), made by
//! [`Client::mcp_stdio`] or [`Client::mcp_http`] and [`McpServerBuilder::connect`], its
//! tools as omni tools ([`McpServer::tools`]) for a call, an agent or a session.
//!
//! The protocol is the core's machine ([`omni_protocol::mcp::McpClient`]: both eras,
//! deadlines, bounds); here is its loop (`drive.rs`, a task per connection), the child
//! process's pipes and shutdown (`process.rs`, over what the driver starts:
//! [`Driver::spawn_process`]), and HTTP through the driver's own transport (its proxy,
//! TLS and secret-header rules; redirects by omni's one rule, same origin only). OAuth is not supported: an
//! HTTP server that needs a token gets one the application obtained
//! ([`McpServerBuilder::bearer_token`], [`McpServerBuilder::header`]).
//!
//! ```text
//!   handles (McpServer, its Tools) ──requests──► loop: McpClient ──lines──► child stdin
//!        ▲                                        │  ▲  ◄──chunks── child stdout
//!        └───── answers, shared tools/info ◄──────┘  └── POSTs ──► driver transport
//! ```

mod drive;
pub(crate) mod process;
mod shared;
mod sources;
mod tools;

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_channel::Sender;
use omni_protocol::dialect::Header;
use omni_protocol::mcp::{McpClient, McpConfig, McpTransport};
use serde_json::Value;

pub use omni_protocol::mcp::{
    CallError, ClientInfo, ConnectionError, Content, Era, McpError, McpLimits, McpTool, McpWarning, ResourceBody,
    RpcError, ServerInfo, ToolCallResult, ToolRejection, DEFAULT_MAX_REQUEST_TIME, DEFAULT_PROBE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use process::{take_pipes, ChildProcess, ProcessControl, ServerLog, SHUTDOWN_GRACE, STDERR_LOG_BYTES};
pub use shared::{Progress, ServerMessage, RECENT};
pub use tools::{SkippedTool, MAX_TOOL_NAME};

use self::drive::{Link, Request};
use self::process::StdioCommand;
use self::shared::Shared;
pub(crate) use self::sources::ToolSources;
use crate::client::{Client, Driver};
use crate::{AsyncTool, Error};

/// Why an MCP server could not be reached, or an operation on it has no result.
#[derive(Debug)]
#[non_exhaustive]
pub enum McpFailure {
    /// The server's process could not be started (no such program, no permission).
    Spawn {
        /// The program.
        program: String,
        /// What the system said.
        error: std::io::Error,
    },
    /// The connection failed (the handshake, no common version, the server closed it).
    Connection(ConnectionError),
    /// The operation has no result (a timeout, a JSON-RPC error, the connection ended).
    Call(CallError),
    /// The connection refused the operation (closed, too many pending requests).
    Refused(McpError),
    /// The connection is closed.
    Closed,
}

impl fmt::Display for McpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn { program, error } => write!(f, "could not start the MCP server {program:?}: {error}"),
            Self::Connection(ConnectionError::Refused(e)) => write!(f, "the MCP server refused: {}", e.message),
            Self::Connection(ConnectionError::NoCommonVersion { supported }) => {
                write!(f, "the MCP server speaks none of our protocol versions (it speaks {supported:?})")
            }
            Self::Connection(ConnectionError::Handshake(e)) => write!(f, "the MCP handshake failed: {e}"),
            Self::Connection(ConnectionError::ServerClosed) => f.write_str("the MCP server closed the connection"),
            Self::Connection(other) => write!(f, "the MCP connection failed: {other:?}"),
            Self::Call(e) => write!(f, "{e}"),
            Self::Refused(e) => write!(f, "{e}"),
            Self::Closed => f.write_str("the MCP connection is closed"),
        }
    }
}

impl std::error::Error for McpFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn { error, .. } => Some(error),
            Self::Refused(e) => Some(e),
            _ => None,
        }
    }
}

/// A connection to one MCP server. Cheap to clone; clones (and the tools made from it)
/// share the connection, which ends when [`close`](Self::close) is called or the last
/// of them is dropped (a stdio server is then shut down and reaped).
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Handle>,
}

struct Handle {
    name: String,
    prefix: Option<String>,
    requests: Sender<Request>,
    cancels: Sender<u64>,
    shared: Arc<Shared>,
    next_ticket: AtomicU64,
    max_request_time: Duration,
    /// The stdio server's process id.
    process_id: Option<u32>,
    /// The last listing, prepared for the model.
    prepared: std::sync::Mutex<Arc<tools::PreparedList>>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer").field("name", &self.inner.name).finish_non_exhaustive()
    }
}

impl McpServer {
    /// The name the application gave the server.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Who the server is: its era, protocol version, identity, capabilities and
    /// instructions.
    pub fn info(&self) -> Option<ServerInfo> {
        self.inner.shared.info()
    }

    /// The server's tools as it lists them (after every page; kept current when the
    /// server announces changes). Shared, not copied.
    pub fn list_tools(&self) -> Arc<[McpTool]> {
        self.inner.shared.tools().0
    }

    /// The server's tools as omni tools, for a call, an agent or a session: named for the
    /// model (prefixed by the server's name when the builder asked), their input checked
    /// against their schema before the call, their results mapped to omni's tool output.
    /// Tools that cannot be offered (a schema the validator refuses, a name that
    /// collides) are left out: [`skipped_tools`](Self::skipped_tools) says which.
    pub fn tools(&self) -> Vec<AsyncTool> {
        self.prepared().tools(self)
    }

    /// The server's tools that [`tools`](Self::tools) leaves out (each also told once in
    /// [`warnings`](Self::warnings)), and why.
    pub fn skipped_tools(&self) -> Vec<SkippedTool> {
        self.prepared().skipped.clone()
    }

    /// The current listing, prepared once per version.
    fn prepared(&self) -> Arc<tools::PreparedList> {
        let mut prepared = self.inner.prepared.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (list, version) = self.inner.shared.tools();
        if prepared.version != version {
            let fresh = tools::PreparedList::new(version, self.inner.prefix.as_deref(), &list);
            for skipped in &fresh.skipped {
                let name = Some(skipped.name.clone());
                self.inner.shared.warn(McpWarning::ToolDropped { name, reason: skipped.kind.clone() });
            }
            *prepared = Arc::new(fresh);
        }
        prepared.clone()
    }

    /// How many listed tools the connection dropped (a bad schema, a duplicate name,
    /// past the limit); each is in [`warnings`](Self::warnings).
    pub fn dropped_tools(&self) -> usize {
        self.inner.shared.dropped_tools()
    }

    /// Counts the tool lists received: it changes when the tools do.
    pub fn tools_version(&self) -> u64 {
        self.inner.shared.tools().1
    }

    /// Resolves once the tools have changed since `version` (or the connection is over).
    pub async fn tools_changed(&self, version: u64) {
        self.inner.shared.until(|shared| shared.tools().1 != version || shared.closed_reason().is_some()).await;
    }

    /// Calls the tool `name` (its name on the server) with `arguments` (a JSON object,
    /// or null). The tool's own failure is `is_error` in the result; an `Err` is a call
    /// that has no result. Dropping the future cancels the call on the server.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolCallResult, McpFailure> {
        self.call(name, arguments, None).await
    }

    /// [`call_tool`](Self::call_tool), with the server's progress reports sent to
    /// `progress` (bounded by the application: reports that do not fit are dropped).
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: Value,
        progress: Sender<Progress>,
    ) -> Result<ToolCallResult, McpFailure> {
        self.call(name, arguments, Some(progress)).await
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<Sender<Progress>>,
    ) -> Result<ToolCallResult, McpFailure> {
        let ticket = self.inner.next_ticket.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = async_channel::bounded(1);
        let request = Request::Call { ticket, name: name.to_string(), arguments, reply, progress };
        self.inner.requests.send(request).await.map_err(|_| McpFailure::Closed)?;
        // From here, dropping this future cancels the call.
        let guard = CancelOnDrop { cancels: &self.inner.cancels, ticket: Some(ticket) };
        let result = answer.recv().await.unwrap_or(Err(McpFailure::Closed));
        guard.disarm();
        result
    }

    /// Lists the tools again; resolves once the new list is in (or the listing failed,
    /// which [`warnings`](Self::warnings) tells).
    pub async fn refresh_tools(&self) -> Result<(), McpFailure> {
        let (reply, done) = async_channel::bounded(1);
        self.inner.requests.send(Request::Refresh(reply)).await.map_err(|_| McpFailure::Closed)?;
        // Closed without an answer: the listing ended (a failure is in the warnings),
        // or the connection did.
        let _ = done.recv().await;
        if self.inner.shared.closed_reason().is_some() {
            return Err(McpFailure::Closed);
        }
        Ok(())
    }

    /// Pings the server (legacy era only: the current revision has no `ping`).
    pub async fn ping(&self) -> Result<(), McpFailure> {
        let (reply, answer) = async_channel::bounded(1);
        self.inner.requests.send(Request::Ping(reply)).await.map_err(|_| McpFailure::Closed)?;
        answer.recv().await.unwrap_or(Err(McpFailure::Closed))
    }

    /// Ends the connection: pending calls end cancelled, and a stdio server is shut down
    /// (stdin closed, then SIGTERM, then SIGKILL) and reaped before this resolves.
    pub async fn close(&self) {
        let (reply, done) = async_channel::bounded(1);
        if self.inner.requests.send(Request::Close(reply)).await.is_ok() {
            let _ = done.recv().await;
        }
        // Closed by another handle, or by the server: wait for the loop's end.
        self.inner.shared.until(Shared::is_finished).await;
    }

    /// Whether the connection is over, and why (`Some(None)` after a close).
    pub fn closed(&self) -> Option<Option<ConnectionError>> {
        self.inner.shared.closed_reason()
    }

    /// The server's stderr, the last [`STDERR_LOG_BYTES`] of it (stdio servers only): its
    /// log, never taken for an error.
    pub fn stderr(&self) -> String {
        self.inner.shared.log.text()
    }

    /// The most recent warnings (at most [`RECENT`]) about what the server sent, and how
    /// many there were in all.
    pub fn warnings(&self) -> (Vec<McpWarning>, u64) {
        self.inner.shared.warnings()
    }

    /// The most recent log messages the server sent (at most [`RECENT`]).
    pub fn messages(&self) -> Vec<ServerMessage> {
        self.inner.shared.messages()
    }

    /// The stdio server's process id (it leads a process group of its own on unix).
    pub fn process_id(&self) -> Option<u32> {
        self.inner.process_id
    }

    pub(crate) fn max_request_time(&self) -> Duration {
        self.inner.max_request_time
    }
}

/// What an agent builder's `mcp` takes: this connection, or a driver's handle on it.
impl AsRef<Self> for McpServer {
    fn as_ref(&self) -> &Self {
        self
    }
}

/// Tells the loop a call was given up, unless disarmed.
struct CancelOnDrop<'a> {
    cancels: &'a Sender<u64>,
    ticket: Option<u64>,
}

impl CancelOnDrop<'_> {
    fn disarm(mut self) {
        self.ticket = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            // Bounded by the pending calls (see the channel's capacity): never full.
            let _ = self.cancels.try_send(ticket);
        }
    }
}

/// Where a server is.
#[derive(Debug, Clone)]
enum Target {
    Stdio(StdioCommand),
    Http { url: String, headers: Vec<Header> },
}

/// Sets up a connection to an MCP server: `client.mcp_stdio(name, program)` or
/// `client.mcp_http(name, url)`, then options, then [`connect`](Self::connect).
pub struct McpServerBuilder<D: Driver> {
    client: Client<D>,
    name: String,
    target: Target,
    prefix: bool,
    config: McpConfig,
    grace: Duration,
}

impl<D: Driver> fmt::Debug for McpServerBuilder<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Headers print redacted when secret; the environment shows only its names.
        f.debug_struct("McpServerBuilder")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> Client<D> {
    /// A server run as a child process speaking MCP on its stdin and stdout; `name`
    /// names it in errors and, when asked, in its tools' names.
    pub fn mcp_stdio(&self, name: impl Into<String>, program: impl Into<OsString>) -> McpServerBuilder<D> {
        let command = StdioCommand { program: program.into(), ..StdioCommand::default() };
        McpServerBuilder::new(self.clone(), name.into(), Target::Stdio(command))
    }

    /// A server at a streamable HTTP endpoint (`https://host/mcp`).
    pub fn mcp_http(&self, name: impl Into<String>, url: impl Into<String>) -> McpServerBuilder<D> {
        McpServerBuilder::new(self.clone(), name.into(), Target::Http { url: url.into(), headers: Vec::new() })
    }
}

impl<D: Driver> McpServerBuilder<D> {
    fn new(client: Client<D>, name: String, target: Target) -> Self {
        Self { client, name, target, prefix: false, config: McpConfig::new(McpTransport::Stdio), grace: SHUTDOWN_GRACE }
    }

    /// Adds an argument (stdio).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        if let Target::Stdio(command) = &mut self.target {
            command.args.push(arg.into());
        }
        self
    }

    /// Adds arguments (stdio).
    pub fn args<A: Into<OsString>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        if let Target::Stdio(command) = &mut self.target {
            command.args.extend(args.into_iter().map(Into::into));
        }
        self
    }

    /// Sets a variable in the server's environment (stdio); it inherits the rest of
    /// this process's unless [`env_clear`](Self::env_clear).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        if let Target::Stdio(command) = &mut self.target {
            command.env.push((key.into(), value.into()));
        }
        self
    }

    /// Starts the server with only the variables set by [`env`](Self::env) (stdio).
    pub fn env_clear(mut self) -> Self {
        if let Target::Stdio(command) = &mut self.target {
            command.clear_env = true;
        }
        self
    }

    /// The server's working directory (stdio).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Target::Stdio(command) = &mut self.target {
            command.current_dir = Some(dir.into());
        }
        self
    }

    /// A header on every request (HTTP); one named like a credential stays secret.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Target::Http { headers, .. } = &mut self.target {
            headers.push(Header::new(name, value));
        }
        self
    }

    /// `Authorization: Bearer {token}` on every request (HTTP), a token the application
    /// obtained (omni runs no OAuth flow).
    pub fn bearer_token(mut self, token: impl AsRef<str>) -> Self {
        if let Target::Http { headers, .. } = &mut self.target {
            headers.push(Header::secret("authorization", format!("Bearer {}", token.as_ref())));
        }
        self
    }

    /// Prefixes the tools' names with the server's name (`{name}__{tool}`): tool names
    /// are unique only within a server.
    pub fn prefix_tools(mut self, prefix: bool) -> Self {
        self.prefix = prefix;
        self
    }

    /// How long a request may go without an answer (a tool call: without progress);
    /// 60 s by default.
    pub fn request_timeout(mut self, limit: Duration) -> Self {
        self.config.request_timeout = limit;
        self
    }

    /// The hard maximum of one request, progress or not; 10 minutes by default.
    pub fn max_request_time(mut self, limit: Duration) -> Self {
        self.config.max_request_time = limit;
        self
    }

    /// How long the era probe waits before trying the legacy handshake; 10 s by default.
    pub fn probe_timeout(mut self, limit: Duration) -> Self {
        self.config.probe_timeout = limit;
        self
    }

    /// The era remembered from an earlier connection (it is probed again if it fails).
    pub fn era(mut self, era: Era) -> Self {
        self.config.era = Some(era);
        self
    }

    /// Whether to follow the server's tool list changes (on by default).
    pub fn watch_tools(mut self, watch: bool) -> Self {
        self.config.watch_tools = watch;
        self
    }

    /// The bounds on what the server controls.
    pub fn limits(mut self, limits: McpLimits) -> Self {
        self.config.limits = limits;
        self
    }

    /// How long shutdown waits after closing stdin, and again after SIGTERM (2 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Starts the server (stdio) and connects: resolves once the era is known and the
    /// first tool listing is over, with the connection, or with why there is none.
    pub async fn connect(self) -> Result<McpServer, Error> {
        let Self { client, name, target, prefix, mut config, grace } = self;
        let runtime = client.inner.runtime.clone();
        let shared = Arc::new(Shared::default());
        // Lines and cancels are bounded by the requests a connection may have pending.
        let lines = config.limits.max_pending * 2 + 16;
        let mut process_id = None;
        let link = match &target {
            Target::Stdio(spec) => {
                config.transport = McpTransport::Stdio;
                let child = D::spawn_process(process::command(spec)).map_err(|error| {
                    let program = spec.program.to_string_lossy().into_owned();
                    Error::Mcp(McpFailure::Spawn { program, error })
                })?;
                process_id = child.control.id();
                Link::Stdio(process::attach(&runtime, child, shared.log.clone(), lines)?)
            }
            Target::Http { url, headers } => {
                config.transport = McpTransport::Http { url: url.clone(), headers: headers.clone() };
                Link::Http(drive::Http::new(client.inner.transport.clone()))
            }
        };
        let max_request_time = config.max_request_time;
        let (requests, requests_rx) = async_channel::bounded(crate::delivery::COMMAND_CAPACITY);
        let (cancels, cancels_rx) = async_channel::bounded(lines);
        let (ready, connected) = async_channel::bounded(1);
        let machine = McpClient::new(config, crate::Runtime::now(&runtime));
        let task = drive::run(runtime.clone(), machine, shared.clone(), link, requests_rx, cancels_rx, ready, grace);
        crate::runtime::Task::detach(crate::Runtime::spawn(&runtime, task)?);
        let prefix = prefix.then(|| name.clone());
        let handle = Handle {
            name,
            prefix,
            requests,
            cancels,
            shared,
            next_ticket: AtomicU64::new(0),
            max_request_time,
            process_id,
            prepared: Default::default(),
        };
        let server = McpServer { inner: Arc::new(handle) };
        match connected.recv().await {
            Ok(Ok(())) => Ok(server),
            Ok(Err(failure)) => {
                server.close().await;
                Err(Error::Mcp(failure))
            }
            Err(_) => Err(Error::Mcp(McpFailure::Closed)),
        }
    }
}
