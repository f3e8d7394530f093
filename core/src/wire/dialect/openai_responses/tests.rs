use serde_json::{json, Value};

use crate::data::error::{ProviderErrorKind, StreamError};
use crate::data::event::StreamEvent;
use crate::data::message::{Block, Context, Message, Origin, Role, Text, Thinking, ToolResult, ToolUse};
use crate::data::model::Model;
use crate::data::options::{Effort, Options, Reasoning, ToolChoice};
use crate::data::provider::{ApiKey, Auth, Provider, Quirks};
use crate::data::response::{Response, StopReason, Warning};
use crate::data::schema::adapt::is_openai_strict as is_strict_compatible;
use crate::wire::decoder::{decode_body, StreamDecoder};
use crate::wire::delta::{BlockDelta, Delta};
use crate::wire::dialect::{Dialect, RequestSpec};
use crate::wire::framing::Frame;

fn provider() -> Provider {
    Provider {
        id: "openai".into(),
        name: "OpenAI".into(),
        base_url: "https://api.openai.com/v1".into(),
        dialect: Dialect::OpenaiResponses,
        auth: Auth::Bearer,
        api_key_env: Some("OPENAI_API_KEY".into()),
        headers: Vec::new(),
        secret_headers: Vec::new(),
        quirks: Quirks::default(),
        hooks: Default::default(),
        tool_protocol: None,
    }
}

fn model(id: &str, reasoning: bool) -> Model {
    Model { reasoning, ..Model::new("openai", id, Dialect::OpenaiResponses) }
}

fn build(model: &Model, context: &Context, options: &Options) -> (Value, Vec<Warning>) {
    let provider = provider();
    let key = ApiKey::new("sk-test");
    let spec = RequestSpec { model, provider: &provider, context, options, api_key: Some(&key) };
    let built = Dialect::OpenaiResponses.build_request(&spec).unwrap();
    assert_eq!(built.request.url, "https://api.openai.com/v1/responses");
    (serde_json::from_slice(&built.request.body).unwrap(), built.warnings)
}

fn sse(events: &[Value]) -> Vec<u8> {
    let mut body = String::new();
    for e in events {
        body.push_str(&format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")));
    }
    body.into_bytes()
}

fn decode(events: &[Value]) -> (Vec<StreamEvent>, Response) {
    decode_body(Dialect::OpenaiResponses, "gpt-5", &sse(events))
}

fn completed(usage: Value) -> Value {
    json!({"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-5", "status": "completed", "usage": usage}})
}

#[test]
fn options_that_do_not_fit_are_reported() {
    let context = Context::from_prompt("hi");
    let options = Options {
        stop: vec!["END".into()],
        temperature: Some(0.5),
        top_p: Some(0.5),
        thinking: Some(Reasoning::Budget(10_000)),
        ..Options::default()
    };
    let (body, warnings) = build(&model("gpt-5", true), &context, &options);
    assert!(body.get("temperature").is_none() && body.get("top_p").is_none(), "{body}");
    assert_eq!(body["reasoning"], json!({"effort": "high", "summary": "auto"}));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    let codes: Vec<&str> = warnings.iter().map(|w| w.code.as_str()).collect();
    assert_eq!(codes, ["unsupported_option", "unsupported_option", "unsupported_option", "approximated_option"]);
    assert!(warnings[0].message.contains("temperature"), "{warnings:?}");
    assert!(warnings[2].message.contains("stop sequences"), "{warnings:?}");

    // A model without reasoning takes sampling options and gets no reasoning fields.
    let (body, warnings) =
        build(&model("gpt-4.1", false), &context, &Options::default().temperature(0.3).thinking(Reasoning::Off));
    assert_eq!(body["temperature"], json!(0.3));
    assert!(body.get("reasoning").is_none() && body.get("include").is_none());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(body["store"], json!(false));
    assert_eq!(body["stream"], json!(true));
}

