//! When a reply's tool call could not be read at all: a span that began as a call but
//! broke before the tool's name (so no call, valid or not, was made of it), in a reply
//! with no call read. The model never learns that from the tool loop (there is no call
//! to answer), so the machines answer such a reply with a correction, as they do for
//! invalid structured output: what was wrong, and the layout a call must have. At most
//! `tool_call_retries` times a call or a turn ([`DEFAULT_TOOL_CALL_RETRIES`]).
//!
//! A span that is plainly quoted (the opener inside inline code, a code fence that is not
//! the protocol's own, or a thinking block) is not a call at all: the parser keeps it as
//! text without a word, so it never asks for a correction.

use super::render::examples;
use super::TextProtocol;
use crate::data::message::ToolSpec;
use crate::data::response::{Response, Warning};

/// The code of the response warning a text protocol gives a span that broke before the
/// tool's name (kept as text): the mark of a call the model meant and nobody read.
pub(crate) const UNREAD_CALL: &str = "invalid_tool_call";

/// Corrections a call or a turn asks for by default.
pub(crate) const DEFAULT_TOOL_CALL_RETRIES: u32 = 1;

/// Why the reply's call could not be read, when it has such a span and no call.
pub(crate) fn unread_call(response: &Response) -> Option<&Warning> {
    if response.message.tool_uses().next().is_some() {
        return None;
    }
    response.warnings.iter().find(|warning| warning.code == UNREAD_CALL)
}

/// The user message that tells the model its call was not read: `why`, and a call in the
/// protocol's layout (the first tool's own example, else its name with no arguments).
pub(crate) fn correction(protocol: &dyn TextProtocol, tools: &[ToolSpec], why: &str) -> String {
    let example = tools
        .first()
        .map(|tool| protocol.format_call(&tool.name, &examples(tool).into_iter().next().unwrap_or_default()));
    let mut text = format!(
        "Your previous reply began a tool call that could not be read, so no tool was run: {why}. \
         Write the call again, exactly in the {} format the instructions give",
        protocol.name()
    );
    match example {
        Some(example) => {
            text.push_str(", for example:\n");
            text.push_str(&example);
        }
        None => text.push('.'),
    }
    text
}
