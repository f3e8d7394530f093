//! What the mock provider answers to one request, written as data: the reply's parts
//! (text, thinking, tool calls), its usage and how it ends, an HTTP error, or raw bytes;
//! and how it is delivered (chunk sizes, gaps). [`crate::MockProvider`] renders it in
//! its dialect's documented streaming format.

use std::time::Duration;

use serde_json::Value;

use crate::http::{BodyStep, Reply};

/// One tool call of a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id; `None` lets the mock number it in the dialect's style (`toolu_…`,
    /// `call_…`; Gemini sends none).
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
}

/// A run of the reply: text or thinking pieces (each one streamed delta), or a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Text, one streamed delta per piece.
    Text(Vec<String>),
    /// Thinking (reasoning) text, one streamed delta per piece.
    Thinking(Vec<String>),
    /// A tool call, its arguments streamed in fragments where the dialect streams them.
    Call(ToolCall),
}

/// Why the reply ended, as the dialect says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Finish {
    /// The model ended its turn (or, with tool calls, asked for them): `end_turn` /
    /// `tool_use`, `stop` / `tool_calls`, `STOP`, `completed`.
    #[default]
    Natural,
    /// The output-token limit cut it: `max_tokens`, `length`, `MAX_TOKENS`,
    /// `incomplete` with `max_output_tokens`.
    Length,
}

/// How the body stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ending {
    /// Complete, with every event that ends the dialect's stream.
    #[default]
    Complete,
    /// The connection closes after the content, before the events that end the stream
    /// (the client must report a cut stream).
    Cut,
    /// The connection closes after this many events (or lines) of the complete body.
    CutAfter(usize),
    /// This many events are sent, then nothing more while the connection stays open (a
    /// stall: the client's stall timeout must end it).
    StallAfter(usize),
}

/// A reply's content: blocks in order, usage, finish and ending.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The blocks, in the order they stream.
    pub blocks: Vec<Block>,
    /// Input and output tokens reported (default 20 and 12).
    pub usage: (u64, u64),
    /// Why it ended.
    pub finish: Finish,
    /// How the body stops.
    pub ending: Ending,
    /// Parallel calls' argument fragments interleaved (Chat Completions and Responses,
    /// whose calls are told apart by index; the other dialects send calls one after the
    /// other or whole).
    pub interleave_calls: bool,
}

impl Answer {
    /// Whether the answer asks for tools.
    pub fn has_calls(&self) -> bool {
        self.blocks.iter().any(|b| matches!(b, Block::Call(_)))
    }

    /// The tool calls, in order.
    pub fn calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.blocks.iter().filter_map(|b| match b {
            Block::Call(call) => Some(call),
            _ => None,
        })
    }
}

/// How the body's bytes are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delivery {
    /// `None`: one write per event (or line); `Some(n)`: the whole body in writes of `n`
    /// bytes, so that events, lines, CRLF pairs and UTF-8 characters are split anywhere.
    pub chunk_bytes: Option<usize>,
    /// The wait between two writes.
    pub gap: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A 200 streaming an answer.
    Answer(Answer),
    /// An error response in the dialect's documented error shape.
    Error { status: u16, message: String, retry_after: Option<u64> },
    /// A 200 with these bytes as the body and this content type (a user's own format).
    Body { content_type: String, bytes: Vec<u8> },
    /// A 200 streaming these events (a recorded body split at its event ends).
    Events { content_type: String, events: Vec<String> },
    /// Exactly this HTTP reply.
    Http(Reply),
}

/// What the mock provider does with one request. Build it with [`Turn::text`],
/// [`Turn::tool_call`], [`Turn::error`] and the methods that add to it:
///
/// ```
/// use omni_testkit::Turn;
/// use serde_json::json;
///
/// let turn = Turn::text("Let me look. ")
///     .then_tool_call("get_weather", json!({"city": "Paris"}))
///     .then_tool_call("get_time", json!({"zone": "CET"}))
///     .usage(120, 30);
/// let cut = Turn::text("It is sun").cut();
/// let busy = Turn::error(429, "slow down").retry_after(2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub(crate) kind: Kind,
    pub(crate) delivery: Delivery,
}

