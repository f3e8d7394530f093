//! # omni-protocol
//!
//! The pure, sans-IO core of omni: the data model, five provider dialects, stream
//! framing and accumulation. No I/O, no clock, no async runtime: drivers
//! (`omni-tokio`, `omni-smol`, `omni-blocking`) execute what the core decides.
//!
//! What is public is chosen here, and nothing else is: the crate's own module groups
//! (data, wire formats, text tools, machines) are private, so that their layout can change
//! without breaking anyone.
//!
//! - At the root: the data an application holds and sees (messages, models, options,
//!   responses, events, errors, usage, providers, the catalogue, tool outputs).
//! - [`dialect`]: the five wire formats and user ones, the stream decoder and its deltas,
//!   for whoever writes a dialect or decodes bodies by hand; [`hooks`]: provider hooks;
//!   [`schema`]: JSON Schemas, their validation and typed schemas; [`text_tools`]: tool
//!   calls as text, for models without native tool calling; [`tool`]: what a tool
//!   returns, for drivers running tools.
//! - The machines a driver runs, one module each: [`generate`], [`agent`], [`session`],
//!   [`manager`], [`mcp`], with [`client`] (configuration and model references) and [`machine`]
//!   (the timer vocabulary they share); [`transport`]: the rules a driver's HTTP client
//!   follows (redirects, proxies, secret names, limits).
//!
//! Applications use a driver (`omni-tokio`, `omni-smol`, `omni-blocking`), which
//! re-exports what they need under the same names.
//!
//! The pipeline for one streamed response:
//!
//! ```text
//!  (Model, Context, Options) ─► Dialect::build_request ─► HttpRequest   (driver sends it)
//!  body bytes ─► StreamDecoder ─► StreamEvent … Done | Error, and a Response
//! ```
//!
//! ## Features
//!
//! - `jsonschema` (default): [`JsonSchemaValidator`](data::schema::JsonSchemaValidator)
//!   is backed by the `jsonschema` crate, every draft and keyword. Off, it is backed by
//!   the built-in [`BuiltinValidator`](data::schema::BuiltinValidator) (the subset schemars
//!   and typical tool schemas use), which refuses a schema with a keyword it cannot check
//!   (`pattern` …) with [`SchemaError::Unsupported`](data::schema::SchemaError::Unsupported);
//!   about 2.2 MB less binary.
//! - `schemars`: schemas from Rust types (`data::schema::for_type`) and the `schemars`
//!   re-export.

#![forbid(unsafe_code)]

mod data;
mod machines;
pub mod text_tools;
mod wire;

/// The schemars crate, for `JsonSchema` bounds and derives (feature `schemars`).
#[cfg(feature = "schemars")]
pub use schemars;

pub use data::catalogue::{Catalogue, CatalogueError, LookupError};
pub use data::dialect::{Dialect, UnknownDialect};
pub use data::error::{ProviderError, ProviderErrorKind, RequestError, ServedBy, StreamError};
pub use data::event::{Fragment, StreamEvent};
pub use data::message::{
    Attachment, Block, Context, InvalidCallInput, Message, Origin, Role, Source, Text, Thinking, ToolResult,
    ToolResultContent, ToolSpec, ToolUse,
};
pub use data::model::{Modality, Model, Prices};
pub use data::options::{CacheRetention, Effort, Options, OptionsError, OutputSchema, Reasoning, ToolChoice};
pub use data::provider::{ApiKey, Auth, Provider, Quirks};
pub use data::response::{Response, StopReason, Warning};
pub use data::tool::{ToolError, ToolOutput};
pub use data::usage::{Cost, Usage};
pub use text_tools::{TextProtocol, ToolProtocol};

pub mod dialect {
    //! Wire formats: the five built-in dialects and the application's own
    //! ([`WireFormat`], [`register`]), requests as they are sent, and the decoding of a
    //! response body (framing, deltas, accumulation) into events and a response.
    pub use crate::data::dialect::{CustomDialect, Dialect, RegisterError, UnknownDialect};
    pub use crate::wire::accumulator::Accumulator;
    pub use crate::wire::decoder::{decode_body, Progress, StreamDecoder};
    pub use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
    pub use crate::wire::dialect::custom::{WireFormat, WireStream};
    pub use crate::wire::dialect::{custom::register, BuiltRequest, DialectRequest, RequestSpec};
    pub use crate::wire::framing::{
        Frame, FrameDecoder, Framing, FramingError, NdjsonDecoder, SseDecoder, StreamEnd, WholeDecoder,
        DEFAULT_MAX_EVENT_BYTES,
    };
    pub use crate::wire::http::{Header, HttpRequest, Method};
}

pub mod hooks {
    //! Provider hooks: a provider's own changes to the URL, the body and each streamed
    //! event (an Azure-style deployment, a gateway's query key).
    pub use crate::data::hooks::{add_query, BodyFn, EventFn, HookContext, ProviderHooks, UrlFn};
}

pub mod schema {
    //! JSON Schemas: built by hand ([`object`], [`string`], …) or from a type
    //! (`for_type`, feature `schemars`), validated ([`Validator`]), and adapted to what
    //! each provider accepts ([`adapt`]).
    pub use crate::data::schema::adapt;
    pub use crate::data::schema::{
        any_of, array, boolean, decode_output, enumeration, integer, number, object, string, BuiltinValidator,
        JsonSchemaValidator, Schema, SchemaError, ValidationError, Validator,
    };
    #[cfg(feature = "schemars")]
    pub use crate::data::schema::{for_type, name_for, output_for};
}

