//! `mcp-fake-server`: a scriptable MCP server for the MCP client's integration tests, to
//! drive the client through normal and hostile behaviour.
//!
//! ```text
//! mcp-fake-server [--era legacy|modern] [--http PORT] MODE
//! ```
//!
//! Over stdio it speaks newline-delimited JSON-RPC 2.0 on stdin/stdout (a thread per
//! `tools/call`, so a slow call blocks nothing, and `notifications/cancelled` honoured by
//! not answering). With `--http PORT` it serves streamable HTTP on `127.0.0.1:PORT/mcp`
//! (one thread per connection; PORT 0 picks a free one) and prints `listening on PORT` to
//! stderr once bound: a `tools/call` is answered as an SSE stream (its notifications, then
//! its response), everything else as `application/json`, a notification with `202`. Every
//! request is logged to stderr, `authorization` and `cookie` values as `<redacted>`.
//! stderr is the server's log; it starts with `fake server starting`.
//!
//! Eras (revisions read from `core/src/machines/mcp/{legacy,modern}.rs`):
//!
//! - `legacy` (default, 2025-11-25): `server/discover` is refused with `-32601` (over HTTP
//!   with a `400`), `initialize` answers protocol version `2025-11-25`, `ping` answers `{}`;
//!   over HTTP `initialize` assigns an `Mcp-Session-Id`, which every later POST must carry
//!   (missing: `400`; unknown: `404`; `DELETE` ends it). List changes are plain
//!   `notifications/tools/list_changed` (over HTTP, on the stream of the call that caused it).
//! - `modern` (2026-07-28): `server/discover` answers `supportedVersions`, capabilities and
//!   `_meta` serverInfo; every request must carry `_meta` protocol version 2026-07-28
//!   (else `-32022` with `data.supported`), every result has `resultType: "complete"`, no
//!   `ping`, no `initialize`. Over HTTP the `MCP-Protocol-Version`, `Mcp-Method` and
//!   `Mcp-Name` headers must match the body (else `400` `-32020`); an unknown method is a
//!   `404` `-32601`. List changes go to `subscriptions/listen` streams (acknowledged first,
//!   each carrying the subscription id; on stdio a `notifications/cancelled` ends one).
//!
//! Tools (mode `normal`, listed in 2 pages): `echo {text}` → that text; `add {a, b}` →
//! `structuredContent {"sum": a+b}` and the same JSON as text (declares an `outputSchema`);
//! `fail {reason}` → an `isError` result; `slow {ms}` → answers after ms milliseconds;
//! `progress {steps}` → `steps` progress notifications 20 ms apart (when the call has a
//! `progressToken`), then `done {steps}`; `image {}` → text and a 1x1 PNG; `add_tool {name}`
//! → adds a tool answering `I am {name}` and announces the change; `bad_schema` is listed
//! with an invalid input schema; `log {}` → a `notifications/message`, then `logged`;
//! `stderr {bytes}` → that many bytes of `e` lines on stderr, then `ok`. Bad arguments
//! give an `isError` result, an unknown tool the JSON-RPC error `-32602`.
//!
//! Modes (after a normal handshake unless said otherwise):
//!
//! - `normal`: the tools above.
//! - `silent`: never writes anything (stdio: reads stdin until EOF, then exits; HTTP: reads
//!   each request and holds the connection without answering).
//! - `flood` (stdio): once the tool listing is complete, writes `notifications/message`
//!   lines as fast as it can until stdout breaks (calls are still answered in between).
//! - `huge-line`: a `tools/call` is preceded by one 1 GiB line of `x` (stdio), or answered
//!   by a 1 GiB JSON body without `Content-Length` and with `Connection: close` (HTTP).
//! - `die-mid-call`: on `tools/call` exits with status 3 (stdio), or closes the connection
//!   without a response (HTTP).
//! - `garbage`: every answer is preceded by `this is not json` and `{"hello":1}` lines
//!   (stdio); a `tools/call` gets a `200` `application/json` body that is not JSON (HTTP).
//! - `unknown-id`: answers every `tools/call` with the request's id + 1000 (a string id gets
//!   `+1000` appended).
//! - `many-tools`: `tools/list` returns 100,000 tools `t0`..`t99999` in pages of 1,000.
//! - `ignore-stdin-close` (stdio): a normal server that keeps running after stdin's EOF and
//!   ignores SIGTERM. std has no signal API: on Unix the process re-executes itself through
//!   `/bin/sh -c "trap '' TERM; exec ..."` (same pid; an ignored signal stays ignored
//!   across `exec`); where that fails, only the EOF is ignored.
//! - `spawn-child` (stdio): first spawns a copy of itself in `silent` mode (stdout and
//!   stderr inherited, stdin a pipe this process holds, so the child exits when this one
//!   is gone) and logs `child pid N`; then `normal`.
//! - `check-auth` (HTTP): `normal`, but any request whose `Authorization` is not exactly
//!   `Bearer test-token` gets `401`.
//!
//! Exit status: 0 at stdin EOF (stdio: once the calls under way are answered), 1 the port
//! could not be bound, 2 bad arguments, 3 `die-mid-call`.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{self, Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const USAGE: &str = "usage: mcp-fake-server [--era legacy|modern] [--http PORT] MODE
modes: normal silent flood huge-line die-mid-call garbage unknown-id many-tools
       ignore-stdin-close spawn-child check-auth";

