//! The assistant message being streamed, rebuilt from the streaming events: what a
//! snapshot shows, and what a subscriber that keeps its own view of the stream rebuilds
//! the same way (the generate machine keeps its own copy private).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::data::event::StreamEvent;
use crate::data::message::{Block, Message, Role, Text, Thinking, ToolUse};

/// The message being streamed: blocks by index; a call's input stays raw text (a JSON
/// string) until the call is complete.
#[derive(Debug, Default)]
pub struct PartialMessage {
    blocks: BTreeMap<usize, Block>,
    tool_input: BTreeMap<usize, String>,
}

impl PartialMessage {
    /// Forgets the message (a step ended, failed or was cancelled).
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.tool_input.clear();
    }

    /// Applies one streaming event.
    pub fn apply(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::TextStart { index } => {
                self.blocks.insert(*index, Block::text(""));
            }
            StreamEvent::TextDelta { index, delta } => {
                if let Some(Block::Text(t)) = self.blocks.get_mut(index) {
                    t.text.push_str(delta);
                }
            }
            StreamEvent::TextEnd { index, text } => {
                self.blocks.insert(*index, Block::Text(Text { text: text.clone(), signature: None }));
            }
            StreamEvent::ThinkingStart { index } => {
                self.blocks.insert(*index, Block::Thinking(Thinking::default()));
            }
            StreamEvent::ThinkingDelta { index, delta } => {
                if let Some(Block::Thinking(t)) = self.blocks.get_mut(index) {
                    t.text.push_str(delta);
                }
            }
            StreamEvent::ThinkingEnd { index, text, signature, .. } => {
                let thinking = Thinking { text: text.clone(), signature: signature.clone(), ..Thinking::default() };
                self.blocks.insert(*index, Block::Thinking(thinking));
            }
            StreamEvent::ToolUseStart { index, id, name } => {
                let call =
                    ToolUse { invalid: None, id: id.clone(), name: name.clone(), input: Value::Null, signature: None };
                self.blocks.insert(*index, Block::ToolUse(call));
                self.tool_input.insert(*index, String::new());
            }
            StreamEvent::ToolUseDelta { index, delta } => {
                if let Some(raw) = self.tool_input.get_mut(index) {
                    raw.push_str(delta);
                }
            }
            StreamEvent::ToolUseEnd { index, tool_use, .. } => {
                self.tool_input.remove(index);
                self.blocks.insert(*index, Block::ToolUse((**tool_use).clone()));
            }
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
        }
    }

    /// The message so far; a call still streaming has its raw input text as a JSON string.
    pub fn message(&self) -> Option<Message> {
        if self.blocks.is_empty() {
            return None;
        }
        let content = self
            .blocks
            .iter()
            .map(|(index, block)| match (block, self.tool_input.get(index)) {
                (Block::ToolUse(call), Some(raw)) => {
                    Block::ToolUse(ToolUse { input: Value::String(raw.clone()), ..call.clone() })
                }
                (block, _) => block.clone(),
            })
            .collect();
        Some(Message::new(Role::Assistant, content))
    }
}
