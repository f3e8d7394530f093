//! The assistant message being streamed, rebuilt from the streaming events so that a
//! snapshot can show it (the generate machine keeps its own copy private).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::event::StreamEvent;
use crate::message::{Block, Message, Role, Text, Thinking, ToolUse};

/// Blocks by index; tool inputs stay raw text until their call is complete.
#[derive(Debug, Default)]
pub(super) struct Partial {
    blocks: BTreeMap<usize, Block>,
    tool_input: BTreeMap<usize, String>,
}

impl Partial {
    /// Forgets the message (a step ended, failed or was cancelled).
    pub(super) fn clear(&mut self) {
        self.blocks.clear();
        self.tool_input.clear();
    }

    /// Applies one streaming event.
    pub(super) fn apply(&mut self, event: &StreamEvent) {
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
                let call = ToolUse { id: id.clone(), name: name.clone(), input: Value::Null, signature: None };
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
                self.blocks.insert(*index, Block::ToolUse(tool_use.clone()));
            }
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => {}
        }
    }

    /// The message so far; a call still streaming has its raw input text as a JSON string.
    pub(super) fn message(&self) -> Option<Message> {
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
