//! The real MCP servers of the checks, installed from the registries by
//! `scripts/mcp-servers.sh` (pinned versions) and found through the environment it
//! prints: the reference `@modelcontextprotocol/server-everything` (npm; the 2025-11-25
//! era) and `conformance/mcp/python_server.py` on the official Python SDK (`mcp` on
//! PyPI; the 2026-07-28 era), each over stdio and over streamable HTTP.
//!
//! Outside CI, without that environment, the checks say they were skipped; in CI
//! (`CI=true`) a missing server fails them.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use omni_protocol::mcp::{Content, Era};
use serde_json::json;

use crate::mcp_suite::{eventually, text_of, McpConnection, McpDriver, Spec};

/// Which real server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Real {
    /// `server-everything` (npm).
    Everything,
    /// The Python SDK's server.
    Python,
}

/// Over which transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// A child process.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// A variable of `scripts/mcp-servers.sh env`, or `None` (said, or a failure in CI).
fn setting(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Some(value),
        _ if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("{name} is not set: CI installs the MCP servers (scripts/mcp-servers.sh)")
        }
        _ => {
            eprintln!("skipped: {name} is not set (run `eval \"$(bash scripts/mcp-servers.sh env)\"`)");
            None
        }
    }
}

/// A server process the test started (HTTP servers), killed when dropped, and what it
/// printed so far.
#[derive(Debug)]
pub struct Running(Child, std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Running {
    /// Whether a line it printed contains `text`.
    pub fn printed(&self, text: &str) -> bool {
        self.1.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().any(|line| line.contains(text))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on loopback (the everything server cannot pick its own).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.local_addr().expect("its address").port()
}

/// Starts `command`, waits for the line (on stdout or stderr) in which `ready` finds
/// the URL.
pub fn start_http(
    mut command: Command,
    ready: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> (Running, String) {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("the server starts");
    let (found, url) = mpsc::channel();
    let ready = std::sync::Arc::new(ready);
    let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for pipe in [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child.stderr.take().map(|p| Box::new(p) as _),
    ]
    .into_iter()
    .flatten()
    {
        let (found, ready, printed) = (found.clone(), ready.clone(), printed.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(url) = ready(&line) {
                    let _ = found.send(url);
                }
                // Bounded: a server's first lines are what the checks look at.
                let mut printed = printed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if printed.len() < 100_000 {
                    printed.push(line);
                }
            }
        });
    }
    let running = Running(child, printed);
    let url = url.recv_timeout(Duration::from_secs(30)).expect("the server says it listens");
    (running, url)
}

/// How to reach `real` over `over`: the connection's spec, and the process to keep
/// alive for HTTP. `None` when the servers are not installed (outside CI).
pub fn spec(real: Real, over: Over) -> Option<(Spec, Option<Running>)> {
    match (real, over) {
        (Real::Everything, Over::Stdio) => {
            let (node, js) = (setting("OMNI_MCP_NODE")?, setting("OMNI_MCP_EVERYTHING_JS")?);
            Some((Spec::stdio("everything", node, &[&js, "stdio"]), None))
        }
        (Real::Everything, Over::Http) => {
            let (node, js) = (setting("OMNI_MCP_NODE")?, setting("OMNI_MCP_EVERYTHING_JS")?);
            let port = free_port();
            let mut command = Command::new(node);
            command.arg(js).arg("streamableHttp").env("PORT", port.to_string());
            let (running, url) = start_http(command, move |line| {
                line.contains("listening on port").then(|| format!("http://127.0.0.1:{port}/mcp"))
            });
            Some((Spec::http("everything", &url), Some(running)))
        }
        (Real::Python, Over::Stdio) => {
            let (python, script) = (setting("OMNI_MCP_PYTHON")?, setting("OMNI_MCP_PYSERVER")?);
            Some((Spec::stdio("python", python, &[&script, "stdio"]), None))
        }
        (Real::Python, Over::Http) => {
            let (python, script) = (setting("OMNI_MCP_PYTHON")?, setting("OMNI_MCP_PYSERVER")?);
            let mut command = Command::new(python);
            command.arg(script).args(["http", "--port", "0"]);
            let (running, url) =
                start_http(command, |line| line.strip_prefix("listening ").map(|url| url.trim().to_string()));
            Some((Spec::http("python", &url), Some(running)))
        }
    }
}

/// The reference server: its era, a call, an image, structured content, progress, an
/// error result, a ping, a call given up, and the connection going on after it.
pub fn everything<D: McpDriver>(driver: &D, over: Over) {
    let Some((spec, _running)) = spec(Real::Everything, over) else { return };
    let server = driver.connect(&spec).expect("connected to server-everything");
    assert_eq!(server.era(), Some(Era::Legacy), "server-everything speaks 2025-11-25");
    let echo = server.call("echo", json!({"message": "hi"})).expect("echo");
    assert_eq!(text_of(&echo), "Echo: hi");
    let image = server.call("get-tiny-image", json!({})).expect("image");
    assert!(image.content.iter().any(|c| matches!(c, Content::Image { .. })), "{image:?}");
    let weather = server.call("get-structured-content", json!({"location": "Chicago"})).expect("structured");
    assert!(weather.structured.as_ref().is_some_and(|s| s.get("temperature").is_some()), "{weather:?}");
    let (progress, reports) = async_channel::bounded(16);
    let long = json!({"duration": 0.4, "steps": 2});
    server.call_with_progress("trigger-long-running-operation", long, progress).expect("long operation");
    assert!(!reports.is_empty(), "progress was reported");
    let unknown = server.call("no-such-tool", json!({})).expect("the server answers with an error result");
    assert!(unknown.is_error, "{unknown:?}");
    server.ping().expect("pong");
    let abandoned = server.call_abandoned(
        "trigger-long-running-operation",
        json!({"duration": 30, "steps": 10}),
        Duration::from_millis(300),
    );
    assert!(abandoned.is_none(), "still running when given up");
    let again = server.call("echo", json!({"message": "again"})).expect("the connection goes on");
    assert_eq!(text_of(&again), "Echo: again");
    server.close();
}

/// The Python SDK's server: its era, structured content, an error result, progress, an
/// image, a call given up, a list change followed and the new tool called.
pub fn python<D: McpDriver>(driver: &D, over: Over) {
    let Some((spec, _running)) = spec(Real::Python, over) else { return };
    let server = driver.connect(&spec).expect("connected to the Python server");
    assert_eq!(server.era(), Some(Era::Modern), "the Python SDK speaks 2026-07-28");
    let add = server.call("add", json!({"a": 2, "b": 3})).expect("add");
    assert_eq!(add.structured, Some(json!({"sum": 5})));
    let failed = server.call("fail", json!({"reason": "broken"})).expect("an error result");
    assert!(failed.is_error && text_of(&failed).contains("broken"), "{failed:?}");
    let (progress, reports) = async_channel::bounded(16);
    let done = server.call_with_progress("progress", json!({"steps": 3}), progress).expect("progress");
    assert!(text_of(&done).contains("done 3"), "{done:?}");
    assert_eq!(reports.len(), 3, "each step reported");
    let image = server.call("image", json!({})).expect("image");
    assert!(image.content.iter().any(|c| matches!(c, Content::Image { .. })), "{image:?}");
    let abandoned = server.call_abandoned("sleep", json!({"seconds": 30}), Duration::from_millis(300));
    assert!(abandoned.is_none(), "still sleeping when given up");
    let version = server.version();
    server.call("add_tool", json!({"name": "fresh"})).expect("add_tool");
    assert!(server.wait_changed(version, Duration::from_secs(10)), "the list change was followed");
    assert!(eventually(Duration::from_secs(5), || server.list().iter().any(|t| t.name == "fresh")));
    let fresh = server.call("fresh", json!({})).expect("the new tool");
    assert_eq!(text_of(&fresh), "I am fresh");
    server.close();
}
