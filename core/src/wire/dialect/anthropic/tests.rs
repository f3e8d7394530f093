//! Unit tests of the `anthropic_messages` dialect: request bodies and stream parsing.

use serde_json::{json, Value};

use crate::data::error::{ProviderErrorKind, StreamError};
use crate::data::event::StreamEvent;
use crate::data::message::{
    Attachment, Block, Context, Message, Origin, Role, Source, Text, Thinking, ToolResult, ToolResultContent, ToolSpec,
    ToolUse,
};
use crate::data::model::Model;
use crate::data::options::{CacheRetention, Effort, Options, OutputSchema, Reasoning, ToolChoice};
use crate::data::provider::{ApiKey, Auth, Provider, Quirks};
use crate::data::response::{Response, StopReason, Warning};
use crate::wire::accumulator::Accumulator;
use crate::wire::dialect::{Dialect, RequestSpec};
use crate::wire::framing::Frame;

const D: Dialect = Dialect::AnthropicMessages;

fn provider() -> Provider {
    Provider {
        id: "anthropic".into(),
        name: "Anthropic".into(),
        base_url: "https://api.anthropic.com/v1".into(),
        dialect: D,
        auth: Auth::Header { name: "x-api-key".into() },
        api_key_env: Some("ANTHROPIC_API_KEY".into()),
        headers: vec![],
        secret_headers: Vec::new(),
        quirks: Quirks::default(),
        hooks: Default::default(),
        tool_protocol: None,
    }
}

fn model(id: &str) -> Model {
    Model { reasoning: true, max_output_tokens: 64_000, ..Model::new("anthropic", id, D) }
}

fn build(model: &Model, context: &Context, options: &Options) -> (Value, Vec<Warning>, Vec<(String, String)>) {
    let key = ApiKey::new("sk-test");
    let spec = RequestSpec { model, provider: &provider(), context, options, api_key: Some(&key) };
    let built = D.build_request(&spec).expect("request builds");
    assert_eq!(built.request.url, "https://api.anthropic.com/v1/messages");
    let headers = built.request.headers.iter().map(|h| (h.name.clone(), h.display_value().to_string())).collect();
    (serde_json::from_slice(&built.request.body).expect("JSON body"), built.warnings, headers)
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} tool"),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }
}

fn own_origin() -> Option<Box<Origin>> {
    Some(Box::new(Origin {
        dialect: "anthropic_messages".into(),
        provider: "anthropic".into(),
        model: "claude".into(),
    }))
}

#[test]
fn minimal_request_has_version_header_max_tokens_and_stream() {
    let (body, warnings, headers) = build(&model("claude-sonnet-4-5"), &"Hi".into(), &Options::default());
    assert!(warnings.is_empty());
    assert!(headers.contains(&("anthropic-version".into(), "2023-06-01".into())));
    assert!(headers.contains(&("x-api-key".into(), "<redacted>".into())));
    assert_eq!(
        body,
        json!({"model": "claude-sonnet-4-5", "max_tokens": 64000, "stream": true,
               "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})
    );
    let unknown = Model::new("local", "smollm2", D);
    let (body, _, _) = build(&unknown, &"Hi".into(), &Options::default());
    assert_eq!(body["max_tokens"], 4096);
}

#[test]
fn tools_choice_cache_stop_and_metadata() {
    let context = Context {
        system: Some("Be brief.".into()),
        messages: vec![Message::user("first"), Message::assistant("ok"), Message::user("weather?")],
        tools: vec![tool("a"), tool("b")],
    };
    let mut options = Options::default().tool_choice(ToolChoice::Tool("b".into()));
    options.cache = Some(CacheRetention::Long);
    options.stop = vec!["END".into()];
    options.metadata.insert("user_id".into(), "u-1".into());
    options.metadata.insert("trace".into(), "t".into());
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &context, &options);
    let cc = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(body["system"], json!([{"type": "text", "text": "Be brief.", "cache_control": cc}]));
    assert_eq!(body["tools"][0].get("cache_control"), None);
    assert_eq!(body["tools"][1]["cache_control"], cc);
    assert_eq!(body["tools"][1]["input_schema"]["type"], "object");
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "b"}));
    // The last two user messages: this turn's prefix and the previous one's.
    assert_eq!(body["messages"][0]["content"][0]["cache_control"], cc);
    assert_eq!(body["messages"][1]["content"][0].get("cache_control"), None);
    assert_eq!(body["messages"][2]["content"][0]["cache_control"], cc);
    assert_eq!(body["stop_sequences"], json!(["END"]));
    assert_eq!(body["metadata"], json!({"user_id": "u-1"}));
    assert_eq!(warnings.len(), 1, "{warnings:?}");

    for (choice, wire) in [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::None, json!({"type": "none"})),
        (ToolChoice::Required, json!({"type": "any"})),
    ] {
        let (body, _, _) = build(&model("claude-sonnet-4-5"), &context, &Options::default().tool_choice(choice));
        assert_eq!(body["tool_choice"], wire);
        assert_eq!(body["system"], "Be brief.");
    }
    let short = Options { cache: Some(CacheRetention::Short), ..Options::default() };
    let (body, _, _) = build(&model("claude-sonnet-4-5"), &context, &short);
    assert_eq!(body["tools"][1]["cache_control"], json!({"type": "ephemeral"}));
}

