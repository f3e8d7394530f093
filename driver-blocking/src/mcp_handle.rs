//! MCP servers on plain threads: omni-shell's connection ([`omni_shell::McpServer`]) with
//! methods that wait on the caller's thread, and its tools as this driver's [`Tool`]s.
//! The connection's loop, and the pipes of a stdio server, run on threads of their own.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use futures_lite::future::block_on;
use omni_shell::mcp::{
    ConnectionError, Era, McpLimits, McpTool, McpWarning, Progress, ServerInfo, ServerMessage, SkippedTool,
    ToolCallResult,
};
use omni_shell::McpFailure;
use serde_json::Value;

use crate::blocking_client::Blocking;
use crate::{Client, Error, Tool};

/// A connection to one MCP server; see [`omni_shell::McpServer`], whose methods these
/// are, waiting on the caller's thread. Clones (and its tools) share the connection,
/// which ends at [`close`](Self::close) or when the last of them is dropped.
///
/// ```no_run
/// use omni_blocking::Client;
///
/// let client = Client::new()?;
/// let files = client
///     .mcp_stdio("files", "npx")
///     .args(["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
///     .prefix_tools(true)
///     .connect()?;
/// let answer = client.call("anthropic:claude-sonnet-4-5", "What is in /tmp?").tools(files.tools()).generate()?;
/// println!("{}", answer.text());
/// files.close();
/// # Ok::<(), omni_blocking::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct McpServer(omni_shell::McpServer);

impl McpServer {
    /// The name the application gave the server.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// Who the server is (era, version, identity, capabilities, instructions).
    pub fn info(&self) -> Option<ServerInfo> {
        self.0.info()
    }

    /// The server's tools as it lists them.
    pub fn list_tools(&self) -> std::sync::Arc<[McpTool]> {
        self.0.list_tools()
    }

    /// The server's tools as this driver's tools (see [`omni_shell::McpServer::tools`]).
    pub fn tools(&self) -> Vec<Tool> {
        self.0.tools().into_iter().map(Tool::from_async).collect()
    }

    /// The tools [`tools`](Self::tools) leaves out, and why.
    pub fn skipped_tools(&self) -> Vec<SkippedTool> {
        self.0.skipped_tools()
    }

    /// How many listed tools the connection dropped.
    pub fn dropped_tools(&self) -> usize {
        self.0.dropped_tools()
    }

    /// Counts the tool lists received: it changes when the tools do.
    pub fn tools_version(&self) -> u64 {
        self.0.tools_version()
    }

    /// Waits until the tools have changed since `version` (or the connection is over).
    pub fn tools_changed(&self, version: u64) {
        block_on(self.0.tools_changed(version));
    }

    /// Calls the tool `name` with `arguments`; see [`omni_shell::McpServer::call_tool`].
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolCallResult, McpFailure> {
        block_on(self.0.call_tool(name, arguments))
    }

    /// [`call_tool`](Self::call_tool), with progress reports sent to `progress`.
    pub fn call_tool_with_progress(
        &self,
        name: &str,
        arguments: Value,
        progress: async_channel::Sender<Progress>,
    ) -> Result<ToolCallResult, McpFailure> {
        block_on(self.0.call_tool_with_progress(name, arguments, progress))
    }

    /// Lists the tools again, waiting for the new list.
    pub fn refresh_tools(&self) -> Result<(), McpFailure> {
        block_on(self.0.refresh_tools())
    }

    /// Pings the server (legacy era only).
    pub fn ping(&self) -> Result<(), McpFailure> {
        block_on(self.0.ping())
    }

    /// Ends the connection; a stdio server is shut down and reaped before this returns.
    pub fn close(&self) {
        block_on(self.0.close());
    }

    /// Whether the connection is over, and why (`Some(None)` after a close).
    pub fn closed(&self) -> Option<Option<ConnectionError>> {
        self.0.closed()
    }

    /// The stdio server's process id.
    pub fn process_id(&self) -> Option<u32> {
        self.0.process_id()
    }

    /// The last of the server's stderr (stdio servers).
    pub fn stderr(&self) -> String {
        self.0.stderr()
    }

    /// The most recent warnings, and how many there were in all.
    pub fn warnings(&self) -> (Vec<McpWarning>, u64) {
        self.0.warnings()
    }

    /// The most recent log messages the server sent.
    pub fn messages(&self) -> Vec<ServerMessage> {
        self.0.messages()
    }
}

/// The agent builder's `mcp` takes this handle.
impl AsRef<omni_shell::McpServer> for McpServer {
    fn as_ref(&self) -> &omni_shell::McpServer {
        &self.0
    }
}

/// Sets up a connection to an MCP server; see [`omni_shell::McpServerBuilder`]. Its
/// [`connect`](Self::connect) waits.
#[derive(Debug)]
pub struct McpServerBuilder(omni_shell::McpServerBuilder<Blocking>);

/// The builder's options, passed through.
macro_rules! options {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        $(#[$doc])*
        pub fn $name(self, $($arg: $ty),*) -> Self {
            Self(self.0.$name($($arg),*))
        }
    )*};
}

impl McpServerBuilder {
    options! {
        /// Adds an argument (stdio).
        fn arg(arg: impl Into<OsString>);
        /// Sets a variable in the server's environment (stdio).
        fn env(key: impl Into<OsString>, value: impl Into<OsString>);
        /// Starts the server with only the variables set by `env` (stdio).
        fn env_clear();
        /// The server's working directory (stdio).
        fn current_dir(dir: impl Into<PathBuf>);
        /// A header on every request (HTTP).
        fn header(name: impl Into<String>, value: impl Into<String>);
        /// `Authorization: Bearer {token}` on every request (HTTP).
        fn bearer_token(token: impl AsRef<str>);
        /// Prefixes the tools' names with the server's name.
        fn prefix_tools(prefix: bool);
        /// How long a request may go without an answer (or progress).
        fn request_timeout(limit: Duration);
        /// The hard maximum of one request.
        fn max_request_time(limit: Duration);
        /// How long the era probe waits.
        fn probe_timeout(limit: Duration);
        /// The era remembered from an earlier connection.
        fn era(era: Era);
        /// Whether to follow the server's tool list changes.
        fn watch_tools(watch: bool);
        /// The bounds on what the server controls.
        fn limits(limits: McpLimits);
        /// How long shutdown waits after closing stdin, and after SIGTERM.
        fn shutdown_grace(grace: Duration);
    }

    /// Adds arguments (stdio).
    pub fn args<A: Into<OsString>>(self, args: impl IntoIterator<Item = A>) -> Self {
        Self(self.0.args(args))
    }

    /// Starts the server (stdio) and connects, waiting until the era is known and the
    /// first tool listing is over.
    pub fn connect(self) -> Result<McpServer, Error> {
        block_on(self.0.connect()).map(McpServer)
    }
}

impl Client {
    /// A server run as a child process speaking MCP on its stdin and stdout.
    pub fn mcp_stdio(&self, name: impl Into<String>, program: impl Into<OsString>) -> McpServerBuilder {
        McpServerBuilder(self.0.mcp_stdio(name, program))
    }

    /// A server at a streamable HTTP endpoint.
    pub fn mcp_http(&self, name: impl Into<String>, url: impl Into<String>) -> McpServerBuilder {
        McpServerBuilder(self.0.mcp_http(name, url))
    }
}
