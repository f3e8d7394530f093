//! Parsing the `?alt=sse` stream: every `data:` is one `GenerateContentResponse` chunk.
//!
//! ```text
//!  chunk ─► error?            ─► Delta::Error
//!        ─► responseId, modelVersion (when changed)
//!        ─► candidates[0].content.parts ─► text / thought runs, whole function calls,
//!                                          partialArgs calls, signatures
//!        ─► finishReason, promptFeedback.blockReason ─► stop reason
//!        ─► usageMetadata (cumulative: each chunk replaces the last)
//! ```
//!
//! Consecutive text parts continue one text block and consecutive thought parts one
//! thinking block; a change of kind, a function call, or a second signature starts a new
//! block. A `finishReason` does not end parsing: a stream may carry two (text after the
//! first is kept, the last reason wins).

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::partial_args::PartialArgs;
use super::wire::{Chunk, Content, FunctionCall, Part, UsageMetadata};
use crate::data::error::StreamError;
use crate::data::response::StopReason;
use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
use crate::wire::dialect::common;
use crate::wire::dialect::in_place::{self, OptStr};
use crate::wire::dialect::DeltaSink;
use crate::wire::framing::Frame;

/// Per-stream state of the `google_gemini` dialect.
#[derive(Debug, Default)]
pub struct StreamState {
    /// The next block index to hand out.
    next_index: u32,
    /// The text or thinking block that the next part of the same kind continues.
    run: Option<Run>,
    /// Function calls seen, for ids when Gemini sends none.
    calls: u32,
    /// A call whose arguments are still streaming as `partialArgs`.
    pending: Option<PendingCall>,
    response_id: Option<String>,
    model: Option<String>,
}

#[derive(Debug, Clone, Copy)]
struct Run {
    index: u32,
    thought: bool,
    signed: bool,
}

#[derive(Debug)]
struct PendingCall {
    index: u32,
    signed: bool,
    args: PartialArgs,
}

impl StreamState {
    /// Parses one frame into `out` (a `Vec`, or the stream decoder's accumulator).
    pub(crate) fn parse_to(&mut self, frame: &Frame<'_>, out: &mut impl DeltaSink) -> Result<(), StreamError> {
        let Frame::Event { data, .. } = frame else { return Ok(()) };
        if data.trim().is_empty() {
            return Ok(());
        }
        let mut chunk = Chunk::default();
        in_place::parse_into(data, &mut chunk)?;
        if let Some(error) = chunk.error {
            let value: Value = common::parse_json(error.get())?;
            out.push(Delta::Error(common::stream_error(&value)));
            return Ok(());
        }
        self.metadata(&chunk, out);
        let mut stop_reason = None;
        // The chunk stays where it was decoded; its parts are taken out of it.
        if let Some(candidate) = &mut chunk.candidate {
            for part in candidate.content.iter_mut().flat_map(Content::parts_mut) {
                self.part(part, out)?;
            }
            if let Some(reason) = candidate.finish_reason.as_deref() {
                // The model is done with this turn: nothing can continue a streamed call.
                self.flush_pending(out);
                stop_reason = Some(finish_reason(reason));
            }
        }
        if chunk.prompt_feedback.and_then(|f| f.block_reason).is_some() {
            stop_reason = Some(StopReason::Refusal);
        }
        let usage = chunk.usage_metadata.as_ref().and_then(usage_update);
        if stop_reason.is_some() || usage.is_some() {
            out.push(Delta::Message(MessageMeta { stop_reason, usage, ..MessageMeta::default() }));
        }
        Ok(())
    }

    pub(crate) fn finish(&mut self, out: &mut impl DeltaSink) {
        self.flush_pending(out);
    }