#[test]
fn tool_round_trip_with_error_result_and_images() {
    let png = Attachment {
        source: Source::Base64 { data: "iVBORw0KGgo=".into() },
        media_type: "image/png".into(),
        name: None,
    };
    let pdf = Attachment {
        source: Source::Url { url: "https://example.com/a.pdf".into() },
        media_type: "application/pdf".into(),
        name: Some("a.pdf".into()),
    };
    let assistant = Message {
        origin: own_origin(),
        ..Message::new(
            Role::Assistant,
            vec![
                Block::Thinking(Thinking { text: "plan".into(), signature: Some("sig".into()), ..Thinking::default() }),
                Block::Thinking(Thinking { redacted: Some("opaque".into()), ..Thinking::default() }),
                Block::text("Calling."),
                Block::ToolUse(ToolUse {
                    invalid: None,
                    id: "toolu_1".into(),
                    name: "a".into(),
                    input: json!({"city": "Oslo"}),
                    signature: None,
                }),
                Block::ToolUse(ToolUse {
                    invalid: None,
                    id: "toolu_2".into(),
                    name: "b".into(),
                    input: Value::Null,
                    signature: None,
                }),
            ],
        )
    };
    let results = Message::new(
        Role::User,
        vec![
            Block::text("Here you go"),
            Block::ToolResult(ToolResult {
                tool_use_id: "toolu_1".into(),
                name: "a".into(),
                content: vec![
                    ToolResultContent::Text { text: "sunny".into() },
                    ToolResultContent::Attachment(png.clone()),
                ],
                is_error: false,
            }),
            Block::ToolResult(ToolResult::error("toolu_2", "b", "boom")),
        ],
    );
    let context = Context {
        messages: vec![
            Message::new(Role::User, vec![Block::text("Look"), Block::Attachment(png), Block::Attachment(pdf)]),
            assistant,
            results,
        ],
        tools: vec![tool("a"), tool("b")],
        ..Context::default()
    };
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &context, &Options::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    let m = &body["messages"];
    assert_eq!(
        m[0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    assert_eq!(
        m[0]["content"][2],
        json!({"type": "document", "title": "a.pdf", "source": {"type": "url", "url": "https://example.com/a.pdf"}})
    );
    assert_eq!(m[1]["content"][0], json!({"type": "thinking", "thinking": "plan", "signature": "sig"}));
    assert_eq!(m[1]["content"][1], json!({"type": "redacted_thinking", "data": "opaque"}));
    assert_eq!(m[1]["content"][4], json!({"type": "tool_use", "id": "toolu_2", "name": "b", "input": {}}));
    // Tool results come first, the text after them.
    assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(m[2]["content"][0]["content"][0], json!({"type": "text", "text": "sunny"}));
    assert_eq!(m[2]["content"][0]["content"][1]["type"], "image");
    assert_eq!(m[2]["content"][0].get("is_error"), None);
    assert_eq!(
        m[2]["content"][1],
        json!({"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": true})
    );
    assert_eq!(m[2]["content"][2], json!({"type": "text", "text": "Here you go"}));
}

#[test]
fn foreign_history_drops_reasoning_and_keeps_calls() {
    let foreign = Message {
        origin: Some(Box::new(Origin {
            dialect: "openai_responses".into(),
            provider: "openai".into(),
            model: "o3".into(),
        })),
        ..Message::new(
            Role::Assistant,
            vec![
                Block::Thinking(Thinking {
                    text: "hmm".into(),
                    signature: Some("enc".into()),
                    id: Some("rs_1".into()),
                    redacted: None,
                }),
                Block::Text(Text { text: "Sure".into(), signature: Some("gem".into()) }),
                Block::ToolUse(ToolUse {
                    invalid: None,
                    id: "call|1".into(),
                    name: "a".into(),
                    input: json!({}),
                    signature: Some("x".into()),
                }),
            ],
        )
    };
    let unsigned_own = Message {
        origin: own_origin(),
        ..Message::new(Role::Assistant, vec![Block::Thinking(Thinking { text: "cut".into(), ..Thinking::default() })])
    };
    let context = Context {
        messages: vec![
            Message::user("go"),
            foreign,
            Message::new(Role::User, vec![Block::ToolResult(ToolResult::text("call|1", "a", "done"))]),
            unsigned_own,
        ],
        ..Context::default()
    };
    let (body, _, _) = build(&model("claude-sonnet-4-5"), &context, &Options::default());
    let m = body["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "the unsigned-only message is skipped: {m:?}");
    assert_eq!(
        m[1]["content"],
        json!([{"type": "text", "text": "Sure"}, {"type": "tool_use", "id": "call_1", "name": "a", "input": {}}])
    );
    assert_eq!(m[2]["content"][0]["tool_use_id"], "call_1");
}

#[test]
fn budget_thinking_drops_temperature_and_fits_under_max_tokens() {
    let opts = Options::default().thinking(Reasoning::Effort(Effort::Medium)).temperature(0.3);
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &"Hi".into(), &opts);
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    assert_eq!(body.get("temperature"), None);
    assert_eq!(warnings.len(), 1);

    let opts = Options::default().thinking(Reasoning::Budget(10_000)).max_tokens(8_000);
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &"Hi".into(), &opts);
    assert_eq!(body["thinking"]["budget_tokens"], 7_999);
    assert_eq!(body["max_tokens"], 8_000);
    assert_eq!(warnings[0].code, "thinking_budget_reduced");

    let opts = Options::default().thinking(Reasoning::Budget(2_000)).max_tokens(1_000);
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &"Hi".into(), &opts);
    assert_eq!(body.get("thinking"), None);
    assert_eq!(warnings.len(), 1);

    let mut unknown = model("my-proxy-model");
    unknown.max_output_tokens = 0;
    let opts = Options::default().thinking(Reasoning::Effort(Effort::High));
    let (body, _, _) = build(&unknown, &"Hi".into(), &opts);
    assert_eq!(body["thinking"]["budget_tokens"], 16_384);
    assert_eq!(body["max_tokens"], 16_384 + 4_096);

    let not_reasoning = Model { reasoning: false, ..model("claude-3-5-haiku") };
    let (body, warnings, _) = build(&not_reasoning, &"Hi".into(), &opts);
    assert_eq!(body.get("thinking"), None);
    assert_eq!(warnings.len(), 1);

    let forced = opts.clone().tool_choice(ToolChoice::Required);
    let context = Context { tools: vec![tool("a")], ..Context::from_prompt("Hi") };
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &context, &forced);
    assert_eq!(body.get("thinking"), None);
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert_eq!(warnings.len(), 1);
}