const LEGACY_VERSION: &str = "2025-11-25";
const MODERN_VERSION: &str = "2026-07-28";
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A valid 1x1 PNG.
const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
const HUGE: usize = 1 << 30;
const PIECE: usize = 64 * 1024;
const MANY_TOOLS: usize = 100_000;
const MANY_PAGE: usize = 1_000;
/// The built-in tools on the first page of a normal listing; the rest on the second.
const FIRST_PAGE: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Legacy,
    Modern,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    Silent,
    Flood,
    HugeLine,
    DieMidCall,
    Garbage,
    UnknownId,
    ManyTools,
    IgnoreStdinClose,
    SpawnChild,
    CheckAuth,
}

const MODES: [(&str, Mode); 11] = [
    ("normal", Mode::Normal),
    ("silent", Mode::Silent),
    ("flood", Mode::Flood),
    ("huge-line", Mode::HugeLine),
    ("die-mid-call", Mode::DieMidCall),
    ("garbage", Mode::Garbage),
    ("unknown-id", Mode::UnknownId),
    ("many-tools", Mode::ManyTools),
    ("ignore-stdin-close", Mode::IgnoreStdinClose),
    ("spawn-child", Mode::SpawnChild),
    ("check-auth", Mode::CheckAuth),
];

impl Mode {
    fn name(self) -> &'static str {
        MODES.iter().find(|(_, m)| *m == self).map_or("?", |(name, _)| name)
    }

    fn over_stdio(self) -> bool {
        self != Self::CheckAuth
    }

    fn over_http(self) -> bool {
        !matches!(self, Self::Flood | Self::IgnoreStdinClose | Self::SpawnChild)
    }
}

#[derive(Debug)]
struct Args {
    era: Era,
    http: Option<u16>,
    mode: Mode,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut era, mut http, mut mode) = (Era::Legacy, None, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--era" => {
                era = match args.next().as_deref() {
                    Some("legacy") => Era::Legacy,
                    Some("modern") => Era::Modern,
                    _ => return Err("--era takes legacy or modern".into()),
                }
            }
            "--http" => http = Some(args.next().and_then(|p| p.parse().ok()).ok_or("--http takes a port number")?),
            name => match MODES.iter().find(|(n, _)| *n == name) {
                Some(&(_, m)) if mode.is_none() => mode = Some(m),
                Some(_) => return Err("only one MODE".into()),
                None => return Err(format!("unknown argument {name}")),
            },
        }
    }
    let mode = mode.ok_or("no MODE given")?;
    match http {
        Some(_) if !mode.over_http() => Err(format!("mode {} is stdio-only", mode.name())),
        None if !mode.over_stdio() => Err(format!("mode {} is HTTP-only", mode.name())),
        _ => Ok(Args { era, http, mode }),
    }
}

fn main() {
    let args = parse_args(std::env::args().skip(1)).unwrap_or_else(|error| {
        log(&format!("{error}\n{USAGE}"));
        process::exit(2);
    });
    if args.mode == Mode::IgnoreStdinClose {
        ignore_sigterm();
    }
    log("fake server starting");
    log(&format!("era {:?}, mode {}", args.era, args.mode.name()));
    // Held until the process ends: the child's stdin is this end of a pipe.
    let _child = if args.mode == Mode::SpawnChild { spawn_child(args.era) } else { None };
    let server = Arc::new(Server::new(args.era, args.mode));
    match args.http {
        Some(port) => {
            if let Err(error) = run_http(server, port) {
                log(&format!("http server failed: {error}"));
                process::exit(1);
            }
        }
        None => run_stdio(&server),
    }
}

/// A line on stderr, the server's log (a closed stderr is not worth a panic).
fn log(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---- the protocol, whatever the transport ----------------------------------------------

/// What a request comes to.
#[derive(Debug)]
enum Reply {
    Result(Value),
    Error {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// No answer (the request was cancelled).
    Nothing,
    /// A `subscriptions/listen` stream: its messages, until the server drops the sender.
    Listen(Receiver<Value>),
}

fn error(code: i64, message: &str) -> Reply {
    Reply::Error { code, message: message.into(), data: None }
}

fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

fn text_result(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }] })
}

/// A tool's own failure: a result the model can read.
fn error_result(why: &str) -> Value {
    let mut result = text_result(why);
    result["isError"] = true.into();
    result
}

