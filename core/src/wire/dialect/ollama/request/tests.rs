use serde_json::json;

use super::*;
use crate::data::message::{Origin, Text, Thinking, ToolSpec};
use crate::data::options::{CacheRetention, OutputSchema};
use crate::data::provider::{Auth, Provider, Quirks};
use crate::wire::dialect::Dialect;

fn provider() -> Provider {
    Provider {
        id: "ollama".into(),
        name: "Ollama".into(),
        base_url: "http://localhost:11434".into(),
        dialect: Dialect::OllamaChat,
        auth: Auth::None,
        api_key_env: None,
        headers: vec![],
        secret_headers: Vec::new(),
        quirks: Quirks::default(),
        hooks: Default::default(),
        tool_protocol: None,
    }
}

fn build(model: &Model, context: &Context, options: &Options) -> (Value, Vec<Warning>) {
    let provider = provider();
    let spec = RequestSpec { model, provider: &provider, context, options, api_key: None };
    let built = Dialect::OllamaChat.build_request(&spec).unwrap();
    assert_eq!(built.request.url, "http://localhost:11434/api/chat");
    assert_eq!(built.request.header("accept"), Some("application/x-ndjson"));
    (serde_json::from_slice(&built.request.body).unwrap(), built.warnings)
}

fn model(id: &str, reasoning: bool) -> Model {
    Model { reasoning, ..Model::new("ollama", id, Dialect::OllamaChat) }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Weather for a city".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

#[test]
fn plain_prompt_with_sampling_options() {
    let context = Context { system: Some("Be brief.".into()), ..Context::from_prompt("Hi") };
    let options =
        Options { top_p: Some(0.5), stop: vec!["END".into()], ..Options::default() }.max_tokens(64).temperature(0.25);
    let (body, warnings) = build(&model("llama3.2", false), &context, &options);
    assert_eq!(
        body,
        json!({
            "model": "llama3.2",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "stream": true,
            "options": {"num_predict": 64, "temperature": 0.25, "top_p": 0.5, "stop": ["END"]},
        })
    );
    assert!(warnings.is_empty());
}

#[test]
fn tool_conversation_round_trips_ids_names_and_errors() {
    let call = |id: &str, city: &str| {
        Block::ToolUse(ToolUse {
            invalid: None,
            id: id.into(),
            name: "get_weather".into(),
            input: json!({"city": city}),
            signature: None,
        })
    };
    let mut assistant =
        Message::new(Role::Assistant, vec![Block::text("Checking."), call("a", "Paris"), call("b", "Oslo")]);
    assistant.origin =
        Some(Box::new(Origin { dialect: "ollama_chat".into(), provider: String::new(), model: String::new() }));
    let results = Message::new(
        Role::User,
        vec![
            Block::ToolResult(ToolResult::text("a", "get_weather", "22°C")),
            Block::ToolResult(ToolResult::error("b", "get_weather", "city not found")),
        ],
    );
    let context = Context {
        messages: vec![Message::user("Weather?"), assistant, results],
        tools: vec![weather_tool()],
        ..Context::default()
    };
    let (body, warnings) = build(&model("qwen3", false), &context, &Options::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "a", "type": "function", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "b", "type": "function", "function": {"index": 1, "name": "get_weather", "arguments": {"city": "Oslo"}}},
            ]},
            {"role": "tool", "content": "22°C", "tool_name": "get_weather", "tool_call_id": "a"},
            {"role": "tool", "content": "Error: city not found", "tool_name": "get_weather", "tool_call_id": "b"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        }}])
    );
}

#[test]
fn tool_choice_is_approximated_with_warnings() {
    let other = ToolSpec { name: "other".into(), ..weather_tool() };
    let context = Context { tools: vec![weather_tool(), other], ..Context::from_prompt("x") };
    let m = model("qwen3", false);
    let (body, warnings) = build(&m, &context, &Options::default().tool_choice(ToolChoice::None));
    assert!(body.get("tools").is_none());
    assert!(warnings.is_empty());
    let (body, warnings) = build(&m, &context, &Options::default().tool_choice(ToolChoice::Tool("other".into())));
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(1));
    assert_eq!(body["tools"][0]["function"]["name"], "other");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].message.contains("only `other` was offered"), "{warnings:?}");
    let (body, warnings) = build(&m, &context, &Options::default().tool_choice(ToolChoice::Tool("missing".into())));
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(2));
    assert_eq!(warnings.len(), 1);
    let (body, warnings) = build(&m, &context, &Options::default().tool_choice(ToolChoice::Required));
    assert_eq!(body["tools"].as_array().map(Vec::len), Some(2));
    assert!(warnings[0].message.contains("required"), "{warnings:?}");
    let (_, warnings) = build(&m, &context, &Options::default().tool_choice(ToolChoice::Auto));
    assert!(warnings.is_empty());
}

