//! The OpenAI Responses API (`POST /responses`, streaming).
//!
//! Requests are stateless: the whole conversation goes in `input` with `store: false`,
//! and reasoning models also get `include: ["reasoning.encrypted_content"]` so their
//! reasoning can be sent back on the next turn without server-side state.
//!
//! Opaque round-trip data kept on the blocks of an assistant message from this dialect:
//!
//! | Responses item | omni block | kept as |
//! |---|---|---|
//! | `reasoning` | [`Thinking`](crate::data::message::Thinking) | `id` = item id, `signature` = `encrypted_content` |
//! | `message` (assistant) | [`Text`](crate::data::message::Text) | `signature` = message item id (`msg_…`) |
//! | `function_call` | [`ToolUse`](crate::data::message::ToolUse) | `id` = `call_id`, `signature` = item id (`fc_…`) |
//!
//! They are sent back only to this dialect ([`Message::is_from_dialect`](crate::data::message::Message::is_from_dialect)),
//! so the API receives its own items exactly as it produced them.
//!
//! The stream is a sequence of typed events; every event names its output item (by
//! `output_index`, or only by `item_id` on llama.cpp), so blocks are keyed by item and
//! content part, never by "the current item":
//!
//! ```text
//! response.created ─► ( output_item.added ─► part/summary/argument deltas ─► output_item.done )*
//!                 ─► response.completed | response.incomplete | response.failed | error
//! ```

mod input;
mod request;
mod stream;
#[cfg(test)]
mod tests;
mod wire;

pub(crate) use request::build_request;
pub(super) use stream::StreamState;

/// This dialect's name, compared with [`Origin::dialect`](crate::data::message::Origin) before sending opaque data back.
const NAME: &str = "openai_responses";
