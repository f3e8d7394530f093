//! The message shapes of the current, "modern" revision, **2026-07-28**: everything of that
//! era in one file, so that a correction to the revision is a change here.
//!
//! Read from the specification repository (`modelcontextprotocol/modelcontextprotocol`,
//! `docs/specification/2026-07-28/` and `schema/2026-07-28/schema.ts`):
//!
//! - no handshake: every request carries, in `params._meta`, the protocol version
//!   (`io.modelcontextprotocol/protocolVersion`, required), the client's capabilities
//!   (`io.modelcontextprotocol/clientCapabilities`, required) and its identity
//!   (`io.modelcontextprotocol/clientInfo`) — `schema.ts`, `RequestMetaObject`;
//! - `server/discover` answers `supportedVersions`, `capabilities`, `instructions` and the
//!   server's identity in `_meta["io.modelcontextprotocol/serverInfo"]` — `server/discover.mdx`;
//! - every result carries `resultType` (`"complete"`, `"input_required"`; absent means
//!   complete, for servers of earlier revisions; any other value is invalid) —
//!   `basic/index.mdx`, "ResultType";
//! - the errors only a modern server returns: `-32020` `HeaderMismatch`, `-32021`
//!   `MissingRequiredClientCapability`, `-32022` `UnsupportedProtocolVersion` (with
//!   `data.supported`) — `basic/index.mdx`, "Error Codes"; a probe answered with one of
//!   them identifies a modern server, anything else a legacy one —
//!   `basic/versioning.mdx`, `basic/transports/stdio.mdx` and `streamable-http.mdx`,
//!   "Backward Compatibility";
//! - over HTTP every POST carries `MCP-Protocol-Version`, `Mcp-Method` and, for
//!   `tools/call`, `Mcp-Name` (Base64 in the `=?base64?…?=` sentinel when not plain
//!   header-safe ASCII) — `streamable-http.mdx`, "Request Metadata";
//! - list changes arrive on a `subscriptions/listen` request's stream (filter
//!   `notifications.toolsListChanged`), each notification carrying
//!   `io.modelcontextprotocol/subscriptionId` — `basic/patterns/subscriptions.mdx`;
//! - no sessions, no `ping`; cancellation is `notifications/cancelled` on stdio and closing
//!   the response stream over HTTP — `basic/patterns/cancellation.mdx`.

use serde_json::{json, Map, Value};

use super::jsonrpc::RpcError;

/// The modern revision this client speaks.
pub(crate) const VERSION: &str = "2026-07-28";

pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

pub(crate) const DISCOVER: &str = "server/discover";
pub(crate) const LISTEN: &str = "subscriptions/listen";
pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

pub(crate) const HEADER_MISMATCH: i64 = -32020;
pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The HTTP headers of every modern POST.
pub(crate) const HEADER_PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
pub(crate) const HEADER_METHOD: &str = "Mcp-Method";
pub(crate) const HEADER_NAME: &str = "Mcp-Name";

/// The `_meta` every modern request carries. This client declares no optional
/// capabilities (no sampling, elicitation or roots), so servers have nothing to ask of it
/// through `input_required`.
pub(crate) fn request_meta(client_name: &str, client_version: &str) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.into(), VERSION.into());
    meta.insert(META_CLIENT_INFO.into(), json!({ "name": client_name, "version": client_version }));
    meta.insert(META_CLIENT_CAPABILITIES.into(), json!({}));
    meta
}

/// The filter of the one subscription this client opens.
pub(crate) fn listen_params() -> Value {
    json!({ "notifications": { "toolsListChanged": true } })
}

/// What a probe's answer says about the server.
#[derive(Debug, PartialEq)]
pub(crate) enum ProbeVerdict {
    /// A modern server that speaks our version.
    Modern,
    /// A modern server that does not speak our version; it advertised these.
    ModernWithout { supported: Vec<String> },
    /// A modern server that refused the probe for another modern reason (a header it
    /// did not like, a capability it requires): modern, and nothing to fall back to.
    ModernRefused(RpcError),
    /// Anything else: a legacy server (the fallback "MUST NOT be keyed to one specific
    /// error code", `stdio.mdx`).
    Legacy,
}