fn tool(name: &str, description: &str, input_schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": input_schema })
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

/// The id an `unknown-id` server answers with.
fn shifted_id(id: &Value) -> Value {
    match id {
        Value::String(s) => Value::String(format!("{s}+1000")),
        other => json!(other.as_i64().unwrap_or(0).saturating_add(1000)),
    }
}

/// A modern request's `_meta` must name the modern version.
fn check_version(params: &Value) -> Result<(), Reply> {
    let requested = params.get("_meta").and_then(|m| m.get(META_PROTOCOL_VERSION));
    if requested.and_then(Value::as_str) == Some(MODERN_VERSION) {
        return Ok(());
    }
    let data = json!({ "supported": [MODERN_VERSION], "requested": requested });
    Err(Reply::Error {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        message: "Unsupported protocol version".into(),
        data: Some(data),
    })
}

/// One server process's state, shared by its threads.
#[derive(Debug)]
struct Server {
    era: Era,
    mode: Mode,
    /// The tools `add_tool` added, in order.
    added: Mutex<Vec<String>>,
    /// The ids (as JSON text) of requests the client cancelled and that were not answered.
    cancelled: Mutex<HashSet<String>>,
    /// Modern list-change subscriptions: the `subscriptions/listen` id and its stream.
    subscribers: Mutex<Vec<(Value, Sender<Value>)>>,
    /// Legacy HTTP sessions.
    sessions: Mutex<HashSet<String>>,
    /// Legacy HTTP: the standalone GET streams open, where list changes go when there is one.
    streams: Mutex<Vec<Sender<Value>>>,
    next_session: AtomicU64,
    flooding: AtomicBool,
    /// `tools/call`s running on their own threads (stdio), waited for at stdin's EOF.
    calls: AtomicUsize,
}

/// One `tools/call`: where its notifications go, and whether it was cancelled.
struct Call<'a> {
    server: &'a Server,
    id: &'a Value,
    params: &'a Value,
    notify: &'a dyn Fn(Value) -> bool,
}

impl Call<'_> {
    /// Sleeps, waking early if the call is cancelled: false then.
    fn sleep(&self, duration: Duration) -> bool {
        let until = Instant::now() + duration;
        loop {
            if lock(&self.server.cancelled).contains(&self.id.to_string()) {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            thread::sleep(left.min(Duration::from_millis(10)));
        }
    }
}

impl Server {
    fn new(era: Era, mode: Mode) -> Self {
        Self {
            era,
            mode,
            added: Mutex::default(),
            cancelled: Mutex::default(),
            subscribers: Mutex::default(),
            sessions: Mutex::default(),
            streams: Mutex::default(),
            next_session: AtomicU64::new(1),
            flooding: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
        }
    }

    /// Answers one request; `notify` carries the notifications that belong to it.
    fn handle_request(&self, id: &Value, method: &str, params: &Value, notify: &dyn Fn(Value) -> bool) -> Reply {
        if self.era == Era::Modern {
            if let Err(reply) = check_version(params) {
                return reply;
            }
        }
        let capabilities = json!({ "tools": { "listChanged": true }, "logging": {} });
        let info = json!({ "name": "fake", "version": "1" });
        let instructions = "A scriptable fake MCP server for tests.";
        match (self.era, method) {
            (Era::Legacy, "initialize") => Reply::Result(json!({ "protocolVersion": LEGACY_VERSION,
                "capabilities": capabilities, "serverInfo": info, "instructions": instructions })),
            (Era::Legacy, "ping" | "logging/setLevel") => Reply::Result(json!({})),
            (Era::Modern, "server/discover") => Reply::Result(json!({ "supportedVersions": [MODERN_VERSION],
                "capabilities": capabilities, "_meta": { META_SERVER_INFO: info }, "instructions": instructions })),
            (Era::Modern, "subscriptions/listen") => self.subscribe(id, params),
            (_, "tools/list") => self.list_tools(params),
            (_, "tools/call") => self.call_tool(&Call { server: self, id, params, notify }),
            _ => error(METHOD_NOT_FOUND, "Method not found"),
        }
    }

    /// A reply as a JSON-RPC response; `null` for `Nothing` and `Listen`, which have none.
    fn message(&self, id: &Value, reply: Reply) -> Value {
        self.response(id, reply).unwrap_or_default()
    }

