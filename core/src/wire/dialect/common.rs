//! Helpers shared by the dialects: block index assignment, JSON decoding of events,
//! and reading error envelopes.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::data::error::{ProviderError, StreamError};

/// Assigns dense block indices to a dialect's own block keys, in order of first sight.
///
/// Providers key blocks differently (Anthropic by content index, OpenAI chat by tool
/// call index, Responses by output index and content part); a dialect maps its key to
/// a `u32` with this, so parallel blocks never share a slot. A lookup is a map lookup
/// (the key used last is remembered, so a run of deltas to one block looks nothing up):
/// a stream with n blocks costs O(n log n), not O(n²).
#[derive(Debug, Default, Clone)]
pub(crate) struct BlockIndexer {
    keys: BTreeMap<u64, u32>,
    last: Option<(u64, u32)>,
    next: u32,
}

impl BlockIndexer {
    /// The index for `key`, and whether it was newly assigned.
    #[inline]
    pub(crate) fn index(&mut self, key: u64) -> (u32, bool) {
        if let Some((k, idx)) = self.last {
            if k == key {
                return (idx, false);
            }
        }
        let (idx, new) = match self.keys.get(&key) {
            Some(&idx) => (idx, false),
            None => {
                let idx = self.next;
                self.next = self.next.saturating_add(1);
                self.keys.insert(key, idx);
                (idx, true)
            }
        };
        self.last = Some((key, idx));
        (idx, new)
    }

    /// The index already assigned to `key`, if any.
    pub(crate) fn get(&self, key: u64) -> Option<u32> {
        match self.last {
            Some((k, idx)) if k == key => Some(idx),
            _ => self.keys.get(&key).copied(),
        }
    }

    /// Forgets every key (e.g. at a new message within one stream) but keeps counting,
    /// so later blocks never reuse an index.
    pub(crate) fn reset_keys(&mut self) {
        self.keys.clear();
        self.last = None;
    }
}

/// Decodes an event payload, turning a JSON error into a typed decode error.
pub(crate) fn parse_json<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, StreamError> {
    serde_json::from_str(data).map_err(|e| StreamError::decode(e, data))
}

/// Reads the provider's error type/code and message from an error body of any of the
/// five dialects:
/// - Anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"…"}}`
/// - OpenAI: `{"error":{"message":"…","type":"invalid_request_error","code":"…"}}`
/// - Gemini: `{"error":{"code":429,"message":"…","status":"RESOURCE_EXHAUSTED"}}`, also
///   wrapped in a one-element array
/// - Ollama and llama.cpp: `{"error":"…"}`
pub(crate) fn error_code_and_message(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (None, None);
    };
    let value = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        v => v,
    };
    error_from_value(&value)
}

/// Like [`error_code_and_message`] for an already parsed value.
pub(crate) fn error_from_value(value: &Value) -> (Option<String>, Option<String>) {
    let err = value.get("error").unwrap_or(value);
    if let Some(msg) = err.as_str() {
        return (None, Some(msg.to_string()));
    }
    let text = |k: &str| err.get(k).and_then(Value::as_str).map(str::to_string);
    // Prefer the most specific code: OpenAI `code`, then Gemini `status`, then `type`.
    let code = text("code").or_else(|| text("status")).or_else(|| text("type"));
    (code, text("message"))
}

/// A provider error from an in-stream error object, classified without an HTTP status.
pub(crate) fn stream_error(value: &Value) -> ProviderError {
    let (code, message) = error_from_value(value);
    ProviderError::new(None, code, message.unwrap_or_else(|| value.to_string()))
}

/// A message for an error body that is not JSON (an HTML error page, plain text).
pub(crate) fn fallback_error_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(500)]);
    let text = text.trim();
    if text.is_empty() {
        format!("HTTP {status} with an empty body")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexer_is_dense_and_stable() {
        let mut ix = BlockIndexer::default();
        assert_eq!(ix.index(7), (0, true));
        assert_eq!(ix.index(3), (1, true));
        assert_eq!(ix.index(7), (0, false));
        ix.reset_keys();
        assert_eq!(ix.index(7), (2, true));
    }

    #[test]
    fn reads_every_error_envelope() {
        let cases: [(&str, Option<&str>, &str); 4] = [
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                Some("overloaded_error"),
                "Overloaded",
            ),
            (
                r#"{"error":{"message":"m","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
                Some("context_length_exceeded"),
                "m",
            ),
            (
                r#"[{"error":{"code":429,"message":"q","status":"RESOURCE_EXHAUSTED"}}]"#,
                Some("RESOURCE_EXHAUSTED"),
                "q",
            ),
            (r#"{"error":"model not found"}"#, None, "model not found"),
        ];
        for (body, code, msg) in cases {
            let (c, m) = error_code_and_message(body.as_bytes());
            assert_eq!(c.as_deref(), code, "{body}");
            assert_eq!(m.as_deref(), Some(msg), "{body}");
        }
    }
}
