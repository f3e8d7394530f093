//! Tests of the `google_gemini` dialect: stream parsing, request building, error bodies,
//! and replay of the upstream recordings that are raw SSE or JSON-lines.

use serde_json::{json, Value};

use crate::data::error::{ProviderErrorKind, StreamError};
use crate::data::event::StreamEvent;
use crate::data::message::ToolSpec;
use crate::data::message::{
    Attachment, Block, Context, Message, Origin, Role, Source, Text, Thinking, ToolResult, ToolUse,
};
use crate::data::model::Model;
use crate::data::options::{Effort, Options, OutputSchema, Reasoning, ToolChoice};
use crate::data::provider::{ApiKey, Auth, Provider, Quirks};
use crate::data::response::{Response, StopReason};
use crate::wire::decoder::decode_body;
use crate::wire::dialect::{Dialect, RequestSpec};

fn decode(body: &str) -> (Vec<StreamEvent>, Response) {
    decode_body(Dialect::GoogleGemini, "gemini-2.5-flash", body.as_bytes())
}

fn sse(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\r\n\r\n")).collect()
}

fn text_chunk(text: &str) -> Value {
    json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}],
           "modelVersion": "gemini-2.5-flash", "responseId": "r1"})
}

fn last_error(events: &[StreamEvent]) -> Option<&StreamError> {
    match events.last() {
        Some(StreamEvent::Error { error }) => Some(error),
        _ => None,
    }
}

#[test]
fn text_runs_merge_and_a_trailing_signature_attaches_to_them() {
    let body = sse(&[
        text_chunk("Hello"),
        text_chunk(", world"),
        json!({"candidates": [{"content": {"parts": [{"text": "", "thoughtSignature": "c2ln"}], "role": "model"},
               "finishReason": "STOP"}],
               "usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 4, "candidatesTokenCount": 3,
                                 "thoughtsTokenCount": 7, "toolUsePromptTokenCount": 2}}),
    ]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.stop_reason, Some(StopReason::Stop));
    assert_eq!(resp.id.as_deref(), Some("r1"));
    assert_eq!(
        resp.message.content,
        [Block::Text(Text { text: "Hello, world".into(), signature: Some("c2ln".into()) })]
    );
    let u = resp.usage;
    assert_eq!((u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens), (8, 4, 10, 7));
}

#[test]
fn thought_parts_open_a_thinking_block_and_text_after_them_a_new_block() {
    let thought = json!({"candidates": [{"content": {"parts": [{"text": "hmm", "thought": true}]}}]});
    let signed = json!({"candidates": [{"content": {"parts": [{"text": "A", "thoughtSignature": "s1"}]}}]});
    let again = json!({"candidates": [{"content": {"parts": [{"text": "B", "thoughtSignature": "s2"}]}}]});
    let stop = json!({"candidates": [{"finishReason": "STOP"}]});
    let (_, resp) = decode(&sse(&[thought, signed, again, stop]));
    assert_eq!(
        resp.message.content,
        [
            Block::Thinking(Thinking { text: "hmm".into(), ..Thinking::default() }),
            Block::Text(Text { text: "A".into(), signature: Some("s1".into()) }),
            Block::Text(Text { text: "B".into(), signature: Some("s2".into()) }),
        ]
    );
}

#[test]
fn parallel_calls_without_ids_get_distinct_ids_and_stop_as_tool_use() {
    let body = sse(&[json!({"responseId": "abc", "candidates": [{"content": {"parts": [
        {"functionCall": {"name": "add", "args": {"a": 2}}, "thoughtSignature": "sig"},
        {"functionCall": {"name": "mul", "args": {}}},
    ]}, "finishReason": "STOP"}]})]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
    let calls: Vec<&ToolUse> = resp.message.tool_uses().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].id.as_str(), calls[0].signature.as_deref()), ("call_abc_0", Some("sig")));
    assert_eq!((calls[1].id.as_str(), calls[1].signature.as_deref()), ("call_abc_1", None));
    assert_eq!(calls[0].input, json!({"a": 2}));
    assert_eq!(calls[1].input, json!({}));
}

#[test]
fn text_after_a_first_finish_reason_is_kept() {
    let first = json!({"candidates": [{"content": {"parts": [{"text": "one "}]}, "finishReason": "STOP"}]});
    let second = json!({"candidates": [{"content": {"parts": [{"text": "two"}]}, "finishReason": "MAX_TOKENS"}]});
    let (_, resp) = decode(&sse(&[first, second]));
    assert_eq!(resp.text(), "one two");
    assert_eq!(resp.stop_reason, Some(StopReason::Length));
}

