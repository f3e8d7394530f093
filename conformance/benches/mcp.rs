//! The MCP client (issue 27) against a minimal raw client doing the same exchange by hand,
//! both talking to the conformance crate's `mcp-fake-server` (legacy era), in one run
//! (report the ratios omni / raw of the medians):
//!
//! - `stdio_call::{tokio, tokio_current, blocking, raw}`: one `tools/call` round trip
//!   (`echo` of a short text) over stdio, one connection reused, calls one after
//!   another. The raw client writes JSON-RPC lines to the child's stdin and reads its
//!   stdout with a std `BufReader` up to the response of that id (serde_json both ways).
//! - `http_call::{tokio, tokio_current, blocking, raw}`: the same over streamable HTTP
//!   (`--http 0`). The raw client is HTTP/1.1 on one kept-alive std `TcpStream`
//!   (`TCP_NODELAY`): a POST with the session and version headers, the body read by
//!   `Content-Length` or chunked, answered as JSON or as SSE (a `tools/call` is answered
//!   as an SSE stream).
//! - `list::{tokio, raw}::<N>`: listing the tools of `many-tools` mode (100,000 listed in
//!   pages of 1,000), keeping at most N: `refresh_tools()` with `McpLimits::max_tools`
//!   N against the raw client paging through `tools/list`, each page parsed into a
//!   `serde_json::Value`, the tools kept. At N = 10,000 (the default limit) both stop
//!   after the page that goes past the limit (11 pages); at 100,000 both read all 100.
//!
//! Every omni connection is told the era (`.era(Era::Legacy)`), so that it skips the
//! probe, as the raw client does. `tokio` is a multi-thread runtime of 2 workers, the
//! calls made from its `block_on` (as `#[tokio::main]` does); `tokio_current`
//! (informational) a current-thread runtime, every task of the connection on the calling
//! thread: the difference is what the hops between threads cost.
//!
//! The fake server answers a `tools/call` over HTTP in three writes on a socket without
//! `TCP_NODELAY`, so every client waits for its delayed ACK (~40 ms a call) until the
//! server sets it; `MCP_FAKE_SERVER=path` runs another build of the server (the same
//! arguments) for every case.
//!
//! `cargo bench -p omni-conformance --bench mcp`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

use divan::{black_box, Bencher};
use omni_conformance::mcp_suite::fake_http;
use omni_protocol::mcp::{Content, Era, McpLimits, ToolCallResult};
use serde_json::{json, Value};

/// The fake server this package builds; `MCP_FAKE_SERVER` names another build of it.
const FAKE: &str = env!("CARGO_BIN_EXE_mcp-fake-server");
/// The legacy revision the fake server speaks.
const VERSION: &str = "2025-11-25";
const TEXT: &str = "hello, server";
const LEGACY_NORMAL: [&str; 3] = ["--era", "legacy", "normal"];
const LEGACY_MANY: [&str; 3] = ["--era", "legacy", "many-tools"];
/// Tools kept from `many-tools`' 100,000: the default limit, and all of them.
const KEPT: [usize; 2] = [10_000, 100_000];

fn main() {
    divan::main();
}

/// The fake server's program.
fn fake() -> &'static str {
    static PROGRAM: OnceLock<String> = OnceLock::new();
    PROGRAM.get_or_init(|| std::env::var("MCP_FAKE_SERVER").unwrap_or_else(|_| FAKE.to_owned()))
}

/// A multi-thread runtime of 2 workers.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio")
    })
}

/// A current-thread runtime: every task of the connection runs on the benchmark's thread,
/// inside its `block_on` (informational: what the hops between threads cost).
fn current_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio"))
}

fn tokio_client(runtime: &tokio::runtime::Runtime) -> omni_tokio::Client {
    let _inside = runtime.enter();
    omni_tokio::Client::builder().no_proxy().build().expect("client")
}

fn blocking_client() -> omni_blocking::Client {
    omni_blocking::Client::builder().no_proxy().build().expect("client")
}

fn echo_args() -> Value {
    json!({ "text": TEXT })
}

/// Checks an omni echo answered the text.
fn echoed(result: &ToolCallResult) {
    assert!(!result.is_error && matches!(result.content.as_slice(), [Content::Text(text)] if text == TEXT));
}

