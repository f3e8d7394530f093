//! Every dialect's request builder against arbitrary input: contexts of any shape (any
//! roles, blocks, unicode with control characters, odd ids and media types, tool inputs of
//! any JSON), odd model ids and options out of every range. Whatever comes in, building
//! must not panic; it either refuses with a typed error or gives a request whose body is
//! JSON, whose URL has no space or control character, and whose headers cannot inject a
//! line (no CR or LF in any name or value).

use omni_protocol::Catalogue;
use omni_protocol::{
    dialect::RequestSpec, ApiKey, Block, CacheRetention, Context, Dialect, Effort, Message, Model, Options,
    OutputSchema, Reasoning, Role, ToolChoice, ToolSpec, ToolUse,
};
use omni_protocol::{Attachment, Source, Text, Thinking, ToolResult, ToolResultContent};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};
use serde_json::{json, Value};

/// Short strings of any characters, control characters and CR/LF included.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z0-9 _.-]{0,12}",
        1 => proptest::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
        1 => Just("line\r\nx-injected: 1".to_string()),
        1 => Just(String::new()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(text(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn attachment() -> impl Strategy<Value = Attachment> {
    let media = prop_oneof![
        Just("image/png".to_string()),
        Just("application/pdf".to_string()),
        Just("text/plain".to_string()),
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

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        3 => (text(), proptest::option::of(text())).prop_map(|(text, signature)| Block::Text(Text { text, signature })),
        1 => (text(), proptest::option::of(text()), proptest::option::of(text()), proptest::option::of(text()))
            .prop_map(|(text, signature, redacted, id)| Block::Thinking(Thinking { text, signature, redacted, id })),
        1 => attachment().prop_map(Block::Attachment),
        2 => (text(), text(), json_value(), proptest::option::of(text()))
            .prop_map(|(id, name, input, signature)| Block::ToolUse(ToolUse { invalid: None, id, name, input, signature })),
        2 => (text(), text(), proptest::collection::vec(prop_oneof![
                text().prop_map(|text| ToolResultContent::Text { text }),
                attachment().prop_map(ToolResultContent::Attachment),
            ], 0..3), any::<bool>())
            .prop_map(|(tool_use_id, name, content, is_error)| {
                Block::ToolResult(ToolResult { tool_use_id, name, content, is_error })
            }),
    ]
}

fn context() -> impl Strategy<Value = Context> {
    let message = (any::<bool>(), proptest::collection::vec(block(), 0..4))
        .prop_map(|(user, content)| Message::new(if user { Role::User } else { Role::Assistant }, content));
    let tool = (text(), text(), prop_oneof![json_value(), Just(json!({"type": "object", "properties": {}}))])
        .prop_map(|(name, description, input_schema)| ToolSpec { name, description, input_schema });
    (proptest::option::of(text()), proptest::collection::vec(message, 0..5), proptest::collection::vec(tool, 0..3))
        .prop_map(|(system, messages, tools)| Context { system, messages, tools })
}

fn options() -> impl Strategy<Value = Options> {
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
    // Mostly in range, so that most inputs reach the builders; sometimes anything.
    let tokens = prop_oneof![4 => 1..200_000u32, 1 => any::<u32>()];
    let temperature = prop_oneof![4 => 0.0..=2.0f64, 1 => any::<f64>()];
    let top_p = prop_oneof![4 => 0.0..=1.0f64, 1 => any::<f64>()];
    let stop = prop_oneof![4 => "[a-z]{1,5}", 1 => text()];
    let header = prop_oneof![4 => ("x-[a-z]{1,8}", "[ -~]{0,12}"), 1 => (text(), text())];
    let cache = prop_oneof![Just(CacheRetention::Short), Just(CacheRetention::Long)];
    let output = (text(), json_value()).prop_map(|(name, schema)| OutputSchema { name, schema });
    (
        proptest::option::of(tokens),
        proptest::option::of(temperature),
        proptest::option::of(top_p),
        proptest::collection::vec(stop, 0..3),
        proptest::option::of(choice),
        proptest::option::of(thinking),
        proptest::option::of(cache),
        proptest::option::of(output),
        proptest::collection::vec(header, 0..2),
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

/// The checks every built request passes.
fn check(request: &omni_protocol::dialect::HttpRequest) -> Result<(), String> {
    serde_json::from_slice::<Value>(&request.body).map_err(|e| format!("the body is not JSON: {e}"))?;
    if let Some(c) = request.url.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("the URL holds {c:?}: {:?}", request.url));
    }
    for header in &request.headers {
        if header.name.contains(['\r', '\n']) || header.value.contains(['\r', '\n']) {
            return Err(format!("header {:?} could inject a line", header.name));
        }
    }
    Ok(())
}

#[test]
fn any_input_builds_a_sound_request_or_a_typed_refusal() {
    let catalogue = Catalogue::builtin().expect("the built-in catalogue");
    let provider_of = |dialect: Dialect| {
        let id = match dialect {
            Dialect::AnthropicMessages => "anthropic",
            Dialect::OpenaiCompletions | Dialect::OpenaiResponses => "openai",
            Dialect::GoogleGemini => "google",
            Dialect::Custom(_) => unreachable!("built-in wires only"),
            Dialect::OllamaChat => "ollama",
        };
        catalogue.provider(id).cloned().unwrap_or_else(|| panic!("provider {id}"))
    };
    let config = Config { cases: 1_500, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config.clone(), TestRng::deterministic_rng(config.rng_algorithm));
    let strategy = (0..Dialect::ALL.len(), text(), any::<bool>(), context(), options());
    let (built, refused) = (std::cell::Cell::new(0usize), std::cell::Cell::new(0usize));
    let result = runner.run(&strategy, |(d, model_id, reasoning, context, options)| {
        let dialect = Dialect::ALL[d];
        let provider = provider_of(dialect);
        let mut model = Model::new(provider.id.clone(), model_id, dialect);
        model.reasoning = reasoning;
        let key = ApiKey::new("sk-fuzz");
        let spec = RequestSpec {
            model: &model,
            provider: &provider,
            context: &context,
            options: &options,
            api_key: Some(&key),
        };
        match dialect.build_request(&spec) {
            Ok(request) => {
                built.set(built.get() + 1);
                check(&request.request).map_err(|e| TestCaseError::fail(format!("{}: {e}", dialect.name())))
            }
            Err(_) => {
                refused.set(refused.get() + 1);
                Ok(())
            }
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (built, refused) = (built.get(), refused.get());
    println!("request builders: {built} requests built, {refused} refused with a typed error");
    assert!(built > 0, "the fuzz must reach built requests, not only refusals");
}
