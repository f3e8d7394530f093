//! The text protocols inside omni: a request rendered for one, a reply read through one by
//! the stream decoder, and which protocol a request uses.

use serde_json::{json, Map, Value};

use super::render::{build_request, format_result, protocol_for, render_request};
use super::stream::TextCalls;
use super::xml::Xml;
use super::{TextProtocol, ToolProtocol};
use crate::data::event::StreamEvent;
use crate::data::message::{Block, Context, Message, ToolResult, ToolSpec, ToolUse};
use crate::data::model::Model;
use crate::data::options::{Options, ToolChoice};
use crate::data::provider::Provider;
use crate::data::response::StopReason;
use crate::wire::decoder::StreamDecoder;
use crate::wire::dialect::{Dialect, RequestSpec};

fn weather() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}, "days": {"type": "integer"}},
            "required": ["city"],
            "examples": [{"city": "Lyon", "days": 2}]
        }),
    }
}

fn city(name: &str) -> Map<String, Value> {
    let mut arguments = Map::new();
    arguments.insert("city".into(), Value::String(name.into()));
    arguments
}

#[test]
fn a_rendered_request_carries_the_tools_in_its_system_prompt_and_its_history_as_text() {
    let call = ToolUse {
        invalid: None,
        id: "call_1_0".into(),
        name: "get_weather".into(),
        input: json!({"city": "Paris"}),
        signature: None,
    };
    let context = Context {
        system: Some("Be brief.".into()),
        messages: vec![
            Message::user("Weather in Paris?"),
            Message { content: vec![Block::text("Let me check.\n"), Block::ToolUse(call)], ..Message::assistant("") },
            Message {
                content: vec![
                    Block::ToolResult(ToolResult::text("call_1_0", "get_weather", "sunny")),
                    Block::ToolResult(ToolResult {
                        is_error: true,
                        ..ToolResult::text("call_1_1", "get_time", "down")
                    }),
                ],
                ..Message::user("")
            },
        ],
        tools: vec![weather()],
    };
    let options = Options::default().tool_choice(ToolChoice::Tool("get_weather".into()));
    let (rendered, options) = render_request(&Xml, &context, &options).expect("rendered");
    assert!(rendered.tools.is_empty(), "no native tools");
    assert_eq!(options.tool_choice, None, "no native tool choice");
    let system = rendered.system.expect("a system prompt");
    let rules = Xml.rules();
    let (rules_at, doc_at, own_at) = (system.find(&rules), system.find("## get_weather"), system.find("Be brief."));
    assert!(rules_at < doc_at && doc_at < own_at, "rules, tools, then the caller's prompt: {system}");
    assert!(system.contains("- city (string, required): The city."), "{system}");
    assert!(system.contains("- days (integer, optional)"), "{system}");
    let mut example = Map::new();
    example.insert("city".into(), json!("Lyon"));
    example.insert("days".into(), json!(2));
    assert!(system.contains(&Xml.format_call("get_weather", &example)), "the tool's own example: {system}");
    assert!(system.contains("Call the tool `get_weather` now."), "the tool choice as an instruction: {system}");
    let assistant = rendered.messages[1].text();
    assert_eq!(assistant, format!("Let me check.\n{}", Xml.format_call("get_weather", &city("Paris"))));
    let results = rendered.messages[2].text();
    assert_eq!(
        results,
        "<tool_result tool=\"get_weather\">\nsunny\n</tool_result>\n<tool_result tool=\"get_time\" status=\"error\">\ndown\n</tool_result>\n"
    );
    assert_eq!(format_result(&ToolResult::text("x", "t", "a\nb")), "<tool_result tool=\"t\">\na\nb\n</tool_result>\n");
}

#[test]
fn the_protocol_is_the_options_else_the_models_else_native() {
    let mut model = Model::new("local", "m", Dialect::OpenaiCompletions);
    let mut provider = Provider::openai_compatible("local", "http://127.0.0.1:9/v1", None);
    assert_eq!(protocol_for(&model, &provider, &Options::default()), ToolProtocol::Native);
    provider.tool_protocol = Some(ToolProtocol::Xml);
    assert_eq!(protocol_for(&model, &provider, &Options::default()), ToolProtocol::Xml, "the provider's");
    model.tool_protocol = Some(ToolProtocol::Json);
    assert_eq!(protocol_for(&model, &provider, &Options::default()), ToolProtocol::Json, "the model's first");
    let native = Options::default().tool_protocol(ToolProtocol::Native);
    assert_eq!(protocol_for(&model, &provider, &native), ToolProtocol::Native, "the option wins");
    provider.tool_protocol = None;
    let context = Context { tools: vec![weather()], ..Context::from("Hi") };
    let spec = RequestSpec {
        model: &model,
        provider: &provider,
        context: &context,
        options: &Options::default(),
        api_key: None,
    };
    let (built, protocol) = build_request(&spec).expect("built");
    assert_eq!(protocol.map(|p| p.name().to_string()).as_deref(), Some("json"));
    let body: Value = serde_json::from_slice(&built.request.body).expect("JSON");
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body["messages"][0]["content"].as_str().is_some_and(|s| s.contains("```tool_call")), "{body}");
}

