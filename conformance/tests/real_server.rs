//! omni against real local model servers, through all three drivers.
//!
//! The servers are llama.cpp's `llama-server` (Chat Completions, Anthropic Messages and
//! Responses endpoints) and llama-cpp-python's server (grammar-forced tool calls), both
//! serving SmolLM2-135M-Instruct. `scripts/local-models.sh` builds, caches and starts them:
//!
//! ```sh
//! scripts/local-models.sh setup
//! eval "$(scripts/local-models.sh start)"   # sets OMNI_LLAMA_SERVER_URL, OMNI_LLAMA_CPP_PYTHON_URL
//! cargo test -p omni-conformance --test real_server -- --nocapture
//! scripts/local-models.sh stop
//! ```
//!
//! Without those variables the suite prints why it was skipped and passes; with a variable
//! set and its server unreachable it fails. The cases run one after the other (the servers
//! have two cores), every case through tokio, smol and blocking, and the suite prints how
//! many ran.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: sockets, clocks, threads

#[path = "real_server/cases.rs"]
mod cases;
#[path = "real_server/drivers.rs"]
mod drivers;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use drivers::{Clients, Driver};
use omni_protocol::Dialect;

const LLAMA_SERVER_ENV: &str = "OMNI_LLAMA_SERVER_URL";
const LLAMA_CPP_PYTHON_ENV: &str = "OMNI_LLAMA_CPP_PYTHON_URL";
const HOW_TO_RUN: &str =
    "scripts/local-models.sh setup && eval \"$(scripts/local-models.sh start)\" (see README, Running against a local model)";

/// llama-server's three endpoints.
const DIALECTS: [Dialect; 3] = [Dialect::OpenaiCompletions, Dialect::AnthropicMessages, Dialect::OpenaiResponses];

fn env_url(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().trim_end_matches('/').to_string()).filter(|v| !v.is_empty())
}

/// A minimal `GET` over HTTP/1.0 (no keep-alive, no chunking) for health and slot checks.
fn http_get(base_url: &str, path: &str) -> Result<(u16, String), String> {
    let authority = base_url.strip_prefix("http://").ok_or_else(|| format!("{base_url}: only http:// is supported"))?;
    let mut conn = TcpStream::connect(authority).map_err(|e| format!("connect {authority}: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    write!(conn, "GET {path} HTTP/1.0\r\nHost: {authority}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).map_err(|e| format!("read {path}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("{path}: no HTTP head"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{path}: bad status line"))?;
    Ok((status, body.to_string()))
}

fn assert_reachable(name: &str, env: &str, base_url: &str, path: &str) {
    match http_get(base_url, path) {
        Ok((200, _)) => {}
        Ok((status, body)) => panic!("{name} at {base_url} ({env}) answers {path} with {status}: {body}"),
        Err(e) => panic!("{name} at {base_url} ({env}) is unreachable: {e}. Start it with: {HOW_TO_RUN}"),
    }
}

/// Runs named cases, each through every driver, and keeps going after a failure so that
/// one run shows every problem.
/// `OMNI_REAL_SERVER_FILTER` keeps only the cases whose name contains it.
#[derive(Default)]
struct Suite {
    filter: Option<String>,
    ran: usize,
    failed: Vec<String>,
}

impl Suite {
    fn case(&mut self, name: &str, mut body: impl FnMut(Driver)) {
        if self.filter.as_deref().is_some_and(|f| !name.contains(f)) {
            return;
        }
        for driver in Driver::ALL {
            let start = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| body(driver)));
            self.ran += 1;
            let verdict = if outcome.is_ok() { "ok" } else { "FAILED" };
            eprintln!("real-server: {name} [{driver}] {verdict} ({:.1} s)", start.elapsed().as_secs_f64());
            if outcome.is_err() {
                self.failed.push(format!("{name} [{driver}]"));
            }
        }
    }
}

#[test]
fn real_servers() {
    let llama_server = env_url(LLAMA_SERVER_ENV);
    let llama_cpp_python = env_url(LLAMA_CPP_PYTHON_ENV);
    if llama_server.is_none() && llama_cpp_python.is_none() {
        eprintln!(
            "real-server tests: skipped: {LLAMA_SERVER_ENV} and {LLAMA_CPP_PYTHON_ENV} are not set; to run them: {HOW_TO_RUN}"
        );
        return;
    }
    let clients = Clients::new(&cases::providers(
        llama_server.as_deref().unwrap_or("http://127.0.0.1:1"),
        llama_cpp_python.as_deref().unwrap_or("http://127.0.0.1:1"),
    ));
    let mut suite = Suite { filter: env_url("OMNI_REAL_SERVER_FILTER"), ..Suite::default() };

    match &llama_server {
        Some(url) => {
            assert_reachable(cases::LLAMA_SERVER, LLAMA_SERVER_ENV, url, "/health");
            for dialect in DIALECTS {
                suite.case(&format!("streamed chat, {dialect}"), |d| cases::streamed_chat(&clients, d, dialect));
                suite.case(&format!("multi-turn, {dialect}"), |d| cases::multi_turn(&clients, d, dialect));
                suite.case(&format!("max tokens, {dialect}"), |d| cases::max_tokens(&clients, d, dialect));
                suite.case(&format!("rejected request, {dialect}"), |d| cases::rejected(&clients, d, dialect));
                suite.case(&format!("cancel mid-stream, {dialect}"), |d| cases::cancel(&clients, d, dialect, url));
            }
            suite.case("structured output, llama-server", |d| {
                cases::structured_output(&clients, d, cases::LLAMA_SERVER)
            });
            suite.case("session turn kept in SQLite", |d| cases::session_turn_in_sqlite(&clients, d));
            suite.case("a tool call through the xml text protocol", |d| {
                cases::text_protocol_tool_call(&clients, d, omni_protocol::text_tools::ToolProtocol::Xml)
            });
            suite.case("a tool call through the hermes text protocol", |d| {
                cases::text_protocol_tool_call(&clients, d, omni_protocol::text_tools::ToolProtocol::Hermes)
            });
        }
        None => eprintln!("real-server tests: llama-server cases skipped: {LLAMA_SERVER_ENV} is not set"),
    }
    match &llama_cpp_python {
        Some(url) => {
            assert_reachable(cases::LLAMA_CPP_PYTHON, LLAMA_CPP_PYTHON_ENV, url, "/v1/models");
            suite.case("llama-cpp-python chat", |d| cases::python_chat(&clients, d));
            suite.case("forced tool call through the tool loop", |d| cases::forced_tool_call(&clients, d));
            suite.case("auto tool choice, empty body", |d| cases::auto_tool_choice_empty_body(&clients, d));
            suite.case("agent two-step turn", |d| cases::agent_two_step_turn(&clients, d));
            suite.case("structured output, llama-cpp-python", |d| {
                cases::structured_output(&clients, d, cases::LLAMA_CPP_PYTHON)
            });
            suite.case("agent structured output turn", |d| cases::agent_structured_output(&clients, d));
        }
        None => eprintln!("real-server tests: llama-cpp-python cases skipped: {LLAMA_CPP_PYTHON_ENV} is not set"),
    }

    eprintln!(
        "real-server tests: {} ran (tokio/smol/blocking), {} passed, {} failed",
        suite.ran,
        suite.ran - suite.failed.len(),
        suite.failed.len()
    );
    assert!(suite.failed.is_empty(), "real-server failures: {}", suite.failed.join("; "));
}
