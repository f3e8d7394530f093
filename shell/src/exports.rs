//! What every async driver re-exports besides its own names (`pub use
//! omni_shell::exports::*`): the data, errors, events and callbacks of the core, and the
//! shell's handles, so that code written against one driver moves to another unchanged.

pub use omni_protocol::data::tool::{ToolError, ToolOutput};
pub use omni_protocol::machines::agent::{
    AgentCallbacks, AgentError, AgentEvent, AgentState, ErrorDecision, NoCallbacks, Prompt, RetryKind, Snapshot,
    Status, ToolDecision, TurnDecision, TurnEnd,
};
pub use omni_protocol::machines::client::{ClientError, ModelRef};
pub use omni_protocol::machines::generate::{GenerateError, GenerateEvent, RetryPolicy};
pub use omni_protocol::{
    ApiKey, Attachment, Block, CacheRetention, Catalogue, Context, Effort, Message, Model, Options, OutputSchema,
    Provider, Reasoning, Response, Role, StopReason, StreamEvent, TextProtocol, ToolChoice, ToolProtocol, ToolResult,
    ToolResultContent, ToolUse, Usage,
};

pub use omni_protocol::machines::manager::{
    CloseReason, FeedEvent, IdleShutdown, ManagerError, OpenSession, Opening, TitleMode,
};
pub use omni_protocol::machines::session::machine::{SessionError, SessionEvent, SessionSnapshot, Written};
pub use omni_protocol::machines::session::store::{
    Claim, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind, StoreWarning,
};
pub use omni_protocol::machines::session::tree::{Node, NodeId, Tree};

pub use crate::{
    Agent, AsyncTool as Tool, CancelHandle, Error, Open, Opened, Session, StateChange, Subscriber, SubscriberCount,
    SubscriberRole, Subscription, TextStream, WeakAgent, Whereabouts, DEFAULT_SUBSCRIBER_CAPACITY,
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
        /// How one session is opened by a [`SessionManager`]; see
        /// [`omni_shell::SessionOptions`]($crate::SessionOptions).
        pub type SessionOptions<C = $crate::exports::NoCallbacks> = $crate::SessionOptions<$driver, C>;
    };
}