#[test]
fn finish_reasons_and_prompt_feedback_map_to_stop_reasons() {
    let cases = [
        ("SAFETY", StopReason::Refusal),
        ("PROHIBITED_CONTENT", StopReason::Refusal),
        ("MALFORMED_FUNCTION_CALL", StopReason::Error),
        ("SOMETHING_NEW", StopReason::Stop),
    ];
    for (reason, expected) in cases {
        let (_, resp) = decode(&sse(&[json!({"candidates": [{"finishReason": reason}]})]));
        assert_eq!(resp.stop_reason, Some(expected), "{reason}");
    }
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 5}});
    let (_, resp) = decode(&sse(&[blocked]));
    assert_eq!(resp.stop_reason, Some(StopReason::Refusal));
    assert_eq!(resp.usage.input_tokens, 5);
}

#[test]
fn in_stream_error_and_malformed_json() {
    let body = format!(
        "{}data: {{\"error\": {{\"code\": 503, \"message\": \"busy\", \"status\": \"UNAVAILABLE\"}}}}\n\n",
        sse(&[text_chunk("partial")])
    );
    let (events, resp) = decode(&body);
    match last_error(&events) {
        Some(StreamError::Provider(e)) => assert_eq!(e.kind, ProviderErrorKind::Overloaded),
        other => panic!("expected a provider error, got {other:?}"),
    }
    assert_eq!(resp.text(), "partial");
    let (events, _) = decode("data: {\"candidates\": [\n\n");
    assert!(matches!(last_error(&events), Some(StreamError::Decode { .. })));
}

#[test]
fn partial_args_assemble_one_call_per_stream_of_parts() {
    let part = |fc: Value| json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": fc}]}}]});
    let body = sse(&[
        part(json!({"name": "getWeather", "willContinue": true})),
        part(json!({"partialArgs": [{"jsonPath": "$.location", "stringValue": "Bos", "willContinue": true}],
                    "willContinue": true})),
        part(json!({"partialArgs": [{"jsonPath": "$.location", "stringValue": "ton"}], "willContinue": true})),
        part(json!({})),
        part(json!({"name": "getWeather", "willContinue": true})),
        part(json!({"partialArgs": [{"jsonPath": "$.days", "numberValue": 3}], "willContinue": true})),
        json!({"candidates": [{"content": {"parts": [{"functionCall": {}}]}, "finishReason": "STOP"}]}),
    ]);
    let (_, resp) = decode(&body);
    let inputs: Vec<&Value> = resp.message.tool_uses().map(|t| &t.input).collect();
    assert_eq!(inputs, [&json!({"location": "Boston"}), &json!({"days": 3})]);
    assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
}

#[test]
fn parses_documented_error_bodies() {
    let cases = [
        (
            429,
            r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#,
            ProviderErrorKind::RateLimited,
        ),
        (
            503,
            r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#,
            ProviderErrorKind::Overloaded,
        ),
        (
            500,
            r#"{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}"#,
            ProviderErrorKind::Server,
        ),
        (
            403,
            r#"{"error":{"code":403,"message":"Method doesn't allow unregistered callers.","status":"PERMISSION_DENIED"}}"#,
            ProviderErrorKind::PermissionDenied,
        ),
        (
            404,
            r#"[{"error":{"code":404,"message":"models/x is not found for API version v1beta","status":"NOT_FOUND"}}]"#,
            ProviderErrorKind::NotFound,
        ),
        (
            400,
            r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
            ProviderErrorKind::ContextTooLong,
        ),
        (
            400,
            r#"{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}"#,
            ProviderErrorKind::InvalidRequest,
        ),
    ];
    for (status, body, kind) in cases {
        let e = Dialect::GoogleGemini.parse_error(status, [], body.as_bytes());
        assert_eq!(e.kind, kind, "{body}");
        assert!(!e.message.is_empty());
    }
}

fn provider() -> Provider {
    Provider {
        id: "google".into(),
        name: "Google".into(),
        base_url: "https://generativelanguage.googleapis.com/v1beta".into(),
        dialect: Dialect::GoogleGemini,
        auth: Auth::Header { name: "x-goog-api-key".into() },
        api_key_env: Some("GEMINI_API_KEY".into()),
        headers: vec![],
        secret_headers: Vec::new(),
        quirks: Quirks::default(),
        hooks: Default::default(),
        tool_protocol: None,
    }
}

