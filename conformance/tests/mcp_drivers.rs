//! MCP servers through every driver's public API: the checks of
//! `omni_conformance::mcp_suite`, run by omni-tokio, omni-smol and omni-blocking.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

use omni_conformance::mcp_real::{self as real, Over};
use omni_conformance::mcp_suite::{self as suite, McpConnection, McpDriver, Spec, Target};
use omni_protocol::mcp::{ConnectionError, Era, McpTool, McpWarning, ToolCallResult};
use omni_shell::mcp::Progress;
use omni_shell::{Driver, Error, McpFailure};
use serde_json::Value;

const FAKE: &str = env!("CARGO_BIN_EXE_mcp-fake-server");

/// A runtime's `block_on`, for a future that returns nothing.
type BlockOn = fn(Pin<Box<dyn Future<Output = ()> + Send + '_>>);

/// Runs `future` to its end with `block_on`, returning its output.
fn run<T: Send>(block_on: BlockOn, future: impl Future<Output = T> + Send) -> T {
    let mut out = None;
    block_on(Box::pin(async { out = Some(future.await) }));
    out.expect("ran to its end")
}

/// An async driver: the shell's client, and its runtime's `block_on`.
struct Async<D: Driver> {
    client: omni_shell::Client<D>,
    block_on: BlockOn,
}

#[derive(Debug)]
struct AsyncConnection {
    server: omni_shell::McpServer,
    block_on: BlockOn,
}

/// `spec`'s options on any driver's builder: the same setters in every driver.
macro_rules! configured {
    ($client:expr, $spec:expr) => {{
        let spec: &Spec = $spec;
        let builder = match &spec.target {
            Target::Stdio { program, args, env, dir } => {
                let mut builder = $client.mcp_stdio(spec.name.clone(), program.clone()).args(args.clone());
                for (key, value) in env {
                    builder = builder.env(key, value);
                }
                if let Some(dir) = dir {
                    builder = builder.current_dir(dir);
                }
                builder
            }
            Target::Http { url, token } => {
                let builder = $client.mcp_http(spec.name.clone(), url.clone());
                match token {
                    Some(token) => builder.bearer_token(token),
                    None => builder,
                }
            }
        };
        let builder = builder
            .prefix_tools(spec.prefix)
            .request_timeout(spec.request_timeout)
            .probe_timeout(spec.probe_timeout)
            .limits(spec.limits)
            .shutdown_grace(spec.grace);
        match spec.era {
            Some(era) => builder.era(era),
            None => builder,
        }
    }};
}

impl<D: Driver> McpDriver for Async<D> {
    type Connection = AsyncConnection;

    fn connect(&self, spec: &Spec) -> Result<AsyncConnection, Error> {
        let builder = configured!(self.client, spec);
        let server = run(self.block_on, builder.connect())?;
        Ok(AsyncConnection { server, block_on: self.block_on })
    }
}

impl McpConnection for AsyncConnection {
    fn call(&self, name: &str, arguments: Value) -> Result<ToolCallResult, McpFailure> {
        run(self.block_on, self.server.call_tool(name, arguments))
    }

    fn call_with_progress(
        &self,
        name: &str,
        arguments: Value,
        progress: async_channel::Sender<Progress>,
    ) -> Result<ToolCallResult, McpFailure> {
        run(self.block_on, self.server.call_tool_with_progress(name, arguments, progress))
    }

    fn call_abandoned(
        &self,
        name: &str,
        arguments: Value,
        after: Duration,
    ) -> Option<Result<ToolCallResult, McpFailure>> {
        let call = async { Some(self.server.call_tool(name, arguments).await) };
        // Polled after the call has started: blocks this thread for `after` (the call's
        // work runs on the connection's task), then gives the call up.
        let timer = async {
            std::thread::sleep(after);
            None
        };
        run(self.block_on, futures_lite::future::or(call, timer))
    }

    fn list(&self) -> Vec<McpTool> {
        self.server.list_tools().to_vec()
    }

    fn tool_names(&self) -> Vec<String> {
        self.server.tools().iter().map(|t| t.name().to_string()).collect()
    }

    fn skipped(&self) -> Vec<String> {
        self.server.skipped_tools().into_iter().map(|s| s.name).collect()
    }

    fn version(&self) -> u64 {
        self.server.tools_version()
    }

    fn wait_changed(&self, version: u64, limit: Duration) -> bool {
        suite::eventually(limit, || self.server.tools_version() != version)
    }

    fn era(&self) -> Option<Era> {
        self.server.info().map(|i| i.era)
    }

    fn ping(&self) -> Result<(), McpFailure> {
        run(self.block_on, self.server.ping())
    }

    fn close(&self) {
        run(self.block_on, self.server.close());
    }

    fn closed(&self) -> Option<Option<ConnectionError>> {
        self.server.closed()
    }

    fn stderr(&self) -> String {
        self.server.stderr()
    }

    fn warnings(&self) -> (Vec<McpWarning>, u64) {
        self.server.warnings()
    }

    fn process_id(&self) -> Option<u32> {
        self.server.process_id()
    }
}

/// omni-blocking: its own client and waiting handles.
struct Blocking(omni_blocking::Client);

impl McpDriver for Blocking {
    type Connection = BlockingConnection;

    fn connect(&self, spec: &Spec) -> Result<BlockingConnection, Error> {
        configured!(self.0, spec).connect().map(BlockingConnection)
    }
}

/// omni-blocking's handle.
#[derive(Debug)]
struct BlockingConnection(omni_blocking::McpServer);

impl McpConnection for BlockingConnection {
    fn call(&self, name: &str, arguments: Value) -> Result<ToolCallResult, McpFailure> {
        self.0.call_tool(name, arguments)
    }

    fn call_with_progress(
        &self,
        name: &str,
        arguments: Value,
        progress: async_channel::Sender<Progress>,
    ) -> Result<ToolCallResult, McpFailure> {
        self.0.call_tool_with_progress(name, arguments, progress)
    }

    fn call_abandoned(
        &self,
        name: &str,
        arguments: Value,
        after: Duration,
    ) -> Option<Result<ToolCallResult, McpFailure>> {
        // A blocking call cannot be dropped from its own thread: the tool is called as an
        // agent would, through the tool's handler future, which is dropped.
        let tool = self.0.tools().into_iter().find(|t| t.name() == name).expect("the tool");
        let handler = omni_shell::AsyncTool::from(tool).handler().cloned().expect("a handler");
        let call = async { Some(handler(arguments).await) };
        let timer = async {
            std::thread::sleep(after);
            None
        };
        futures_lite::future::block_on(futures_lite::future::or(call, timer)).map(|output| {
            output
                .map(|_| ToolCallResult { content: vec![], structured: None, is_error: false })
                .map_err(|_| McpFailure::Closed)
        })
    }

    fn list(&self) -> Vec<McpTool> {
        self.0.list_tools().to_vec()
    }

    fn tool_names(&self) -> Vec<String> {
        self.0.tools().iter().map(|t| t.name().to_string()).collect()
    }

    fn skipped(&self) -> Vec<String> {
        self.0.skipped_tools().into_iter().map(|s| s.name).collect()
    }

    fn version(&self) -> u64 {
        self.0.tools_version()
    }

    fn wait_changed(&self, version: u64, limit: Duration) -> bool {
        suite::eventually(limit, || self.0.tools_version() != version)
    }

    fn era(&self) -> Option<Era> {
        self.0.info().map(|i| i.era)
    }

    fn ping(&self) -> Result<(), McpFailure> {
        self.0.ping()
    }

    fn close(&self) {
        self.0.close();
    }

    fn closed(&self) -> Option<Option<ConnectionError>> {
        self.0.closed()
    }

    fn stderr(&self) -> String {
        self.0.stderr()
    }

    fn warnings(&self) -> (Vec<McpWarning>, u64) {
        self.0.warnings()
    }

    fn process_id(&self) -> Option<u32> {
        self.0.process_id()
    }
}

fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio")
    })
}

