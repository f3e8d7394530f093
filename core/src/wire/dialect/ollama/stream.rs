//! Parsing an `/api/chat` NDJSON stream into deltas.
//!
//! ```text
//!  {"message":{"thinking":"…"},"done":false}     ─► thinking block (pieces)
//!  {"message":{"content":"…"},"done":false}      ─► text block (pieces)
//!  {"message":{"tool_calls":[…]},"done":false}   ─► one whole tool block per call
//!  {"done":true,"done_reason":"stop",…}          ─► stop reason and usage
//!  {"error":"…"}                                 ─► provider error
//! ```
//!
//! A line may carry thinking, content and tool calls at once; they are taken in that
//! order (the model reasons, writes, then calls). Consecutive pieces of the same kind
//! extend one block, a change of kind starts a new one. A stream without a `done: true`
//! line never gets a stop reason, so the accumulator reports it as incomplete.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::de::MapAccess;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::data::error::{ProviderErrorKind, StreamError};
use crate::data::response::StopReason;
use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
use crate::wire::dialect::common;
use crate::wire::dialect::in_place::{self, read, read_object, Fields, OptStr, OptU64};
use crate::wire::dialect::DeltaSink;
use crate::wire::framing::Frame;

/// A string borrowed from the line (owned only when it had escapes). serde borrows a
/// `Cow` only when the field is exactly that type: an `Option<Cow<str>>` is always copied.
#[derive(Deserialize)]
#[serde(transparent)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

/// One line of the stream. Only what omni uses is read; unknown fields are ignored.
/// Decoded in place ([`in_place`](crate::wire::dialect::in_place)): the line is parsed for every text piece.
#[derive(Default)]
struct Chunk<'a> {
    model: OptStr<'a>,
    created_at: OptStr<'a>,
    message: Option<ChunkMessage<'a>>,
    done: bool,
    done_reason: OptStr<'a>,
    prompt_eval_count: OptU64,
    eval_count: OptU64,
    /// A string from Ollama; an object from servers that imitate it.
    error: Option<&'a RawValue>,
}

impl<'de> Fields<'de> for Chunk<'de> {
    const NAMES: &'static [&'static str] =
        &["model", "created_at", "message", "done", "done_reason", "prompt_eval_count", "eval_count", "error"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "model" => 0,
            "created_at" => 1,
            "message" => 2,
            "done" => 3,
            "done_reason" => 4,
            "prompt_eval_count" => 5,
            "eval_count" => 6,
            "error" => 7,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.model),
            1 => read(map, &mut self.created_at),
            2 => read_object(map, &mut self.message),
            3 => read(map, &mut self.done),
            4 => read(map, &mut self.done_reason),
            5 => read(map, &mut self.prompt_eval_count),
            6 => read(map, &mut self.eval_count),
            _ => read(map, &mut self.error),
        }
    }
}

#[derive(Default)]
struct ChunkMessage<'a> {
    content: OptStr<'a>,
    thinking: OptStr<'a>,
    tool_calls: Option<Vec<WireToolCall<'a>>>,
}

impl<'de> Fields<'de> for ChunkMessage<'de> {
    const NAMES: &'static [&'static str] = &["content", "thinking", "tool_calls"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "content" => 0,
            "thinking" => 1,
            "tool_calls" => 2,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.content),
            1 => read(map, &mut self.thinking),
            _ => read(map, &mut self.tool_calls),
        }
    }
}

#[derive(Deserialize)]
struct WireToolCall<'a> {
    /// Sent by recent Ollama versions (`call_…`), absent from older ones.
    #[serde(borrow, default)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    function: WireFunction<'a>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    /// A JSON object; kept raw so it is forwarded without re-encoding.
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// The kind of the block that pieces of text currently extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Text,
    Thinking,
}

/// Per-stream state of `ollama_chat`.
#[derive(Debug, Default)]
pub struct StreamState {
    /// Next free block index.
    next_index: u32,
    /// The text or thinking block that is still growing.
    open: Option<(u32, Piece)>,
    /// The model name has been reported (it repeats on every line).
    model_reported: bool,
    /// Tool calls seen so far, for generated ids.
    tool_calls: u64,
    /// Ids handed out in this stream, so no two calls share one.
    tool_ids: BTreeSet<String>,
}

impl StreamState {
    #[cfg(test)]
    pub(crate) fn parse(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
        self.parse_to(frame, out)
    }