#[test]
fn adaptive_thinking_on_newer_models() {
    let opts = Options::default().thinking(Reasoning::Effort(Effort::Low));
    let (body, warnings, _) = build(&model("claude-opus-4-6"), &"Hi".into(), &opts);
    assert!(warnings.is_empty());
    assert_eq!(body["thinking"], json!({"type": "adaptive", "display": "summarized"}));
    assert_eq!(body["output_config"], json!({"effort": "low"}));

    // 4.6 still takes an explicit budget; 4.7 only takes effort levels.
    let opts = Options::default().thinking(Reasoning::Budget(20_000));
    let (body, _, _) = build(&model("claude-opus-4-6"), &"Hi".into(), &opts);
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 20_000}));
    let (body, warnings, _) = build(&model("claude-opus-4-7"), &"Hi".into(), &opts);
    assert_eq!(body["output_config"]["effort"], "high");
    assert_eq!(warnings[0].code, "thinking_budget_mapped");

    let opts = Options::default().thinking(Reasoning::Effort(Effort::Xhigh)).temperature(0.5);
    let (body, warnings, _) = build(&model("claude-sonnet-4-6"), &"Hi".into(), &opts);
    assert_eq!(body["output_config"]["effort"], "high");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let (body, _, _) = build(&model("claude-opus-4-7"), &"Hi".into(), &opts);
    assert_eq!(body["output_config"]["effort"], "xhigh");
}

