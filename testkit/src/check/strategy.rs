//! The proptest strategies the checks draw from, public so that your own properties can
//! compose them: contexts and options of any shape for request builders, hostile strings
//! and argument maps for text protocols, cut points, and damages to a response body.
//!
//! ```
//! use omni_testkit::check::strategy;
//! use proptest::prelude::*;
//! use proptest::test_runner::{Config, TestRunner};
//!
//! // Any context serialises and reads back as itself (in a test of yours, the same
//! // property in a `proptest!` block).
//! let mut runner = TestRunner::new(Config { cases: 8, ..Config::default() });
//! runner
//!     .run(&strategy::context(), |context| {
//!         let json = serde_json::to_string(&context).map_err(|e| TestCaseError::fail(e.to_string()))?;
//!         let back: omni_protocol::Context = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
//!         prop_assert_eq!(back.messages.len(), context.messages.len());
//!         Ok(())
//!     })
//!     .expect("contexts serialise");
//! ```

use omni_protocol::{
    Attachment, Block, CacheRetention, Context, Effort, Message, Options, OutputSchema, Reasoning, Role, Source, Text,
    Thinking, ToolChoice, ToolResult, ToolResultContent, ToolSpec, ToolUse,
};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Map, Value};

pub use super::wire::damages;

/// Short strings of any characters, control characters and a CR LF that would inject a
/// header line among them.
pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9 _.-]{0,12}",
        1 => vec(any::<char>(), 0..12).prop_map(String::from_iter),
        1 => Just("line\r\nx-injected: 1".to_owned()),
        1 => Just(String::new()),
    ]
}

/// Any JSON value (finite numbers), nested up to three levels, strings from [`text`].
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::from),
            btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An attachment: base64 data, a URL or a data URL, common and odd media types.
pub fn attachment() -> impl Strategy<Value = Attachment> {
    let media = prop_oneof![
        Just("image/png".to_owned()),
        Just("application/pdf".to_owned()),
        Just("text/plain".to_owned()),
        text()
    ];
    let source = prop_oneof![
        text().prop_map(|data| Source::Base64 { data }),
        text().prop_map(|url| Source::Url { url }),
        Just(Source::Url { url: "data:image/png;base64,iVBORw0KGgo=".into() }),
    ];
    (source, media, proptest::option::of(text())).prop_map(|(source, media_type, name)| Attachment {
        source,
        media_type,
        name,
    })
}

/// A block of any kind, with odd ids, names, signatures and tool inputs.
pub fn block() -> impl Strategy<Value = Block> {
    let result_content = prop_oneof![
        text().prop_map(|text| ToolResultContent::Text { text }),
        attachment().prop_map(ToolResultContent::Attachment),
    ];
    prop_oneof![
        3 => (text(), proptest::option::of(text())).prop_map(|(text, signature)| Block::Text(Text { text, signature })),
        1 => (text(), proptest::option::of(text()), proptest::option::of(text()), proptest::option::of(text()))
            .prop_map(|(text, signature, redacted, id)| Block::Thinking(Thinking { text, signature, redacted, id })),
        1 => attachment().prop_map(Block::Attachment),
        2 => (text(), text(), json_value(), proptest::option::of(text()))
            .prop_map(|(id, name, input, signature)| Block::ToolUse(ToolUse { invalid: None, id, name, input, signature })),
        2 => (text(), text(), vec(result_content, 0..3), any::<bool>())
            .prop_map(|(tool_use_id, name, content, is_error)| {
                Block::ToolResult(ToolResult { tool_use_id, name, content, is_error })
            }),
    ]
}

/// A context of any shape: messages of either role holding any blocks in any order (a
/// tool result without its call, a call without its result), odd tools and schemas.
pub fn context() -> impl Strategy<Value = Context> {
    let message = (any::<bool>(), vec(block(), 0..4))
        .prop_map(|(user, content)| Message::new(if user { Role::User } else { Role::Assistant }, content));
    let tool = (text(), text(), prop_oneof![json_value(), Just(json!({"type": "object", "properties": {}}))])
        .prop_map(|(name, description, input_schema)| ToolSpec { name, description, input_schema });
    (proptest::option::of(text()), vec(message, 0..5), vec(tool, 0..3)).prop_map(|(system, messages, tools)| Context {
        system,
        messages,
        tools,
    })
}