/// Checks a raw `tools/call` result echoed the text.
fn raw_echoed(result: &Value) {
    assert_eq!(result.pointer("/content/0/text").and_then(Value::as_str), Some(TEXT), "{result}");
}

// ---- tools/call over stdio --------------------------------------------------------------

mod stdio_call {
    use super::*;

    #[divan::bench(sample_count = 200, sample_size = 10)]
    fn tokio(bencher: Bencher) {
        calls(bencher, runtime());
    }

    #[divan::bench(sample_count = 200, sample_size = 10)]
    fn tokio_current(bencher: Bencher) {
        calls(bencher, current_runtime());
    }

    fn calls(bencher: Bencher, runtime: &tokio::runtime::Runtime) {
        let client = tokio_client(runtime);
        let connect = client.mcp_stdio("fake", fake()).args(LEGACY_NORMAL).era(Era::Legacy).connect();
        let server = runtime.block_on(connect).expect("connected");
        echoed(&runtime.block_on(server.call_tool("echo", echo_args())).expect("answered"));
        bencher.bench_local(|| runtime.block_on(server.call_tool("echo", echo_args())).expect("answered"));
        runtime.block_on(server.close());
    }

    #[divan::bench(sample_count = 200, sample_size = 10)]
    fn blocking(bencher: Bencher) {
        let client = blocking_client();
        let server =
            client.mcp_stdio("fake", fake()).args(LEGACY_NORMAL).era(Era::Legacy).connect().expect("connected");
        echoed(&server.call_tool("echo", echo_args()).expect("answered"));
        bencher.bench_local(|| server.call_tool("echo", echo_args()).expect("answered"));
        server.close();
    }

    #[divan::bench(sample_count = 200, sample_size = 10)]
    fn raw(bencher: Bencher) {
        let mut raw = RawStdio::start(&LEGACY_NORMAL);
        raw_echoed(&raw.request("tools/call", json!({ "name": "echo", "arguments": echo_args() })));
        bencher.bench_local(|| raw.request("tools/call", json!({ "name": "echo", "arguments": echo_args() })));
    }
}

/// The least a client can do over stdio: JSON-RPC lines on the child's pipes.
struct RawStdio {
    child: Child,
    /// Dropped to close the child's stdin (it exits at EOF).
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: Vec<u8>,
    out: Vec<u8>,
}

impl RawStdio {
    /// Starts the fake server and does the legacy handshake (no probe).
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(fake())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the fake server starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("stdout"));
        let mut raw = Self { child, stdin: Some(stdin), stdout, next_id: 0, line: Vec::new(), out: Vec::new() };
        let info = json!({ "name": "raw", "version": "0" });
        let result =
            raw.request("initialize", json!({ "protocolVersion": VERSION, "capabilities": {}, "clientInfo": info }));
        assert_eq!(result["protocolVersion"], VERSION);
        raw.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        raw
    }

    /// One message as one line, in one write.
    fn send(&mut self, message: &Value) {
        self.out.clear();
        serde_json::to_writer(&mut self.out, message).expect("serialized");
        self.out.push(b'\n');
        self.stdin.as_mut().expect("open").write_all(&self.out).expect("written to the server");
    }

    /// Sends a request and reads lines up to its response (other lines are skipped): its
    /// result.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            self.line.clear();
            let n = self.stdout.read_until(b'\n', &mut self.line).expect("read from the server");
            assert!(n > 0, "the server closed its stdout");
            let Ok(message) = serde_json::from_slice::<Value>(&self.line) else { continue };
            if message.get("id").and_then(Value::as_u64) == Some(id) {
                return result_of(message);
            }
        }
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

/// A response's result (an error response fails the benchmark).
fn result_of(mut message: Value) -> Value {
    if let Some(error) = message.get("error") {
        panic!("the server answered an error: {error}");
    }
    message.get_mut("result").map(Value::take).expect("a result")
}

// ---- tools/call over streamable HTTP ----------------------------------------------------

mod http_call {
    use super::*;

    #[divan::bench(sample_count = 100, sample_size = 5)]
    fn tokio(bencher: Bencher) {
        calls(bencher, runtime());
    }

    #[divan::bench(sample_count = 100, sample_size = 5)]
    fn tokio_current(bencher: Bencher) {
        calls(bencher, current_runtime());
    }