    /// Parses one frame into `out` (a `Vec`, or the stream decoder's accumulator).
    pub(crate) fn parse_to(&mut self, frame: &Frame<'_>, out: &mut impl DeltaSink) -> Result<(), StreamError> {
        let Frame::Event { data, .. } = frame else {
            return Ok(()); // blank keep-alive lines; `[DONE]` never occurs in NDJSON
        };
        let line = data.trim();
        if line.is_empty() {
            return Ok(());
        }
        let mut chunk = Chunk::default();
        in_place::parse_into(line, &mut chunk)?;
        if chunk.error.is_some_and(|e| e.get() != "null") {
            out.push(Delta::Error(stream_error(line)?));
            return Ok(());
        }
        if !self.model_reported {
            if let Some(model) = chunk.model.as_deref().filter(|m| !m.is_empty()) {
                self.model_reported = true;
                out.push(Delta::Message(MessageMeta { model: Some(model.to_string()), ..MessageMeta::default() }));
            }
        }
        // The line stays where it was decoded; its parts are taken out of it.
        if let Some(message) = &mut chunk.message {
            if let Some(thinking) = message.thinking.0.take().filter(|t| !t.is_empty()) {
                self.piece(Piece::Thinking, thinking, out);
            }
            if let Some(content) = message.content.0.take().filter(|c| !c.is_empty()) {
                self.piece(Piece::Text, content, out);
            }
            for call in message.tool_calls.take().unwrap_or_default() {
                self.tool_call(call, chunk.created_at.as_deref(), out)?;
            }
        }
        if chunk.done {
            self.close_open(out);
            let usage = UsageUpdate {
                input_tokens: chunk.prompt_eval_count.0,
                output_tokens: chunk.eval_count.0,
                ..UsageUpdate::default()
            };
            out.push(Delta::Message(MessageMeta {
                stop_reason: Some(stop_reason(chunk.done_reason.as_deref())),
                usage: Some(usage),
                ..MessageMeta::default()
            }));
        }
        Ok(())
    }

    /// Nothing is held back: every line is complete in itself.
    pub(crate) fn finish(&mut self, _out: &mut impl DeltaSink) {}

    fn allocate(&mut self) -> u32 {
        let index = self.next_index;
        self.next_index += 1;
        index
    }

    fn close_open(&mut self, out: &mut impl DeltaSink) {
        if let Some((index, _)) = self.open.take() {
            out.push(Delta::BlockStop { index });
        }
    }

    fn piece(&mut self, kind: Piece, text: Cow<'_, str>, out: &mut impl DeltaSink) {
        let index = match self.open {
            Some((index, open)) if open == kind => index,
            _ => {
                self.close_open(out);
                let index = self.allocate();
                self.open = Some((index, kind));
                let block = match kind {
                    Piece::Text => BlockKind::Text,
                    Piece::Thinking => BlockKind::Thinking { id: None },
                };
                out.push(Delta::BlockStart { index, kind: block });
                index
            }
        };
        let text = crate::data::event::Fragment::from(text);
        let delta = match kind {
            Piece::Text => BlockDelta::Text(text),
            Piece::Thinking => BlockDelta::Thinking(text),
        };
        out.push(Delta::BlockDelta { index, delta });
    }

    /// A whole tool call: start, all arguments at once, stop.
    fn tool_call(
        &mut self,
        call: WireToolCall<'_>,
        created_at: Option<&str>,
        out: &mut impl DeltaSink,
    ) -> Result<(), StreamError> {
        self.close_open(out);
        let index = self.allocate();
        let ordinal = self.tool_calls;
        self.tool_calls += 1;
        let id = match call.id.map(|id| id.0).filter(|id| !id.is_empty() && !self.tool_ids.contains(id.as_ref())) {
            Some(id) => id.into_owned(),
            None => self.generated_id(created_at, ordinal),
        };
        self.tool_ids.insert(id.clone());
        let name = call.function.name.map(|n| n.0.into_owned()).unwrap_or_default();
        let arguments = arguments_json(call.function.arguments)?;
        out.push(Delta::BlockStart { index, kind: BlockKind::ToolUse { id, name } });
        out.push(Delta::BlockDelta { index, delta: BlockDelta::ToolInput(arguments.into()) });
        out.push(Delta::BlockStop { index });
        Ok(())
    }