    /// A reply as a JSON-RPC response (none for `Nothing` and `Listen`).
    fn response(&self, id: &Value, reply: Reply) -> Option<Value> {
        match reply {
            Reply::Result(mut result) => {
                if let (Era::Modern, Some(object)) = (self.era, result.as_object_mut()) {
                    object.entry("resultType").or_insert_with(|| "complete".into());
                }
                Some(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
            }
            Reply::Error { code, message, data } => {
                let mut error = json!({ "code": code, "message": message });
                if let Some(data) = data {
                    error["data"] = data;
                }
                Some(json!({ "jsonrpc": "2.0", "id": id, "error": error }))
            }
            Reply::Nothing | Reply::Listen(_) => None,
        }
    }

    fn on_notification(&self, method: &str, params: &Value) {
        if method != "notifications/cancelled" {
            return;
        }
        if let Some(id) = params.get("requestId") {
            log(&format!("request {id} cancelled"));
            lock(&self.cancelled).insert(id.to_string());
            // Ends a subscription of that id: its stream sees the sender go.
            lock(&self.subscribers).retain(|(sub, _)| sub != id);
        }
    }

    /// Whether request `id` was cancelled; either way it is forgotten.
    fn take_cancelled(&self, id: &Value) -> bool {
        lock(&self.cancelled).remove(&id.to_string())
    }

    fn subscribe(&self, id: &Value, params: &Value) -> Reply {
        let (tx, rx) = mpsc::channel();
        let wanted = params.pointer("/notifications/toolsListChanged") == Some(&Value::Bool(true));
        let granted = if wanted { json!({ "toolsListChanged": true }) } else { json!({}) };
        let ack = json!({ "_meta": { META_SUBSCRIPTION_ID: id }, "notifications": granted });
        let _ = tx.send(notification("notifications/subscriptions/acknowledged", ack));
        if wanted {
            lock(&self.subscribers).push((id.clone(), tx));
        }
        Reply::Listen(rx)
    }

    /// Announces a change of the tool list as the era does.
    fn tools_changed(&self, notify: &dyn Fn(Value) -> bool) {
        let method = "notifications/tools/list_changed";
        match self.era {
            Era::Legacy => {
                // On the client's GET stream when it opened one, else on the call's own.
                let mut streams = lock(&self.streams);
                streams.retain(|tx| tx.send(notification(method, json!({}))).is_ok());
                if streams.is_empty() {
                    notify(notification(method, json!({})));
                }
            }
            Era::Modern => lock(&self.subscribers).retain(|(id, tx)| {
                tx.send(notification(method, json!({ "_meta": { META_SUBSCRIPTION_ID: id } }))).is_ok()
            }),
        }
    }

    fn normal_tools(&self) -> Vec<Value> {
        let string = json!({ "type": "string" });
        let integer = json!({ "type": "integer" });
        let bad_schema = json!({ "type": "object", "properties": { "x": { "type": "no-such-type" } } });
        let mut add =
            tool("add", "Adds two integers.", object_schema(json!({ "a": integer, "b": integer }), &["a", "b"]));
        add["outputSchema"] = object_schema(json!({ "sum": integer }), &["sum"]);
        let mut tools = vec![
            tool("echo", "Echoes text back.", object_schema(json!({ "text": string }), &["text"])),
            add,
            tool("fail", "Fails with the reason given.", object_schema(json!({ "reason": string }), &["reason"])),
            tool("slow", "Answers after ms milliseconds.", object_schema(json!({ "ms": integer }), &["ms"])),
            tool("progress", "Reports progress steps times.", object_schema(json!({ "steps": integer }), &["steps"])),
            tool("image", "Returns a 1x1 PNG.", object_schema(json!({}), &[])),
            tool("add_tool", "Adds a tool of that name.", object_schema(json!({ "name": string }), &["name"])),
            tool("bad_schema", "Listed with an invalid schema.", bad_schema),
            tool("log", "Sends a log message.", object_schema(json!({}), &[])),
            tool("stderr", "Writes bytes to stderr.", object_schema(json!({ "bytes": integer }), &["bytes"])),
        ];
        let added = lock(&self.added);
        tools.extend(added.iter().map(|name| tool(name, "Added by add_tool.", json!({ "type": "object" }))));
        tools
    }

    fn list_tools(&self, params: &Value) -> Reply {
        let cursor = params.get("cursor").and_then(Value::as_str);
        let bad_cursor = || error(INVALID_PARAMS, "Invalid cursor");
        let (tools, next) = if self.mode == Mode::ManyTools {
            let start = match cursor.map(str::parse::<usize>) {
                None => 0,
                Some(Ok(n)) if n < MANY_TOOLS => n,
                Some(_) => return bad_cursor(),
            };
            let end = (start + MANY_PAGE).min(MANY_TOOLS);
            let tools = (start..end).map(|i| tool(&format!("t{i}"), "One of many.", json!({ "type": "object" })));
            (tools.collect(), (end < MANY_TOOLS).then(|| end.to_string()))
        } else {
            let mut all = self.normal_tools();
            match cursor {
                None => {
                    all.truncate(FIRST_PAGE);
                    (all, Some("page-2".to_owned()))
                }
                Some("page-2") => (all.split_off(FIRST_PAGE), None),
                Some(_) => return bad_cursor(),
            }
        };
        let mut result = json!({ "tools": tools });
        if let Some(next) = next {
            result["nextCursor"] = next.into();
        }
        Reply::Result(result)
    }

    fn call_tool(&self, call: &Call<'_>) -> Reply {
        let name = call.params.get("name").and_then(Value::as_str).unwrap_or_default();
        let args = call.params.get("arguments").unwrap_or(&Value::Null);
        let outcome = match name {
            "echo" => string_arg(args, "text").map(|text| text_result(&text)),
            "add" => add(args),
            "fail" => string_arg(args, "reason").and_then(Err),
            "slow" => return slow(call, args),
            "progress" => return progress(call, args),
            "image" => Ok(json!({ "content": [{ "type": "text", "text": "a pixel" },
                { "type": "image", "data": PNG_1X1, "mimeType": "image/png" }] })),
            "add_tool" => self.add_tool(call, args),
            "bad_schema" => Ok(text_result("bad_schema was called")),
            "log" => {
                let params = json!({ "level": "info", "logger": "fake", "data": "hello from the server" });
                (call.notify)(notification("notifications/message", params));
                Ok(text_result("logged"))
            }
            "stderr" => uint_arg(args, "bytes").map(|bytes| {
                write_stderr_bytes(bytes);
                text_result("ok")
            }),
            _ if lock(&self.added).iter().any(|n| n == name) => Ok(text_result(&format!("I am {name}"))),
            _ if self.mode == Mode::ManyTools && is_many_tool(name) => Ok(text_result(&format!("I am {name}"))),
            _ => return error(INVALID_PARAMS, &format!("Unknown tool: {name}")),
        };
        Reply::Result(outcome.unwrap_or_else(|why| error_result(&why)))
    }

    fn add_tool(&self, call: &Call<'_>, args: &Value) -> Result<Value, String> {
        let name = string_arg(args, "name")?;
        if self.normal_tools().iter().any(|t| t["name"] == name.as_str()) {
            return Err(format!("a tool named {name} exists already"));
        }
        lock(&self.added).push(name.clone());
        self.tools_changed(call.notify);
        Ok(text_result(&format!("added {name}")))
    }

    fn new_session(&self) -> String {
        let n = self.next_session.fetch_add(1, Ordering::Relaxed);
        let session = format!("fake-session-{}-{n}", process::id());
        lock(&self.sessions).insert(session.clone());
        session
    }
}

fn string_arg(args: &Value, name: &str) -> Result<String, String> {
    args.get(name).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| format!("{name} must be a string"))
}