    fn calls(bencher: Bencher, runtime: &tokio::runtime::Runtime) {
        let (_running, url) = fake_http(fake(), "legacy", "normal");
        let client = tokio_client(runtime);
        let server = runtime.block_on(client.mcp_http("fake", url).era(Era::Legacy).connect()).expect("connected");
        echoed(&runtime.block_on(server.call_tool("echo", echo_args())).expect("answered"));
        bencher.bench_local(|| runtime.block_on(server.call_tool("echo", echo_args())).expect("answered"));
        runtime.block_on(server.close());
    }

    #[divan::bench(sample_count = 100, sample_size = 5)]
    fn blocking(bencher: Bencher) {
        let (_running, url) = fake_http(fake(), "legacy", "normal");
        let client = blocking_client();
        let server = client.mcp_http("fake", url).era(Era::Legacy).connect().expect("connected");
        echoed(&server.call_tool("echo", echo_args()).expect("answered"));
        bencher.bench_local(|| server.call_tool("echo", echo_args()).expect("answered"));
        server.close();
    }

    #[divan::bench(sample_count = 100, sample_size = 5)]
    fn raw(bencher: Bencher) {
        let (_running, url) = fake_http(fake(), "legacy", "normal");
        let mut raw = RawHttp::connect(&url);
        raw_echoed(&raw.request("tools/call", json!({ "name": "echo", "arguments": echo_args() })));
        bencher.bench_local(|| raw.request("tools/call", json!({ "name": "echo", "arguments": echo_args() })));
    }
}

/// A response as the raw HTTP client reads it.
struct Response {
    status: u16,
    /// Lower-case names.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The least a client can do over streamable HTTP: HTTP/1.1 on one kept-alive
/// connection (opened again if the server closes it).
struct RawHttp {
    /// `host:port`.
    authority: String,
    path: String,
    connection: Option<(BufReader<TcpStream>, TcpStream)>,
    session: Option<String>,
    next_id: u64,
    out: Vec<u8>,
    line: String,
}

impl RawHttp {
    /// Connects to `url` (`http://host:port/path`) and does the legacy handshake.
    fn connect(url: &str) -> Self {
        let rest = url.strip_prefix("http://").expect("an http URL");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut raw = Self {
            authority: authority.to_owned(),
            path: if path.is_empty() { "/".to_owned() } else { path.to_owned() },
            connection: None,
            session: None,
            next_id: 0,
            out: Vec::new(),
            line: String::new(),
        };
        let info = json!({ "name": "raw", "version": "0" });
        let params = json!({ "protocolVersion": VERSION, "capabilities": {}, "clientInfo": info });
        let id = raw.take_id();
        let response = raw.post(&json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": params }));
        raw.session = response.header("mcp-session-id").map(str::to_owned);
        assert!(raw.session.is_some(), "initialize assigns a session");
        assert_eq!(answer(&response, id)["protocolVersion"], VERSION);
        let accepted = raw.post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        assert_eq!(accepted.status, 202, "a notification is accepted");
        raw
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A request's result.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.take_id();
        let response = self.post(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        answer(&response, id)
    }

    /// POSTs `message` (head and body in one write) and reads the whole response.
    fn post(&mut self, message: &Value) -> Response {
        let body = serde_json::to_vec(message).expect("serialized");
        self.out.clear();
        let _ = write!(
            self.out,
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n\
             Content-Length: {}\r\n",
            self.path,
            self.authority,
            body.len()
        );
        if let Some(session) = &self.session {
            let _ = write!(self.out, "Mcp-Session-Id: {session}\r\n");
        }
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(&body);
        let (reader, mut writer) = match self.connection.take() {
            Some(connection) => connection,
            None => {
                let stream = TcpStream::connect(&self.authority).expect("connected");
                stream.set_nodelay(true).expect("TCP_NODELAY");
                (BufReader::with_capacity(64 * 1024, stream.try_clone().expect("cloned")), stream)
            }
        };
        writer.write_all(&self.out).expect("sent");
        let mut reader = reader;
        let (response, keep) = read_response(&mut reader, &mut self.line);
        if keep {
            self.connection = Some((reader, writer));
        }
        response
    }
}

/// Reads one response; whether the connection may carry another.
fn read_response(reader: &mut BufReader<TcpStream>, line: &mut String) -> (Response, bool) {
    next_line(reader, line);
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status line");
    let mut headers = Vec::new();
    loop {
        next_line(reader, line);
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').expect("a header line");
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let mut response = Response { status, headers, body: Vec::new() };
    let mut keep = !response.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    if response.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            next_line(reader, line);
            let size = line.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size, 16).expect("a chunk size");
            if size == 0 {
                // Trailers, up to the blank line.
                loop {
                    next_line(reader, line);
                    if line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = response.body.len();
            response.body.resize(start + size, 0);
            reader.read_exact(&mut response.body[start..]).expect("a chunk");
            next_line(reader, line);
        }
    } else if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().expect("a content length");
        response.body.resize(length, 0);
        reader.read_exact(&mut response.body).expect("the body");
    } else if !matches!(status, 100..=199 | 204 | 304) {
        // Delimited by the connection's end.
        reader.read_to_end(&mut response.body).expect("the body");
        keep = false;
    }
    (response, keep)
}

/// Reads one line (the connection must not end there).
fn next_line(reader: &mut BufReader<TcpStream>, line: &mut String) {
    line.clear();
    let n = reader.read_line(line).expect("read from the server");
    assert!(n > 0, "the server closed the connection");
}

/// The result of the response of `id` in `response`: a JSON body, or an SSE stream whose
/// events are the server's messages (notifications, then the response).
fn answer(response: &Response, id: u64) -> Value {
    assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
    let is_id = |message: &Value| message.get("id").and_then(Value::as_u64) == Some(id);
    let content_type = response.header("content-type").unwrap_or_default();
    if content_type.starts_with("application/json") {
        let message: Value = serde_json::from_slice(&response.body).expect("a JSON body");
        assert!(is_id(&message), "the response of another request");
        return result_of(message);
    }
    assert!(content_type.starts_with("text/event-stream"), "content type {content_type}");
    let mut data = Vec::new();
    // A blank line ends an event; a final event without one ends with the body.
    for line in response.body.split(|&b| b == b'\n').chain([&b""[..]]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                if let Ok(message) = serde_json::from_slice::<Value>(&data) {
                    if is_id(&message) {
                        return result_of(message);
                    }
                }
                data.clear();
            }
        } else if let Some(value) = line.strip_prefix(b"data:") {
            if !data.is_empty() {
                data.push(b'\n');
            }
            data.extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
        }
    }
    panic!("the stream ended without the response")
}

