//! A made-up wire format, `ticker`, written against omni-protocol's open dialect layer
//! (`omni_protocol::dialect`) as an application would write its own: the proof
//! that a user dialect works wherever a built-in one does (the simulation, the generate
//! loop with tools, every driver).
//!
//! The format:
//! - request: `POST {base}/ticker/chat`, body `{"model", "system"?, "cap"?, "turns": [{"who":
//!   "user"|"bot"|"tool", "say"?, "calls"?, "results"?}], "tools"?: [{"name", "params"}]}`;
//! - response: NDJSON, one object per line: `{"kind": "text", "text"}`, `{"kind": "call",
//!   "id", "tool", "args"}`, and last `{"kind": "end", "why": "done"|"tool"|"cap", "used":
//!   {"in", "out"}}`; a stream without its `end` line is incomplete;
//! - error: `{"problem": "..."}` with an HTTP error status.
//!
//! Its fixtures (response bodies) are in `conformance/fixtures_custom/ticker/`.

use std::path::{Path, PathBuf};

use omni_protocol::dialect::{register, WireFormat, WireStream};
use omni_protocol::dialect::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
use omni_protocol::dialect::{DialectRequest, RequestSpec};
use omni_protocol::dialect::{Frame, Framing};
use omni_protocol::{Block, Dialect, Model, Provider, Role, StopReason, ToolResultContent, Warning};
use omni_protocol::{ProviderError, RequestError, StreamError};
use serde_json::{json, Value};

/// The format (a `static`: formats are registered for the process).
#[derive(Debug)]
pub struct Ticker;

/// The one instance.
pub static TICKER: Ticker = Ticker;

/// The dialect of `ticker` models (registered on first use).
pub fn dialect() -> Dialect {
    register(&TICKER).unwrap_or_else(|e| panic!("registering the ticker format: {e}"))
}

/// The `ticker` model of the tests.
pub fn model() -> Model {
    Model::new("ticker", "tick-1", dialect())
}

/// The `ticker` provider at `base_url`, keyed by a bearer token.
pub fn provider(base_url: &str) -> Provider {
    let mut provider = Provider::openai_compatible("ticker", base_url, Some("TICKER_KEY"));
    provider.dialect = dialect();
    provider
}

/// A response body of the format's fixtures.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures().join(format!("{name}.ndjson"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures_custom/ticker")
}

impl WireFormat for Ticker {
    fn name(&self) -> &'static str {
        "ticker"
    }

    fn framing(&self) -> Framing {
        Framing::Ndjson
    }

    fn build_request(
        &self,
        spec: &RequestSpec<'_>,
        warnings: &mut Vec<Warning>,
    ) -> Result<DialectRequest, RequestError> {
        let mut turns = Vec::new();
        for message in &spec.context.messages {
            let who = match message.role {
                Role::User if message.content.iter().any(|b| matches!(b, Block::ToolResult(_))) => "tool",
                Role::User => "user",
                Role::Assistant => "bot",
            };
            let mut turn = json!({"who": who});
            let text = message.text();
            if !text.is_empty() {
                turn["say"] = Value::String(text);
            }
            let calls: Vec<Value> =
                message.tool_uses().map(|c| json!({"id": c.id, "tool": c.name, "args": c.input})).collect();
            if !calls.is_empty() {
                turn["calls"] = Value::Array(calls);
            }
            let results: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolResult(r) => {
                        let text: String = r
                            .content
                            .iter()
                            .filter_map(|c| match c {
                                ToolResultContent::Text { text } => Some(text.as_str()),
                                ToolResultContent::Attachment(_) => None,
                            })
                            .collect();
                        Some(json!({"id": r.tool_use_id, "out": text, "failed": r.is_error}))
                    }
                    _ => None,
                })
                .collect();
            if !results.is_empty() {
                turn["results"] = Value::Array(results);
            }
            turns.push(turn);
        }
        let mut body = json!({"model": spec.model.id, "turns": turns});
        if let Some(system) = &spec.context.system {
            body["system"] = Value::String(system.clone());
        }
        if let Some(cap) = spec.options.max_tokens {
            body["cap"] = Value::from(cap);
        }
        if !spec.context.tools.is_empty() {
            let tools: Vec<Value> =
                spec.context.tools.iter().map(|t| json!({"name": t.name, "params": t.input_schema})).collect();
            body["tools"] = Value::Array(tools);
        }
        if spec.options.temperature.is_some() {
            warnings.push(Warning::unsupported("temperature", "ticker"));
        }
        Ok(DialectRequest { path: "/ticker/chat".into(), headers: Vec::new(), body })
    }

    fn new_stream(&self) -> Box<dyn WireStream> {
        Box::new(TickerStream::default())
    }

    fn parse_error(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> ProviderError {
        let problem = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["problem"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("HTTP {status}"));
        ProviderError::new(Some(status), None, problem).with_body(body).with_retry_after_from(headers.iter().copied())
    }
}

