//! JSON-RPC 2.0 as MCP uses it: the messages a client writes, and the one reading of
//! whatever a server sends (a response, a notification, a request, or not a message).

use serde_json::{json, Map, Value};

/// JSON-RPC's own error codes (the spec's `basic/index`, "Error Codes").
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// A JSON-RPC error object as received.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code (an integer, per JSON-RPC).
    pub code: i64,
    /// The server's short description.
    pub message: String,
    /// The server's additional data, if any.
    pub data: Option<Value>,
}

/// A message's id as a server wrote it. The client writes integer ids only, so a string
/// id can never match one of ours; it is kept to answer a server's request with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WireId {
    Number(u64),
    Other(Value),
}

impl WireId {
    fn read(value: &Value) -> Self {
        match value.as_u64() {
            Some(n) => Self::Number(n),
            None => Self::Other(value.clone()),
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Self::Number(n) => Value::from(*n),
            Self::Other(v) => v.clone(),
        }
    }
}

/// One message from the server.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// A response to a request (ours, or one we do not know).
    Result {
        id: WireId,
        result: Map<String, Value>,
    },
    /// An error response; its id may be absent (the spec allows that when the request's
    /// id could not be read).
    Error {
        id: Option<WireId>,
        error: RpcError,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A request from the server (legacy era only: `ping`, sampling, roots ...).
    Request {
        id: WireId,
        method: String,
    },
}

/// Why a line or event was not a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Not JSON at all (a log line written to stdout, say).
    NotJson,
    /// JSON, but not a JSON-RPC 2.0 message (a batch, a missing `jsonrpc`, a result that
    /// is not an object, ...).
    NotJsonRpc(&'static str),
}

/// Reads one message. `serde_json` bounds the nesting it parses (128 levels), so no
/// input can exhaust the stack here.
pub(crate) fn parse(bytes: &[u8]) -> Result<Incoming, Malformed> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| Malformed::NotJson)?;
    let Value::Object(mut object) = value else {
        return Err(Malformed::NotJsonRpc("not an object"));
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Malformed::NotJsonRpc("no \"jsonrpc\": \"2.0\""));
    }
    let id = object.get("id").filter(|id| !id.is_null()).map(WireId::read);
    if let Some(method) = object.get("method").and_then(Value::as_str).map(str::to_owned) {
        return Ok(match id {
            Some(id) => Incoming::Request { id, method },
            None => {
                let params = match object.remove("params") {
                    Some(Value::Object(params)) => params,
                    None | Some(Value::Null) => Map::new(),
                    Some(_) => return Err(Malformed::NotJsonRpc("params is not an object")),
                };
                Incoming::Notification { method, params }
            }
        });
    }
    if let Some(error) = object.remove("error") {
        let code =
            error.get("code").and_then(Value::as_i64).ok_or(Malformed::NotJsonRpc("error without an integer code"))?;
        let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        let data = error.get("data").cloned();
        return Ok(Incoming::Error { id, error: RpcError { code, message, data } });
    }
    match (id, object.remove("result")) {
        (Some(id), Some(Value::Object(result))) => Ok(Incoming::Result { id, result }),
        (Some(_), Some(_)) => Err(Malformed::NotJsonRpc("result is not an object")),
        _ => Err(Malformed::NotJsonRpc("neither a request, a notification nor a response")),
    }
}

/// A request's bytes.
pub(crate) fn request(id: u64, method: &str, params: Value) -> Vec<u8> {
    to_bytes(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
}

/// A notification's bytes.
pub(crate) fn notification(method: &str, params: Value) -> Vec<u8> {
    to_bytes(&json!({ "jsonrpc": "2.0", "method": method, "params": params }))
}

/// A result answering a server's request (legacy `ping`).
pub(crate) fn result(id: &WireId, result: Value) -> Vec<u8> {
    to_bytes(&json!({ "jsonrpc": "2.0", "id": id.to_value(), "result": result }))
}

/// An error answering a server's request.
pub(crate) fn error(id: &WireId, code: i64, message: &str) -> Vec<u8> {
    to_bytes(&json!({ "jsonrpc": "2.0", "id": id.to_value(), "error": { "code": code, "message": message } }))
}

fn to_bytes(value: &Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail (its keys are strings); the fallback keeps the
    // core panic-free all the same. JSON escapes newlines inside strings, so one message
    // is always one line, as stdio requires.
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_message_is_read() {
        let r = parse(br#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#);
        assert!(matches!(r, Ok(Incoming::Result { id: WireId::Number(3), .. })));
        let e = parse(br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}}"#);
        assert!(
            matches!(e, Ok(Incoming::Error { id: Some(WireId::Number(4)), error }) if error.code == METHOD_NOT_FOUND)
        );
        let n = parse(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#);
        assert!(matches!(n, Ok(Incoming::Notification { method, .. }) if method == "notifications/progress"));
        let q = parse(br#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#);
        assert!(matches!(q, Ok(Incoming::Request { id: WireId::Other(_), method }) if method == "ping"));
    }

    #[test]
    fn what_is_not_a_message_is_told_apart() {
        assert_eq!(parse(b"starting server..."), Err(Malformed::NotJson));
        assert!(matches!(parse(b"[1,2]"), Err(Malformed::NotJsonRpc(_))));
        assert!(matches!(parse(br#"{"id":1,"result":{}}"#), Err(Malformed::NotJsonRpc(_))));
        assert!(matches!(parse(br#"{"jsonrpc":"2.0","id":1,"result":7}"#), Err(Malformed::NotJsonRpc(_))));
        let deep = "[".repeat(100_000);
        assert_eq!(parse(deep.as_bytes()), Err(Malformed::NotJson));
    }

    #[test]
    fn a_message_with_a_newline_in_a_string_stays_one_line() {
        let bytes = request(1, "tools/call", json!({ "arguments": { "text": "a\nb" } }));
        assert!(!bytes.contains(&b'\n'));
    }
}