#[test]
fn sampling_rules_per_model() {
    let mut opts = Options::default().temperature(1.5);
    opts.top_p = Some(0.9);
    let (body, warnings, _) = build(&model("claude-3-7-sonnet-latest"), &"Hi".into(), &opts);
    assert_eq!((body["temperature"].as_f64(), body["top_p"].as_f64()), (Some(1.0), Some(0.9)));
    assert_eq!(warnings[0].code, "temperature_clamped");
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &"Hi".into(), &opts);
    assert_eq!(body.get("top_p"), None);
    assert_eq!(warnings.len(), 2);
    let (body, warnings, _) = build(&model("claude-opus-4-7"), &"Hi".into(), &opts);
    assert_eq!((body.get("temperature"), body.get("top_p")), (None, None));
    assert_eq!(warnings.len(), 2);
}

#[test]
fn structured_output_uses_output_config_format() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false});
    let opts = Options {
        output: Some(OutputSchema { name: "answer".into(), schema: schema.clone() }),
        ..Options::default().thinking(Reasoning::Effort(Effort::Medium))
    };
    let (body, _, headers) = build(&model("claude-opus-4-6"), &"Hi".into(), &opts);
    assert_eq!(body["output_config"], json!({"effort": "medium", "format": {"type": "json_schema", "schema": schema}}));
    assert!(!headers.iter().any(|(name, _)| name == "anthropic-beta"));
}

#[test]
fn unsupported_attachments_warn_and_text_documents_decode() {
    let audio =
        Attachment { source: Source::Base64 { data: "AAAA".into() }, media_type: "audio/wav".into(), name: None };
    let text = Attachment {
        source: Source::Base64 { data: "aGVsbG8=".into() },
        media_type: "text/markdown".into(),
        name: Some("notes.md".into()),
    };
    let context = Context::from(vec![Message::new(
        Role::User,
        vec![Block::text("read"), Block::Attachment(audio), Block::Attachment(text)],
    )]);
    let (body, warnings, _) = build(&model("claude-sonnet-4-5"), &context, &Options::default());
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "document", "title": "notes.md", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}})
    );
}

#[test]
fn prefill_loses_trailing_whitespace() {
    let context = Context::from(vec![Message::user("Write JSON"), Message::assistant("{\n  ")]);
    let (body, _, _) = build(&model("claude-sonnet-4-5"), &context, &Options::default());
    assert_eq!(body["messages"][1]["content"][0]["text"], "{");
}

// ---- stream parsing ----

/// Decodes a whole SSE body with a minimal splitter (blank-line separated events,
/// `event:`/`data:` lines), so these tests depend on this dialect only.
fn replay(model: &str, body: &[u8]) -> (Vec<StreamEvent>, Response) {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    let mut state = super::StreamState::default();
    let mut acc = Accumulator::new(model, None);
    let (mut deltas, mut events) = (Vec::new(), Vec::new());
    for chunk in text.split("\n\n") {
        let mut event = "";
        let mut data = Vec::new();
        for line in chunk.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim_start();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if data.is_empty() {
            continue;
        }
        let data = data.join("\n");
        let parsed = state.parse(&Frame::Event { event, data: &data, id: None }, &mut deltas);
        for d in deltas.drain(..) {
            acc.push(d, &mut events);
        }
        if let Err(e) = parsed {
            acc.fail(e, &mut events);
        }
    }
    state.finish(&mut deltas);
    for d in deltas.drain(..) {
        acc.push(d, &mut events);
    }
    acc.finish(&mut events);
    (events, acc.into_response())
}

