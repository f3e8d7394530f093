//! `google_gemini`: the Gemini API's `models/{model}:streamGenerateContent?alt=sse`.
//!
//! ```text
//!  (Model, Context, Options) ─► request::build_request ─► {contents, systemInstruction, tools,
//!                                                          toolConfig, generationConfig}
//!  data: GenerateContentResponse ─► stream::StreamState ─► Delta …
//! ```
//!
//! Every SSE event is a whole `GenerateContentResponse` chunk. Text arrives in pieces,
//! function calls arrive whole (or, on Vertex with `streamFunctionCallArguments`, as
//! `partialArgs` addressed by JSON path, see [`partial_args`]), usage is cumulative, and
//! `thoughtSignature` may ride on any part.
//!
//! Thought parts and signatures are sent back only on messages this dialect produced.
//! Gemini 3 rejects a function call of
//! the current turn without a signature, so a model turn whose first function call has
//! none (history from another dialect or model) gets Google's documented placeholder
//! `skip_thought_signature_validator` on that call.

mod partial_args;
mod request;
mod stream;
mod wire;

pub(crate) use request::build_request;
pub(super) use stream::StreamState;

/// The dialect's name, as recorded in [`Origin::dialect`](crate::data::message::Origin).
const DIALECT: &str = "google_gemini";

#[cfg(test)]
mod tests;