fn uint_arg(args: &Value, name: &str) -> Result<u64, String> {
    args.get(name).and_then(Value::as_u64).ok_or_else(|| format!("{name} must be a non-negative integer"))
}

fn add(args: &Value) -> Result<Value, String> {
    let int = |name| args.get(name).and_then(Value::as_i64).ok_or_else(|| format!("{name} must be an integer"));
    let sum = int("a")?.checked_add(int("b")?).ok_or("the sum overflows")?;
    let structured = json!({ "sum": sum });
    let mut result = text_result(&structured.to_string());
    result["structuredContent"] = structured;
    Ok(result)
}

fn slow(call: &Call<'_>, args: &Value) -> Reply {
    let ms = match uint_arg(args, "ms") {
        Ok(ms) => ms,
        Err(why) => return Reply::Result(error_result(&why)),
    };
    if !call.sleep(Duration::from_millis(ms)) {
        return Reply::Nothing;
    }
    Reply::Result(text_result(&format!("slept {ms} ms")))
}

fn progress(call: &Call<'_>, args: &Value) -> Reply {
    let steps = match uint_arg(args, "steps") {
        Ok(steps) => steps,
        Err(why) => return Reply::Result(error_result(&why)),
    };
    let token = call.params.get("_meta").and_then(|m| m.get("progressToken"));
    for i in 1..=steps {
        if let Some(token) = token {
            let params =
                json!({ "progressToken": token, "progress": i, "total": steps, "message": format!("step {i}") });
            (call.notify)(notification("notifications/progress", params));
        }
        if !call.sleep(Duration::from_millis(20)) {
            return Reply::Nothing;
        }
    }
    Reply::Result(text_result(&format!("done {steps}")))
}

fn is_many_tool(name: &str) -> bool {
    name.strip_prefix('t').and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n < MANY_TOOLS)
}

/// `bytes` bytes of lines of `e` on stderr.
fn write_stderr_bytes(bytes: u64) {
    let line = [b"e".repeat(79), b"\n".to_vec()].concat();
    let mut stderr = io::stderr().lock();
    let mut left = usize::try_from(bytes).unwrap_or(usize::MAX);
    while left > 0 {
        let take = left.min(line.len());
        let piece = &line[line.len() - take..];
        if stderr.write_all(piece).is_err() {
            return;
        }
        left -= take;
    }
}

// ---- stdio ----------------------------------------------------------------------------

fn run_stdio(server: &Arc<Server>) {
    let mut input = io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if server.mode == Mode::Silent || line.iter().all(u8::is_ascii_whitespace) => {}
            Ok(_) => match serde_json::from_slice::<Value>(&line) {
                Ok(message) => on_stdio_message(server, message),
                Err(_) => write_answer(server, &Value::Null, "", error(-32700, "Parse error")),
            },
        }
    }
    log("stdin closed");
    // Calls under way are finished first (a slow one unless the client kills us).
    while server.calls.load(Ordering::SeqCst) > 0 {
        thread::sleep(Duration::from_millis(10));
    }
    if server.mode == Mode::IgnoreStdinClose {
        log("ignoring it: running on");
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }
    log("exiting");
}

fn on_stdio_message(server: &Arc<Server>, message: Value) {
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let Some(id) = message.get("id").cloned() else {
        return server.on_notification(&method, &params);
    };
    if method.is_empty() {
        return; // the client's answer to a request of ours: we send none
    }
    if method == "tools/call" {
        if server.mode == Mode::DieMidCall {
            log("dying mid-call");
            process::exit(3);
        }
        let server = Arc::clone(server);
        server.calls.fetch_add(1, Ordering::SeqCst);
        thread::spawn(move || {
            let reply = server.handle_request(&id, &method, &params, &write_message);
            write_answer(&server, &id, &method, reply);
            server.calls.fetch_sub(1, Ordering::SeqCst);
        });
        return;
    }
    let reply = server.handle_request(&id, &method, &params, &write_message);
    let complete = method == "tools/list" && matches!(&reply, Reply::Result(r) if r.get("nextCursor").is_none());
    write_answer(server, &id, &method, reply);
    if complete && server.mode == Mode::Flood && !server.flooding.swap(true, Ordering::SeqCst) {
        thread::spawn(flood);
    }
}

