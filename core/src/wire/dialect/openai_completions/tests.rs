//! Tests of the `openai_completions` dialect: stream parsing (frame by frame, through the
//! accumulator), request bodies and error bodies. Real recordings are replayed by the
//! conformance crate (the core does no file I/O).

use serde_json::{json, Value};

use super::StreamState;
use crate::data::error::{ProviderErrorKind, StreamError};
use crate::data::event::StreamEvent;
use crate::data::message::{
    Attachment, Block, Context, Message, Origin, Role, Source, Thinking, ToolResult, ToolSpec, ToolUse,
};
use crate::data::model::Model;
use crate::data::options::{CacheRetention, Effort, Options, OutputSchema, Reasoning, ToolChoice};
use crate::data::provider::{ApiKey, Auth, Provider, Quirks};
use crate::data::response::{Response, StopReason};
use crate::wire::accumulator::Accumulator;
use crate::wire::dialect::{Dialect, RequestSpec};
use crate::wire::framing::Frame;

/// A minimal SSE splitter for these tests (the framing layer has its own tests):
/// `data:` lines joined, `event:` kept, `:` comments, `[DONE]`, dispatch on a blank line.
fn frames(body: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    let (mut event, mut data): (String, Option<String>) = (String::new(), None);
    for line in body.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Some(d) = data.take() {
                out.push((Some(std::mem::take(&mut event)), d));
            }
            event.clear();
        } else if let Some(comment) = line.strip_prefix(':') {
            out.push((None, comment.to_string()));
        } else if let Some(v) = line.strip_prefix("data:") {
            let v = v.strip_prefix(' ').unwrap_or(v);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(v);
                }
                None => data = Some(v.to_string()),
            }
        } else if let Some(v) = line.strip_prefix("event:") {
            event = v.trim().to_string();
        }
    }
    out
}

/// Decodes a body the way `StreamDecoder` does, with the test splitter.
fn decode(body: &str) -> (Vec<StreamEvent>, Response) {
    let mut state = StreamState::default();
    let mut acc = Accumulator::new("m", None);
    let (mut events, mut deltas) = (Vec::new(), Vec::new());
    for (event, data) in frames(body) {
        let frame = match &event {
            None => Frame::Comment(&data),
            Some(_) if data == "[DONE]" => Frame::Done,
            Some(event) => Frame::Event { event, data: &data, id: None },
        };
        let result = state.parse(&frame, &mut deltas);
        for d in deltas.drain(..) {
            acc.push(d, &mut events);
        }
        if let Err(e) = result {
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

/// Builds an SSE body from chunk JSON values, ending with `[DONE]`.
fn sse(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn delta(d: Value) -> Value {
    json!({"id": "chatcmpl-1", "model": "gpt-4o", "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "model": "gpt-4o", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn tool_calls(resp: &Response) -> Vec<(String, String, Value)> {
    resp.message.tool_uses().map(|t| (t.id.clone(), t.name.clone(), t.input.clone())).collect()
}

fn last_error(events: &[StreamEvent]) -> Option<&StreamError> {
    match events.last() {
        Some(StreamEvent::Error { error }) => Some(error),
        _ => None,
    }
}

#[test]
fn text_stream_with_final_usage_chunk() {
    let body = sse(&[
        delta(json!({"role": "assistant", "content": "", "refusal": null})),
        delta(json!({"content": "Hel"})),
        delta(json!({"content": "lo"})),
        finish("stop"),
        json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 60}, "completion_tokens_details": {"reasoning_tokens": 5}}}),
    ]);
    let (events, resp) = decode(&body);
    assert!(matches!(events.last(), Some(StreamEvent::Done { stop_reason: StopReason::Stop, .. })), "{events:?}");
    assert_eq!(resp.text(), "Hello");
    assert_eq!(resp.message.content.len(), 1);
    assert_eq!(resp.id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(resp.model, "gpt-4o");
    let u = resp.usage;
    assert_eq!((u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens), (40, 60, 20, 5));
}

#[test]
fn reasoning_from_either_field_becomes_thinking() {
    for field in ["reasoning_content", "reasoning"] {
        let body = sse(&[delta(json!({field: "Let me think"})), delta(json!({"content": "42"})), finish("stop")]);
        let (_, resp) = decode(&body);
        let Some(Block::Thinking(t)) = resp.message.content.first() else { panic!("{field}: {resp:?}") };
        assert_eq!(t.text, "Let me think");
        assert_eq!(resp.text(), "42");
    }
    // A server that fills both fields with the same text: taken once.
    let body = sse(&[delta(json!({"reasoning_content": "x", "reasoning": "x"})), finish("stop")]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.message.content, vec![Block::Thinking(Thinking { text: "x".into(), ..Thinking::default() })]);
}

#[test]
fn parallel_tool_calls_interleave_by_index() {
    let body = sse(&[
        delta(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "weather", "arguments": ""}}]})),
        delta(json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "time", "arguments": "{\"tz\":"}}]})),
        delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]})),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": "\"UTC\"}"}}]})),
        finish("tool_calls"),
    ]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        tool_calls(&resp),
        [
            ("call_a".into(), "weather".into(), json!({"city": "Paris"})),
            ("call_b".into(), "time".into(), json!({"tz": "UTC"}))
        ]
    );
}