fn sse(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// An Anthropic Messages stream whose text is `deltas`, ending with `end_turn`.
fn anthropic_text(deltas: &[&str]) -> Vec<u8> {
    let start = json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "m", "content": [], "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}});
    let mut body = sse("message_start", start);
    body += &sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    for delta in deltas {
        body += &sse(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": delta}}),
        );
    }
    body += &sse("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    body += &sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
    );
    body += &sse("message_stop", json!({"type": "message_stop"}));
    body.into_bytes()
}

fn decode(deltas: &[&str]) -> (Vec<StreamEvent>, crate::data::response::Response) {
    let model = Model::new("anthropic", "m", Dialect::AnthropicMessages);
    let calls = TextCalls::new(Xml.parser(&[weather()]), "call_7_");
    let mut decoder = StreamDecoder::for_model(&model).with_text_calls(calls);
    let mut events = Vec::new();
    let body = anthropic_text(deltas);
    for piece in body.chunks(5) {
        decoder.feed(piece, &mut events);
    }
    decoder.finish(&mut events);
    (events, decoder.into_response())
}

#[test]
fn a_call_in_the_text_reads_as_a_native_tool_call() {
    let call = Xml.format_call("get_weather", &city("Paris"));
    let (middle, end) = call.split_at(call.len() / 2);
    let (events, response) = decode(&["Let me check.\n<tool", &middle["<tool".len()..], end]);
    let starts: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseStart { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [("call_7_0", "get_weather")]);
    let input: String = events
        .iter()
        .filter_map(|e| if let StreamEvent::ToolUseDelta { delta, .. } = e { Some(delta.as_str()) } else { None })
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&input).expect("JSON"), json!({"city": "Paris"}));
    assert!(matches!(events.last(), Some(StreamEvent::Done { stop_reason: StopReason::ToolUse, .. })), "{events:?}");
    assert_eq!(response.message.text(), "Let me check.\n");
    let uses: Vec<&ToolUse> = response.message.tool_uses().collect();
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0].input, json!({"city": "Paris"}));
    assert!(response.warnings.is_empty(), "{:?}", response.warnings);
}

#[test]
fn an_unknown_tool_ends_as_a_call_with_an_input_error_and_a_broken_span_as_text() {
    let unknown = Xml.format_call("get_stock", &city("ACME"));
    let (events, response) = decode(&["Trying: ", &unknown, " and <tool_call>oops"]);
    let end = events.iter().find_map(|e| match e {
        StreamEvent::ToolUseEnd { tool_use, input_error, .. } => Some((tool_use.name.clone(), input_error.clone())),
        _ => None,
    });
    let (name, error) = end.expect("the unknown tool's call ends");
    assert_eq!(name, "get_stock");
    assert!(error.is_some_and(|e| e.contains("get_stock")), "the loop will answer with this error");
    // The call cut by the end of the reply stays text, and the response says why.
    assert!(response.message.text().ends_with(" and <tool_call>oops"), "{:?}", response.message.text());
    assert!(response.warnings.iter().any(|w| w.code == "invalid_tool_call"), "{:?}", response.warnings);
}

#[test]
fn an_alias_in_a_json_call_reads_the_call_and_warns() {
    let model = Model::new("anthropic", "m", Dialect::AnthropicMessages);
    let calls = TextCalls::new(super::json::Json.parser(&[weather()]), "call_7_");
    let mut decoder = StreamDecoder::for_model(&model).with_text_calls(calls);
    let mut events = Vec::new();
    let call = "```tool_call\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}\n```";
    for piece in anthropic_text(&["Checking. ", call]).chunks(7) {
        decoder.feed(piece, &mut events);
    }
    decoder.finish(&mut events);
    let response = decoder.into_response();
    let uses: Vec<&ToolUse> = response.message.tool_uses().collect();
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0].input, json!({"city": "Paris"}));
    let aliases: Vec<&str> =
        response.warnings.iter().filter(|w| w.code == "tool_call_alias").map(|w| w.message.as_str()).collect();
    assert_eq!(aliases.len(), 2, "{:?}", response.warnings);
    assert!(aliases[0].contains("\"name\" read as \"tool\""), "{aliases:?}");
    assert!(aliases[1].contains("string holding a JSON object"), "{aliases:?}");
    assert_eq!(response.message.text(), "Checking. ");
}