impl Turn {
    fn answer(blocks: Vec<Block>) -> Self {
        let answer = Answer { blocks, usage: (20, 12), ..Answer::default() };
        Self { kind: Kind::Answer(answer), delivery: Delivery::default() }
    }

    /// A reply starting with `text` (one delta).
    pub fn text(text: impl Into<String>) -> Self {
        Self::answer(vec![Block::Text(vec![text.into()])])
    }

    /// A reply starting with thinking `text` (one delta).
    pub fn thinking(text: impl Into<String>) -> Self {
        Self::answer(vec![Block::Thinking(vec![text.into()])])
    }

    /// A reply starting with a call of `name` with `arguments` (a JSON object).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::answer(Vec::new()).and_call(ToolCall { id: None, name: name.into(), arguments })
    }

    /// An empty reply to add blocks to (`Turn::reply().then_text("It is ").then_text("sunny.")`).
    pub fn reply() -> Self {
        Self::answer(Vec::new())
    }

    /// An error response with `status`, its body `message` in the dialect's documented
    /// error shape (Anthropic's `{"type":"error","error":{…}}`, OpenAI's
    /// `{"error":{"message","type","code"}}`, Google's `{"error":{"code","message","status"}}`,
    /// Ollama's `{"error":"…"}`).
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        let kind = Kind::Error { status, message: message.into(), retry_after: None };
        Self { kind, delivery: Delivery::default() }
    }

    /// A 200 response whose body is `bytes`, with `content_type`: a stream in your own
    /// wire format, or a damaged one.
    pub fn body(content_type: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        let kind = Kind::Body { content_type: content_type.into(), bytes: bytes.into() };
        Self { kind, delivery: Delivery::default() }
    }

    /// A recorded body in omni's fixture layout (`<case>/body.sse`, `body.ndjson` or
    /// `body.json`), streamed one event (SSE) or line (NDJSON) per write, as it was
    /// received; `chunked` and `gap` apply. Recordings of real providers replay this way.
    pub fn recorded(case_dir: impl AsRef<std::path::Path>) -> std::io::Result<Self> {
        let dir = case_dir.as_ref();
        let kinds = [
            ("body.sse", "text/event-stream"),
            ("body.ndjson", "application/x-ndjson"),
            ("body.json", "application/json"),
        ];
        for (file, content_type) in kinds {
            let path = dir.join(file);
            if !path.is_file() {
                continue;
            }
            let body = std::fs::read_to_string(&path)?;
            let separator = if file == "body.sse" { "\n\n" } else { "\n" };
            let events = split_after(&body, separator);
            let kind = Kind::Events { content_type: content_type.into(), events };
            return Ok(Self { kind, delivery: Delivery::default() });
        }
        let message = format!("{} has no body.sse, body.ndjson or body.json", dir.display());
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, message))
    }

    /// Exactly this HTTP reply (statuses, headers, body steps of your own; a refused
    /// connection is [`Reply::ConnectFail`]).
    pub fn http(reply: Reply) -> Self {
        Self { kind: Kind::Http(reply), delivery: Delivery::default() }
    }

    fn with_answer(mut self, change: impl FnOnce(&mut Answer)) -> Self {
        if let Kind::Answer(answer) = &mut self.kind {
            change(answer);
        }
        self
    }

    fn push_piece(self, thinking: bool, piece: String) -> Self {
        self.with_answer(|answer| match (answer.blocks.last_mut(), thinking) {
            (Some(Block::Text(pieces)), false) | (Some(Block::Thinking(pieces)), true) => pieces.push(piece),
            (_, false) => answer.blocks.push(Block::Text(vec![piece])),
            (_, true) => answer.blocks.push(Block::Thinking(vec![piece])),
        })
    }

    fn and_call(self, call: ToolCall) -> Self {
        self.with_answer(|answer| answer.blocks.push(Block::Call(call)))
    }

    /// Then `text`: the next delta of the current text block, or a new one.
    /// (On an error or raw turn, the content methods change nothing.)
    pub fn then_text(self, text: impl Into<String>) -> Self {
        self.push_piece(false, text.into())
    }

    /// Then thinking `text`: the next delta of the current thinking block, or a new one.
    pub fn then_thinking(self, text: impl Into<String>) -> Self {
        self.push_piece(true, text.into())
    }

    /// Then a call of `name` with `arguments`; several calls are parallel calls, streamed
    /// in the order given.
    pub fn then_tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.and_call(ToolCall { id: None, name: name.into(), arguments })
    }

    /// Then a call with the id given.
    pub fn then_tool_call_with_id(self, id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        self.and_call(ToolCall { id: Some(id.into()), name: name.into(), arguments })
    }

    /// The input and output tokens the reply reports.
    pub fn usage(self, input: u64, output: u64) -> Self {
        self.with_answer(|answer| answer.usage = (input, output))
    }

    /// Parallel calls' argument fragments interleaved where the dialect allows it (see
    /// [`Answer::interleave_calls`]): each call's first fragment, then each one's second.
    pub fn interleave_calls(self) -> Self {
        self.with_answer(|answer| answer.interleave_calls = true)
    }

    /// The reply ends because the output-token limit was reached.
    pub fn max_tokens_reached(self) -> Self {
        self.with_answer(|answer| answer.finish = Finish::Length)
    }

    /// The connection closes after the content, before the events that end the stream.
    pub fn cut(self) -> Self {
        self.with_answer(|answer| answer.ending = Ending::Cut)
    }

    /// The connection closes after `events` events (or lines) of the complete body.
    pub fn cut_after(self, events: usize) -> Self {
        self.with_answer(|answer| answer.ending = Ending::CutAfter(events))
    }

    /// `events` events are sent, then nothing more; the connection stays open.
    pub fn stall_after(self, events: usize) -> Self {
        self.with_answer(|answer| answer.ending = Ending::StallAfter(events))
    }

    /// An error's `retry-after` header, in seconds.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        if let Kind::Error { retry_after, .. } = &mut self.kind {
            *retry_after = Some(seconds);
        }
        self
    }

    /// The body goes out in writes of `bytes` bytes (at least 1) instead of one write
    /// per event.
    pub fn chunked(mut self, bytes: usize) -> Self {
        self.delivery.chunk_bytes = Some(bytes.max(1));
        self
    }

    /// Waits `gap` between two writes of the body.
    pub fn gap(mut self, gap: Duration) -> Self {
        self.delivery.gap = gap;
        self
    }
}

