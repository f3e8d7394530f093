//! MCP servers through every driver, written once: each driver's public MCP API behind
//! one small trait ([`McpDriver`], [`McpConnection`]), the checks as plain functions
//! over it. omni-tokio and omni-smol pass the shell's async handles with their runtime's
//! `block_on`; omni-blocking passes its own waiting handles.
//!
//! Two kinds of server: the scriptable fake (`mcp-fake-server`, this crate's binary:
//! normal and hostile behaviour, both eras, stdio and HTTP), and the real ones installed
//! by `scripts/mcp-servers.sh` (the reference `server-everything` from npm, a server on
//! the official Python SDK from PyPI), found through the environment that script prints.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use omni_protocol::mcp::{CallError, ConnectionError, Content, Era, McpLimits, McpTool, McpWarning, ToolCallResult};
use omni_shell::mcp::Progress;
use omni_shell::{Error, McpFailure};
use serde_json::{json, Value};

/// Where a server is and how to reach it.
#[derive(Debug, Clone)]
pub enum Target {
    /// A child process.
    Stdio {
        /// The program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
        /// Variables set in its environment.
        env: Vec<(String, String)>,
        /// Its working directory.
        dir: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The URL.
        url: String,
        /// A bearer token.
        token: Option<String>,
    },
}

/// A connection to set up: every option the checks use.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The server's name.
    pub name: String,
    /// Where it is.
    pub target: Target,
    /// Prefix the tools' names.
    pub prefix: bool,
    /// The request timeout.
    pub request_timeout: Duration,
    /// The probe timeout.
    pub probe_timeout: Duration,
    /// The bounds.
    pub limits: McpLimits,
    /// The shutdown grace.
    pub grace: Duration,
    /// A remembered era.
    pub era: Option<Era>,
}

impl Spec {
    /// A stdio server with quick timeouts (the fake answers at once).
    pub fn stdio(name: &str, program: impl Into<OsString>, args: &[&str]) -> Self {
        let target = Target::Stdio {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            env: Vec::new(),
            dir: None,
        };
        Self::new(name, target)
    }

    /// An HTTP server.
    pub fn http(name: &str, url: &str) -> Self {
        Self::new(name, Target::Http { url: url.into(), token: None })
    }

    fn new(name: &str, target: Target) -> Self {
        Self {
            name: name.into(),
            target,
            prefix: false,
            request_timeout: Duration::from_secs(20),
            probe_timeout: Duration::from_secs(10),
            limits: McpLimits::default(),
            grace: Duration::from_secs(2),
            era: None,
        }
    }
}

/// A driver's MCP API.
pub trait McpDriver {
    /// Its connection handle.
    type Connection: McpConnection;
    /// `client.mcp_stdio(…)` / `client.mcp_http(…)` with `spec`'s options, then
    /// `connect`.
    fn connect(&self, spec: &Spec) -> Result<Self::Connection, Error>;
}

/// A driver's connection handle, its calls waiting.
pub trait McpConnection: std::fmt::Debug {
    /// `call_tool`.
    fn call(&self, name: &str, arguments: Value) -> Result<ToolCallResult, McpFailure>;
    /// `call_tool_with_progress`.
    fn call_with_progress(
        &self,
        name: &str,
        arguments: Value,
        progress: async_channel::Sender<Progress>,
    ) -> Result<ToolCallResult, McpFailure>;
    /// `call_tool`, given up after `after` (its future dropped): the call's result if it
    /// came sooner.
    fn call_abandoned(
        &self,
        name: &str,
        arguments: Value,
        after: Duration,
    ) -> Option<Result<ToolCallResult, McpFailure>>;
    /// `list_tools`.
    fn list(&self) -> Vec<McpTool>;
    /// The names of `tools()` (the omni tools).
    fn tool_names(&self) -> Vec<String>;
    /// `skipped_tools`, their server names.
    fn skipped(&self) -> Vec<String>;
    /// `tools_version`.
    fn version(&self) -> u64;
    /// `tools_changed`, bounded by `limit`: whether it changed.
    fn wait_changed(&self, version: u64, limit: Duration) -> bool;
    /// `info().era`.
    fn era(&self) -> Option<Era>;
    /// `ping`.
    fn ping(&self) -> Result<(), McpFailure>;
    /// `close`.
    fn close(&self);
    /// `closed`.
    fn closed(&self) -> Option<Option<ConnectionError>>;
    /// `stderr`.
    fn stderr(&self) -> String;
    /// `warnings`.
    fn warnings(&self) -> (Vec<McpWarning>, u64);
    /// `process_id`.
    fn process_id(&self) -> Option<u32>;
}

