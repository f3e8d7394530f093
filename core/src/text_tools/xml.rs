//! The `xml` text protocol: tool calls written as XML-like tags.
//!
//! # Format
//!
//! Each call is wrapped in `<tool_call>` … `</tool_call>`. Inside, the tool's name is a
//! tag, and each parameter is a child tag of it holding the parameter's value:
//!
//! ```text
//! <tool_call>
//! <get_weather>
//! <city>Paris</city>
//! <days>3</days>
//! </get_weather>
//! </tool_call>
//! ```
//!
//! - **One call per wrapper**; a reply may hold several wrappers, one after another.
//! - **Tags**: `<name>` and `</name>` exactly: no attributes, no self-closing `<name/>`,
//!   no comments or declarations. A name is 1 to 256 bytes, none of them ASCII whitespace
//!   or one of `<>/!?="'&`. The wrapper is exactly `<tool_call>`: anything else in prose
//!   (`<tool_call >`, `<get_weather>`, `<city>`, a lone `<`) is text.
//! - **Whitespace**: ASCII whitespace between tags (outside values) is ignored; any other
//!   text between tags is malformed.
//! - **Values**: a value is the exact text between its parameter's tags, not trimmed:
//!   `<city> Paris </city>` is `" Paris "`. There is no entity decoding: `&amp;` is five
//!   characters and `&` is a plain character.
//! - **Escape**: a value may contain CDATA sections, `<![CDATA[` … `]]>`, whose content is
//!   taken literally; `]]>` inside content is written `]]]]><![CDATA[>` (the standard XML
//!   split: one section ends after `]]`, the next begins with `>`). A value may mix plain
//!   text and sections. Outside a section, a `<` in a value must begin `<![CDATA[` or the
//!   value's own closing tag; any other `<` is malformed (so a nested tag is too).
//! - **Types**: a parameter is read as its tool's `input_schema` types it. When the
//!   property's `type` is `"string"`, or a list of types containing `"string"`, or is
//!   missing (no schema, no `type`, a parameter not in `properties`), the value is a JSON
//!   string of the value's text. Any other type (`"integer"`, `"number"`, `"boolean"`,
//!   `"null"`, `"array"`, `"object"`, or a list of them) reads the value's text, trimmed of
//!   surrounding whitespace (for these types only), as JSON; text that is not JSON is
//!   malformed.
//!
//! [`Xml::format_call`](TextProtocol::format_call) writes exactly this layout (a newline
//! after every tag but a parameter's opening tag); a string value as its text, any other
//! value as compact JSON (`serde_json`); a value's text containing `<` as one CDATA section
//! (split where the text contains `]]>`), any other as plain text.
//!
//! # Invalid calls
//!
//! - A tool tag naming no tool given to the parser: [`InvalidCall::UnknownTool`], reported
//!   at the wrapper's end, with no [`Parsed::CallStart`] before it.
//! - A break of the grammar above ([`InvalidCall::Malformed`], with what was wrong): text
//!   between tags, a closing tag that closes nothing open, a `<` in a value that begins
//!   neither a section nor the closing tag, a duplicate parameter, a typed value that is
//!   not JSON, a second tool tag in one wrapper, an empty wrapper, a `<tool_call>` where
//!   the tool's tag is due, a bad or overlong tag name. From the point it breaks, the call's span runs to the first `</tool_call>`
//!   after it (inclusive, CDATA no longer recognised).
//! - A call whose wrapper never closes (malformed or not): [`InvalidCall::Unclosed`] when
//!   the reply ends, its span everything from `<tool_call>`.
//!
//! A call that was malformed after its [`Parsed::CallStart`] ends as [`Parsed::Invalid`]
//! with the same index.
//!
//! # Streaming
//!
//! `CallStart` comes as soon as the tool tag is read and known, then `{`; each parameter
//! adds `"name":` (with a comma before all but the first); a string value streams as its
//! text arrives (the opening quote, escaped pieces, the closing quote at its closing tag);
//! a typed value comes whole, as compact JSON, at its closing tag; `}` at the tool's
//! closing tag; [`Parsed::CallEnd`] at `</tool_call>`, its raw span the whole wrapper.
//!
//! Outside a call, the parser holds back only a suffix that could begin `<tool_call>`,
//! `<think>` or `</think>` (at most 10 bytes) or a trailing run of backticks, and a
//! `<tool_call>` inside a code span not closed yet, until the span closes (a mention) or
//! its line ends (a call); inside a call, it holds the call's bytes until its span comes
//! out. A `<tool_call>` in inline code or in `<think>` … `</think>` is a mention, text (the
//! rules are in the [parent module's doc](super)). A
//! call's size is not bounded here: the response's size limit bounds it. Parsing is linear
//! in the text's length however it is split.
//!
//! [`InvalidCall::UnknownTool`]: super::InvalidCall::UnknownTool
//! [`InvalidCall::Malformed`]: super::InvalidCall::Malformed
//! [`InvalidCall::Unclosed`]: super::InvalidCall::Unclosed
//! [`Parsed::CallStart`]: super::Parsed::CallStart
//! [`Parsed::CallEnd`]: super::Parsed::CallEnd
//! [`Parsed::Invalid`]: super::Parsed::Invalid

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{CallParser, TextProtocol};
use crate::data::message::ToolSpec;