/// Options, mostly in range (so that most reach a builder) and sometimes anything.
pub fn options() -> impl Strategy<Value = Options> {
    let choice = prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::None),
        Just(ToolChoice::Required),
        text().prop_map(ToolChoice::Tool),
    ];
    let thinking = prop_oneof![
        Just(Reasoning::Off),
        Just(Reasoning::Effort(Effort::High)),
        Just(Reasoning::Effort(Effort::Max)),
        (1024..200_000u32).prop_map(Reasoning::Budget),
        any::<u32>().prop_map(Reasoning::Budget),
    ];
    let tokens = prop_oneof![4 => 1..200_000u32, 1 => any::<u32>()];
    let temperature = prop_oneof![4 => 0.0..=2.0f64, 1 => any::<f64>()];
    let top_p = prop_oneof![4 => 0.0..=1.0f64, 1 => any::<f64>()];
    let stop = prop_oneof![4 => "[a-z]{1,5}", 1 => text()];
    // Secret-looking names among them: a builder must mark those sensitive.
    let header = prop_oneof![4 => ("x-[a-z]{1,8}", "[ -~]{0,12}"), 1 => ("x-(api-key|auth-token)", "[ -~]{1,12}"), 1 => (text(), text())];
    let cache = prop_oneof![Just(CacheRetention::Short), Just(CacheRetention::Long)];
    let output = (text(), json_value()).prop_map(|(name, schema)| OutputSchema { name, schema });
    (
        proptest::option::of(tokens),
        proptest::option::of(temperature),
        proptest::option::of(top_p),
        vec(stop, 0..3),
        proptest::option::of(choice),
        proptest::option::of(thinking),
        proptest::option::of(cache),
        proptest::option::of(output),
        vec(header, 0..2),
    )
        .prop_map(|(max_tokens, temperature, top_p, stop, tool_choice, thinking, cache, output, headers)| {
            Options {
                max_tokens,
                temperature,
                top_p,
                stop,
                tool_choice,
                thinking,
                cache,
                output,
                headers,
                ..Options::default()
            }
        })
}

/// Text made to trip a reader of JSON, of markup or of fences: quotes, braces, escapes,
/// backtick runs, tags, control characters, line separators, non-ASCII characters.
pub fn hostile_text() -> impl Strategy<Value = String> {
    const PIECES: &[&str] = &[
        "`",
        "```",
        "```tool_call",
        "\"",
        "'",
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\\",
        "\\u",
        "\\\"",
        "\n",
        "\r",
        "\r\n",
        "\t",
        "\u{0}",
        "\u{1f}",
        "\u{7f}",
        "é",
        "日本",
        "😀",
        "\u{2028}",
        " ",
        "<",
        ">",
        "&",
        "&amp;",
        "<![CDATA[",
        "]]>",
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "tool",
        "arguments",
    ];
    vec(prop_oneof![select(PIECES).prop_map(str::to_owned), any::<char>().prop_map(String::from)], 0..6)
        .prop_map(|pieces| pieces.concat())
}

/// A JSON value for a tool argument: nulls, booleans, integers, finite floats, strings
/// from [`hostile_text`], arrays and objects nested up to three levels.
pub fn argument_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
        3 => hostile_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(hostile_text(), inner, 0..4).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A tool name or parameter name as tools declare them: `[a-z_][a-z0-9_]{0,15}`.
pub fn identifier() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,15}"
}

/// A call's arguments: parameter names from [`identifier`], hostile values from
/// [`argument_value`]. What a protocol that writes names into markup (XML elements) must
/// read back.
pub fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    btree_map(identifier(), argument_value(), 0..5).prop_map(|map| map.into_iter().collect())
}

/// A call's arguments whose names are hostile too: for a protocol that writes the
/// arguments as JSON, where any name is allowed.
pub fn hostile_arguments() -> impl Strategy<Value = Map<String, Value>> {
    btree_map(hostile_text(), argument_value(), 0..5).prop_map(|map| map.into_iter().collect())
}

/// Up to `max` cut points in `0..=len`, sorted and without repeats: where a body or a text
/// is split.
pub fn cut_points(len: usize, max: usize) -> impl Strategy<Value = Vec<usize>> {
    vec(0..=len, 0..=max).prop_map(|mut cuts| {
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    })
}