#[test]
fn repeated_id_and_name_are_not_concatenated() {
    // llama-cpp-python repeats id, type and name on every delta.
    let call = |args: &str| {
        delta(json!({"function_call": {"name": "get_weather", "arguments": args}, "tool_calls": [{"index": 0,
            "id": "call__0", "type": "function", "function": {"name": "get_weather", "arguments": args}}]}))
    };
    let body = sse(&[call("{\"city\""), call(": \"Paris\""), call("}"), finish("tool_calls")]);
    let (_, resp) = decode(&body);
    assert_eq!(tool_calls(&resp), [("call__0".into(), "get_weather".into(), json!({"city": "Paris"}))]);
}

#[test]
fn new_id_under_a_used_index_is_a_new_call() {
    let call = |id: &str, name: &str| {
        delta(json!({"tool_calls": [{"index": 0, "id": id, "function": {"name": name, "arguments": "{}"}}]}))
    };
    let body = sse(&[call("a", "f"), call("b", "g"), finish("tool_calls")]);
    let (_, resp) = decode(&body);
    assert_eq!(tool_calls(&resp), [("a".into(), "f".into(), json!({})), ("b".into(), "g".into(), json!({}))]);
}

#[test]
fn tool_index_may_start_at_one_and_follow_text() {
    let body = sse(&[
        delta(json!({"content": "Reading it."})),
        delta(json!({"tool_calls": [{"index": 1, "id": "toolu_1", "function": {"name": "read", "arguments": ""}}]})),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": ""}}]})),
        delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"path\":\"a\"}"}}]})),
        finish("tool_calls"),
    ]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.text(), "Reading it.");
    assert_eq!(tool_calls(&resp), [("toolu_1".into(), "read".into(), json!({"path": "a"}))]);
}

#[test]
fn call_without_arguments_or_id() {
    let body = sse(&[delta(json!({"tool_calls": [{"index": 0, "function": {"name": "now"}}]})), finish("tool_calls")]);
    let (_, resp) = decode(&body);
    assert_eq!(tool_calls(&resp), [("call_chatcmpl-1_0".into(), "now".into(), json!({}))]);
}

