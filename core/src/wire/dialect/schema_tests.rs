//! Each dialect's built request carries the adapted schema, and the adaptation's warnings
//! land in `BuiltRequest::warnings` with the tool or output they belong to.

use serde_json::{json, Value};

use crate::data::message::{Context, ToolSpec};
use crate::data::model::Model;
use crate::data::options::{Options, OutputSchema};
use crate::data::provider::{ApiKey, Auth, Provider, Quirks};
use crate::data::response::Warning;
use crate::wire::dialect::{Dialect, RequestSpec};

fn build(dialect: Dialect, context: &Context, options: &Options) -> (Value, Vec<Warning>) {
    let provider = Provider {
        id: "p".into(),
        name: "P".into(),
        base_url: "https://example.com/v1".into(),
        dialect,
        auth: Auth::Bearer,
        api_key_env: None,
        headers: Vec::new(),
        secret_headers: Vec::new(),
        quirks: Quirks::default(),
        hooks: Default::default(),
        tool_protocol: None,
    };
    let model = Model::new("p", "m", dialect);
    let key = ApiKey::new("k");
    let spec = RequestSpec { model: &model, provider: &provider, context, options, api_key: Some(&key) };
    let built = dialect.build_request(&spec).expect("request builds");
    (serde_json::from_slice(&built.request.body).expect("JSON body"), built.warnings)
}

/// A tool with an optional, length-limited property and a unique-items list.
fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "weather".into(),
        description: "Weather for a city".into(),
        input_schema: json!({"type": "object", "properties": {
            "city": {"type": "string", "minLength": 1},
            "days": {"type": "integer", "minimum": 1, "exclusiveMaximum": 15},
            "fields": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
        }, "required": ["city"]}),
    }
}

/// A tool whose input is a free-form map: strict mode cannot take it.
fn map_tool() -> ToolSpec {
    ToolSpec {
        name: "tag".into(),
        description: "Set tags".into(),
        input_schema: json!({"type": "object", "properties": {"tags": {"type": "object",
            "additionalProperties": {"type": "string"}}}, "required": ["tags"]}),
    }
}

fn context() -> Context {
    Context { tools: vec![weather_tool(), map_tool()], ..Context::from_prompt("Weather in Oslo?") }
}

fn options() -> Options {
    Options {
        output: Some(OutputSchema {
            name: "report".into(),
            schema: json!({"type": "object", "properties": {"summary": {"type": "string", "maxLength": 200},
                "score": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["summary"]}),
        }),
        ..Options::default()
    }
}

fn messages(warnings: &[Warning]) -> Vec<&str> {
    warnings.iter().map(|w| w.message.as_str()).collect()
}

/// The weather tool as strict mode gets it: closed, `days` and `fields` required and
/// nullable, `uniqueItems` moved to the description.
fn strict_weather() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["city", "days", "fields"], "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 15},
        "fields": {"type": ["array", "null"], "items": {"type": "string"}, "description": "{uniqueItems: true}"}
    }})
}

fn strict_report() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["summary", "score"], "properties": {
        "summary": {"type": "string", "maxLength": 200},
        "score": {"type": ["number", "null"], "minimum": 0, "maximum": 1}
    }})
}

#[test]
fn openai_completions_sends_strict_schemas_when_they_fit() {
    let (body, warnings) = build(Dialect::OpenaiCompletions, &context(), &options());
    let weather = &body["tools"][0]["function"];
    assert_eq!(weather["parameters"], strict_weather());
    assert_eq!(weather["strict"], true);
    let tag = &body["tools"][1]["function"];
    assert_eq!(tag["parameters"], map_tool().input_schema, "sent as given");
    assert!(tag.get("strict").is_none());
    assert_eq!(body["response_format"]["json_schema"]["schema"], strict_report());
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    let texts = messages(&warnings);
    assert_eq!(texts.len(), 3, "{texts:#?}");
    assert!(texts[0].starts_with("tool `weather`: the JSON Schema was adapted for OpenAI strict mode: removed `uniqueItems` at /properties/fields; sent optional properties as required and nullable at /properties/days, /properties/fields"), "{}", texts[0]);
    assert!(texts[1].starts_with("tool `tag`: sent without strict mode"), "{}", texts[1]);
    assert_eq!(warnings[1].code, "schema_not_strict");
    assert!(texts[2].starts_with("output schema `report`: the JSON Schema was adapted"), "{}", texts[2]);
}

