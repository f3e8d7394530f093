//! The three drivers export one surface: the same names at their roots, the idiom (a
//! runtime, an HTTP client, blocking's thread pool for tools) the only difference.
//!
//! Two checks, from one list of names ([`with_surface!`]):
//! - every driver has every name: `use omni_X::{…}` of the whole list compiles for each;
//! - no driver has a name outside the list and its own idiom names: each driver's
//!   `src/lib.rs` is read, with what it takes from `omni_shell::exports` and
//!   `omni_shell::driver_types!`, and the root names it declares are compared.

use std::collections::BTreeSet;
use std::path::Path;

/// Calls `$then!` with every name a driver's root exports whatever the driver. A new
/// public name goes here, and in each driver by the one list in `shell/src/exports.rs`.
macro_rules! with_surface {
    ($then:ident $(, $arg:tt)*) => {
        $then! {
            $($arg)*;
            // The handles.
            Client, ClientBuilder, Call, TextStream, CancelHandle, Error, SetupError, Tool, Agent, AgentBuilder, WeakAgent,
            StateChange, Session, SessionBuilder, Open, Subscriber, Subscription, SubscriberCount, SubscriberRole,
            DEFAULT_SUBSCRIBER_CAPACITY, SessionManager, ManagerBuilder, SessionOptions, Opened, Whereabouts,
            McpServer, McpServerBuilder, McpFailure, Metrics, MetricAttributes, TokenType,
            // Data.
            ApiKey, Attachment, Auth, Block, CacheRetention, Catalogue, CatalogueError, Context, Cost, Dialect,
            Effort, Fragment, InvalidCallInput, LookupError, Message, Modality, Model, Options, OptionsError, Origin,
            OutputSchema, Prices, Provider, ProviderError, ProviderErrorKind, Quirks, Reasoning, RequestError,
            Response, Role, ServedBy, Source, StopReason, StreamError, StreamEvent, Text, TextProtocol, Thinking, ToolChoice,
            ToolError, ToolOutput, ToolProtocol, ToolResult, ToolResultContent, ToolSpec, ToolUse, Usage, Warning,
            HookContext, ProviderHooks,
            // Calls, agents, sessions, the manager.
            ClientConfig, ClientError, ModelRef, GenerateError, GenerateEvent, RetryPolicy, TransportError,
            TransportErrorKind, AgentCallbacks, AgentError, AgentEvent, AgentState, ErrorDecision, NoCallbacks,
            PartialMessage, Prompt, RetryKind, Snapshot, Status, ToolDecision, TurnDecision, TurnEnd, Claim, Node,
            NodeId, SessionError, SessionEvent, SessionId, SessionInfo, SessionList, SessionSnapshot, SessionState,
            Store, StoreError, StoreErrorKind, StoreWarning, Tree, Written, CloseReason, FeedEvent, IdleShutdown,
            ManagerError, OpenSession, Opening, TitleMode,
            // Modules.
            protocol, dialect, hooks, schema, text_tools, schemars, mcp, telemetry
        }
    };
}

/// What only one driver has: its runtime and HTTP client, and for omni-blocking the
/// threads its tools run on and how long connecting may take (ureq's own setting).
const IDIOM: [(&str, &[&str]); 3] = [
    ("driver-tokio", &["Tokio", "TokioTask", "Reqwest"]),
    ("driver-smol", &["Smol", "SmolTask", "Http1"]),
    (
        "driver-blocking",
        &["ToolPool", "CancelToken", "live_tool_threads", "MAX_RUNNING_TOOLS", "MAX_TOOL_THREADS", "CONNECT_TIMEOUT"],
    ),
];

macro_rules! name_list {
    (; $($name:ident),* $(,)?) => {
        &[$(stringify!($name)),*]
    };
}
const SURFACE: &[&str] = with_surface!(name_list);

macro_rules! import_all {
    ($driver:ident; $($name:ident),* $(,)?) => {
        #[allow(unused_imports)]
        mod $driver {
            use $driver::{$($name),*};
        }
    };
}
with_surface!(import_all, omni_tokio);
with_surface!(import_all, omni_smol);
with_surface!(import_all, omni_blocking);