#[test]
fn arguments_sent_as_an_object_are_kept() {
    let body = sse(&[
        delta(json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": {"x": 1}}}]})),
        finish("tool_calls"),
    ]);
    let (_, resp) = decode(&body);
    assert_eq!(tool_calls(&resp), [("c".into(), "f".into(), json!({"x": 1}))]);
}

#[test]
fn refusal_is_text_with_a_refusal_stop() {
    let body = sse(&[
        delta(json!({"content": null, "refusal": ""})),
        delta(json!({"refusal": "I can't help with that."})),
        finish("stop"),
    ]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.text(), "I can't help with that.");
    assert_eq!(resp.stop_reason, Some(StopReason::Refusal));
    let (_, resp) = decode(&sse(&[delta(json!({"content": "x"})), finish("content_filter")]));
    assert_eq!(resp.stop_reason, Some(StopReason::Refusal));
}

#[test]
fn finish_reasons_map_and_unknown_is_stop() {
    for (reason, stop) in [
        ("stop", StopReason::Stop),
        ("length", StopReason::Length),
        ("function_call", StopReason::Stop), // no call was streamed
        ("eos_token", StopReason::Stop),
    ] {
        let (_, resp) = decode(&sse(&[delta(json!({"content": "x"})), finish(reason)]));
        assert_eq!(resp.stop_reason, Some(stop), "{reason}");
    }
}

#[test]
fn only_choice_zero_is_read() {
    let body = sse(&[
        json!({"choices": [{"index": 1, "delta": {"content": "other"}}, {"index": 0, "delta": {"content": "mine"}}]}),
        json!({"choices": [{"index": 1, "delta": {}, "finish_reason": "length"}]}),
        finish("stop"),
    ]);
    let (_, resp) = decode(&body);
    assert_eq!(resp.text(), "mine");
    assert_eq!(resp.stop_reason, Some(StopReason::Stop));
}

#[test]
fn usage_variants_are_normalised() {
    let cases = [
        // DeepSeek: cache hits as their own fields.
        (
            json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 7, "prompt_cache_hit_tokens": 4,
                "prompt_cache_miss_tokens": 6, "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 3}}}),
            (6, 4, 0, 7, 3),
        ),
        // Groq: usage in x_groq.
        (
            json!({"choices": [], "x_groq": {"id": "req", "usage": {"prompt_tokens": 210, "completion_tokens": 15}}}),
            (210, 0, 0, 15, 0),
        ),
        // Moonshot: usage inside the choice.
        (
            json!({"choices": [{"index": 0, "delta": {}, "usage": {"prompt_tokens": 50, "completion_tokens": 5, "cached_tokens": 20}}]}),
            (30, 20, 0, 5, 0),
        ),
        // OpenRouter: cache writes.
        (
            json!({"choices": [], "usage": {"prompt_tokens": 194, "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 100}}}),
            (94, 0, 100, 2, 0),
        ),
    ];
    for (chunk, want) in cases {
        let (_, resp) = decode(&sse(&[delta(json!({"content": "x"})), finish("stop"), chunk.clone()]));
        let u = resp.usage;
        let got = (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens, u.reasoning_tokens);
        assert_eq!(got, want, "{chunk}");
    }
}

#[test]
fn mid_stream_errors() {
    // OpenAI.
    let body = format!(
        "{}data: {}\n\n",
        sse(&[delta(json!({"content": "partial"}))]).replace("data: [DONE]\n\n", ""),
        json!({"error": {"message": "The server had an error", "type": "server_error", "param": null, "code": null}})
    );
    let (events, resp) = decode(&body);
    let Some(StreamError::Provider(e)) = last_error(&events) else { panic!("{events:?}") };
    assert_eq!((e.kind, e.code.as_deref()), (ProviderErrorKind::Server, Some("server_error")));
    assert_eq!(resp.text(), "partial");
    // Groq: `event: error` and a status code.
    let body = "event: error\ndata: {\"error\":{\"message\":\"Tool call validation failed\",\"type\":\"invalid_request_error\",\"code\":\"tool_use_failed\",\"status_code\":400}}\n\n";
    let (events, _) = decode(body);
    let Some(StreamError::Provider(e)) = last_error(&events) else { panic!("{events:?}") };
    assert_eq!((e.kind, e.code.as_deref()), (ProviderErrorKind::InvalidRequest, Some("tool_use_failed")));
    // OpenRouter: numeric code, usage in the same chunk, after a finish reason.
    let body = sse(&[
        finish("length"),
        json!({"error": {"code": 429, "message": "Rate limited upstream"}, "choices": [{"index": 0, "delta": {"content": ""}}],
            "usage": {"prompt_tokens": 43, "completion_tokens": 10}}),
    ]);
    let (events, resp) = decode(&body);
    let Some(StreamError::Provider(e)) = last_error(&events) else { panic!("{events:?}") };
    assert_eq!((e.kind, e.code.as_deref()), (ProviderErrorKind::RateLimited, Some("429")));
    assert_eq!(resp.usage.output_tokens, 10);
    // finish_reason "error" without an error object.
    let (events, _) = decode(&sse(&[delta(json!({"content": "x"})), finish("error")]));
    assert!(matches!(last_error(&events), Some(StreamError::Provider(_))), "{events:?}");
}

#[test]
fn streams_that_never_finish_are_incomplete() {
    // llama-cpp-python answers tool_choice auto with 200 and an empty body.
    let (events, resp) = decode("");
    assert!(matches!(last_error(&events), Some(StreamError::Incomplete)), "{events:?}");
    assert_eq!(resp.stop_reason, Some(StopReason::Error));
    // Cut after some text, and `[DONE]` without a finish reason.
    for body in ["data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n", "data: [DONE]\n\n"] {
        let (events, _) = decode(body);
        assert!(matches!(last_error(&events), Some(StreamError::Incomplete)), "{body}: {events:?}");
    }
}

#[test]
fn comments_and_odd_fields_are_harmless() {
    let body = format!(
        ": OPENROUTER PROCESSING\n\n{}",
        sse(&[
            json!({"choices": [], "id": "", "model": "", "prompt_filter_results": []}),
            delta(json!({"content": [{"type": "text", "text": "ignored parts"}]})),
            delta(json!({"content": "ok", "reasoning": null, "tool_calls": null})),
            finish("stop"),
        ])
    );
    let (events, resp) = decode(&body);
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })), "{events:?}");
    assert_eq!(resp.text(), "ok");
    assert_eq!(resp.id.as_deref(), Some("chatcmpl-1"));
}