/// One message as one line on stdout: false when stdout is broken.
fn write_message(message: Value) -> bool {
    let mut out = io::stdout().lock();
    writeln!(out, "{message}").and_then(|()| out.flush()).is_ok()
}

/// Writes a request's answer, with what the mode adds to it.
fn write_answer(server: &Arc<Server>, id: &Value, method: &str, reply: Reply) {
    if let Reply::Listen(stream) = reply {
        let (server, id) = (Arc::clone(server), id.clone());
        thread::spawn(move || forward_subscription(&server, &id, &stream));
        return;
    }
    if server.take_cancelled(id) {
        return;
    }
    let call = method == "tools/call";
    let id = if call && server.mode == Mode::UnknownId { shifted_id(id) } else { id.clone() };
    let Some(message) = server.response(&id, reply) else { return };
    let mut out = io::stdout().lock();
    let mut write = || -> io::Result<()> {
        if server.mode == Mode::Garbage {
            out.write_all(b"this is not json\n{\"hello\":1}\n")?;
        }
        if call && server.mode == Mode::HugeLine {
            let piece = vec![b'x'; PIECE];
            for _ in 0..HUGE / PIECE {
                out.write_all(&piece)?;
            }
            out.write_all(b"\n")?;
        }
        writeln!(out, "{message}")?;
        out.flush()
    };
    if let Err(error) = write() {
        log(&format!("stdout: {error}"));
    }
}

/// A stdio subscription: its messages go to stdout until the server drops it; then, unless
/// the client cancelled it, the graceful end (a response to the `subscriptions/listen`).
fn forward_subscription(server: &Server, id: &Value, stream: &Receiver<Value>) {
    for message in stream {
        if !write_message(message) {
            return;
        }
    }
    if !server.take_cancelled(id) {
        let end = Reply::Result(json!({ "_meta": { META_SUBSCRIPTION_ID: id } }));
        if let Some(message) = server.response(id, end) {
            write_message(message);
        }
    }
}

fn flood() {
    log("flooding");
    for n in 0u64.. {
        let params = json!({ "level": "info", "logger": "fake", "data": format!("flood {n}") });
        if !write_message(notification("notifications/message", params)) {
            log("stdout broke; the flood stops");
            return;
        }
    }
}

// ---- process tricks -------------------------------------------------------------------

/// Spawns a `silent` copy of this program; its stdin is a pipe the returned child holds.
fn spawn_child(era: Era) -> Option<Child> {
    let era = if era == Era::Modern { "modern" } else { "legacy" };
    let spawned = std::env::current_exe()
        .and_then(|exe| Command::new(exe).args(["--era", era, "silent"]).stdin(Stdio::piped()).spawn());
    match spawned {
        Ok(child) => {
            log(&format!("child pid {}", child.id()));
            Some(child)
        }
        Err(error) => {
            log(&format!("could not spawn the child: {error}"));
            None
        }
    }
}

/// Re-executes this program (same pid) with SIGTERM ignored, which `exec` keeps.
#[cfg(unix)]
fn ignore_sigterm() {
    use std::os::unix::process::CommandExt;
    const MARK: &str = "MCP_FAKE_SERVER_SIGTERM_IGNORED";
    if std::env::var_os(MARK).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let error = Command::new("/bin/sh")
        .args(["-c", "trap '' TERM; exec \"$0\" \"$@\""])
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(MARK, "1")
        .exec();
    log(&format!("could not re-execute to ignore SIGTERM ({error}): only stdin EOF is ignored"));
}

#[cfg(not(unix))]
fn ignore_sigterm() {
    log("SIGTERM is not ignored on this platform: only stdin EOF is");
}

// ---- streamable HTTP ------------------------------------------------------------------

fn run_http(server: Arc<Server>, port: u16) -> io::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    log(&format!("listening on {}", listener.local_addr()?.port()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let server = Arc::clone(&server);
        thread::spawn(move || {
            if let Err(error) = serve_connection(&server, &stream) {
                log(&format!("connection: {error}"));
            }
        });
    }
    Ok(())
}

#[derive(Debug)]
struct HttpRequest {
    method: String,
    path: String,
    /// Names in lower case.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn log(&self) {
        let mut text = format!("http {} {}", self.method, self.path);
        for (name, value) in &self.headers {
            let value = if name == "authorization" || name == "cookie" { "<redacted>" } else { value };
            let _ = write!(text, "\n  {name}: {value}");
        }
        log(&text);
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads one request, or `None` at a clean end of the connection.
fn read_request(reader: &mut impl BufRead) -> io::Result<Option<HttpRequest>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else { return Err(invalid("bad request line")) };
    let path = target.split('?').next().unwrap_or_default().to_owned();
    let mut request = HttpRequest { method: method.to_owned(), path, headers: Vec::new(), body: Vec::new() };
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(invalid("the connection ended in the head"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').ok_or_else(|| invalid("bad header line"))?;
        request.headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    if request.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        request.body = read_chunked(reader)?;
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length.parse().map_err(|_| invalid("bad content-length"))?;
        request.body = vec![0; length];
        reader.read_exact(&mut request.body)?;
    }
    Ok(Some(request))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size = line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size, 16).map_err(|_| invalid("bad chunk size"))?;
        if size == 0 {
            // Trailers, up to the blank line.
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        line.clear();
        reader.read_line(&mut line)?;
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Unknown",
    }
}