// ---- listing many tools ------------------------------------------------------------------

mod list {
    use super::*;

    #[divan::bench(consts = KEPT, sample_count = 10, sample_size = 1)]
    fn tokio<const N: usize>(bencher: Bencher) {
        let runtime = runtime();
        let client = tokio_client(runtime);
        let limits = McpLimits { max_tools: N, ..McpLimits::default() };
        let connect = client.mcp_stdio("fake", fake()).args(LEGACY_MANY).era(Era::Legacy).limits(limits).connect();
        let server = runtime.block_on(connect).expect("connected");
        assert_eq!(server.list_tools().len(), N);
        let version = server.tools_version();
        bencher.bench_local(|| runtime.block_on(server.refresh_tools()).expect("listed"));
        assert!(server.tools_version() > version, "every refresh brings a new list");
        assert_eq!(server.list_tools().len(), N);
        runtime.block_on(server.close());
    }

    #[divan::bench(consts = KEPT, sample_count = 10, sample_size = 1)]
    fn raw<const N: usize>(bencher: Bencher) {
        let mut raw = RawStdio::start(&LEGACY_MANY);
        assert_eq!(list_raw(&mut raw, N).len(), N);
        bencher.bench_local(|| list_raw(&mut raw, N));
    }
}

/// Pages through `tools/list`, keeping at most `max` tools: stops after the last page, or
/// after the page that went past `max` (as omni does).
fn list_raw(raw: &mut RawStdio, max: usize) -> Vec<Value> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        let mut result = raw.request("tools/list", params);
        let mut over = false;
        if let Some(Value::Array(page)) = result.get_mut("tools").map(Value::take) {
            for tool in page {
                if tools.len() < max {
                    tools.push(tool);
                } else {
                    over = true;
                }
            }
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !over => cursor = Some(next.to_owned()),
            _ => return black_box(tools),
        }
    }
}