#[test]
fn effort_levels_map_to_reasoning_effort() {
    let context = Context::from_prompt("hi");
    for (effort, name) in [
        (Effort::Low, "low"),
        (Effort::Medium, "medium"),
        (Effort::High, "high"),
        (Effort::Xhigh, "xhigh"),
        (Effort::Max, "xhigh"),
    ] {
        let (body, warnings) =
            build(&model("gpt-5", true), &context, &Options::default().thinking(Reasoning::Effort(effort)));
        assert_eq!(body["reasoning"]["effort"], json!(name));
        assert!(warnings.is_empty());
    }
    // Off is effort "none", which also allows temperature (gpt-5.1 and later).
    let options = Options::default().thinking(Reasoning::Off).temperature(0.1);
    let (body, warnings) = build(&model("gpt-5.1", true), &context, &options);
    assert_eq!(body["reasoning"], json!({"effort": "none"}));
    assert_eq!(body["temperature"], json!(0.1));
    assert!(warnings.is_empty());
}

#[test]
fn tool_choice_needs_tools() {
    let context = Context::from_prompt("hi");
    let (body, warnings) =
        build(&model("gpt-4.1", false), &context, &Options::default().tool_choice(ToolChoice::Required));
    assert!(body.get("tool_choice").is_none());
    assert_eq!(warnings.len(), 1);
}

#[test]
fn strict_mode_only_for_schemas_that_qualify() {
    let closed = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false});
    assert!(is_strict_compatible(&closed));
    let optional = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"], "additionalProperties": false});
    assert!(!is_strict_compatible(&optional));
    let open = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert!(!is_strict_compatible(&open));
    let nested_open = json!({"type": "object", "additionalProperties": false, "required": ["n"],
        "properties": {"n": {"type": "array", "items": {"type": "object", "properties": {}}}}});
    assert!(!is_strict_compatible(&nested_open));
    assert!(!is_strict_compatible(&json!({})));
}

fn own_origin() -> Option<Box<Origin>> {
    Some(Box::new(Origin { dialect: "openai_responses".into(), provider: "openai".into(), model: "gpt-5".into() }))
}

#[test]
fn reasoning_without_a_following_item_or_ciphertext_is_not_sent() {
    let thinking = |sig: Option<&str>| {
        Block::Thinking(Thinking {
            text: "t".into(),
            signature: sig.map(Into::into),
            redacted: None,
            id: Some("rs_1".into()),
        })
    };
    let mut trailing = Message::new(Role::Assistant, vec![thinking(Some("enc"))]);
    trailing.origin = own_origin();
    let mut no_cipher = Message::new(Role::Assistant, vec![thinking(None), Block::text("answer")]);
    no_cipher.origin = own_origin();
    let context = Context::from(vec![Message::user("a"), trailing, Message::user("b"), no_cipher]);
    let (body, _) = build(&model("gpt-5", true), &context, &Options::default());
    let types: Vec<&str> = body["input"].as_array().unwrap().iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["message", "message", "message"]);
}