fn write_head(mut stream: &TcpStream, status: u16, headers: &[(&str, &str)]) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())
}

/// A whole response with a `Content-Length`.
fn respond(mut stream: &TcpStream, status: u16, headers: &[(&str, &str)], body: &[u8]) -> io::Result<()> {
    let length = body.len().to_string();
    let mut all = headers.to_vec();
    all.push(("Content-Length", &length));
    write_head(stream, status, &all)?;
    stream.write_all(body)
}

fn respond_json(stream: &TcpStream, status: u16, headers: &[(&str, &str)], message: &Value) -> io::Result<()> {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    respond(stream, status, &all, message.to_string().as_bytes())
}

/// The head of an SSE response, its body chunked.
fn start_sse(stream: &TcpStream) -> io::Result<()> {
    let headers = [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("X-Accel-Buffering", "no"),
        ("Transfer-Encoding", "chunked"),
    ];
    write_head(stream, 200, &headers)
}

fn sse_event(mut stream: &TcpStream, message: &Value) -> io::Result<()> {
    let event = format!("event: message\ndata: {message}\n\n");
    stream.write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
}

fn end_sse(mut stream: &TcpStream) -> io::Result<()> {
    stream.write_all(b"0\r\n\r\n")
}

fn serve_connection(server: &Server, stream: &TcpStream) -> io::Result<()> {
    // An answer goes out in several writes (head, events, end): without this, the second
    // waits for the client's delayed ACK (40 ms), whatever the client does.
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    while let Some(request) = read_request(&mut reader)? {
        request.log();
        let close = request.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if !handle_http(server, &request, stream)? || close {
            break;
        }
    }
    Ok(())
}

/// Answers one HTTP request: false when the connection must close.
fn handle_http(server: &Server, request: &HttpRequest, stream: &TcpStream) -> io::Result<bool> {
    if server.mode == Mode::Silent {
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }
    if server.mode == Mode::CheckAuth && request.header("authorization") != Some("Bearer test-token") {
        let body = json!({ "error": "unauthorized" });
        respond_json(stream, 401, &[("WWW-Authenticate", "Bearer")], &body)?;
        return Ok(true);
    }
    if request.path != "/mcp" {
        respond(stream, 404, &[("Content-Type", "text/plain")], b"not found")?;
        return Ok(true);
    }
    match request.method.as_str() {
        "POST" => {}
        "GET" if server.era == Era::Legacy && server.mode == Mode::Normal => {
            let known = request.header("mcp-session-id").is_some_and(|s| lock(&server.sessions).contains(s));
            if !known {
                respond(stream, 404, &[], b"")?;
                return Ok(true);
            }
            let (tx, rx) = mpsc::channel();
            lock(&server.streams).push(tx);
            start_sse(stream)?;
            for message in rx {
                sse_event(stream, &message)?;
            }
            end_sse(stream)?;
            return Ok(false);
        }
        "DELETE" if server.era == Era::Legacy => {
            let ended = request.header("mcp-session-id").is_some_and(|s| lock(&server.sessions).remove(s));
            respond(stream, if ended { 200 } else { 404 }, &[], b"")?;
            return Ok(true);
        }
        _ => {
            respond(stream, 405, &[("Allow", "POST"), ("Content-Type", "text/plain")], b"method not allowed")?;
            return Ok(true);
        }
    }
    let message = match serde_json::from_slice::<Value>(&request.body) {
        Ok(message @ Value::Object(_)) => message,
        _ => {
            respond_json(stream, 400, &[], &server.message(&Value::Null, error(-32700, "Parse error")))?;
            return Ok(true);
        }
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let id = message.get("id").cloned();
    let checked = match (server.era, &id) {
        (Era::Legacy, _) => check_session(server, request, method),
        (Era::Modern, Some(_)) => check_modern_headers(request, method, &params),
        (Era::Modern, None) => Ok(()),
    };
    if let Err((status, reply)) = checked {
        let body = server.message(id.as_ref().unwrap_or(&Value::Null), reply);
        respond_json(stream, status, &[], &body)?;
        return Ok(true);
    }
    let Some(id) = id else {
        // A notification (or an answer to us): accepted, no body.
        server.on_notification(method, &params);
        respond(stream, 202, &[], b"")?;
        return Ok(true);
    };
    if method == "tools/call" {
        return http_call(server, stream, &id, &params);
    }
    match server.handle_request(&id, method, &params, &|_| true) {
        Reply::Listen(messages) => {
            http_listen(server, stream, &id, &messages)?;
            Ok(false)
        }
        Reply::Nothing => Ok(true),
        reply => {
            let status = match &reply {
                Reply::Error { code: METHOD_NOT_FOUND, .. } if server.era == Era::Modern => 404,
                Reply::Error { code: UNSUPPORTED_PROTOCOL_VERSION..=HEADER_MISMATCH, .. } => 400,
                _ => 200,
            };
            let session = if method == "initialize" { Some(server.new_session()) } else { None };
            let headers: Vec<(&str, &str)> = session.iter().map(|s| ("Mcp-Session-Id", s.as_str())).collect();
            respond_json(stream, status, &headers, &server.message(&id, reply))?;
            Ok(true)
        }
    }
}

type Rejection = (u16, Reply);

/// A legacy POST other than `initialize` must carry a live session; `server/discover` is
/// refused as a legacy server does before `initialize`.
fn check_session(server: &Server, request: &HttpRequest, method: &str) -> Result<(), Rejection> {
    match method {
        "initialize" => Ok(()),
        "server/discover" => Err((400, error(METHOD_NOT_FOUND, "Method not found"))),
        _ => match request.header("mcp-session-id") {
            None => Err((400, error(-32000, "Bad Request: no Mcp-Session-Id header"))),
            Some(session) if !lock(&server.sessions).contains(session) => {
                Err((404, error(-32001, "Session not found")))
            }
            Some(_) => Ok(()),
        },
    }
}

/// A modern request's headers must match its body, and its version must be ours.
fn check_modern_headers(request: &HttpRequest, method: &str, params: &Value) -> Result<(), Rejection> {
    let mismatch = |what: &str| Err((400, error(HEADER_MISMATCH, &format!("Header mismatch: {what}"))));
    let meta_version = params.get("_meta").and_then(|m| m.get(META_PROTOCOL_VERSION)).and_then(Value::as_str);
    if request.header("mcp-protocol-version").is_none() || request.header("mcp-protocol-version") != meta_version {
        return mismatch("MCP-Protocol-Version is missing or differs from _meta");
    }
    if request.header("mcp-method") != Some(method) {
        return mismatch("Mcp-Method is missing or differs from the method");
    }
    if method == "tools/call" {
        let name = params.get("name").and_then(Value::as_str);
        if request.header("mcp-name").and_then(decode_header_value).as_deref() != name {
            return mismatch("Mcp-Name is missing or differs from params.name");
        }
    }
    check_version(params).map_err(|reply| (400, reply))
}

/// A header value, plain or in the `=?base64?…?=` sentinel.
fn decode_header_value(value: &str) -> Option<String> {
    let Some(encoded) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_owned());
    };
    let mut bytes = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in encoded.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = ((acc << 6) | u32::from(v)) & 0xffff;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    String::from_utf8(bytes).ok()
}

