//! Prompt-cache breakpoints, placed by one pure function over the built body (when
//! `options.cache` is set). Anthropic caches the prefix up to each `cache_control` mark and
//! allows four marks per request; they go where the prefix stops changing:
//!
//! 1. the system prompt (a text protocol's rules and tool documentation come first in it,
//!    so they are cached with it);
//! 2. the last tool (the tool definitions come before the system prompt in the cached
//!    prefix: `tools`, `system`, `messages`);
//! 3. the last block of the last user message (this turn's prefix, read by the next
//!    request of the tool loop);
//! 4. the last block of the second-to-last user message (the previous turn's prefix, still
//!    a hit when the last user message changed, as it does when a turn begins).

use serde_json::{Map, Value};

/// At most this many breakpoints per request (Anthropic's limit).
pub(super) const MAX_BREAKPOINTS: usize = 4;

/// Marks `body`'s cacheable prefixes with `cache_control` (see the module's doc); returns
/// how many marks were placed.
pub(super) fn place_breakpoints(body: &mut Map<String, Value>, cache_control: &Value) -> usize {
    let mut placed = 0;
    if let Some(system) = body.get_mut("system") {
        if let Value::String(text) = system {
            // A breakpoint needs the block form of `system`.
            *system = serde_json::json!([{"type": "text", "text": std::mem::take(text)}]);
        }
        if let Some(Value::Object(last)) = system.as_array_mut().and_then(|blocks| blocks.last_mut()) {
            last.insert("cache_control".into(), cache_control.clone());
            placed += 1;
        }
    }
    if let Some(Value::Object(last)) = body.get_mut("tools").and_then(Value::as_array_mut).and_then(|t| t.last_mut()) {
        last.insert("cache_control".into(), cache_control.clone());
        placed += 1;
    }
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        let users = messages.iter_mut().rev().filter(|m| m.get("role").and_then(Value::as_str) == Some("user"));
        for message in users.take(2) {
            if placed == MAX_BREAKPOINTS {
                break;
            }
            let block = message.get_mut("content").and_then(Value::as_array_mut).and_then(|c| c.last_mut());
            if let Some(Value::Object(block)) = block {
                block.insert("cache_control".into(), cache_control.clone());
                placed += 1;
            }
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn marked(value: &Value) -> bool {
        value.get("cache_control").is_some()
    }

    #[test]
    fn four_breakpoints_system_tools_and_the_last_two_user_messages() {
        let mut body = json!({
            "system": "Be brief.",
            "tools": [{"name": "a"}, {"name": "b"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "one"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
                {"role": "user", "content": [{"type": "text", "text": "three"}, {"type": "text", "text": "four"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "five"}]},
                {"role": "user", "content": [{"type": "text", "text": "six"}]}
            ]
        });
        let cc = json!({"type": "ephemeral"});
        let Value::Object(map) = &mut body else { unreachable!() };
        assert_eq!(place_breakpoints(map, &cc), 4);
        assert_eq!(body["system"], json!([{"type": "text", "text": "Be brief.", "cache_control": cc}]));
        assert!(!marked(&body["tools"][0]) && marked(&body["tools"][1]));
        let m = &body["messages"];
        assert!(!marked(&m[0]["content"][0]), "only the last two user messages");
        assert!(!marked(&m[2]["content"][0]) && marked(&m[2]["content"][1]), "the last block");
        assert!(marked(&m[4]["content"][0]));
        assert!(!marked(&m[1]["content"][0]) && !marked(&m[3]["content"][0]), "never an assistant message");
    }

    #[test]
    fn fewer_parts_fewer_breakpoints() {
        let mut body = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
        let Value::Object(map) = &mut body else { unreachable!() };
        assert_eq!(place_breakpoints(map, &json!({"type": "ephemeral"})), 1);
        assert!(body.get("system").is_none() && body.get("tools").is_none());
    }
}