fn build(model: &Model, context: &Context, options: &Options) -> (Value, String, Vec<String>) {
    let provider = provider();
    let key = ApiKey::new("k");
    let spec = RequestSpec { model, provider: &provider, context, options, api_key: Some(&key) };
    let built = Dialect::GoogleGemini.build_request(&spec).unwrap();
    assert_eq!(built.request.header("x-goog-api-key"), Some("k"));
    let body = serde_json::from_slice(&built.request.body).unwrap();
    (body, built.request.url, built.warnings.into_iter().map(|w| w.message).collect())
}

fn model(id: &str) -> Model {
    Model { reasoning: true, ..Model::new("google", id, Dialect::GoogleGemini) }
}

fn origin(model: &str) -> Option<Box<Origin>> {
    Some(Box::new(Origin { dialect: "google_gemini".into(), provider: "google".into(), model: model.into() }))
}

#[test]
fn builds_a_request_with_tools_history_and_config() {
    let call = ToolUse {
        invalid: None,
        id: "c1".into(),
        name: "get".into(),
        input: json!({"q": 1}),
        signature: Some("sig".into()),
    };
    let mut own = Message::new(
        Role::Assistant,
        vec![
            Block::Thinking(Thinking { text: "plan".into(), signature: Some("t".into()), ..Thinking::default() }),
            Block::ToolUse(call),
        ],
    );
    own.origin = origin("gemini-2.5-flash");
    let results = Message::new(
        Role::User,
        vec![
            Block::ToolResult(ToolResult::text("c1", "get", "ok")),
            Block::ToolResult(ToolResult::error("c2", "get", "bad")),
        ],
    );
    let image = Attachment {
        source: Source::Url { url: "https://x/y.png".into() },
        media_type: "image/png".into(),
        name: None,
    };
    let context = Context {
        system: Some("Be brief.".into()),
        messages: vec![Message::new(Role::User, vec![Block::text("hi"), Block::Attachment(image)]), own, results],
        tools: vec![ToolSpec {
            name: "get".into(),
            description: "Get".into(),
            input_schema: json!({"type": "object"}),
        }],
    };
    let options = Options {
        max_tokens: Some(100),
        temperature: Some(0.5),
        stop: vec!["END".into()],
        tool_choice: Some(ToolChoice::Tool("get".into())),
        thinking: Some(Reasoning::Effort(Effort::Max)),
        output: Some(OutputSchema { name: "o".into(), schema: json!({"type": "object"}) }),
        ..Options::default()
    };
    let (body, url, warnings) = build(&model("gemini-2.5-flash"), &context, &options);
    assert_eq!(
        url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        body,
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}, {"fileData": {"mimeType": "image/png", "fileUri": "https://x/y.png"}}]},
                {"role": "model", "parts": [
                    {"text": "plan", "thought": true, "thoughtSignature": "t"},
                    {"functionCall": {"name": "get", "args": {"q": 1}, "id": "c1"}, "thoughtSignature": "sig"}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get", "id": "c1", "response": {"output": "ok"}}},
                    {"functionResponse": {"name": "get", "id": "c2", "response": {"error": "bad"}}}
                ]}
            ],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{"name": "get", "description": "Get", "parametersJsonSchema": {"type": "object"}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get"]}},
            "generationConfig": {
                "maxOutputTokens": 100, "temperature": 0.5, "stopSequences": ["END"],
                "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"},
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 24576}
            }
        })
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}"); // the clamped budget
}