#[test]
fn malformed_json_is_a_decode_error() {
    let (events, _) = decode("data: {\"choices\":[\n\n");
    assert!(matches!(last_error(&events), Some(StreamError::Decode { .. })), "{events:?}");
}

#[test]
fn parses_the_documented_error_body() {
    let body = br#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let e = Dialect::OpenaiCompletions.parse_error(400, [], body);
    assert_eq!(e.kind, ProviderErrorKind::ContextTooLong);
    let body = br#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    let e = Dialect::OpenaiCompletions.parse_error(429, [("retry-after-ms", "250")], body);
    assert_eq!(e.kind, ProviderErrorKind::RateLimited);
    assert_eq!(e.retry_after, Some(std::time::Duration::from_millis(250)));
    let body = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
    assert_eq!(Dialect::OpenaiCompletions.parse_error(401, [], body).kind, ProviderErrorKind::Authentication);
    let body = br#"{"error":{"code":400,"message":"request (2009 tokens) exceeds the available context size (512 tokens), try increasing it","n_ctx":512,"type":"exceed_context_size_error"}}"#;
    assert_eq!(Dialect::OpenaiCompletions.parse_error(400, [], body).kind, ProviderErrorKind::ContextTooLong);
    let body = br#"{"error":{"message":"The server is overloaded","type":"server_error","param":null,"code":null}}"#;
    assert_eq!(Dialect::OpenaiCompletions.parse_error(503, [], body).kind, ProviderErrorKind::Overloaded);
}

// ---- requests ----

fn provider(quirks: Quirks) -> Provider {
    Provider {
        id: "openai".into(),
        name: "OpenAI".into(),
        base_url: "https://api.openai.com/v1".into(),
        dialect: Dialect::OpenaiCompletions,
        auth: Auth::Bearer,
        api_key_env: None,
        headers: vec![],
        secret_headers: Vec::new(),
        quirks,
        hooks: Default::default(),
        tool_protocol: None,
    }
}

fn build(model: &Model, quirks: Quirks, context: &Context, options: &Options) -> (Value, Vec<String>) {
    let provider = provider(quirks);
    let key = ApiKey::new("sk-test");
    let spec = RequestSpec { model, provider: &provider, context, options, api_key: Some(&key) };
    let built = Dialect::OpenaiCompletions.build_request(&spec).expect("request builds");
    assert_eq!(built.request.url, "https://api.openai.com/v1/chat/completions");
    let body = serde_json::from_slice(&built.request.body).expect("JSON body");
    (body, built.warnings.into_iter().map(|w| w.message).collect())
}