/// A `tools/call` over HTTP: an SSE stream of its notifications and its response, or what
/// the mode does instead. False when the connection must close.
fn http_call(server: &Server, stream: &TcpStream, id: &Value, params: &Value) -> io::Result<bool> {
    match server.mode {
        Mode::DieMidCall => {
            log("closing the connection mid-call");
            let _ = stream.shutdown(Shutdown::Both);
            return Ok(false);
        }
        Mode::Garbage => {
            respond(stream, 200, &[("Content-Type", "application/json")], b"this is not json")?;
            return Ok(true);
        }
        Mode::HugeLine => {
            huge_body(server, stream, id)?;
            return Ok(false);
        }
        _ => {}
    }
    start_sse(stream)?;
    let reply = server.handle_request(id, "tools/call", params, &|message| sse_event(stream, &message).is_ok());
    let answer_id = if server.mode == Mode::UnknownId { shifted_id(id) } else { id.clone() };
    if !server.take_cancelled(id) {
        if let Some(message) = server.response(&answer_id, reply) {
            sse_event(stream, &message)?;
        }
    }
    end_sse(stream)?;
    Ok(true)
}

/// A 1 GiB JSON response, written in pieces, its end marked by closing the connection.
fn huge_body(server: &Server, mut stream: &TcpStream, id: &Value) -> io::Result<()> {
    write_head(stream, 200, &[("Content-Type", "application/json"), ("Connection", "close")])?;
    let result_type = if server.era == Era::Modern { r#""resultType":"complete","# } else { "" };
    let start = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{{result_type}"content":[{{"type":"text","text":""#);
    stream.write_all(start.as_bytes())?;
    let piece = vec![b'x'; PIECE];
    for _ in 0..HUGE / PIECE {
        stream.write_all(&piece)?;
    }
    stream.write_all(br#""}]}}"#)?;
    stream.shutdown(Shutdown::Write)
}

/// A modern subscription over HTTP: an SSE stream open until the client goes.
fn http_listen(server: &Server, stream: &TcpStream, id: &Value, messages: &Receiver<Value>) -> io::Result<()> {
    start_sse(stream)?;
    for message in messages {
        sse_event(stream, &message)?;
    }
    let end = Reply::Result(json!({ "_meta": { META_SUBSCRIPTION_ID: id } }));
    if let Some(message) = server.response(id, end) {
        sse_event(stream, &message)?;
    }
    end_sse(stream)
}