    /// An id for a call Ollama sent without one (or with a repeated one).
    ///
    /// Deterministic, so replaying a stream gives the same ids, and derived from the
    /// line's timestamp as well as the call's position, so calls of different turns of a
    /// conversation do not share ids (some providers reject repeated tool ids in history).
    fn generated_id(&self, created_at: Option<&str>, ordinal: u64) -> String {
        let mut salt = 0u64;
        loop {
            let mut hash = Fnv1a::default();
            hash.write(created_at.unwrap_or("").as_bytes());
            hash.write(&ordinal.to_le_bytes());
            hash.write(&salt.to_le_bytes());
            let id = format!("call_{:016x}", hash.0);
            if !self.tool_ids.contains(&id) {
                return id;
            }
            salt += 1;
        }
    }
}

/// 64-bit FNV-1a: tiny, stable across platforms and Rust versions (unlike `DefaultHasher`).
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The JSON text of a call's arguments. Ollama sends an object; a JSON string holding
/// the arguments (as OpenAI-style servers do) is unwrapped; `null` or nothing means no
/// arguments.
fn arguments_json(raw: Option<&RawValue>) -> Result<String, StreamError> {
    let Some(raw) = raw else {
        return Ok(String::new());
    };
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<String>(text).map_err(|e| StreamError::decode(e, text)),
        _ if text == "null" => Ok(String::new()),
        _ => Ok(text.to_string()),
    }
}

/// Ollama's documented stop reasons: `stop` (natural end or stop sequence), `length`
/// (`num_predict` reached), `load` and `unload` (model management calls with no
/// messages). Tool calls also end with `stop`; the accumulator turns that into
/// [`StopReason::ToolUse`]. Anything unknown is a normal stop.
fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("length") => StopReason::Length,
        _ => StopReason::Stop,
    }
}