fn model() -> Model {
    Model::new("openai", "gpt-4o", Dialect::OpenaiCompletions)
}

#[test]
fn request_with_tools_options_and_structured_output() {
    let closed = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": false});
    // A free-form object cannot take strict mode: sent as given, without the flag.
    let open = json!({"type": "object"});
    let context = Context {
        system: Some("Be brief.".into()),
        messages: vec![Message::user("Weather?")],
        tools: vec![
            ToolSpec { name: "weather".into(), description: "Get weather".into(), input_schema: closed.clone() },
            ToolSpec { name: "search".into(), description: String::new(), input_schema: open.clone() },
        ],
    };
    let mut options =
        Options::default().max_tokens(100).temperature(0.5).tool_choice(ToolChoice::Tool("weather".into()));
    options.top_p = Some(0.9);
    options.stop = vec!["END".into()];
    options.metadata.insert("user".into(), "u1".into());
    options.cache = Some(CacheRetention::Long);
    options.output = Some(OutputSchema { name: "answer".into(), schema: closed.clone() });
    let (body, warnings) = build(&model(), Quirks::default(), &context, &options);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("tool `search`: sent without strict mode"), "{warnings:?}");
    assert_eq!(
        body,
        json!({
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [
                {"type": "function", "function": {"name": "weather", "description": "Get weather", "parameters": closed, "strict": true}},
                {"type": "function", "function": {"name": "search", "parameters": open}}
            ],
            "tool_choice": {"type": "function", "function": {"name": "weather"}},
            "max_completion_tokens": 100,
            "temperature": 0.5,
            "top_p": 0.9,
            "stop": ["END"],
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": closed, "strict": true}},
            "metadata": {"user": "u1"},
            "store": true,
            "prompt_cache_retention": "24h"
        })
    );
}

#[test]
fn quirks_change_token_field_and_stream_options() {
    let quirks = Quirks { legacy_max_tokens: true, no_stream_options: true, ..Quirks::default() };
    let (body, _) = build(&model(), quirks, &Context::from_prompt("hi"), &Options::default().max_tokens(5));
    assert_eq!(body["max_tokens"], 5);
    assert!(body.get("max_completion_tokens").is_none() && body.get("stream_options").is_none());
}

#[test]
fn llama_cpp_python_takes_the_schema_as_json_object() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let options =
        Options { output: Some(OutputSchema { name: "answer".into(), schema: schema.clone() }), ..Options::default() };
    let quirks = Quirks { json_object_schema: true, ..Quirks::default() };
    let (body, warnings) = build(&model(), quirks, &Context::from_prompt("hi"), &options);
    assert_eq!(body["response_format"], json!({"type": "json_object", "schema": schema}));
    assert!(warnings.is_empty(), "the schema goes as given: {warnings:?}");
}

#[test]
fn reasoning_effort_only_for_reasoning_models() {
    let options = Options::default().thinking(Reasoning::Effort(Effort::High));
    let (body, warnings) = build(&model(), Quirks::default(), &Context::from_prompt("hi"), &options);
    assert!(body.get("reasoning_effort").is_none());
    assert_eq!(warnings.len(), 1);
    let off = Options::default().thinking(Reasoning::Off);
    let (body, warnings) = build(&model(), Quirks::default(), &Context::from_prompt("hi"), &off);
    assert!(body.get("reasoning_effort").is_none() && warnings.is_empty(), "{warnings:?}");
    let mut reasoning = Model::new("openai", "o4-mini", Dialect::OpenaiCompletions);
    reasoning.reasoning = true;
    let (body, warnings) = build(&reasoning, Quirks::default(), &Context::from_prompt("hi"), &options);
    assert_eq!((body["reasoning_effort"].as_str(), warnings.len()), (Some("high"), 0));
}

