//! `openai_completions`: OpenAI Chat Completions (`POST /chat/completions`, streamed as
//! SSE) and the many servers that copy it (OpenRouter, Groq, DeepSeek, Moonshot, Z.ai,
//! Alibaba, Venice, llama.cpp, vLLM, llama-cpp-python …).
//!
//! ```text
//!  request.rs  (Model, Context, Options) ─► {"model", "messages", "stream": true, …}
//!  stream.rs   data: {"choices":[{"delta":{…},"finish_reason":…}],"usage":…} ─► Delta …
//! ```
//!
//! Choices made where the API or its copies leave room:
//! - the system prompt is sent with role `system`, also to reasoning models: OpenAI maps
//!   it to `developer` itself, and most compatible servers know only `system`;
//! - tool results become `tool` messages; the API has no error flag, so a failed tool's
//!   output is prefixed with `Error: `; images in tool results (not allowed in `tool`
//!   messages) follow in one user message after the tool messages;
//! - `strict` is set on tools and on `response_format` only when the schema already
//!   meets strict mode's rules (closed objects, every property required), because the
//!   API rejects strict requests with any other schema;
//! - request metadata is sent with `store: true`: OpenAI accepts `metadata` only on
//!   stored completions;
//! - reasoning text is read from `delta.reasoning_content` and `delta.reasoning`; it is
//!   sent back only under the provider's `quirks.reasoning_field`, and only on messages
//!   this dialect produced.

mod fast;
mod request;
mod stream;
mod wire;

pub(crate) use request::build_request;
pub(super) use stream::StreamState;

/// This dialect's name, as recorded on the messages it produces.
const NAME: &str = "openai_completions";

#[cfg(test)]
mod tests;
