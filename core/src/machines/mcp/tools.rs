//! Tools as the server describes them and tool results as the application receives them:
//! `Tool` and `CallToolResult` of `schema.ts` (both eras share them), read defensively —
//! one bad tool is dropped with its reason, never the whole list.

use std::fmt;

use serde_json::{Map, Value};

use crate::data::depth;

/// A tool a server offers (`tools/list`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// Its name, unique within the server.
    pub name: String,
    /// A human-readable title, if given.
    pub title: Option<String>,
    /// What it does, for the model.
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// The JSON Schema of its `structuredContent`, if it declares one.
    pub output_schema: Option<Value>,
    /// Hints about its behaviour (`readOnlyHint`, `destructiveHint`, ...), untrusted.
    pub annotations: Option<Value>,
}

/// Why a listed tool was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolRejection {
    /// Not an object, or no string `name`.
    NoName,
    /// `inputSchema` missing or not an object schema.
    BadInputSchema,
    /// A schema nests deeper than the limit.
    SchemaTooDeep {
        /// The limit in levels.
        limit: usize,
    },
    /// A schema is larger than the limit (serialized bytes).
    SchemaTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A second tool of a name already listed.
    Duplicate,
    /// An `x-mcp-header` annotation the spec forbids (streamable HTTP only).
    BadHeaderAnnotation(&'static str),
}

impl fmt::Display for ToolRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoName => f.write_str("no name"),
            Self::BadInputSchema => f.write_str("inputSchema is not an object schema"),
            Self::SchemaTooDeep { limit } => write!(f, "a schema nests deeper than {limit} levels"),
            Self::SchemaTooLarge { limit } => write!(f, "a schema is larger than {limit} bytes"),
            Self::Duplicate => f.write_str("a tool of that name is already listed"),
            Self::BadHeaderAnnotation(why) => f.write_str(why),
        }
    }
}

/// The bounds a listed tool's schemas must keep.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SchemaBounds {
    pub(crate) depth: usize,
    pub(crate) bytes: usize,
}

/// Reads one entry of `tools`. The name comes back with a rejection when there is one, so
/// the warning can say which tool went.
pub(crate) fn read_tool(value: Value, bounds: SchemaBounds) -> Result<McpTool, (Option<String>, ToolRejection)> {
    let Value::Object(mut object) = value else {
        return Err((None, ToolRejection::NoName));
    };
    let Some(Value::String(name)) = object.remove("name") else {
        return Err((None, ToolRejection::NoName));
    };
    let fail = |why| Err((Some(name.clone()), why));
    let input_schema = match object.remove("inputSchema") {
        Some(schema @ Value::Object(_)) => schema,
        _ => return fail(ToolRejection::BadInputSchema),
    };
    let output_schema = object.remove("outputSchema").filter(Value::is_object);
    for schema in std::iter::once(&input_schema).chain(output_schema.as_ref()) {
        if depth::exceeds(schema, bounds.depth) {
            return fail(ToolRejection::SchemaTooDeep { limit: bounds.depth });
        }
        if serialized_len(schema) > bounds.bytes {
            return fail(ToolRejection::SchemaTooLarge { limit: bounds.bytes });
        }
    }
    Ok(McpTool {
        title: take_string(&mut object, "title"),
        description: take_string(&mut object, "description"),
        annotations: object.remove("annotations").filter(Value::is_object),
        name,
        input_schema,
        output_schema,
    })
}

fn take_string(object: &mut Map<String, Value>, key: &str) -> Option<String> {
    match object.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A value's length as JSON, counted without building the text.
fn serialized_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing into a counter cannot fail; an error would only undercount, and the value
    // was parsed from a message already bounded in size.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// One piece of a tool's result (`ContentBlock` of `schema.ts`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Content {
    /// Text.
    Text(String),
    /// An image, base64 `data` of `mime_type`.
    Image {
        /// Base64 data.
        data: String,
        /// Its media type.
        mime_type: String,
    },
    /// Audio, base64 `data` of `mime_type`.
    Audio {
        /// Base64 data.
        data: String,
        /// Its media type.
        mime_type: String,
    },
    /// A link to a resource the client may read (`resource_link`).
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
        /// A description, if given.
        description: Option<String>,
        /// Its media type, if given.
        mime_type: Option<String>,
    },
    /// A resource's contents embedded in the result (`resource`).
    Resource {
        /// Its URI.
        uri: String,
        /// Its media type, if given.
        mime_type: Option<String>,
        /// Text or base64 bytes.
        body: ResourceBody,
    },
    /// A block of a type this client does not know (a later revision's, an extension's),
    /// kept whole rather than dropped.
    Other(Value),
}

/// An embedded resource's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceBody {
    /// Text contents.
    Text(String),
    /// Base64 binary contents.
    Blob(String),
}

/// A `tools/call` result: what the tool produced. `is_error` is the tool's own failure,
/// reported to the model so that it can correct itself; a JSON-RPC error (unknown tool,
/// bad arguments) is a [`CallError`](super::CallError) instead.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallResult {
    /// The unstructured content, in order.
    pub content: Vec<Content>,
    /// The structured result, when the tool returns one (`structuredContent`).
    pub structured: Option<Value>,
    /// The tool reports a failure.
    pub is_error: bool,
}