fn conversation(origin: &str) -> Context {
    let mut assistant = Message::new(
        Role::Assistant,
        vec![
            Block::Thinking(Thinking {
                text: "They want weather.".into(),
                signature: Some("sig".into()),
                ..Thinking::default()
            }),
            Block::text("Checking."),
            Block::ToolUse(ToolUse {
                invalid: None,
                id: "call_1".into(),
                name: "weather".into(),
                input: json!({"city": "Paris"}),
                signature: None,
            }),
            Block::ToolUse(ToolUse {
                invalid: None,
                id: "call_2".into(),
                name: "time".into(),
                input: json!({}),
                signature: None,
            }),
        ],
    );
    assistant.origin = Some(Box::new(Origin { dialect: origin.into(), provider: "x".into(), model: "m".into() }));
    let image =
        Attachment { source: Source::Base64 { data: "iVBORw0K".into() }, media_type: "image/png".into(), name: None };
    let mut with_image = ToolResult::text("call_2", "time", "12:00");
    with_image.content.push(crate::data::message::ToolResultContent::Attachment(image.clone()));
    Context {
        system: None,
        messages: vec![
            Message::new(
                Role::User,
                vec![
                    Block::text("Weather in Paris? See both."),
                    Block::Attachment(Attachment {
                        source: Source::Url { url: "https://x/cat.jpg".into() },
                        media_type: "image/jpeg".into(),
                        name: None,
                    }),
                    Block::Attachment(Attachment {
                        source: Source::Base64 { data: "JVBERi0=".into() },
                        media_type: "application/pdf".into(),
                        name: Some("report.pdf".into()),
                    }),
                ],
            ),
            assistant,
            Message::new(
                Role::User,
                vec![
                    Block::ToolResult(ToolResult::error("call_1", "weather", "city not found")),
                    Block::ToolResult(with_image),
                    Block::text("Thanks"),
                ],
            ),
        ],
        tools: vec![],
    }
}

#[test]
fn conversation_with_tool_results_images_and_pdf() {
    let quirks = Quirks { reasoning_field: Some("reasoning_content".into()), ..Quirks::default() };
    let (body, warnings) = build(&model(), quirks.clone(), &conversation("openai_completions"), &Options::default());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris? See both."},
                {"type": "image_url", "image_url": {"url": "https://x/cat.jpg"}},
                {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}}
            ]},
            {"role": "assistant", "content": "Checking.", "reasoning_content": "They want weather.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Error: city not found"},
            {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
            {"role": "user", "content": [
                {"type": "text", "text": "Attachments returned by tool time (call call_2):"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
                {"type": "text", "text": "Thanks"}
            ]}
        ])
    );
    // History from another dialect: its thinking is dropped, text and calls kept.
    let (body, _) = build(&model(), quirks, &conversation("anthropic_messages"), &Options::default());
    let assistant = &body["messages"][1];
    assert!(assistant.get("reasoning_content").is_none(), "{assistant}");
    assert_eq!(assistant["tool_calls"].as_array().map(Vec::len), Some(2));
    // Without the quirk, even own reasoning is not sent.
    let (body, _) = build(&model(), Quirks::default(), &conversation("openai_completions"), &Options::default());
    assert!(body["messages"][1].get("reasoning_content").is_none());
}

#[test]
fn tool_calls_without_text_send_empty_content() {
    let call = ToolUse {
        invalid: None,
        id: "call_1".into(),
        name: "weather".into(),
        input: json!({"city": "Paris"}),
        signature: None,
    };
    let context = Context::from(vec![
        Message::user("Weather in Paris?"),
        Message::new(Role::Assistant, vec![Block::ToolUse(call)]),
        Message::new(Role::User, vec![Block::ToolResult(ToolResult::text("call_1", "weather", "sunny"))]),
    ]);
    let (body, _) = build(&model(), Quirks::default(), &context, &Options::default());
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}
        ]})
    );
}

#[test]
fn unsupported_content_is_reported() {
    let context = Context::from(vec![Message::new(
        Role::User,
        vec![
            Block::text("read"),
            Block::Attachment(Attachment {
                source: Source::Url { url: "https://x/a.pdf".into() },
                media_type: "application/pdf".into(),
                name: None,
            }),
        ],
    )]);
    let options = Options::default().tool_choice(ToolChoice::Required);
    let (body, warnings) = build(&model(), Quirks::default(), &context, &options);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "read"}]));
    assert!(body.get("tool_choice").is_none());
}