fn tokio_block_on(future: Pin<Box<dyn Future<Output = ()> + Send + '_>>) {
    tokio_runtime().block_on(future);
}

fn smol_block_on(future: Pin<Box<dyn Future<Output = ()> + Send + '_>>) {
    smol::block_on(future);
}

fn tokio() -> Async<omni_tokio::Tokio> {
    let client = {
        let _inside = tokio_runtime().enter();
        omni_shell::Client::<omni_tokio::Tokio>::builder().no_proxy().build().expect("client")
    };
    Async { client, block_on: tokio_block_on }
}

fn smol() -> Async<omni_smol::Smol> {
    let client = omni_shell::Client::<omni_smol::Smol>::builder().no_proxy().build().expect("client");
    Async { client, block_on: smol_block_on }
}

fn blocking() -> Blocking {
    Blocking(omni_blocking::Client::builder().no_proxy().build().expect("client"))
}

/// Each check, through each driver.
macro_rules! through_every_driver {
    ($($name:ident => |$driver:ident| $check:expr;)*) => {
        mod tokio_driver {
            use super::*;
            $(#[test] fn $name() { let $driver = &tokio(); $check; })*
        }
        mod smol_driver {
            use super::*;
            $(#[test] fn $name() { let $driver = &smol(); $check; })*
        }
        mod blocking_driver {
            use super::*;
            $(#[test] fn $name() { let $driver = &blocking(); $check; })*
        }
    };
}

through_every_driver! {
    fake_legacy_tools_work => |d| suite::fake_normal(d, FAKE, "legacy");
    fake_modern_tools_work => |d| suite::fake_normal(d, FAKE, "modern");
    a_silent_server_fails_within_its_deadlines => |d| suite::fake_silent(d, FAKE);
    a_flood_is_dropped_and_calls_still_answered => |d| suite::fake_flood(d, FAKE);
    a_huge_line_is_skipped_as_it_arrives => |d| suite::fake_huge_line(d, FAKE);
    a_server_dying_mid_call_ends_the_call_and_is_reaped => |d| suite::fake_dies(d, FAKE);
    garbage_on_stdout_is_set_aside => |d| suite::fake_garbage(d, FAKE);
    answers_to_unknown_ids_are_counted_and_the_call_times_out => |d| suite::fake_unknown_id(d, FAKE);
    a_hundred_thousand_tools_are_cut_at_the_limit => |d| suite::fake_many_tools(d, FAKE);
    shutdown_terminates_a_stubborn_server_and_its_children => |d| suite::fake_shutdown(d, FAKE);
    a_call_given_up_is_cancelled_and_the_connection_goes_on => |d| suite::fake_cancel(d, FAKE);
    environment_and_directory_reach_the_server => |d| suite::fake_env_and_dir(d, FAKE);
    a_missing_program_is_a_typed_error => |d| suite::missing_program(d);
    a_dropped_connection_leaves_no_process => |d| suite::fake_dropped(d, FAKE);
    fake_legacy_tools_over_http => |d| suite::fake_http_normal(d, FAKE, "legacy");
    fake_modern_tools_over_http => |d| suite::fake_http_normal(d, FAKE, "modern");
    hostile_http_servers_are_typed_errors_within_deadlines => |d| suite::fake_http_hostile(d, FAKE);
    server_everything_over_stdio => |d| real::everything(d, Over::Stdio);
    server_everything_over_http => |d| real::everything(d, Over::Http);
    python_sdk_server_over_stdio => |d| real::python(d, Over::Stdio);
    python_sdk_server_over_http => |d| real::python(d, Over::Http);
}

/// An agent's turn with MCP tools (a list change followed between steps, an approval gate)
/// against the mock provider, through each driver.
mod agent {
    use super::*;
    use omni_conformance::mcp_agent::{self, RejectAddTool};
    use omni_protocol::agent::AgentEvent;

    #[test]
    fn tokio_agent_follows_the_list_and_its_gate() {
        let make = |mock: &omni_testkit::MockProvider| {
            let _inside = tokio_runtime().enter();
            omni_shell::Client::<omni_tokio::Tokio>::builder()
                .provider(mock.provider())
                .no_proxy()
                .build()
                .expect("client")
        };
        tokio_runtime().block_on(mcp_agent::async_agent(make, FAKE));
    }

    #[test]
    fn smol_agent_follows_the_list_and_its_gate() {
        let make = |mock: &omni_testkit::MockProvider| {
            omni_shell::Client::<omni_smol::Smol>::builder()
                .provider(mock.provider())
                .no_proxy()
                .build()
                .expect("client")
        };
        smol::block_on(mcp_agent::async_agent(make, FAKE));
    }

    #[test]
    fn blocking_agent_follows_the_list_and_its_gate() {
        let turn_end = |events: omni_blocking::Subscription| {
            for event in events {
                if matches!(event, AgentEvent::Turn { .. }) {
                    break;
                }
            }
        };
        let mock = mcp_agent::scripted_mock();
        let client = omni_blocking::Client::builder().provider(mock.provider()).no_proxy().build().expect("client");
        let server =
            client.mcp_stdio("fake", FAKE).arg("normal").prefix_tools(true).connect().expect("the fake server");
        let agent = client.agent(mock.model()).mcp(&server).start().expect("agent");
        let (_, events) = agent.subscribe().expect("subscribed");
        agent.prompt("go").expect("prompted");
        turn_end(events);
        mcp_agent::check_requests(&mock);

        let mock = mcp_agent::approval_mock();
        let client = omni_blocking::Client::builder().provider(mock.provider()).no_proxy().build().expect("client");
        let agent = client.agent(mock.model()).mcp(&server).callbacks(RejectAddTool).start().expect("agent");
        let (_, events) = agent.subscribe().expect("subscribed");
        agent.prompt("go").expect("prompted");
        turn_end(events);
        server.refresh_tools().expect("listed again");
        let listed: Vec<String> = server.list_tools().iter().map(|t| t.name.clone()).collect();
        mcp_agent::check_rejected(&mock, &listed);
        server.close();

        let mock = mcp_agent::scripted_mock();
        let client = omni_blocking::Client::builder().provider(mock.provider()).no_proxy().build().expect("client");
        let server =
            client.mcp_stdio("fake", FAKE).arg("normal").prefix_tools(true).connect().expect("the fake server");
        let store = std::sync::Arc::new(omni_store::MemoryStore::new());
        let session = client.agent(mock.model()).mcp(&server).session(store).create().expect("session");
        let (_, events) = session.subscribe().expect("subscribed");
        session.prompt("go").expect("prompted");
        for event in events {
            if matches!(event, omni_protocol::session::SessionEvent::Agent(AgentEvent::Turn { .. })) {
                break;
            }
        }
        mcp_agent::check_requests(&mock);
        server.close();
    }
}

/// A token or an environment value given to a connection never shows in its builder's
/// `Debug`, in any driver.
#[test]
fn credentials_never_show_in_a_builders_debug() {
    let tokio = tokio();
    let shown = [
        format!("{:?}", tokio.client.mcp_http("h", "https://mcp.invalid/mcp").bearer_token("s3cret-token")),
        format!("{:?}", tokio.client.mcp_http("h", "https://mcp.invalid/mcp").header("x-api-key", "s3cret-key")),
        format!("{:?}", tokio.client.mcp_stdio("s", "server").env("API_TOKEN", "s3cret-env")),
        format!("{:?}", blocking().0.mcp_http("h", "https://mcp.invalid/mcp").bearer_token("s3cret-token")),
        format!("{:?}", blocking().0.mcp_stdio("s", "server").env("API_TOKEN", "s3cret-env")),
    ];
    for shown in shown {
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("mcp.invalid") || shown.contains("API_TOKEN"), "still useful: {shown}");
    }
}