/// The text of a result's text blocks, joined.
pub fn text_of(result: &ToolCallResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// Whether process `pid` is gone for good: no entry at all (reaped); a zombie keeps its
/// entry until it is waited for.
pub fn process_gone(pid: u32) -> bool {
    std::fs::metadata(format!("/proc/{pid}")).is_err()
}

/// Waits up to `limit` for `done`.
pub fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

/// The fake server's usual tools work: a call, a structured result, an error result, an
/// image, progress, a list change, pagination, a bad schema skipped, stderr kept, a ping.
pub fn fake_normal<D: McpDriver>(driver: &D, fake: &str, era: &str) {
    let spec = Spec { prefix: true, ..Spec::stdio("fake", fake, &["--era", era, "normal"]) };
    let server = driver.connect(&spec).expect("connected");
    let expected = if era == "modern" { Era::Modern } else { Era::Legacy };
    assert_eq!(server.era(), Some(expected));
    let names: Vec<String> = server.list().into_iter().map(|t| t.name).collect();
    for tool in ["echo", "add", "fail", "slow", "progress", "image", "add_tool", "log"] {
        assert!(names.iter().any(|n| n == tool), "{tool} listed (two pages): {names:?}");
    }
    assert_eq!(server.skipped(), ["bad_schema"], "only the tool with a bad schema is left out");
    let dropped = |w: &McpWarning| matches!(w, McpWarning::ToolDropped { name: Some(n), .. } if n == "bad_schema");
    assert!(server.warnings().0.iter().any(dropped), "with a warning: {:?}", server.warnings());
    assert!(server.tool_names().iter().all(|n| n.starts_with("fake__")), "{:?}", server.tool_names());
    let echo = server.call("echo", json!({"text": "hi"})).expect("echo");
    assert_eq!(text_of(&echo), "hi");
    let add = server.call("add", json!({"a": 2, "b": 3})).expect("add");
    assert_eq!(add.structured, Some(json!({"sum": 5})));
    let failed = server.call("fail", json!({"reason": "no such city"})).expect("an error result is a result");
    assert!(failed.is_error && text_of(&failed) == "no such city", "{failed:?}");
    let image = server.call("image", json!({})).expect("image");
    assert!(image.content.iter().any(|c| matches!(c, Content::Image { mime_type, .. } if mime_type == "image/png")));
    let (progress, reports) = async_channel::bounded(16);
    let done = server.call_with_progress("progress", json!({"steps": 3}), progress).expect("progress");
    assert_eq!(text_of(&done), "done 3");
    assert_eq!(reports.len(), 3, "every progress report reached the caller");
    if era == "legacy" {
        server.ping().expect("a legacy server answers pings");
    }
    {
        // Legacy: a notification; modern: the `subscriptions/listen` stream.
        let version = server.version();
        server.call("add_tool", json!({"name": "fresh"})).expect("add_tool");
        assert!(server.wait_changed(version, Duration::from_secs(10)), "the list change was followed");
        assert!(server.list().iter().any(|t| t.name == "fresh"));
        let fresh = server.call("fresh", json!({})).expect("the new tool");
        assert_eq!(text_of(&fresh), "I am fresh");
    }
    assert!(eventually(Duration::from_secs(5), || server.stderr().contains("fake server starting")));
    let pid = server.process_id().expect("a stdio server has a pid");
    server.close();
    assert_eq!(server.closed(), Some(None));
    assert!(process_gone(pid), "the server is reaped by the time close returns");
}

/// A server that never answers: the connection fails within its deadlines, typed.
pub fn fake_silent<D: McpDriver>(driver: &D, fake: &str) {
    let spec = Spec {
        probe_timeout: Duration::from_millis(200),
        request_timeout: Duration::from_millis(300),
        grace: Duration::from_millis(200),
        ..Spec::stdio("silent", fake, &["silent"])
    };
    let started = Instant::now();
    let error = driver.connect(&spec).expect_err("nothing answers");
    assert!(
        matches!(error, Error::Mcp(McpFailure::Connection(ConnectionError::Handshake(CallError::Timeout { .. })))),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "within the deadlines: {:?}", started.elapsed());
}

/// A server that floods notifications: calls are still answered, the flood is counted
/// and dropped past the budget.
pub fn fake_flood<D: McpDriver>(driver: &D, fake: &str) {
    let server = driver.connect(&Spec::stdio("flood", fake, &["flood"])).expect("connected");
    let echo = server.call("echo", json!({"text": "through"})).expect("answered through the flood");
    assert_eq!(text_of(&echo), "through");
    assert!(
        eventually(Duration::from_secs(10), || server
            .warnings()
            .0
            .iter()
            .any(|w| matches!(w, McpWarning::Flood { .. }))),
        "the flood is told: {:?}",
        server.warnings()
    );
    let pid = server.process_id().expect("pid");
    server.close();
    assert!(process_gone(pid));
}

/// A 1 GiB line is skipped as it arrives, never buffered; the answer after it arrives.
pub fn fake_huge_line<D: McpDriver>(driver: &D, fake: &str) {
    let spec = Spec { request_timeout: Duration::from_secs(60), ..Spec::stdio("huge", fake, &["huge-line"]) };
    let server = driver.connect(&spec).expect("connected");
    let echo = server.call("echo", json!({"text": "after"})).expect("answered after the huge line");
    assert_eq!(text_of(&echo), "after");
    assert!(server.warnings().0.iter().any(|w| matches!(w, McpWarning::LineTooLong { .. })), "{:?}", server.warnings());
    server.close();
}

/// A server that dies mid-call: the call ends at once, the connection says why, and the
/// child is reaped.
pub fn fake_dies<D: McpDriver>(driver: &D, fake: &str) {
    let server = driver.connect(&Spec::stdio("dies", fake, &["die-mid-call"])).expect("connected");
    let pid = server.process_id().expect("pid");
    let started = Instant::now();
    let error = server.call("echo", json!({"text": "x"})).expect_err("no answer");
    assert!(matches!(error, McpFailure::Call(CallError::Closed)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.closed(), Some(Some(ConnectionError::ServerClosed)));
    assert!(eventually(Duration::from_secs(5), || process_gone(pid)), "no zombie");
    let after = server.call("echo", json!({"text": "x"})).expect_err("closed");
    assert!(matches!(after, McpFailure::Closed | McpFailure::Refused(_) | McpFailure::Call(CallError::Closed)));
}

/// Lines that are not JSON, or not JSON-RPC, are set aside with a warning.
pub fn fake_garbage<D: McpDriver>(driver: &D, fake: &str) {
    let server = driver.connect(&Spec::stdio("garbage", fake, &["garbage"])).expect("connected");
    let echo = server.call("echo", json!({"text": "fine"})).expect("answered");
    assert_eq!(text_of(&echo), "fine");
    let (warnings, _) = server.warnings();
    assert!(warnings.iter().any(|w| matches!(w, McpWarning::NotJson { .. })), "{warnings:?}");
    assert!(warnings.iter().any(|w| matches!(w, McpWarning::NotJsonRpc { .. })), "{warnings:?}");
    server.close();
}

/// Answers to ids never used: counted; the call itself times out.
pub fn fake_unknown_id<D: McpDriver>(driver: &D, fake: &str) {
    let spec = Spec { request_timeout: Duration::from_millis(500), ..Spec::stdio("ids", fake, &["unknown-id"]) };
    let server = driver.connect(&spec).expect("connected");
    let started = Instant::now();
    let error = server.call("echo", json!({"text": "x"})).expect_err("never answered");
    assert!(matches!(error, McpFailure::Call(CallError::Timeout { .. })), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(server.warnings().0.iter().any(|w| matches!(w, McpWarning::UnknownResponse)), "{:?}", server.warnings());
    server.close();
}

/// 100,000 tools: the first 10,000 are kept, the rest dropped with one warning.
pub fn fake_many_tools<D: McpDriver>(driver: &D, fake: &str) {
    let server = driver.connect(&Spec::stdio("many", fake, &["many-tools"])).expect("connected");
    assert_eq!(server.list().len(), McpLimits::default().max_tools);
    assert!(
        server.warnings().0.iter().any(|w| matches!(w, McpWarning::ToolsTruncated { .. })),
        "{:?}",
        server.warnings()
    );
    server.close();
}

/// A server that ignores the end of its stdin is terminated, and what it started goes
/// with it.
pub fn fake_shutdown<D: McpDriver>(driver: &D, fake: &str) {
    let spec = Spec { grace: Duration::from_millis(300), ..Spec::stdio("stubborn", fake, &["ignore-stdin-close"]) };
    let server = driver.connect(&spec).expect("connected");
    let pid = server.process_id().expect("pid");
    let started = Instant::now();
    server.close();
    assert!(process_gone(pid), "terminated and reaped");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

    let server = driver.connect(&Spec::stdio("parent", fake, &["spawn-child"])).expect("connected");
    assert!(eventually(Duration::from_secs(5), || server.stderr().contains("child pid ")));
    let stderr = server.stderr();
    let child: u32 = stderr
        .split("child pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the child's pid");
    server.close();
    assert!(eventually(Duration::from_secs(5), || process_gone(child)), "the server's own child is gone too");
}

/// A call given up (its future dropped) is cancelled on the server; the connection goes
/// on.
pub fn fake_cancel<D: McpDriver>(driver: &D, fake: &str) {
    let server = driver.connect(&Spec::stdio("cancel", fake, &["normal"])).expect("connected");
    let abandoned = server.call_abandoned("slow", json!({"ms": 5_000}), Duration::from_millis(100));
    assert!(abandoned.is_none(), "the slow call was still running");
    let echo = server.call("echo", json!({"text": "still here"})).expect("the connection goes on");
    assert_eq!(text_of(&echo), "still here");
    server.close();
}

/// The environment and working directory given reach the server.
pub fn fake_env_and_dir<D: McpDriver>(driver: &D, fake: &str) {
    let dir = std::env::temp_dir();
    let script = "echo \"dir=$(pwd) token=$OMNI_TEST_TOKEN\" >&2; exec \"$0\" normal";
    let target = Target::Stdio {
        program: "sh".into(),
        args: vec!["-c".into(), script.into(), fake.into()],
        env: vec![("OMNI_TEST_TOKEN".into(), "t0ken".into())],
        dir: Some(dir.clone()),
    };
    let server = driver.connect(&Spec::new("env", target)).expect("connected");
    let expected = format!("dir={} token=t0ken", dir.canonicalize().unwrap_or(dir).display());
    assert!(eventually(Duration::from_secs(5), || server.stderr().contains(&expected)), "{}", server.stderr());
    server.close();
}

/// A program that does not exist: a typed error naming it.
pub fn missing_program<D: McpDriver>(driver: &D) {
    let error = driver.connect(&Spec::stdio("nothing", "/no/such/mcp-server", &[])).expect_err("no such program");
    assert!(
        matches!(&error, Error::Mcp(McpFailure::Spawn { program, .. }) if program == "/no/such/mcp-server"),
        "{error:?}"
    );
}

/// The fake server over streamable HTTP in `mode` (`--http 0`): its URL, and the
/// process, killed when dropped.
pub fn fake_http(fake: &str, era: &str, mode: &str) -> (crate::mcp_real::Running, String) {
    let mut command = std::process::Command::new(fake);
    command.args(["--era", era, "--http", "0", mode]);
    crate::mcp_real::start_http(command, |line| {
        line.strip_prefix("listening on ").map(|port| format!("http://127.0.0.1:{}/mcp", port.trim()))
    })
}

/// The fake server's tools over HTTP, in each era: calls, an SSE answer with progress,
/// a list change on a call's stream (legacy), a bearer token that reaches the server
/// (and one missing, refused).
pub fn fake_http_normal<D: McpDriver>(driver: &D, fake: &str, era: &str) {
    let (running, url) = fake_http(fake, era, "normal");
    let server = driver.connect(&Spec::http("fake", &url)).expect("connected over HTTP");
    let expected = if era == "modern" { Era::Modern } else { Era::Legacy };
    assert_eq!(server.era(), Some(expected));
    assert_eq!(server.skipped(), ["bad_schema"]);
    assert_eq!(text_of(&server.call("echo", json!({"text": "over http"})).expect("echo")), "over http");
    let (progress, reports) = async_channel::bounded(16);
    let done = server.call_with_progress("progress", json!({"steps": 2}), progress).expect("progress");
    assert_eq!(text_of(&done), "done 2");
    assert_eq!(reports.len(), 2, "progress on the call's SSE stream");
    let failed = server.call("fail", json!({"reason": "nope"})).expect("an error result");
    assert!(failed.is_error);
    if era == "legacy" {
        server.ping().expect("pong");
        let version = server.version();
        server.call("add_tool", json!({"name": "fresh"})).expect("add_tool");
        assert!(server.wait_changed(version, Duration::from_secs(10)), "the change on the call's stream was followed");
        assert_eq!(text_of(&server.call("fresh", json!({})).expect("fresh")), "I am fresh");
    }
    server.close();
    if era == "legacy" {
        let ended = eventually(Duration::from_secs(5), || running.printed("http DELETE /mcp"));
        assert!(ended, "closing ends the legacy session on the server (DELETE)");
    }

    let (_running, url) = fake_http(fake, era, "check-auth");
    let token = Spec {
        target: Target::Http { url: url.clone(), token: Some("test-token".into()) },
        ..Spec::http("auth", &url)
    };
    let server = driver.connect(&token).expect("the token reached the server");
    assert_eq!(text_of(&server.call("echo", json!({"text": "authorized"})).expect("echo")), "authorized");
    server.close();
    let refused = driver.connect(&Spec::http("auth", &url)).expect_err("no token, no connection");
    assert!(matches!(refused, Error::Mcp(_)), "{refused:?}");
    assert!(!format!("{refused:?} {refused}").contains("test-token"));
}

/// Hostile servers over HTTP: one that never answers, one that drops the connection
/// mid-call, one that answers garbage, one that answers other ids, one that sends 1 GiB:
/// each a typed error within its deadline.
pub fn fake_http_hostile<D: McpDriver>(driver: &D, fake: &str) {
    let quick = |url: &str| Spec {
        probe_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_millis(500),
        ..Spec::http("hostile", url)
    };
    let (_running, url) = fake_http(fake, "legacy", "silent");
    let started = Instant::now();
    let error = driver.connect(&quick(&url)).expect_err("nothing answers");
    assert!(matches!(error, Error::Mcp(McpFailure::Connection(_))), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());

    for (mode, what) in [("die-mid-call", "dropped"), ("garbage", "not JSON"), ("unknown-id", "another id")] {
        let (_running, url) = fake_http(fake, "legacy", mode);
        let server = driver.connect(&quick(&url)).expect("connected");
        let started = Instant::now();
        let error = server.call("echo", json!({"text": "x"})).expect_err(what);
        assert!(matches!(error, McpFailure::Call(_)), "{mode}: {error:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "{mode}: {:?}", started.elapsed());
        server.close();
    }

    let (_running, url) = fake_http(fake, "legacy", "huge-line");
    let server = driver.connect(&Spec::http("huge", &url)).expect("connected");
    let error = server.call("echo", json!({"text": "x"})).expect_err("too large");
    assert!(matches!(error, McpFailure::Call(CallError::TooLarge { .. })), "{error:?}");
    server.close();

    let (_running, url) = fake_http(fake, "legacy", "many-tools");
    let server = driver.connect(&Spec::http("many", &url)).expect("connected");
    assert_eq!(server.list().len(), McpLimits::default().max_tools);
    server.close();
}

/// A connection whose every handle is dropped, unclosed, shuts its server down: no
/// process is left, and no zombie.
pub fn fake_dropped<D: McpDriver>(driver: &D, fake: &str) {
    let server = driver.connect(&Spec::stdio("dropped", fake, &["normal"])).expect("connected");
    let pid = server.process_id().expect("pid");
    assert!(!process_gone(pid));
    drop(server);
    assert!(eventually(Duration::from_secs(10), || process_gone(pid)), "shut down and reaped after the drop");
}