#[test]
fn openai_responses_sends_strict_schemas_when_they_fit() {
    let (body, warnings) = build(Dialect::OpenaiResponses, &context(), &options());
    assert_eq!(body["tools"][0]["parameters"], strict_weather());
    assert_eq!(body["tools"][0]["strict"], true);
    assert_eq!(body["tools"][1]["parameters"], map_tool().input_schema);
    assert_eq!(body["tools"][1]["strict"], false);
    assert_eq!(body["text"]["format"]["schema"], strict_report());
    assert_eq!(body["text"]["format"]["strict"], true);
    let codes: Vec<&str> = warnings.iter().map(|w| w.code.as_str()).collect();
    assert_eq!(codes, ["schema_adapted", "schema_not_strict", "schema_adapted"]);

    // An output schema that cannot be strict is no longer sent with `strict: true`.
    let options = Options {
        output: Some(OutputSchema {
            name: "list".into(),
            schema: json!({"type": "array", "items": {"type": "string"}}),
        }),
        ..Options::default()
    };
    let (body, warnings) = build(Dialect::OpenaiResponses, &Context::from_prompt("List."), &options);
    assert_eq!(body["text"]["format"]["strict"], false);
    assert_eq!(body["text"]["format"]["schema"], json!({"type": "array", "items": {"type": "string"}}));
    assert!(messages(&warnings)[0].contains("a root that is not of type object"), "{warnings:?}");
}

#[test]
fn gemini_sends_the_documented_subset() {
    let (body, warnings) = build(Dialect::GoogleGemini, &context(), &options());
    let params = &body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"];
    assert_eq!(
        params,
        &json!({"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "{minLength: 1}"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "fields": {"type": "array", "items": {"type": "string"}, "description": "{uniqueItems: true}"}
        }})
    );
    assert_eq!(body["tools"][0]["functionDeclarations"][1]["parametersJsonSchema"], map_tool().input_schema);
    assert_eq!(
        body["generationConfig"]["responseJsonSchema"],
        json!({"type": "object", "required": ["summary"], "properties": {
            "summary": {"type": "string", "description": "{maxLength: 200}"},
            "score": {"type": "number", "minimum": 0, "maximum": 1}
        }})
    );
    assert_eq!(
        messages(&warnings),
        [
            "tool `weather`: the JSON Schema was adapted for Gemini: removed `minLength` at /properties/city; \
             removed `uniqueItems` at /properties/fields",
            "output schema `report`: the JSON Schema was adapted for Gemini: removed `maxLength` at /properties/summary",
        ]
    );
}

#[test]
fn anthropic_adapts_the_output_schema_and_sends_tools_as_given() {
    let (body, warnings) = build(Dialect::AnthropicMessages, &context(), &options());
    assert_eq!(body["tools"][0]["input_schema"], weather_tool().input_schema, "no strict tool use: as given");
    assert_eq!(
        body["output_config"]["format"]["schema"],
        json!({"type": "object", "additionalProperties": false, "required": ["summary"], "properties": {
            "summary": {"type": "string", "description": "{maxLength: 200}"},
            "score": {"type": "number", "description": "{maximum: 1, minimum: 0}"}
        }})
    );
    assert_eq!(
        messages(&warnings),
        ["output schema `report`: the JSON Schema was adapted for Anthropic structured outputs: removed \
          `maximum` at /properties/score; removed `minimum` at /properties/score; removed `maxLength` at \
          /properties/summary"]
    );
}

#[test]
fn ollama_sends_schemas_as_given() {
    let (body, warnings) = build(Dialect::OllamaChat, &context(), &options());
    assert_eq!(body["tools"][0]["function"]["parameters"], weather_tool().input_schema);
    assert_eq!(body["format"], options().output.map(|o| o.schema).unwrap_or_default());
    assert!(warnings.is_empty(), "{warnings:?}");
}
