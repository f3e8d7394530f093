//! The `anthropic_messages` dialect: Anthropic's Messages API (`POST /v1/messages`), streaming.
//!
//! - [`request`]: the request body and headers, checked field by field against the API reference;
//! - [`content`]: messages and content blocks (images, PDFs, tool calls and results, thinking);
//! - [`models`]: what a model id says about thinking modes and sampling parameters;
//! - [`stream`]: the SSE events into [`Delta`](crate::wire::delta::Delta)s.

mod cache;
mod content;
mod hot;
mod models;
mod request;
mod stream;

pub(crate) use request::build_request;
pub(super) use stream::StreamState;

/// The dialect name, compared with [`Message::origin`](crate::data::message::Message::origin) before
/// sending signed thinking back.
const NAME: &str = "anthropic_messages";

#[cfg(test)]
mod tests;