pub mod tool {
    //! What a tool run gives back, and the helpers drivers use to run one.
    pub use crate::data::tool::{no_handler, outcome, panic_message, typed_input, ToolError, ToolOutput};
    pub use crate::machines::generate::ToolOutcome;
}

pub mod generate {
    //! The generate machine: one call with its tool rounds, retries, deadlines and
    //! structured output, and the vocabulary every machine shares (effects, reports, ids,
    //! transport errors).
    pub use crate::machines::generate::{
        Effect, Generate, GenerateConfig, GenerateError, GenerateEvent, Input, InputError, Report, RequestId,
        RetryPolicy, ToolDecl, ToolOutcome, ToolRunId, TransportError, TransportErrorKind, DEFAULT_MAX_RESPONSE_BYTES,
        DEFAULT_MAX_STEPS, DEFAULT_OUTPUT_RETRIES, DEFAULT_STALL_TIMEOUT, DEFAULT_TOOL_TIMEOUT,
    };
}

pub mod observe {
    //! What the machines tell an application's telemetry (`Effect::Observe`), in the
    //! OpenTelemetry GenAI conventions' terms: omni-shell turns it into `tracing` spans
    //! and metrics.
    pub use crate::machines::observe::{
        error_type, finish_reason, provider_name, InferenceContent, InferenceEnd, InferenceStart, Observation, Observe,
    };
}

pub mod agent {
    //! The agent machine: a conversation of turns, tools gated by the application's
    //! callbacks, pause, resume and retry.
    pub use crate::machines::agent::{
        Agent, AgentCallbacks, AgentConfig, AgentError, AgentEvent, AgentInput, AgentState, ErrorDecision, NoCallbacks,
        PartialMessage, Prompt, RetryKind, Snapshot, StateChange, StatePatch, Status, ToolDecision, TurnDecision,
        TurnEnd, Update,
    };
}

pub mod client {
    //! A client's configuration, and how a call names its model.
    pub use crate::machines::client::{CallSpec, ClientConfig, ClientError, ModelRef, StartError};
}

pub mod session {
    //! Sessions: the session machine (an agent whose conversation tree is kept in a
    //! [`Store`]), the tree, the store contract and presence (which node runs which
    //! session).
    pub use crate::machines::session::machine::{
        Session, SessionEffect, SessionError, SessionEvent, SessionInput, SessionSnapshot, StoreOp, WriteId, Written,
    };
    pub use crate::machines::session::presence::{Change, Entry, Listener, Notice, Presence, Run};
    pub use crate::machines::session::store::{
        assemble, check_append, Claim, InvalidId, Loaded, Pager, SessionId, SessionInfo, SessionList, SessionState,
        Store, StoreError, StoreErrorKind, StoreWarning, MAX_ID_LEN,
    };
    pub use crate::machines::session::tree::{Node, NodeId, Position, Tree, TreeError};
}

pub mod manager {
    //! The session manager: many sessions of one store, opened, closed, renamed and
    //! titled on request, idle ones shut down, their leases renewed together.
    pub use crate::machines::manager::title::TITLE_MESSAGES;
    pub use crate::machines::manager::{
        Answer, CloseReason, FeedEvent, IdleShutdown, Manager, ManagerConfig, ManagerEffect, ManagerError,
        ManagerInput, OpenSession, Opening, RenewalId, RequestId, Started, TitleId, TitleMode, DEFAULT_IDLE_AFTER,
        DEFAULT_MAX_SESSIONS,
    };
}

pub mod mcp {
    //! A Model Context Protocol client as a sans-IO machine: one server's tools, over
    //! stdio or streamable HTTP, in both protocol eras (2026-07-28 and the legacy
    //! 2025-11-25), for a driver to run.
    pub use crate::machines::mcp::{
        CallError, ClientInfo, ConnectionError, Content, Era, ExchangeId, McpClient, McpConfig, McpEffect, McpError,
        McpEvent, McpInput, McpLimits, McpStats, McpTool, McpTransport, McpWarning, OpId, ResourceBody, RpcError,
        ServerInfo, ToolCallResult, ToolRejection, DEFAULT_MAX_REQUEST_TIME, DEFAULT_PROBE_TIMEOUT,
        DEFAULT_REQUEST_TIMEOUT,
    };
}

pub mod machine {
    //! What every machine shares: the contract a driver loop runs it by, and the reasons
    //! of its deadlines.
    pub use crate::machines::timer::Timer;
    pub use crate::machines::Machine;
}

pub mod transport {
    //! The rules a driver's HTTP client follows: redirects (never a secret to another
    //! origin), proxies from the environment, which header and query names are secret,
    //! how deep a JSON document may nest.
    pub use crate::data::depth::{exceeds as too_deep, MAX_DEPTH};
    pub use crate::wire::http::is_secret_name;
    pub use crate::wire::proxy::{NoProxy, Proxy, ProxyError, ProxyRules, ProxySetting};
    pub use crate::wire::query::{is_secret_query_name, redacted_url, QuerySecrets};
    pub use crate::wire::redirect::{is_redirect, RedirectError, Redirects, MAX_REDIRECTS};
    pub use crate::wire::secret::{Secrets, REDACTED};
}