#[test]
fn foreign_history_drops_opaque_data_and_gemini3_gets_the_placeholder() {
    let call = ToolUse {
        invalid: None,
        id: "toolu_1".into(),
        name: "get".into(),
        input: json!({}),
        signature: Some("anthropic".into()),
    };
    let mut foreign = Message::new(
        Role::Assistant,
        vec![
            Block::Thinking(Thinking { text: "secret".into(), signature: Some("x".into()), ..Thinking::default() }),
            Block::Text(Text { text: "calling".into(), signature: None }),
            Block::ToolUse(call),
        ],
    );
    foreign.origin =
        Some(Box::new(Origin { dialect: "anthropic_messages".into(), provider: String::new(), model: String::new() }));
    // Gemini reports `modelVersion`, which may differ from the requested id (an alias):
    // signatures of this dialect's messages are kept whatever model is named.
    let mut own = Message::assistant("earlier");
    own.content = vec![Block::Text(Text { text: "earlier".into(), signature: Some("old".into()) })];
    own.origin = origin("gemini-3.1-pro-preview");
    let context = Context::from(vec![Message::user("q"), own, foreign]);
    let options = Options::default().thinking(Reasoning::Effort(Effort::Medium));
    let (body, _, _) = build(&model("gemini-3-pro-preview"), &context, &options);
    assert_eq!(body["contents"][1]["parts"], json!([{"text": "earlier", "thoughtSignature": "old"}]));
    assert_eq!(
        body["contents"][2]["parts"],
        json!([
            {"text": "calling"},
            {"functionCall": {"name": "get", "args": {}, "id": "toolu_1"}, "thoughtSignature": "skip_thought_signature_validator"}
        ])
    );
    // Gemini 3.0 Pro has no `medium` level.
    assert_eq!(body["generationConfig"]["thinkingConfig"], json!({"includeThoughts": true, "thinkingLevel": "high"}));
}

#[test]
fn thinking_levels_budgets_and_warnings() {
    let ctx = Context::from_prompt("hi");
    let cfg = |id: &str, r: Reasoning| {
        let (body, _, warnings) = build(&model(id), &ctx, &Options::default().thinking(r));
        (body["generationConfig"]["thinkingConfig"].clone(), warnings.len())
    };
    assert_eq!(cfg("gemini-3-flash-preview", Reasoning::Effort(Effort::Medium)).0["thinkingLevel"], "medium");
    assert_eq!(cfg("gemini-3-flash-preview", Reasoning::Off), (json!({"thinkingLevel": "minimal"}), 1));
    assert_eq!(cfg("gemini-3-pro-preview", Reasoning::Off), (json!({"thinkingLevel": "low"}), 1));
    assert_eq!(cfg("gemini-3.1-pro-preview", Reasoning::Effort(Effort::Medium)).0["thinkingLevel"], "medium");
    assert_eq!(cfg("gemini-2.5-flash", Reasoning::Off), (json!({"thinkingBudget": 0}), 0));
    assert_eq!(cfg("gemini-2.5-pro", Reasoning::Off), (json!({"thinkingBudget": 128}), 1));
    assert_eq!(
        cfg("gemini-2.5-pro", Reasoning::Budget(2048)),
        (json!({"includeThoughts": true, "thinkingBudget": 2048}), 0)
    );
    let plain = Model::new("google", "gemini-2.0-flash", Dialect::GoogleGemini);
    let mut options = Options::default().thinking(Reasoning::Effort(Effort::High));
    options.cache = Some(crate::data::options::CacheRetention::Short);
    options.metadata.insert("user".into(), "u".into());
    let (body, _, warnings) = build(&plain, &ctx, &options);
    assert!(body.get("generationConfig").is_none());
    assert_eq!(warnings.len(), 3, "{warnings:?}");
}

#[test]
fn tool_result_media_goes_inside_the_response_on_gemini3_and_after_it_before() {
    let png = Attachment { source: Source::Base64 { data: "AAAA".into() }, media_type: "image/png".into(), name: None };
    let result = ToolResult {
        tool_use_id: "c1".into(),
        name: "shot".into(),
        content: vec![crate::data::message::ToolResultContent::Attachment(png)],
        is_error: false,
    };
    let ctx = Context::from(vec![Message::new(Role::User, vec![Block::ToolResult(result)])]);
    let (body, _, _) = build(&model("gemini-3-flash-preview"), &ctx, &Options::default());
    assert_eq!(
        body["contents"][0]["parts"],
        json!([{"functionResponse": {"name": "shot", "id": "c1", "response": {"output": ""},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]}}])
    );
    let (body, _, _) = build(&model("gemini-2.5-flash"), &ctx, &Options::default());
    assert_eq!(body["contents"][0]["parts"][1], json!({"inlineData": {"mimeType": "image/png", "data": "AAAA"}}));
}

#[test]
fn the_model_id_cannot_break_or_extend_the_url() {
    let context = Context::from_prompt("hi");
    let (_, url, _) = build(&model("tunedModels/my model?key=x#y"), &context, &Options::default());
    assert_eq!(
        url,
        "https://generativelanguage.googleapis.com/v1beta/models/tunedModels/my%20model%3Fkey%3Dx%23y:streamGenerateContent?alt=sse"
    );
}