/// Reads a probe's JSON-RPC error.
pub(crate) fn judge_error(error: &RpcError) -> ProbeVerdict {
    match error.code {
        UNSUPPORTED_PROTOCOL_VERSION => {
            // Recognized only with its documented `data.supported`; a legacy server could
            // use any code, this one included, with another shape.
            let supported = error.data.as_ref().and_then(|d| d.get("supported")).and_then(Value::as_array);
            match supported {
                Some(list) => ProbeVerdict::ModernWithout {
                    supported: list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                },
                None => ProbeVerdict::Legacy,
            }
        }
        HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY => ProbeVerdict::ModernRefused(error.clone()),
        _ => ProbeVerdict::Legacy,
    }
}

/// Reads a `DiscoverResult`: is our version among `supportedVersions`?
pub(crate) fn judge_discover(result: &Map<String, Value>) -> ProbeVerdict {
    let supported: Vec<String> = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if supported.iter().any(|v| v == VERSION) {
        ProbeVerdict::Modern
    } else {
        ProbeVerdict::ModernWithout { supported }
    }
}

/// The server's identity in a modern result.
pub(crate) fn server_info(result: &Map<String, Value>) -> Option<&Value> {
    result.get("_meta").and_then(|m| m.get(META_SERVER_INFO))
}

/// What a result's `resultType` says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ResultKind {
    Complete,
    /// The server needs input (sampling, elicitation, roots) or asks for a retry with its
    /// `requestState` (multi round-trip requests, `basic/patterns/mrtr.mdx`). This client
    /// declares none of those capabilities, so it reports the result rather than retrying.
    InputRequired,
    Unknown(String),
}

pub(crate) fn result_kind(result: &Map<String, Value>) -> ResultKind {
    match result.get("resultType") {
        None | Some(Value::Null) => ResultKind::Complete,
        Some(Value::String(s)) if s == "complete" => ResultKind::Complete,
        Some(Value::String(s)) if s == "input_required" => ResultKind::InputRequired,
        Some(other) => ResultKind::Unknown(other.as_str().map_or_else(|| other.to_string(), str::to_owned)),
    }
}

/// Whether a notification belongs to the subscription `listen` opened.
pub(crate) fn subscription_of(params: &Map<String, Value>) -> Option<u64> {
    params.get("_meta").and_then(|m| m.get(META_SUBSCRIPTION_ID)).and_then(Value::as_u64)
}

/// A header value as `streamable-http.mdx` ("Value Encoding") requires: plain when it is
/// visible ASCII without leading or trailing spaces and not itself sentinel-shaped, else
/// Base64 of its UTF-8 in the `=?base64?…?=` sentinel.
pub(crate) fn header_value(value: &str) -> String {
    let visible = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = visible && !padded && !sentinel;
    if plain {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", base64(value.as_bytes()))
    }
}

/// One `x-mcp-header` annotation: the argument's path (a chain of `properties` keys) and
/// the header it is mirrored into (`Mcp-Param-{name}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    pub(crate) path: Vec<String>,
    pub(crate) name: String,
}

/// The `x-mcp-header` annotations of a tool's input schema, checked as
/// `streamable-http.mdx` ("Schema Extension") requires of a client over HTTP: a token name,
/// unique regardless of case, on an integer, string or boolean property reachable from
/// the root through `properties` keys only. Any violation rejects the tool. The schema's
/// depth is already bounded (`tools::read_tool`), so the walk is too.
pub(crate) fn param_headers(schema: &Value) -> Result<Vec<ParamHeader>, &'static str> {
    let mut found = Vec::new();
    let mut stack: Vec<(&Value, Vec<String>)> = vec![(schema, Vec::new())];
    while let Some((node, path)) = stack.pop() {
        let Some(properties) = node.get("properties").and_then(Value::as_object) else { continue };
        for (key, property) in properties {
            let mut at = path.clone();
            at.push(key.clone());
            if let Some(annotation) = property.get("x-mcp-header") {
                let name = annotation.as_str().ok_or("an x-mcp-header value is not a string")?;
                if name.is_empty() || !name.bytes().all(is_tchar) {
                    return Err("an x-mcp-header value is not a header name token");
                }
                let primitive =
                    matches!(property.get("type").and_then(Value::as_str), Some("integer" | "string" | "boolean"));
                if !primitive {
                    return Err("x-mcp-header on a property that is not an integer, string or boolean");
                }
                if found.iter().any(|h: &ParamHeader| h.name.eq_ignore_ascii_case(name)) {
                    return Err("two x-mcp-header values differ only in case");
                }
                found.push(ParamHeader { path: at.clone(), name: name.to_owned() });
            }
            stack.push((property, at));
        }
    }
    // An annotation anywhere else (under `items`, `anyOf`, `$defs` ...) invalidates the tool.
    // A property *named* `x-mcp-header` has an object schema, an annotation a string: only
    // the latter is counted.
    if count_annotations(schema) != found.len() {
        return Err("x-mcp-header on a property not reachable through properties alone");
    }
    Ok(found)
}