fn sse(events: &[(&str, Value)]) -> Vec<u8> {
    let mut body = String::new();
    for (name, data) in events {
        body.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    body.into_bytes()
}

fn message_start(input: u64, cache_read: u64, cache_write: u64) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write, "cache_read_input_tokens": cache_read, "output_tokens": 1}}}),
    )
}

fn start(index: u32, block: Value) -> (&'static str, Value) {
    ("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn delta(index: u32, delta: Value) -> (&'static str, Value) {
    ("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn stop(index: u32) -> (&'static str, Value) {
    ("content_block_stop", json!({"type": "content_block_stop", "index": index}))
}

fn message_delta(reason: &str, usage: Value) -> (&'static str, Value) {
    (
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null}, "usage": usage}),
    )
}

fn message_stop() -> (&'static str, Value) {
    ("message_stop", json!({"type": "message_stop"}))
}

#[test]
fn decodes_thinking_text_and_parallel_tools_with_usage() {
    let body = sse(&[
        message_start(10, 200, 30),
        ("ping", json!({"type": "ping"})),
        start(0, json!({"type": "thinking", "thinking": ""})),
        delta(0, json!({"type": "thinking_delta", "thinking": "Let me see."})),
        delta(0, json!({"type": "signature_delta", "signature": "EqQB"})),
        stop(0),
        start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "Checking both. "})),
        delta(1, json!({"type": "citations_delta", "citation": {"type": "char_location"}})),
        stop(1),
        start(2, json!({"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {}})),
        start(3, json!({"type": "tool_use", "id": "toolu_b", "name": "time", "input": {}})),
        delta(2, json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"})),
        delta(3, json!({"type": "input_json_delta", "partial_json": "{\"tz\": \"CET\"}"})),
        delta(2, json!({"type": "input_json_delta", "partial_json": "ris\"}"})),
        stop(2),
        stop(3),
        message_delta("tool_use", json!({"output_tokens": 90, "output_tokens_details": {"thinking_tokens": 20}})),
        message_stop(),
    ]);
    let (events, response) = replay("m", &body);
    assert!(matches!(events.last(), Some(StreamEvent::Done { stop_reason: StopReason::ToolUse, .. })), "{events:?}");
    assert_eq!(response.id.as_deref(), Some("msg_1"));
    assert_eq!(response.model, "claude-sonnet-4-5-20250929");
    assert_eq!(response.text(), "Checking both. ");
    let content = &response.message.content;
    assert!(
        matches!(&content[0], Block::Thinking(t) if t.text == "Let me see." && t.signature.as_deref() == Some("EqQB"))
    );
    let calls: Vec<_> = response.message.tool_uses().map(|t| (t.id.as_str(), t.input.clone())).collect();
    assert_eq!(calls, [("toolu_a", json!({"city": "Paris"})), ("toolu_b", json!({"tz": "CET"}))]);
    let u = response.usage;
    assert_eq!((u.input_tokens, u.cache_read_tokens, u.cache_write_tokens), (10, 200, 30));
    assert_eq!((u.output_tokens, u.reasoning_tokens), (90, 20));
}

#[test]
fn stop_reasons_map() {
    for (wire, want) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("pause_turn", StopReason::Stop),
        ("max_tokens", StopReason::Length),
        ("model_context_window_exceeded", StopReason::Length),
        ("refusal", StopReason::Refusal),
        ("something_new", StopReason::Stop),
    ] {
        let body = sse(&[message_start(1, 0, 0), message_delta(wire, json!({"output_tokens": 2})), message_stop()]);
        let (events, response) = replay("m", &body);
        assert_eq!(response.stop_reason, Some(want), "{wire} {events:?}");
    }
}

#[test]
fn server_tools_and_unknown_blocks_are_skipped() {
    let body = sse(&[
        message_start(5, 0, 0),
        start(0, json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}})),
        delta(0, json!({"type": "input_json_delta", "partial_json": "{\"query\": \"x\"}"})),
        stop(0),
        start(1, json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []})),
        stop(1),
        start(2, json!({"type": "text", "text": ""})),
        delta(2, json!({"type": "text_delta", "text": "Found it."})),
        stop(2),
        ("brand_new_event", json!({"type": "brand_new_event"})),
        message_delta("end_turn", json!({"output_tokens": 7})),
        message_stop(),
    ]);
    let (events, response) = replay("m", &body);
    assert_eq!(response.message.content.len(), 1, "{events:?}");
    assert_eq!(response.text(), "Found it.");
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
}