#[test]
fn consecutive_parts_of_one_message_item_stay_together() {
    let text = |t: &str, id: &str| Block::Text(Text { text: t.into(), signature: Some(id.into()) });
    let mut message = Message::new(Role::Assistant, vec![text("a", "msg_1"), text("b", "msg_1"), text("c", "msg_2")]);
    message.origin = own_origin();
    let context = Context::from(vec![Message::user("q"), message]);
    let (body, _) = build(&model("gpt-4.1", false), &context, &Options::default());
    let items = body["input"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[1]["id"], json!("msg_1"));
    assert_eq!(items[1]["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(items[2]["id"], json!("msg_2"));
}

#[test]
fn tool_errors_say_so_and_raw_arguments_go_back_raw() {
    let mut call = Message::new(
        Role::Assistant,
        vec![Block::ToolUse(ToolUse {
            invalid: None,
            id: "c1".into(),
            name: "f".into(),
            input: json!("{\"x\":"),
            signature: None,
        })],
    );
    call.origin = own_origin();
    let results = Message::new(
        Role::User,
        vec![
            Block::ToolResult(ToolResult::error("c1", "f", "disk full")),
            Block::ToolResult(ToolResult::error("c1", "f", "Error: already marked")),
        ],
    );
    let context = Context::from(vec![Message::user("q"), call, results]);
    let (body, warnings) = build(&model("gpt-4.1", false), &context, &Options::default());
    let items = body["input"].as_array().unwrap();
    assert_eq!(items[1]["arguments"], json!("{\"x\":"));
    assert_eq!(items[2]["output"], json!("Error: disk full"));
    assert_eq!(items[3]["output"], json!("Error: already marked"));
    assert!(warnings.is_empty());
}

#[test]
fn documented_error_bodies_are_classified() {
    let cases = [
        (
            429,
            r#"{"error":{"message":"Rate limit reached for gpt-5 in organization org-x on tokens per min (TPM)","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
            ProviderErrorKind::RateLimited,
        ),
        (
            400,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
            ProviderErrorKind::ContextTooLong,
        ),
        (
            401,
            r#"{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
            ProviderErrorKind::Authentication,
        ),
        (
            400,
            r#"{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}"#,
            ProviderErrorKind::InvalidRequest,
        ),
        (
            500,
            r#"{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}"#,
            ProviderErrorKind::Server,
        ),
        (
            503,
            r#"{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}"#,
            ProviderErrorKind::Overloaded,
        ),
    ];
    for (status, body, kind) in cases {
        let error = Dialect::OpenaiResponses.parse_error(status, [("retry-after", "3")], body.as_bytes());
        assert_eq!(error.kind, kind, "{body}");
        assert_eq!(error.status, Some(status));
    }
}

#[test]
fn parallel_calls_are_keyed_by_item_and_arguments_are_not_doubled() {
    let (events, response) = decode(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "f", "arguments": ""}}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "g", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_b", "delta": "{\"y\":"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_a", "delta": "{\"x\":1}"}),
        json!({"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_b", "delta": "2}"}),
        json!({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_a", "arguments": "{\"x\":1}"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "f", "arguments": "{\"x\":1}"}}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "g", "arguments": "{\"y\":2}"}}),
        completed(json!({"input_tokens": 10, "output_tokens": 5})),
    ]);
    let calls: Vec<(String, Value)> = response.message.tool_uses().map(|t| (t.id.clone(), t.input.clone())).collect();
    assert_eq!(calls, [("call_a".into(), json!({"x": 1})), ("call_b".into(), json!({"y": 2}))]);
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));
}

#[test]
fn unknown_events_and_odd_field_types_do_not_fail() {
    let (events, response) = decode(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}}),
        json!({"type": "response.reasoning_summary.delta", "item_id": "rs_1", "output_index": 0, "delta": {"text": "x"}}),
        json!({"type": "response.future_event", "output_index": "zero", "delta": [1, 2], "item": null}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "status": "in_progress"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "web_search_call", "id": "ws_1", "action": {"query": "q"}}}),
        json!({"type": "response.output_text.annotation.added", "item_id": "msg_1", "annotation": {"type": "url_citation"}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "ok", "logprobs": [{"token": "ok"}]}),
        completed(Value::Null),
    ]);
    assert_eq!(response.text(), "ok");
    assert!(matches!(events.last(), Some(StreamEvent::Done { stop_reason: StopReason::Stop, .. })), "{events:?}");
}

#[test]
fn malformed_json_is_a_decode_error() {
    let body = b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\n\n";
    let (events, _) = decode_body(Dialect::OpenaiResponses, "gpt-5", body);
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { error}) if matches!(**error, StreamError::Decode { .. })),
        "{events:?}"
    );
}

#[test]
fn text_and_reasoning_only_in_done_events_are_kept() {
    let (_, response) = decode(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}], "encrypted_content": "enc"}}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "message", "id": "msg_1", "role": "assistant",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}]}}),
        completed(json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 3}})),
    ]);
    let content = &response.message.content;
    assert_eq!(
        content[0],
        Block::Thinking(Thinking {
            text: "a\n\nb".into(),
            signature: Some("enc".into()),
            redacted: None,
            id: Some("rs_1".into())
        })
    );
    assert_eq!(content[1], Block::Text(Text { text: "hello".into(), signature: Some("msg_1".into()) }));
    let usage = response.usage;
    assert_eq!(
        (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens, usage.reasoning_tokens),
        (6, 4, 5, 3)
    );
}