/// One response's state: the text block open, the blocks numbered so far.
#[derive(Debug, Default)]
struct TickerStream {
    text_open: Option<u32>,
    blocks: u32,
}

impl TickerStream {
    fn close_text(&mut self, out: &mut Vec<Delta>) {
        if let Some(index) = self.text_open.take() {
            out.push(Delta::BlockStop { index });
        }
    }
}

impl WireStream for TickerStream {
    fn event(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
        let Frame::Event { data, .. } = frame else { return Ok(()) };
        let value: Value = serde_json::from_str(data).map_err(|e| StreamError::decode(e, data))?;
        match value.get("lines").and_then(Value::as_array) {
            // The whole-body variant: every line in one document.
            Some(lines) => lines.iter().for_each(|line| self.line(line, out)),
            None => self.line(&value, out),
        }
        Ok(())
    }
}

impl TickerStream {
    fn line(&mut self, line: &Value, out: &mut Vec<Delta>) {
        match line["kind"].as_str() {
            Some("text") => {
                let text = line["text"].as_str().unwrap_or_default();
                let index = match self.text_open {
                    Some(index) => index,
                    None => {
                        let index = self.blocks;
                        self.blocks += 1;
                        self.text_open = Some(index);
                        out.push(Delta::BlockStart { index, kind: BlockKind::Text });
                        index
                    }
                };
                out.push(Delta::BlockDelta { index, delta: BlockDelta::Text(text.into()) });
            }
            Some("call") => {
                self.close_text(out);
                let index = self.blocks;
                self.blocks += 1;
                let id = line["id"].as_str().unwrap_or_default().to_string();
                let name = line["tool"].as_str().unwrap_or_default().to_string();
                out.push(Delta::BlockStart { index, kind: BlockKind::ToolUse { id, name } });
                out.push(Delta::BlockDelta { index, delta: BlockDelta::ToolInput(line["args"].to_string().into()) });
                out.push(Delta::BlockStop { index });
            }
            Some("end") => {
                self.close_text(out);
                let stop = match line["why"].as_str() {
                    Some("tool") => StopReason::ToolUse,
                    Some("cap") => StopReason::Length,
                    _ => StopReason::Stop,
                };
                let used = &line["used"];
                let usage = UsageUpdate {
                    input_tokens: used["in"].as_u64(),
                    output_tokens: used["out"].as_u64(),
                    ..Default::default()
                };
                out.push(Delta::Message(MessageMeta {
                    stop_reason: Some(stop),
                    usage: Some(usage),
                    ..MessageMeta::default()
                }));
            }
            // Lines of kinds the format may add later are skipped.
            _ => {}
        }
    }
}

/// `ticker` as a server that does not stream: the same lines in one JSON document,
/// `{"lines": [...]}`, at `POST {base}/ticker/answer` ([`Framing::Json`]).
#[derive(Debug)]
pub struct TickerWhole;

/// The one instance.
pub static TICKER_WHOLE: TickerWhole = TickerWhole;

impl WireFormat for TickerWhole {
    fn name(&self) -> &'static str {
        "ticker_whole"
    }

    fn framing(&self) -> Framing {
        Framing::Json
    }

    fn build_request(
        &self,
        spec: &RequestSpec<'_>,
        warnings: &mut Vec<Warning>,
    ) -> Result<DialectRequest, RequestError> {
        let part = TICKER.build_request(spec, warnings)?;
        Ok(DialectRequest { path: "/ticker/answer".into(), ..part })
    }

    fn new_stream(&self) -> Box<dyn WireStream> {
        Box::new(TickerStream::default())
    }
}