fn count_annotations(schema: &Value) -> usize {
    let mut count = 0;
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                count += usize::from(map.get("x-mcp-header").is_some_and(|v| !v.is_object()));
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    count
}

/// RFC 9110's `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `Mcp-Param-*` headers of a call's arguments: a value present at the annotated path
/// is mirrored; an absent or null one is omitted, as is one of another type (the server
/// rejects that call with `HeaderMismatch`, which is the spec's answer to it).
pub(crate) fn param_header_values(headers: &[ParamHeader], arguments: Option<&Value>) -> Vec<(String, String)> {
    const SAFE: u64 = (1 << 53) - 1;
    let mut out = Vec::new();
    for header in headers {
        let value = header.path.iter().try_fold(arguments, |v, key| v.map(|v| v.get(key)));
        let text = match value.flatten() {
            Some(Value::String(s)) => header_value(s),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) if n.as_i64().is_some_and(|i| i.unsigned_abs() <= SAFE) => n.to_string(),
            _ => continue,
        };
        out.push((format!("Mcp-Param-{}", header.name), text));
    }
    out
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [group[0], group.get(1).copied().unwrap_or(0), group.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_follow_the_spec_table() {
        // The examples of `streamable-http.mdx`, "Value Encoding".
        assert_eq!(header_value("us-west1"), "us-west1");
        assert_eq!(header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(header_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
    }

    #[test]
    fn x_mcp_header_annotations_are_checked_and_mirrored() {
        let schema = json!({ "type": "object", "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "opts": { "type": "object", "properties": { "n": { "type": "integer", "x-mcp-header": "N" } } },
            "query": { "type": "string" },
        } });
        let headers = param_headers(&schema).unwrap();
        assert_eq!(headers.len(), 2);
        let args = json!({ "region": "Hello, 世界", "opts": { "n": 42 }, "query": "select" });
        let mut values = param_header_values(&headers, Some(&args));
        values.sort();
        assert_eq!(
            values,
            vec![
                ("Mcp-Param-N".to_string(), "42".to_string()),
                ("Mcp-Param-Region".to_string(), "=?base64?SGVsbG8sIOS4lueVjA==?=".to_string()),
            ]
        );
        assert!(param_header_values(&headers, Some(&json!({ "region": null }))).is_empty());
        let bad = [
            json!({ "properties": { "x": { "type": "number", "x-mcp-header": "X" } } }),
            json!({ "properties": { "x": { "type": "string", "x-mcp-header": "a b" } } }),
            json!({ "properties": { "x": { "type": "string", "x-mcp-header": "" } } }),
            json!({ "properties": { "a": { "type": "string", "x-mcp-header": "H" }, "b": { "type": "string", "x-mcp-header": "h" } } }),
            json!({ "properties": { "x": { "type": "array", "items": { "type": "string", "x-mcp-header": "X" } } } }),
            json!({ "anyOf": [{ "properties": { "x": { "type": "string", "x-mcp-header": "X" } } }] }),
        ];
        for schema in bad {
            assert!(param_headers(&schema).is_err(), "{schema}");
        }
    }

    #[test]
    fn only_documented_modern_errors_identify_a_modern_server() {
        let unsupported = RpcError {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({ "supported": ["2027-01-01"], "requested": VERSION })),
        };
        assert_eq!(judge_error(&unsupported), ProbeVerdict::ModernWithout { supported: vec!["2027-01-01".into()] });
        let shapeless = RpcError { data: None, ..unsupported };
        assert_eq!(judge_error(&shapeless), ProbeVerdict::Legacy);
        let not_found = RpcError { code: -32601, message: "Method not found".into(), data: None };
        assert_eq!(judge_error(&not_found), ProbeVerdict::Legacy);
    }

    #[test]
    fn result_types() {
        let mut r = Map::new();
        assert_eq!(result_kind(&r), ResultKind::Complete);
        r.insert("resultType".into(), "input_required".into());
        assert_eq!(result_kind(&r), ResultKind::InputRequired);
        r.insert("resultType".into(), "task".into());
        assert_eq!(result_kind(&r), ResultKind::Unknown("task".into()));
    }
}