pub(crate) fn read_result(mut result: Map<String, Value>) -> ToolCallResult {
    let content = match result.remove("content") {
        Some(Value::Array(blocks)) => blocks.into_iter().map(read_content).collect(),
        _ => Vec::new(),
    };
    ToolCallResult {
        content,
        structured: result.remove("structuredContent").filter(|v| !v.is_null()),
        is_error: result.get("isError").and_then(Value::as_bool).unwrap_or(false),
    }
}

fn read_content(block: Value) -> Content {
    let Value::Object(mut o) = block else {
        return Content::Other(block);
    };
    let kind = o.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
    let s = |o: &Map<String, Value>, k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
    let known = match kind.as_str() {
        "text" => s(&o, "text").map(Content::Text),
        "image" | "audio" => match (s(&o, "data"), s(&o, "mimeType")) {
            (Some(data), Some(mime_type)) if kind == "image" => Some(Content::Image { data, mime_type }),
            (Some(data), Some(mime_type)) => Some(Content::Audio { data, mime_type }),
            _ => None,
        },
        "resource_link" => match (s(&o, "uri"), s(&o, "name")) {
            (Some(uri), Some(name)) => Some(Content::ResourceLink {
                uri,
                name,
                description: s(&o, "description"),
                mime_type: s(&o, "mimeType"),
            }),
            _ => None,
        },
        "resource" => o.get("resource").and_then(|r| {
            let body = match (s(r.as_object()?, "text"), s(r.as_object()?, "blob")) {
                (Some(text), _) => ResourceBody::Text(text),
                (None, Some(blob)) => ResourceBody::Blob(blob),
                (None, None) => return None,
            };
            Some(Content::Resource { uri: s(r.as_object()?, "uri")?, mime_type: s(r.as_object()?, "mimeType"), body })
        }),
        _ => None,
    };
    known.unwrap_or_else(|| {
        o.remove("_meta");
        Content::Other(Value::Object(o))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const BOUNDS: SchemaBounds = SchemaBounds { depth: 8, bytes: 1024 };

    #[test]
    fn a_tool_is_read_and_bad_ones_rejected_with_their_reason() {
        let ok = read_tool(json!({ "name": "t", "inputSchema": { "type": "object" }, "description": "d" }), BOUNDS);
        assert_eq!(ok.map(|t| (t.name, t.description)), Ok(("t".into(), Some("d".into()))));
        assert_eq!(read_tool(json!({ "inputSchema": {} }), BOUNDS), Err((None, ToolRejection::NoName)));
        assert_eq!(read_tool(json!({ "name": "t" }), BOUNDS), Err((Some("t".into()), ToolRejection::BadInputSchema)));
        let mut deep = json!({});
        for _ in 0..10 {
            deep = json!({ "properties": { "x": deep } });
        }
        let r = read_tool(json!({ "name": "d", "inputSchema": deep }), BOUNDS);
        assert_eq!(r, Err((Some("d".into()), ToolRejection::SchemaTooDeep { limit: 8 })));
        let big = json!({ "description": "x".repeat(2000) });
        let r = read_tool(json!({ "name": "b", "inputSchema": big }), BOUNDS);
        assert_eq!(r, Err((Some("b".into()), ToolRejection::SchemaTooLarge { limit: 1024 })));
    }

    #[test]
    fn every_content_type_is_mapped() {
        let result = json!({
            "content": [
                { "type": "text", "text": "hi" },
                { "type": "image", "data": "aW1n", "mimeType": "image/png" },
                { "type": "audio", "data": "YXU=", "mimeType": "audio/wav" },
                { "type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain" },
                { "type": "resource", "resource": { "uri": "file:///b", "text": "body" } },
                { "type": "resource", "resource": { "uri": "file:///c", "blob": "Ynl0ZXM=" } },
                { "type": "hologram", "data": 1 },
            ],
            "structuredContent": { "temperature": 21 },
            "isError": false,
        });
        let Value::Object(result) = result else { unreachable!() };
        let r = read_result(result);
        assert_eq!(r.content.len(), 7);
        assert_eq!(r.content[0], Content::Text("hi".into()));
        assert!(matches!(&r.content[1], Content::Image { mime_type, .. } if mime_type == "image/png"));
        assert!(matches!(&r.content[2], Content::Audio { data, .. } if data == "YXU="));
        assert!(matches!(&r.content[3], Content::ResourceLink { uri, .. } if uri == "file:///a"));
        assert!(matches!(&r.content[4], Content::Resource { body: ResourceBody::Text(t), .. } if t == "body"));
        assert!(matches!(&r.content[5], Content::Resource { body: ResourceBody::Blob(_), .. }));
        assert!(matches!(&r.content[6], Content::Other(v) if v["type"] == "hologram"));
        assert_eq!(r.structured, Some(json!({ "temperature": 21 })));
        assert!(!r.is_error);
    }
}