    fn metadata(&mut self, chunk: &Chunk<'_>, out: &mut impl DeltaSink) {
        let changed = |known: &mut Option<String>, new: &OptStr<'_>| match new.as_deref() {
            Some(new) if known.as_deref() != Some(new) => {
                *known = Some(new.to_string());
                Some(new.to_string())
            }
            _ => None,
        };
        let id = changed(&mut self.response_id, &chunk.response_id);
        let model = changed(&mut self.model, &chunk.model_version);
        if id.is_some() || model.is_some() {
            out.push(Delta::Message(MessageMeta { id, model, ..MessageMeta::default() }));
        }
    }

    fn part(&mut self, part: &mut Part<'_>, out: &mut impl DeltaSink) -> Result<(), StreamError> {
        let thought = part.thought;
        let unmodelled = part.unmodelled_kind;
        if let Some(raw) = part.function_call {
            // Parsed only when present: keeping the part type small keeps text chunks fast.
            let call: FunctionCall<'_> = common::parse_json(raw.get())?;
            return self.function_call(call, part.thought_signature.0.take(), out);
        }
        match part.text.0.take() {
            Some(text) if !text.is_empty() => {
                let signed = part.thought_signature.0.is_some();
                let index = self.run_index(thought, signed, out);
                let delta = if thought { BlockDelta::Thinking(text.into()) } else { BlockDelta::Text(text.into()) };
                out.push(Delta::BlockDelta { index, delta });
                if let Some(sig) = part.thought_signature.0.take() {
                    self.sign_run(index, sig, out);
                }
            }
            // Code execution or media: not modelled; the text after it is a new block, and
            // a signature it carries is kept on a block of its own.
            _ if unmodelled => {
                self.run = None;
                if let Some(sig) = part.thought_signature.0.take() {
                    let index = self.start_run(thought, out);
                    self.sign_run(index, sig, out);
                }
            }
            // An empty text part (or a bare signature part) matters only for its signature,
            // which belongs to the run it ends.
            _ => {
                if let Some(sig) = part.thought_signature.0.take() {
                    let index = match self.run {
                        Some(run) if run.thought == thought && !run.signed => run.index,
                        _ => self.start_run(thought, out),
                    };
                    self.sign_run(index, sig, out);
                }
            }
        }
        Ok(())
    }

    /// The block a text or thought part goes to: the open run of the same kind, or a
    /// new one (also when both the run and this part are signed: signatures never merge).
    fn run_index(&mut self, thought: bool, signed: bool, out: &mut impl DeltaSink) -> u32 {
        match self.run {
            Some(run) if run.thought == thought && !(signed && run.signed) => run.index,
            _ => self.start_run(thought, out),
        }
    }

    fn start_run(&mut self, thought: bool, out: &mut impl DeltaSink) -> u32 {
        let index = self.new_index();
        let kind = if thought { BlockKind::Thinking { id: None } } else { BlockKind::Text };
        out.push(Delta::BlockStart { index, kind });
        self.run = Some(Run { index, thought, signed: false });
        index
    }

    fn sign_run(&mut self, index: u32, sig: Cow<'_, str>, out: &mut impl DeltaSink) {
        out.push(Delta::BlockDelta { index, delta: BlockDelta::Signature(sig.into()) });
        if let Some(run) = &mut self.run {
            run.signed = true;
        }
    }

    fn new_index(&mut self) -> u32 {
        let index = self.next_index;
        self.next_index += 1;
        index
    }

    fn function_call(
        &mut self,
        call: FunctionCall<'_>,
        sig: Option<Cow<'_, str>>,
        out: &mut impl DeltaSink,
    ) -> Result<(), StreamError> {
        self.run = None;
        let streaming = call.will_continue == Some(true);
        match call.name.map(|n| n.0).filter(|n| !n.is_empty()) {
            Some(name) => {
                self.flush_pending(out);
                let index = self.new_index();
                let id = match call.id.map(|id| id.0).filter(|id| !id.is_empty()) {
                    Some(id) => id.into_owned(),
                    None => self.generated_id(),
                };
                self.calls += 1;
                out.push(Delta::BlockStart { index, kind: BlockKind::ToolUse { id, name: name.into_owned() } });
                if let Some(sig) = &sig {
                    out.push(Delta::BlockDelta { index, delta: BlockDelta::Signature(sig.as_ref().into()) });
                }
                if streaming || !call.partial_args.is_empty() {
                    let base = call.args.and_then(|raw| serde_json::from_str::<Map<String, Value>>(raw.get()).ok());
                    let mut args = PartialArgs::with_args(base);
                    call.partial_args.iter().try_for_each(|a| args.apply(a))?;
                    self.pending = Some(PendingCall { index, signed: sig.is_some(), args });
                    if !streaming {
                        self.flush_pending(out);
                    }
                } else {
                    let input = call.args.map_or("{}", RawValue::get).to_string();
                    out.push(Delta::BlockDelta { index, delta: BlockDelta::ToolInput(input.into()) });
                    out.push(Delta::BlockStop { index });
                }
            }
            // A continuation of the streamed call (a nameless part; `{}` ends it).
            None => {
                let Some(pending) = &mut self.pending else {
                    if let Some(sig) = sig {
                        let index = self.start_run(false, out);
                        self.sign_run(index, sig, out);
                    }
                    return Ok(());
                };
                call.partial_args.iter().try_for_each(|a| pending.args.apply(a))?;
                if let Some(sig) = sig {
                    if pending.signed {
                        // A second signature on one call: keep it on its own block.
                        let index = self.start_run(false, out);
                        self.sign_run(index, sig, out);
                        self.run = None;
                    } else {
                        pending.signed = true;
                        out.push(Delta::BlockDelta { index: pending.index, delta: BlockDelta::Signature(sig.into()) });
                    }
                }
                if !streaming {
                    self.flush_pending(out);
                }
            }
        }
        Ok(())
    }

    /// An id for a call Gemini sent without one: unique in the stream by position, and
    /// across the conversation through the response id.
    fn generated_id(&self) -> String {
        match &self.response_id {
            Some(response) => format!("call_{response}_{}", self.calls),
            None => format!("call_{}", self.calls),
        }
    }

    fn flush_pending(&mut self, out: &mut impl DeltaSink) {
        if let Some(call) = self.pending.take() {
            out.push(Delta::BlockDelta {
                index: call.index,
                delta: BlockDelta::ToolInput(call.args.into_json().into()),
            });
            out.push(Delta::BlockStop { index: call.index });
        }
    }
}

