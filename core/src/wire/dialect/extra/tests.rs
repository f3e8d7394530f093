//! Extra options through [`Dialect::build_request`]: placement, warnings, strict mode,
//! collisions, and the tables against the builders and the README.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{Kind, Table};
use crate::data::error::RequestError;
use crate::data::message::{Context, ToolSpec};
use crate::data::model::Model;
use crate::data::options::{CacheRetention, Effort, Options, OutputSchema, Reasoning, ToolChoice};
use crate::data::provider::{Auth, Provider};
use crate::data::response::Warning;
use crate::wire::dialect::{Dialect, RequestSpec};

const LOCAL: &str = "http://localhost:1234/v1";

fn try_build(
    dialect: Dialect,
    base_url: &str,
    options: &Options,
    context: &Context,
) -> Result<(Value, Vec<Warning>), RequestError> {
    let provider = Provider { dialect, auth: Auth::None, ..Provider::openai_compatible("p", base_url, None) };
    let model = Model { reasoning: true, ..Model::new("p", "m-1", dialect) };
    let spec = RequestSpec { model: &model, provider: &provider, context, options, api_key: None };
    let built = dialect.build_request(&spec)?;
    let body = serde_json::from_slice(&built.request.body).expect("a JSON body");
    Ok((body, built.warnings))
}

fn build(dialect: Dialect, options: &Options) -> Result<(Value, Vec<Warning>), RequestError> {
    try_build(dialect, LOCAL, options, &Context::from_prompt("hi"))
}

fn codes(warnings: &[Warning]) -> Vec<&str> {
    warnings.iter().map(|w| w.code.as_str()).collect()
}

#[test]
fn known_keys_go_where_each_provider_expects_them() {
    let cases = [
        (Dialect::AnthropicMessages, "top_k", json!(40), "/top_k"),
        (Dialect::AnthropicMessages, "service_tier", json!("standard_only"), "/service_tier"),
        (Dialect::OpenaiCompletions, "seed", json!(7), "/seed"),
        (Dialect::OpenaiCompletions, "logit_bias", json!({"50256": -100}), "/logit_bias"),
        (Dialect::OpenaiResponses, "truncation", json!("auto"), "/truncation"),
        (Dialect::OpenaiResponses, "verbosity", json!("low"), "/text/verbosity"),
        (Dialect::GoogleGemini, "topK", json!(20), "/generationConfig/topK"),
        (
            Dialect::GoogleGemini,
            "safetySettings",
            json!([{"category": "HARM_CATEGORY_HARASSMENT",
            "threshold": "BLOCK_ONLY_HIGH"}]),
            "/safetySettings",
        ),
        (Dialect::OllamaChat, "num_ctx", json!(8192), "/options/num_ctx"),
        (Dialect::OllamaChat, "keep_alive", json!("10m"), "/keep_alive"),
        (Dialect::OllamaChat, "keep_alive", json!(-1), "/keep_alive"),
    ];
    for (dialect, key, value, pointer) in cases {
        let (body, warnings) = build(dialect, &Options::default().extra(key, value.clone())).expect("built");
        assert_eq!(body.pointer(pointer), Some(&value), "{dialect} {key}: {body}");
        assert!(warnings.is_empty(), "{dialect} {key}: {warnings:?}");
    }
}

#[test]
fn a_nested_key_joins_the_object_omni_built() {
    let options = Options::default().temperature(0.5).extra("seed", json!(3)).extra("topK", json!(5));
    let (body, _) = build(Dialect::GoogleGemini, &options).expect("built");
    assert_eq!(body["generationConfig"], json!({"temperature": 0.5, "seed": 3, "topK": 5}));

    let options = Options::default().max_tokens(64).extra("num_ctx", json!(4096)).extra("min_p", json!(0.05));
    let (body, _) = build(Dialect::OllamaChat, &options).expect("built");
    assert_eq!(body["options"], json!({"num_predict": 64, "num_ctx": 4096, "min_p": 0.05}));

    let output = OutputSchema { name: "answer".into(), schema: json!({"type": "object"}) };
    let options = Options { output: Some(output), ..Options::default() }.extra("verbosity", json!("high"));
    let (body, _) = build(Dialect::OpenaiResponses, &options).expect("built");
    assert_eq!(body["text"]["verbosity"], "high");
    assert_eq!(body["text"]["format"]["type"], "json_schema");
}

