//! The one public surface of omni. Every driver's root is this list (`pub use
//! omni_shell::exports::*`), the names of [`driver_types!`](crate::driver_types) for its
//! driver type, and its own runtime and HTTP client; omni-blocking puts its waiting
//! handles in place of the async ones under the same names. So code written against one
//! driver moves to another by changing the crate name and the idiom (`.await` or not),
//! and `conformance/tests/surface.rs` holds the three drivers' names equal.
//!
//! What is here: the data an application names (messages, models, options, responses,
//! events, errors), the agent's, session's and manager's vocabulary, the handles, and
//! four modules for less common work ([`dialect`], [`hooks`], [`schema`],
//! [`text_tools`]). Everything else of the core is under [`protocol`] (omni-protocol).

/// The pure core (omni-protocol), for what the surface leaves out: the machines
/// themselves, the transport rules a driver follows.
pub use omni_protocol as protocol;
/// The schemars crate, for `#[derive(JsonSchema)]` on typed tools and structured output
/// (feature `schemars`).
#[cfg(feature = "schemars")]
pub use omni_protocol::schemars;
pub use omni_protocol::{dialect, hooks, schema, text_tools};

pub use omni_protocol::agent::{
    AgentCallbacks, AgentError, AgentEvent, AgentState, ErrorDecision, NoCallbacks, PartialMessage, Prompt, RetryKind,
    Snapshot, Status, ToolDecision, TurnDecision, TurnEnd,
};
pub use omni_protocol::client::{ClientConfig, ClientError, ModelRef};
pub use omni_protocol::generate::{GenerateError, GenerateEvent, RetryPolicy, TransportError, TransportErrorKind};
pub use omni_protocol::hooks::{HookContext, ProviderHooks};
pub use omni_protocol::manager::{CloseReason, FeedEvent, IdleShutdown, ManagerError, OpenSession, Opening, TitleMode};
pub use omni_protocol::session::{
    Claim, Node, NodeId, SessionError, SessionEvent, SessionId, SessionInfo, SessionList, SessionSnapshot,
    SessionState, Store, StoreError, StoreErrorKind, StoreWarning, Tree, Written,
};
pub use omni_protocol::{
    ApiKey, Attachment, Auth, Block, CacheRetention, Catalogue, CatalogueError, Context, Cost, Dialect, Effort,
    Fragment, InvalidCallInput, LookupError, Message, Modality, Model, Options, OptionsError, Origin, OutputSchema,
    Prices, Provider, ProviderError, ProviderErrorKind, Quirks, Reasoning, RequestError, Response, Role, ServedBy,
    Source, StopReason, StreamError, StreamEvent, Text, TextProtocol, Thinking, ToolChoice, ToolError, ToolOutput,
    ToolProtocol, ToolResult, ToolResultContent, ToolSpec, ToolUse, Usage, Warning,
};

/// MCP servers: their vocabulary (tools, results, errors, eras) and what a connection
/// reports ([`Progress`](crate::mcp::Progress), [`ServerMessage`](crate::mcp::ServerMessage)).
pub use crate::mcp;

/// Spans and metrics after the OpenTelemetry GenAI conventions: the [`Metrics`] an
/// application connects, and the instruments' names.
pub use crate::telemetry;
pub use crate::telemetry::{MetricAttributes, Metrics, TokenType};

pub use crate::{
    Agent, AsyncTool as Tool, CancelHandle, Error, McpFailure, McpServer, Open, Opened, Session, SetupError,
    StateChange, Subscriber, SubscriberCount, SubscriberRole, Subscription, TextStream, WeakAgent, Whereabouts,
    DEFAULT_SUBSCRIBER_CAPACITY,
};

/// Names a driver's client, builders and call after the shell's, for its driver type:
/// `omni_shell::driver_types!(Tokio);` in omni-tokio's root makes `Client`
/// (`Client<Tokio>`), `ClientBuilder`, `Call` and `AgentBuilder`. Written once so that
/// every driver hands out the same names.
#[macro_export]
macro_rules! driver_types {
    ($driver:ty) => {
        /// An omni client on this driver. Cheap to clone: clones share the configuration
        /// and the connections.
        pub type Client = $crate::Client<$driver>;
        /// Builds a [`Client`]; see [`omni_shell::ClientBuilder`]($crate::ClientBuilder).
        pub type ClientBuilder = $crate::ClientBuilder<Client>;
        /// A call being set up; see [`omni_shell::Call`]($crate::Call).
        pub type Call = $crate::Call<$driver>;
        /// Sets up an agent (`client.agent(model)`); see
        /// [`omni_shell::AgentBuilder`]($crate::AgentBuilder).
        pub type AgentBuilder<C = $crate::exports::NoCallbacks> = $crate::AgentBuilder<Client, $crate::AsyncTool, C>;
        /// Sets up a session (`client.agent(model)….session(store)`); see
        /// [`omni_shell::SessionBuilder`]($crate::SessionBuilder).
        pub type SessionBuilder<C = $crate::exports::NoCallbacks> =
            $crate::SessionBuilder<Client, $crate::AsyncTool, C>;
        /// Many sessions of one store (`client.session_manager(store, agent)….start()`);
        /// see [`omni_shell::SessionManager`]($crate::SessionManager).
        pub type SessionManager<C = $crate::exports::NoCallbacks> = $crate::SessionManager<$driver, C>;
        /// Sets up a [`SessionManager`]; see [`omni_shell::ManagerBuilder`]($crate::ManagerBuilder).
        pub type ManagerBuilder<C = $crate::exports::NoCallbacks> = $crate::ManagerBuilder<$driver, C>;
        /// Sets up a connection to an MCP server (`client.mcp_stdio(name, program)`,
        /// `client.mcp_http(name, url)`); see
        /// [`omni_shell::McpServerBuilder`]($crate::McpServerBuilder).
        pub type McpServerBuilder = $crate::McpServerBuilder<$driver>;
        /// How one session is opened by a [`SessionManager`]; see
        /// [`omni_shell::SessionOptions`]($crate::SessionOptions).
        pub type SessionOptions<C = $crate::exports::NoCallbacks> = $crate::SessionOptions<$driver, C>;
    };
}