/// `body` in pieces each ending with `separator` (or the end: a recording may stop mid-event),
/// CRLF line ends kept as they are.
fn split_after(body: &str, separator: &str) -> Vec<String> {
    let crlf = separator.replace('\n', "\r\n");
    let mut events = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let end = [separator, crlf.as_str()]
            .iter()
            .filter_map(|sep| rest.find(sep).map(|at| at + sep.len()))
            .min()
            .unwrap_or(rest.len());
        let (event, tail) = rest.split_at(end);
        events.push(event.to_string());
        rest = tail;
    }
    events
}

/// A 200 streaming `events` as `delivery` says, ending as `ending` says; `complete` is
/// where the events that end the stream begin.
pub(crate) fn streamed(
    content_type: &str,
    events: &[String],
    complete: usize,
    ending: Ending,
    delivery: Delivery,
) -> Reply {
    let (sent, tail) = match ending {
        Ending::Complete => (events.len(), None),
        Ending::Cut => (complete.min(events.len()), Some(BodyStep::Reset)),
        Ending::CutAfter(n) => (n.min(events.len()), Some(BodyStep::Reset)),
        Ending::StallAfter(n) => (n.min(events.len()), Some(BodyStep::Hang)),
    };
    let mut body = paced(&events[..sent], delivery);
    body.extend(tail);
    Reply::Http { status: 200, headers: vec![("content-type".into(), content_type.into())], body }
}

/// The body steps of `events` sent as `delivery` says.
pub(crate) fn paced(events: &[String], delivery: Delivery) -> Vec<BodyStep> {
    let pieces: Vec<Vec<u8>> = match delivery.chunk_bytes {
        None => events.iter().map(|e| e.as_bytes().to_vec()).collect(),
        Some(n) => events.concat().into_bytes().chunks(n).map(<[u8]>::to_vec).collect(),
    };
    let mut steps = Vec::with_capacity(pieces.len() * 2);
    for (i, piece) in pieces.into_iter().enumerate() {
        if i > 0 && !delivery.gap.is_zero() {
            steps.push(BodyStep::Wait(delivery.gap));
        }
        steps.push(BodyStep::Bytes(piece));
    }
    steps
}