#[test]
fn a_mistyped_known_key_is_sent_with_a_warning() {
    let options = Options::default().extra("top_k", json!("40")).extra("service_tier", json!("fast"));
    let (body, warnings) = build(Dialect::AnthropicMessages, &options).expect("built");
    assert_eq!(body["top_k"], "40");
    assert_eq!(body["service_tier"], "fast");
    assert_eq!(codes(&warnings), ["extra_option_type", "extra_option_type"]);
    assert!(warnings[0].message.contains(r#"expects one of "auto", "standard_only", got "fast""#), "{warnings:?}");
    assert!(warnings[1].message.contains(r#"expects an integer, got "40""#), "{warnings:?}");

    let (_, warnings) = build(Dialect::OllamaChat, &Options::default().extra("num_ctx", json!(8192.5))).expect("built");
    assert_eq!(codes(&warnings), ["extra_option_type"]);
    // `null` is the provider's "unset", whatever the key's type.
    let (body, warnings) = build(Dialect::OllamaChat, &Options::default().extra("seed", Value::Null)).expect("built");
    assert!(warnings.is_empty() && body["options"]["seed"].is_null(), "{body} {warnings:?}");
}

#[test]
fn an_unknown_key_goes_to_the_top_level_with_the_closest_known_one() {
    let (body, warnings) =
        build(Dialect::AnthropicMessages, &Options::default().extra("topK", json!(3))).expect("built");
    assert_eq!(body["topK"], 3);
    assert_eq!(codes(&warnings), ["unknown_extra_option"]);
    assert!(warnings[0].message.contains("did you mean `top_k`?"), "{warnings:?}");

    let (body, warnings) = build(Dialect::GoogleGemini, &Options::default().extra("top_k", json!(3))).expect("built");
    assert_eq!(body["top_k"], 3);
    assert!(body["generationConfig"].get("topK").is_none());
    assert!(warnings[0].message.contains("did you mean `topK`?"), "{warnings:?}");

    let (body, warnings) =
        build(Dialect::OllamaChat, &Options::default().extra("chat_template_kwargs", json!({}))).expect("built");
    assert_eq!(body["chat_template_kwargs"], json!({}));
    assert!(!warnings[0].message.contains("did you mean"), "{warnings:?}");
}

#[test]
fn openrouter_knows_its_routing_keys_other_compatible_servers_do_not() {
    let options = Options::default().extra("provider", json!({"order": ["Together"], "allow_fallbacks": false}));
    let openrouter = "https://openrouter.ai/api/v1";
    let (body, warnings) = try_build(Dialect::OpenaiCompletions, openrouter, &options, &"hi".into()).expect("built");
    assert_eq!(body["provider"]["order"], json!(["Together"]));
    assert!(warnings.is_empty(), "{warnings:?}");
    let (body, warnings) = build(Dialect::OpenaiCompletions, &options).expect("built");
    assert_eq!(body["provider"]["order"], json!(["Together"]));
    assert_eq!(codes(&warnings), ["unknown_extra_option"]);
}

#[test]
fn strict_mode_refuses_unknown_and_mistyped_keys() {
    let strict = Options::default().strict_extra(true);
    let err = build(Dialect::OpenaiCompletions, &strict.clone().extra("sed", json!(1))).unwrap_err();
    assert!(matches!(&err, RequestError::InvalidExtraOption { key, .. } if key == "sed"), "{err:?}");
    assert_eq!(
        err.to_string(),
        "extra option `sed`: not a key the openai_completions dialect knows (did you mean `seed`?)"
    );

    let err = build(Dialect::OllamaChat, &strict.clone().extra("num_ctx", json!("8k"))).unwrap_err();
    assert_eq!(err.to_string(), r#"extra option `num_ctx`: the ollama_chat dialect expects an integer, got "8k""#);

    let (body, warnings) = build(Dialect::OllamaChat, &strict.extra("num_ctx", json!(8192))).expect("built");
    assert_eq!(body["options"]["num_ctx"], 8192);
    assert!(warnings.is_empty());
    // Off again for one call over strict defaults.
    let call = Options::default().strict_extra(false).extra("sed", json!(1));
    let merged = call.merged_over(&Options::default().strict_extra(true));
    assert_eq!(codes(&build(Dialect::OpenaiCompletions, &merged).expect("built").1), ["unknown_extra_option"]);
}

#[test]
fn a_field_omni_sets_is_never_overwritten() {
    let collides = |dialect, options: Options| match build(dialect, &options) {
        Err(RequestError::ExtraOptionCollides { key, instead }) => (key, instead),
        other => panic!("{dialect}: {other:?}"),
    };
    // A field omni's options drive: refused whether or not the option is set.
    for options in [Options::default(), Options::default().max_tokens(10)] {
        let (key, instead) = collides(Dialect::AnthropicMessages, options.extra("max_tokens", json!(5)));
        assert_eq!((key.as_str(), instead.as_deref()), ("max_tokens", Some("use the `max_tokens` option")));
    }
    let (_, instead) = collides(Dialect::GoogleGemini, Options::default().extra("temperature", json!(0.1)));
    assert_eq!(instead.as_deref(), Some("use the `temperature` option"));
    let (_, instead) = collides(Dialect::OpenaiCompletions, Options::default().extra("messages", json!([])));
    assert_eq!(instead.as_deref(), Some("use the context"));
    // A known key omni sets from one of its options: refused only when it did.
    let effort = Options::default().extra("reasoning_effort", json!("minimal"));
    let (body, _) = build(Dialect::OpenaiCompletions, &effort).expect("built");
    assert_eq!(body["reasoning_effort"], "minimal");
    let (_, instead) = collides(Dialect::OpenaiCompletions, effort.thinking(Reasoning::Effort(Effort::Low)));
    assert_eq!(instead.as_deref(), Some("use the `thinking` option"));
    let (key, _) = collides(Dialect::OllamaChat, Options::default().max_tokens(8).extra("num_predict", json!(-1)));
    assert_eq!(key, "num_predict");
    let err =
        build(Dialect::OllamaChat, &Options::default().max_tokens(8).extra("num_predict", json!(-1))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "extra option `num_predict` names a field omni sets itself: use the `max_tokens` option"
    );
}

/// Options setting every field omni's builders write, on a reasoning model with a tool.
fn everything() -> (Options, Context) {
    let options = Options {
        top_p: Some(0.9),
        stop: vec!["END".into()],
        tool_choice: Some(ToolChoice::Auto),
        cache: Some(CacheRetention::Long),
        metadata: BTreeMap::from([("user_id".to_string(), "u-1".to_string())]),
        output: Some(OutputSchema { name: "answer".into(), schema: json!({"type": "object"}) }),
        ..Options::default()
    }
    .max_tokens(2_000)
    .temperature(0.5)
    .thinking(Reasoning::Effort(Effort::Low));
    let tool = ToolSpec {
        name: "get_weather".into(),
        description: "Weather.".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    };
    let context = Context { system: Some("Be brief.".into()), tools: vec![tool], ..Context::from_prompt("hi") };
    (options, context)
}

#[test]
fn every_field_a_builder_writes_is_owned_or_known_as_set_by_omni() {
    let (options, context) = everything();
    for dialect in Dialect::ALL {
        let (body, _) = try_build(dialect, LOCAL, &options, &context).expect("built");
        let table = Table::of(dialect, LOCAL);
        for key in body.as_object().expect("an object").keys() {
            let hinted = table.owned(key).is_some() || table.known(key).is_some_and(|k| k.set_by.is_some());
            assert!(hinted, "{dialect}: omni writes `{key}`, which the table neither owns nor marks");
        }
        // A known key without a `set_by` is one omni never writes.
        for known in table.known.iter().filter(|k| k.set_by.is_none()) {
            let slot = known.parent.map_or(Some(&body), |parent| body.get(parent));
            assert!(slot.and_then(|slot| slot.get(known.name)).is_none(), "{dialect}: omni writes `{}`", known.name);
        }
    }
}

#[test]
fn the_tables_are_consistent() {
    for dialect in Dialect::ALL {
        for base_url in [LOCAL, "https://openrouter.ai/api/v1"] {
            let table = Table::of(dialect, base_url);
            let mut names: Vec<&str> = table.known.iter().chain(table.more).map(|k| k.name).collect();
            names.extend(table.owned.iter().map(|(name, _)| *name));
            let count = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), count, "{dialect}: a key is listed twice");
            // A parent object is owned: an unknown key can never replace it.
            for parent in table.known.iter().filter_map(|k| k.parent) {
                assert!(table.owned(parent).is_some(), "{dialect}: `{parent}` is not owned");
            }
        }
    }
    assert!(super::is_openrouter("https://openrouter.ai/api/v1"));
    assert!(super::is_openrouter("https://user@eu.openrouter.ai:443"));
    assert!(!super::is_openrouter("https://openrouter.ai.example.com/v1"));
    assert!(!super::is_openrouter("http://localhost:8080/openrouter.ai"));
}

#[test]
fn kinds_accept_their_json_types() {
    assert!(Kind::Integer.accepts(&json!(-3)) && !Kind::Integer.accepts(&json!(1.5)));
    assert!(Kind::Number.accepts(&json!(1.5)) && Kind::Number.accepts(&json!(2)) && !Kind::Number.accepts(&json!("2")));
    assert!(Kind::StringOrNumber.accepts(&json!("5m")) && Kind::StringOrNumber.accepts(&json!(300)));
    assert!(!Kind::StringOrNumber.accepts(&json!(true)));
    assert!(Kind::OneOf(&["a"]).accepts(&json!("a")) && !Kind::OneOf(&["a"]).accepts(&json!("b")));
    assert!(
        Kind::Array.accepts(&json!([])) && Kind::Object.accepts(&json!({})) && Kind::Boolean.accepts(&json!(false))
    );
}

#[test]
fn an_extra_value_nested_too_deep_is_refused() {
    let mut value = json!(1);
    for _ in 0..crate::data::depth::MAX_DEPTH {
        value = Value::Array(vec![value]);
    }
    let err = build(Dialect::OllamaChat, &Options::default().extra("stop_words", value)).unwrap_err();
    assert_eq!(err, RequestError::TooDeep { what: "the extra option `stop_words`".into() });
}

/// The README's "Provider-specific options" section lists every key each dialect knows
/// (compiled in from the workspace root: tests only).
#[test]
fn the_readme_lists_every_known_key() {
    let readme = include_str!("../../../../../README.md");
    let start = readme.find("## Provider-specific options").expect("the README section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    for dialect in Dialect::ALL {
        let table = Table::of(dialect, "https://openrouter.ai/api/v1");
        for known in table.known.iter().chain(table.more) {
            assert!(section.contains(&format!("`{}`", known.name)), "{dialect}: `{}` is not in the README", known.name);
        }
    }
}