#[test]
fn every_driver_exports_the_one_surface_and_only_its_idiom_besides() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let shell_exports = read("shell/src/exports.rs");
    let (exports_list, driver_types) = shell_exports.split_once("macro_rules! driver_types").expect("the macro");
    let shared = root_names(exports_list);
    let typed = declared_types(driver_types);
    let surface: BTreeSet<String> = SURFACE.iter().map(|name| name.to_string()).collect();
    assert_eq!(surface.len(), SURFACE.len(), "a name is listed twice");

    for (driver, idiom) in IDIOM {
        let lib = read(&format!("{driver}/src/lib.rs"));
        let mut names = root_names(&lib);
        if lib.contains("pub use omni_shell::exports::*;") {
            names.extend(shared.iter().cloned());
        }
        if lib.contains("omni_shell::driver_types!(") {
            names.extend(typed.iter().cloned());
        }
        let expected: BTreeSet<String> = surface.iter().cloned().chain(idiom.iter().map(|n| n.to_string())).collect();
        let extra: Vec<_> = names.difference(&expected).collect();
        let missing: Vec<_> = expected.difference(&names).collect();
        assert!(
            extra.is_empty() && missing.is_empty(),
            "{driver}: exports {extra:?} that are neither in the surface nor its idiom, lacks {missing:?}"
        );
    }
}

/// The names a module's source makes public at its root: `pub use` trees (last segment or
/// alias; a glob contributes nothing here), and `pub` items. Nested modules' bodies and
/// macro bodies are skipped by reading only lines that start at column 0.
fn root_names(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut statement = String::new();
    for line in source.lines() {
        if statement.is_empty() && !line.starts_with("pub ") {
            continue;
        }
        statement.push_str(line.trim());
        statement.push(' ');
        if let Some(rest) = statement.strip_prefix("pub use ") {
            if !rest.contains(';') {
                continue;
            }
            let tree = rest.split(';').next().unwrap_or_default();
            use_tree_names(tree, &mut names);
        } else {
            let mut words =
                statement.split(|c: char| c.is_whitespace() || "(<:=;{".contains(c)).filter(|w| !w.is_empty());
            let kind = words.nth(1).unwrap_or_default();
            if ["mod", "fn", "struct", "enum", "trait", "type", "const", "static"].contains(&kind) {
                names.insert(words.next().unwrap_or_default().to_owned());
            }
        }
        statement.clear();
    }
    names
}

/// The names a `use` tree brings in: `a::b::{C, D as E, f::{G}}` gives C, E and G.
fn use_tree_names(tree: &str, names: &mut BTreeSet<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let inner = &tree[open + 1..tree.rfind('}').expect("a closed group")];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_tree_names(&inner[start..i], names);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_tree_names(&inner[start..], names);
    } else if !tree.is_empty() && !tree.ends_with('*') {
        let last = tree.rsplit(" as ").next().unwrap_or(tree);
        names.insert(last.rsplit("::").next().unwrap_or(last).trim().to_owned());
    }
}

/// The type aliases a `driver_types!` body declares (`pub type Client = …`).
fn declared_types(body: &str) -> BTreeSet<String> {
    body.split("pub type ")
        .skip(1)
        .map(|rest| rest.split(['<', ' ', '=']).next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_name_reader_sees_what_a_root_exports() {
    let source = "pub use a::b::{C, D as E, f::{G, H}};\npub use x::*;\npub use y::Z;\n\
                  pub const K: u8 = 1;\npub fn f() {}\n    pub fn nested() {}\npub(crate) use q::R;\n\
                  pub mod m;\npub use long::{\n    One,\n    Two,\n};\n";
    let names: Vec<String> = root_names(source).into_iter().collect();
    assert_eq!(names, ["C", "E", "G", "H", "K", "One", "Two", "Z", "f", "m"]);
    let types = declared_types("pub type Client = X;\n pub type AgentBuilder<C = N> = Y;");
    assert_eq!(types.into_iter().collect::<Vec<_>>(), ["AgentBuilder", "Client"]);
}