#[test]
fn keep_alives_and_done_markers_produce_nothing() {
    let mut state = super::StreamState::default();
    let mut out = Vec::new();
    state.parse(&Frame::Comment("keep-alive"), &mut out).unwrap();
    state.parse(&Frame::Done, &mut out).unwrap();
    state.parse(&Frame::Event { event: "ping", data: "", id: None }, &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn text_delta_is_borrowed_into_one_delta() {
    let mut state = super::StreamState::default();
    let mut out = Vec::new();
    let data =
        r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"a\"b"}"#;
    state.parse(&Frame::Event { event: "", data, id: None }, &mut out).unwrap();
    assert_eq!(out.last(), Some(&Delta::BlockDelta { index: 0, delta: BlockDelta::Text("a\"b".into()) }));
}

/// A decoded response sent back on the next turn carries the API's own items.
#[test]
fn own_items_round_trip() {
    let mut decoder = StreamDecoder::new(Dialect::OpenaiResponses, "gpt-5");
    let mut events = Vec::new();
    decoder.feed(
        &sse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "first"}}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_9", "summary_index": 0, "delta": "plan"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "final"}}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "f", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_9", "delta": "{\"a\":1}"}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "f", "arguments": "{\"a\":1}"}}),
            completed(Value::Null),
        ]),
        &mut events,
    );
    decoder.finish(&mut events);
    let reply = decoder.into_response().message;
    let context = Context::from(vec![
        Message::user("q"),
        reply,
        Message::new(Role::User, vec![Block::ToolResult(ToolResult::text("call_9", "f", "ok"))]),
    ]);
    let (body, _) = build(&model("gpt-5", true), &context, &Options::default());
    let items = body["input"].as_array().unwrap();
    assert_eq!(
        items[1],
        json!({"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "final"})
    );
    assert_eq!(
        items[2],
        json!({"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": "f", "arguments": "{\"a\":1}"})
    );
    assert_eq!(items[3], json!({"type": "function_call_output", "call_id": "call_9", "output": "ok"}));

    // The same message presented as another dialect's loses every opaque field.
    let mut foreign = context.messages[1].clone();
    foreign.origin =
        Some(Box::new(Origin { dialect: "anthropic_messages".into(), provider: String::new(), model: String::new() }));
    let context = Context::from(vec![Message::user("q"), foreign]);
    let (body, _) = build(&model("gpt-5", true), &context, &Options::default());
    assert_eq!(
        body["input"][1],
        json!({"type": "function_call", "call_id": "call_9", "name": "f", "arguments": "{\"a\":1}"})
    );
    assert_eq!(body["input"].as_array().map(Vec::len), Some(2));
}

#[test]
fn events_naming_no_item_go_to_the_latest_item_of_their_kind() {
    let (_, response) = decode(&[
        json!({"type": "response.output_item.added", "item": {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{}"}),
        json!({"type": "response.output_text.delta", "delta": "a"}),
        json!({"type": "response.output_text.delta", "delta": "b"}),
        completed(Value::Null),
    ]);
    assert_eq!(response.message.content.len(), 2, "{:?}", response.message.content);
    assert_eq!(response.text(), "ab");
}

#[test]
fn custom_tool_calls_are_tool_uses_with_text_input() {
    let (_, response) = decode(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "sql", "input": ""}}),
        json!({"type": "response.custom_tool_call_input.delta", "output_index": 0, "item_id": "ctc_1", "delta": "SELECT 1"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "sql", "input": "SELECT 1"}}),
        completed(Value::Null),
    ]);
    let call = response.message.tool_uses().next().cloned();
    assert_eq!(call.map(|c| (c.id, c.input)), Some(("call_1".to_string(), json!("SELECT 1"))));
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
}