mod parser;

use parser::XmlParser;

/// The `xml` text protocol (see the module's doc for the format).
#[derive(Debug, Clone, Copy, Default)]
pub struct Xml;

/// What [`Xml::rules`](TextProtocol::rules) teaches the model.
const RULES: &str = r#"To call a tool, write a tool call block, then stop writing:

<tool_call>
<TOOL_NAME>
<PARAMETER_NAME>value</PARAMETER_NAME>
<OTHER_PARAMETER>value</OTHER_PARAMETER>
</TOOL_NAME>
</tool_call>

Rules:
- One call per <tool_call> block. To call several tools, write several blocks, one after another.
- Use the tool's name and its parameters' names as tags, exactly as given. No attributes, no other tags.
- A value is the exact text between its tags: do not pad it with spaces or newlines. Entities such as &lt; or &amp; are not decoded: write characters as they are.
- If a value contains "<", wrap it in a CDATA section: <code><![CDATA[if a < b { return; }]]></code>. Inside a CDATA section, write "]]>" as "]]]]><![CDATA[>".
- Write a value that is not a string (number, boolean, null, array, object) as JSON: <count>3</count>, <tags>["a", "b"]</tags>.
- After your tool call blocks, stop writing and wait: the results come back in the next user message.

Example:

<tool_call>
<search_files>
<pattern>TODO</pattern>
<max_results>10</max_results>
</search_files>
</tool_call>"#;

impl TextProtocol for Xml {
    fn name(&self) -> &str {
        "xml"
    }

    fn rules(&self) -> String {
        RULES.to_owned()
    }

    /// Writes the call in the module doc's layout. Names are written as they are: a name
    /// the tag grammar cannot hold (whitespace, `<`, `>`, `/`…) does not read back.
    fn format_call(&self, name: &str, arguments: &Map<String, Value>) -> String {
        let mut call = format!("<tool_call>\n<{name}>\n");
        for (parameter, value) in arguments {
            call.push('<');
            call.push_str(parameter);
            call.push('>');
            push_value(&mut call, value);
            call.push_str("</");
            call.push_str(parameter);
            call.push_str(">\n");
        }
        call.push_str("</");
        call.push_str(name);
        call.push_str(">\n</tool_call>");
        call
    }

    fn parser(&self, tools: &[ToolSpec]) -> Box<dyn CallParser> {
        Box::new(XmlParser::new(tools))
    }
}

/// Appends `value` as a parameter's value: a string as its text, anything else as compact
/// JSON; as one CDATA section if the text holds a `<` (which plain text cannot).
fn push_value(call: &mut String, value: &Value) {
    let text = match value {
        Value::String(text) => Cow::Borrowed(text.as_str()),
        other => Cow::Owned(other.to_string()),
    };
    if text.contains('<') {
        call.push_str("<![CDATA[");
        call.push_str(&text.replace("]]>", "]]]]><![CDATA[>"));
        call.push_str("]]>");
    } else {
        call.push_str(&text);
    }
}

#[cfg(test)]
mod tests;