/// An error line. Ollama only reports errors mid-stream when running the model failed,
/// so an error without a recognisable kind is a server error (worth a retry).
fn stream_error(line: &str) -> Result<crate::data::error::ProviderError, StreamError> {
    let value: Value = common::parse_json(line)?;
    let mut error = common::stream_error(&value);
    if error.kind == ProviderErrorKind::Other {
        error.kind = ProviderErrorKind::Server;
    }
    Ok(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lines: &[&str]) -> Vec<Delta> {
        let mut state = StreamState::default();
        let mut out = Vec::new();
        for line in lines {
            state.parse(&Frame::Event { event: "", data: line, id: None }, &mut out).unwrap();
        }
        state.finish(&mut out);
        out
    }

    fn text(index: u32, s: &str) -> Delta {
        Delta::BlockDelta { index, delta: BlockDelta::Text(s.into()) }
    }

    fn model(m: &str) -> Delta {
        Delta::Message(MessageMeta { model: Some(m.into()), ..MessageMeta::default() })
    }

    fn done(reason: StopReason, input: Option<u64>, output: Option<u64>) -> Delta {
        let usage = UsageUpdate { input_tokens: input, output_tokens: output, ..UsageUpdate::default() };
        Delta::Message(MessageMeta { stop_reason: Some(reason), usage: Some(usage), ..MessageMeta::default() })
    }

    #[test]
    fn text_pieces_extend_one_block_and_done_gives_usage() {
        let deltas = run(&[
            r#"{"model":"m","created_at":"t1","message":{"role":"assistant","content":"Hel"},"done":false}"#,
            r#"{"model":"m","created_at":"t2","message":{"role":"assistant","content":"lo"},"done":false}"#,
            r#"{"model":"m","created_at":"t3","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":20,"eval_count":2}"#,
        ]);
        assert_eq!(
            deltas,
            vec![
                model("m"),
                Delta::BlockStart { index: 0, kind: BlockKind::Text },
                text(0, "Hel"),
                text(0, "lo"),
                Delta::BlockStop { index: 0 },
                done(StopReason::Stop, Some(20), Some(2)),
            ]
        );
    }

    #[test]
    fn thinking_then_text_then_tool_call_are_separate_blocks() {
        let deltas = run(&[
            r#"{"model":"m","message":{"role":"assistant","content":"","thinking":"Hmm"},"done":false}"#,
            r#"{"model":"m","message":{"role":"assistant","content":"Ok"},"done":false}"#,
            r#"{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","function":{"index":0,"name":"f","arguments":{"a":1}}}]},"done":false}"#,
            r#"{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}"#,
        ]);
        assert_eq!(
            deltas,
            vec![
                model("m"),
                Delta::BlockStart { index: 0, kind: BlockKind::Thinking { id: None } },
                Delta::BlockDelta { index: 0, delta: BlockDelta::Thinking("Hmm".into()) },
                Delta::BlockStop { index: 0 },
                Delta::BlockStart { index: 1, kind: BlockKind::Text },
                text(1, "Ok"),
                Delta::BlockStop { index: 1 },
                Delta::BlockStart { index: 2, kind: BlockKind::ToolUse { id: "call_1".into(), name: "f".into() } },
                Delta::BlockDelta { index: 2, delta: BlockDelta::ToolInput(r#"{"a":1}"#.into()) },
                Delta::BlockStop { index: 2 },
                done(StopReason::Stop, None, None),
            ]
        );
    }

    #[test]
    fn calls_without_ids_or_with_repeated_ids_get_unique_deterministic_ids() {
        let lines = [
            r#"{"created_at":"t1","message":{"tool_calls":[{"function":{"name":"f","arguments":{}}},{"function":{"name":"f","arguments":{}}}]},"done":false}"#,
            r#"{"created_at":"t2","message":{"tool_calls":[{"id":"x","function":{"name":"g","arguments":null}},{"id":"x","function":{"name":"g"}}]},"done":false}"#,
        ];
        let ids = |deltas: Vec<Delta>| -> Vec<String> {
            deltas
                .into_iter()
                .filter_map(|d| match d {
                    Delta::BlockStart { kind: BlockKind::ToolUse { id, .. }, .. } => Some(id),
                    _ => None,
                })
                .collect()
        };
        let first = ids(run(&lines));
        assert_eq!(first.len(), 4);
        assert_eq!(first.iter().collect::<BTreeSet<_>>().len(), 4, "{first:?}");
        assert!(first[0].starts_with("call_") && first[1].starts_with("call_"));
        assert_eq!(first[2], "x");
        assert_eq!(ids(run(&lines)), first, "replay gives the same ids");
    }

    #[test]
    fn string_and_missing_arguments() {
        assert_eq!(arguments_json(None).unwrap(), "");
        let raw = |s: &str| serde_json::from_str::<Box<RawValue>>(s).unwrap();
        assert_eq!(arguments_json(Some(&raw("null"))).unwrap(), "");
        assert_eq!(arguments_json(Some(&raw(r#""{\"a\":1}""#))).unwrap(), r#"{"a":1}"#);
        assert_eq!(arguments_json(Some(&raw(r#"{"b":"é"}"#))).unwrap(), r#"{"b":"é"}"#);
    }

    #[test]
    fn line_keys_are_numbered_by_name() {
        in_place::assert_keys_match_names::<Chunk<'_>>();
        in_place::assert_keys_match_names::<ChunkMessage<'_>>();
    }

    #[test]
    fn stop_reasons() {
        assert_eq!(stop_reason(Some("length")), StopReason::Length);
        assert_eq!(stop_reason(Some("stop")), StopReason::Stop);
        assert_eq!(stop_reason(Some("load")), StopReason::Stop);
        assert_eq!(stop_reason(Some("something_new")), StopReason::Stop);
        assert_eq!(stop_reason(None), StopReason::Stop);
    }

    #[test]
    fn error_lines_become_provider_errors() {
        let deltas = run(&[r#"{"error":"an error was encountered while running the model"}"#]);
        let [Delta::Error(e)] = deltas.as_slice() else { panic!("{deltas:?}") };
        assert_eq!(e.message, "an error was encountered while running the model");
        assert_eq!(e.kind, ProviderErrorKind::Server);
        assert!(e.is_retryable());
        let deltas = run(&[r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#]);
        let [Delta::Error(e)] = deltas.as_slice() else { panic!("{deltas:?}") };
        assert_eq!(e.kind, ProviderErrorKind::RateLimited);
    }

    #[test]
    fn blank_lines_and_comments_produce_nothing() {
        assert!(run(&["", "  ", "\r"]).is_empty());
        let mut state = StreamState::default();
        let mut out = Vec::new();
        state.parse(&Frame::Comment(""), &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn malformed_lines_are_decode_errors() {
        let mut state = StreamState::default();
        let mut out = Vec::new();
        let frame = Frame::Event { event: "", data: r#"{"message":{"content":"#, id: None };
        assert!(matches!(state.parse(&frame, &mut out), Err(StreamError::Decode { .. })));
        let frame = Frame::Event {
            event: "",
            data: r#"{"message":{"tool_calls":[{"function":{"arguments":"\u"}}]}}"#,
            id: None,
        };
        assert!(matches!(state.parse(&frame, &mut out), Err(StreamError::Decode { .. })));
    }
}