/// Maps a `finishReason`. Unknown values are a normal stop.
fn finish_reason(reason: &str) -> StopReason {
    match reason {
        "MAX_TOKENS" => StopReason::Length,
        "SAFETY"
        | "RECITATION"
        | "LANGUAGE"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "MODEL_ARMOR" => StopReason::Refusal,
        // The model produced something unusable or the request was inconsistent.
        "MALFORMED_FUNCTION_CALL"
        | "UNEXPECTED_TOOL_CALL"
        | "TOO_MANY_TOOL_CALLS"
        | "MISSING_THOUGHT_SIGNATURE"
        | "MALFORMED_RESPONSE"
        | "OTHER"
        | "IMAGE_OTHER"
        | "NO_IMAGE" => StopReason::Error,
        _ => StopReason::Stop,
    }
}

/// Normalises cumulative `usageMetadata`: `promptTokenCount` includes the cached part,
/// `candidatesTokenCount` excludes thoughts, tool-use prompt tokens are input.
///
/// `toolUsePromptTokenCount` counts what the built-in tools (code execution, search)
/// fed back to the model within this one request: the code execution guide bills those
/// "intermediate tokens" as input, and `totalTokenCount` includes them. So omni's input
/// is the prompt plus them (a two-step code execution stream with `promptTokenCount` 91
/// and `toolUsePromptTokenCount` 574 has 665 input tokens, not 91), and input + output +
/// cache reads add up to `totalTokenCount`, which a prompt-only count would not.
fn usage_update(u: &UsageMetadata) -> Option<UsageUpdate> {
    let counts = [
        u.prompt_token_count,
        u.cached_content_token_count,
        u.candidates_token_count,
        u.tool_use_prompt_token_count,
        u.thoughts_token_count,
    ];
    if counts.iter().all(Option::is_none) {
        return None; // e.g. Vertex chunks carrying only `trafficType`
    }
    let cached = u.cached_content_token_count.unwrap_or(0);
    let thoughts = u.thoughts_token_count.unwrap_or(0);
    let prompt = u.prompt_token_count.unwrap_or(0).saturating_sub(cached);
    Some(UsageUpdate {
        // Saturating: a count is whatever the stream says, and a sum must not overflow.
        input_tokens: Some(prompt.saturating_add(u.tool_use_prompt_token_count.unwrap_or(0))),
        output_tokens: Some(u.candidates_token_count.unwrap_or(0).saturating_add(thoughts)),
        cache_read_tokens: Some(cached),
        cache_write_tokens: None,
        reasoning_tokens: Some(thoughts),
    })
}