#[test]
fn images_base64_and_data_urls_are_sent_other_files_warn() {
    let image = |source: Source, media_type: &str| {
        Block::Attachment(Attachment { source, media_type: media_type.into(), name: None })
    };
    let user = Message::new(
        Role::User,
        vec![
            Block::text("What is this?"),
            image(Source::Base64 { data: "iVBORw0KGgo=".into() }, "image/png"),
            image(Source::Url { url: "data:image/jpeg;base64,/9j/4AAQ".into() }, "image/jpeg"),
            image(Source::Url { url: "https://example.com/cat.png".into() }, "image/png"),
            image(Source::Url { url: "https://example.com/other.png".into() }, "image/png"),
            image(Source::Base64 { data: "JVBERi0=".into() }, "application/pdf"),
        ],
    );
    let (body, warnings) = build(&model("llava", false), &Context::from(vec![user]), &Options::default());
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "What is this?", "images": ["iVBORw0KGgo=", "/9j/4AAQ"]}])
    );
    assert_eq!(warnings.len(), 2, "one warning per kind: {warnings:?}");
    assert!(warnings[0].message.contains("image URLs"));
    assert!(warnings[1].message.contains("application/pdf"));
}

#[test]
fn thinking_levels_booleans_and_non_reasoning_models() {
    let ctx = Context::from_prompt("x");
    let think = |id: &str, reasoning: bool, r: Reasoning| {
        let (body, warnings) = build(&model(id, reasoning), &ctx, &Options::default().thinking(r));
        (body.get("think").cloned(), warnings.len())
    };
    assert_eq!(think("gpt-oss:20b", true, Reasoning::Effort(Effort::Low)), (Some(json!("low")), 0));
    assert_eq!(think("gpt-oss:20b", true, Reasoning::Effort(Effort::Max)), (Some(json!("high")), 0));
    assert_eq!(think("gpt-oss:20b", true, Reasoning::Budget(5000)), (Some(json!("medium")), 1));
    assert_eq!(think("qwen3:4b", true, Reasoning::Effort(Effort::Medium)), (Some(json!(true)), 0));
    assert_eq!(think("qwen3:4b", true, Reasoning::Effort(Effort::High)), (Some(json!(true)), 1));
    assert_eq!(think("qwen3:4b", true, Reasoning::Off), (Some(json!(false)), 0));
    assert_eq!(think("llama3.2", false, Reasoning::Effort(Effort::High)), (None, 1));
    let (body, _) = build(&model("qwen3:4b", true), &ctx, &Options::default());
    assert!(body.get("think").is_none(), "no option: the model's default");
}

#[test]
fn own_thinking_goes_back_foreign_thinking_is_dropped() {
    let blocks = || {
        vec![
            Block::Thinking(Thinking {
                text: "Let me think.".into(),
                signature: Some("sig".into()),
                ..Thinking::default()
            }),
            Block::Thinking(Thinking { redacted: Some("opaque".into()), ..Thinking::default() }),
            Block::Text(Text { text: "Answer.".into(), signature: None }),
        ]
    };
    let origin = |dialect: &str| {
        Some(Box::new(Origin { dialect: dialect.into(), provider: String::new(), model: String::new() }))
    };
    let mut own = Message::new(Role::Assistant, blocks());
    own.origin = origin("ollama_chat");
    let mut foreign = Message::new(Role::Assistant, blocks());
    foreign.origin = origin("anthropic_messages");
    let context = Context::from(vec![Message::user("q"), own, Message::user("q2"), foreign]);
    let (body, warnings) = build(&model("qwen3", true), &context, &Options::default());
    assert!(warnings.is_empty());
    assert_eq!(body["messages"][1], json!({"role": "assistant", "content": "Answer.", "thinking": "Let me think."}));
    assert_eq!(body["messages"][3], json!({"role": "assistant", "content": "Answer."}));
}

#[test]
fn structured_output_and_unsupported_options() {
    let schema = json!({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]});
    let options = Options {
        output: Some(OutputSchema { name: "person".into(), schema: schema.clone() }),
        cache: Some(CacheRetention::Long),
        metadata: [("user_id".to_string(), "u1".to_string())].into_iter().collect(),
        ..Options::default()
    };
    let (body, warnings) = build(&model("llama3.1", false), &Context::from_prompt("x"), &options);
    assert_eq!(body["format"], schema);
    assert!(body.get("keep_alive").is_none());
    let messages: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].contains("cache") && messages[1].contains("metadata"));
}

#[test]
fn non_object_tool_input_is_sent_as_empty_object() {
    let call = ToolUse { invalid: None, id: String::new(), name: "f".into(), input: json!("{broken"), signature: None };
    let context = Context::from(vec![Message::user("q"), Message::new(Role::Assistant, vec![Block::ToolUse(call)])]);
    let (body, warnings) = build(&model("qwen3", false), &context, &Options::default());
    assert_eq!(
        body["messages"][1]["tool_calls"],
        json!([{"type": "function", "function": {"index": 0, "name": "f", "arguments": {}}}])
    );
    assert_eq!(warnings.len(), 1);
}