/// The whole-body fixture: `name`'s lines in one document.
pub fn whole_fixture(name: &str) -> Vec<u8> {
    let text = String::from_utf8(fixture(name)).unwrap_or_default();
    let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    serde_json::to_vec(&json!({ "lines": lines })).unwrap_or_default()
}

/// A 200 response with `body` as NDJSON, in pieces of `chunk` bytes.
pub fn reply(body: &[u8], chunk: usize) -> crate::sim::Reply {
    let mut reply = crate::sim::Reply::stream(body, chunk, std::time::Duration::from_millis(1));
    if let crate::sim::Reply::Http { headers, .. } = &mut reply {
        *headers = vec![("content-type".into(), "application/x-ndjson".into())];
    }
    reply
}

/// The `ticker` format through a driver's public API against the replay server: a text
/// reply read in 5-byte pieces, its usage, the request at the format's own path with its
/// own body; the same as the simulation reads.
pub fn through_a_driver(driver: &impl crate::http_suite::StreamingDriver) {
    use crate::http_suite::{finished_text, Setup};
    let server = crate::replay::ReplayServer::start(vec![reply(&fixture("text"), 5)]).expect("server");
    let setup = Setup { provider: Some(provider(&server.base_url())), ..Setup::new(server.base_url(), "sk-ticker") };
    let client = driver.client(&setup);
    let events = driver.stream_model(&client, model().into());
    assert_eq!(finished_text(&events).as_deref(), Some("It is sunny and noon."), "{events:?}");
    let Some(omni_protocol::generate::GenerateEvent::Finished(response)) = events.last() else {
        panic!("finished: {events:?}")
    };
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (12, 5));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/ticker/chat");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-ticker"));
    let body: Value = serde_json::from_slice(&requests[0].body).expect("a JSON body");
    assert_eq!(body["model"], "tick-1");
    assert_eq!(body["turns"][0], json!({"who": "user", "say": "hi"}), "{body}");

    // The variant that answers in one JSON document (Framing::Json), in 5-byte pieces.
    let whole = register(&TICKER_WHOLE).unwrap_or_else(|e| panic!("registering: {e}"));
    let mut answer = reply(&whole_fixture("text"), 5);
    if let crate::sim::Reply::Http { headers, .. } = &mut answer {
        *headers = vec![("content-type".into(), "application/json".into())];
    }
    let server = crate::replay::ReplayServer::start(vec![answer]).expect("server");
    let mut whole_provider = provider(&server.base_url());
    whole_provider.dialect = whole;
    let setup = Setup { provider: Some(whole_provider), ..Setup::new(server.base_url(), "sk-ticker") };
    let client = driver.client(&setup);
    let events = driver.stream_model(&client, Model::new("ticker", "tick-1", whole).into());
    assert_eq!(finished_text(&events).as_deref(), Some("It is sunny and noon."), "{events:?}");
    assert_eq!(server.requests()[0].path, "/ticker/answer");
    assert_eq!(server.requests()[0].header("accept"), Some("application/json"));
}

/// An answer in `ticker`'s lines, for omni-testkit's mock (`MockProvider::custom`): text
/// pieces, calls, and the `end` line (the one a cut leaves out). Ticker has no thinking.
pub fn render(answer: &omni_testkit::Answer) -> (Vec<String>, usize) {
    use omni_testkit::{Block as Part, Finish};
    let mut lines = Vec::new();
    let mut calls = 0;
    for part in &answer.blocks {
        match part {
            Part::Text(pieces) => lines.extend(pieces.iter().map(|p| json!({"kind": "text", "text": p}))),
            Part::Thinking(_) => {}
            Part::Call(call) => {
                calls += 1;
                let id = call.id.clone().unwrap_or_else(|| format!("t{calls}"));
                lines.push(json!({"kind": "call", "id": id, "tool": call.name, "args": call.arguments}));
            }
        }
    }
    let complete = lines.len();
    let why = match (answer.finish, answer.has_calls()) {
        (Finish::Length, _) => "cap",
        (Finish::Natural, true) => "tool",
        (Finish::Natural, false) => "done",
    };
    lines.push(json!({"kind": "end", "why": why, "used": {"in": answer.usage.0, "out": answer.usage.1}}));
    (lines.into_iter().map(|line| format!("{line}\n")).collect(), complete)
}