#[test]
fn second_message_start_gets_fresh_indices() {
    let body = sse(&[
        message_start(5, 0, 0),
        start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "one"})),
        stop(0),
        message_start(6, 0, 0),
        start(0, json!({"type": "tool_use", "id": "toolu_x", "name": "f", "input": {}})),
        delta(0, json!({"type": "input_json_delta", "partial_json": "{}"})),
        stop(0),
        message_delta("tool_use", json!({"output_tokens": 3})),
        message_stop(),
    ]);
    let (_, response) = replay("m", &body);
    assert_eq!(response.message.content.len(), 2);
    assert_eq!(response.text(), "one");
    assert_eq!(response.message.tool_uses().count(), 1);
    assert_eq!(response.usage.input_tokens, 6);
}

#[test]
fn error_event_is_a_provider_error() {
    let body = sse(&[
        message_start(5, 0, 0),
        start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hel"})),
        ("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ]);
    let (events, response) = replay("m", &body);
    match events.last().and_then(|event| match event {
        StreamEvent::Error { error } => Some(&**error),
        _ => None,
    }) {
        Some(StreamError::Provider(e)) => {
            assert_eq!(e.kind, ProviderErrorKind::Overloaded);
            assert_eq!(e.code.as_deref(), Some("overloaded_error"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(response.text(), "Hel");
    assert_eq!(response.stop_reason, Some(StopReason::Error));
}

#[test]
fn cut_stream_is_incomplete_and_bad_json_is_a_decode_error() {
    let body = sse(&[
        message_start(5, 0, 0),
        start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Hi"})),
    ]);
    let (events, _) = replay("m", &body);
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { error}) if matches!(**error, StreamError::Incomplete)),
        "{events:?}"
    );
    let (events, _) = replay(
        "m",
        b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\n\n",
    );
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { error}) if matches!(**error, StreamError::Decode { .. })),
        "{events:?}"
    );
}

#[test]
fn decodes_without_message_start_or_event_names() {
    // llama.cpp may skip message_start; JSON-lines replays carry no `event:` names.
    let mut body = String::new();
    for data in [
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "🌌"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 6}}),
        json!({"type": "message_stop"}),
    ] {
        body.push_str(&format!("data: {data}\n\n"));
    }
    let (_, response) = replay("smollm2", body.as_bytes());
    assert_eq!(response.text(), "🌌");
    assert_eq!(response.stop_reason, Some(StopReason::Length));
    assert_eq!(response.usage.output_tokens, 6);
}

#[test]
fn redacted_thinking_keeps_its_data() {
    let body = sse(&[
        message_start(5, 0, 0),
        start(0, json!({"type": "redacted_thinking", "data": "EmwKAhgB"})),
        stop(0),
        start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "OK"})),
        stop(1),
        message_delta("end_turn", json!({"output_tokens": 3})),
        message_stop(),
    ]);
    let (_, response) = replay("m", &body);
    assert!(matches!(&response.message.content[0], Block::Thinking(t) if t.redacted.as_deref() == Some("EmwKAhgB")));
    assert_eq!(response.text(), "OK");
}

#[test]
fn parses_documented_error_bodies() {
    let cases = [
        (529, "overloaded_error", ProviderErrorKind::Overloaded),
        (429, "rate_limit_error", ProviderErrorKind::RateLimited),
        (401, "authentication_error", ProviderErrorKind::Authentication),
        (403, "permission_error", ProviderErrorKind::PermissionDenied),
        (404, "not_found_error", ProviderErrorKind::NotFound),
        (413, "request_too_large", ProviderErrorKind::InvalidRequest),
        (400, "invalid_request_error", ProviderErrorKind::InvalidRequest),
        (500, "api_error", ProviderErrorKind::Server),
    ];
    for (status, kind, want) in cases {
        let body = format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"m"}},"request_id":"req_1"}}"#);
        let e = D.parse_error(status, [("retry-after", "3")], body.as_bytes());
        assert_eq!(e.kind, want, "{kind}");
        assert_eq!(e.code.as_deref(), Some(kind));
        assert_eq!(e.message, "m");
    }
    let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    assert_eq!(D.parse_error(400, [], body).kind, ProviderErrorKind::ContextTooLong);
}
