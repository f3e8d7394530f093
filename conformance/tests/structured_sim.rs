//! Structured output on the virtual clock: valid at once; invalid then corrected (the
//! correction visible in the second request); every correction failing; a reply cut by
//! the token limit (no retry).

use omni_conformance::scenarios::{self, paced, text_events};
use omni_conformance::sim::{simulate, Scenario, SimResult};
use omni_protocol::generate::GenerateConfig;
use omni_protocol::{Context, OutputSchema, StopReason};
use serde_json::json;

fn schema() -> OutputSchema {
    OutputSchema {
        name: "city".into(),
        schema: json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
            "required": ["name", "population"],
            "additionalProperties": false
        }),
    }
}

fn run(replies: Vec<omni_conformance::sim::Reply>) -> SimResult {
    let model = scenarios::model();
    let options = omni_protocol::Options { output: Some(schema()), ..omni_protocol::Options::default() };
    let mut config = GenerateConfig::new(
        model,
        scenarios::provider("http://replay.invalid/v1"),
        Context::from_prompt("The largest city of France, as JSON."),
        options,
    );
    config.api_key = Some("k".into());
    simulate(config, &Scenario { replies, ..Scenario::default() })
}

fn answer(text: &str) -> omni_conformance::sim::Reply {
    paced(&text_events(&[text]), std::time::Duration::ZERO)
}

#[test]
fn valid_on_the_first_try() {
    let r = run(vec![answer(r#"{"name": "Paris", "population": 2100000}"#)]);
    let response = r.response.unwrap();
    assert_eq!(response.output, Some(json!({"name": "Paris", "population": 2100000})));
    assert_eq!(response.output_error, None);
    assert_eq!(r.requests.len(), 1);
}

#[test]
fn invalid_then_valid_sends_one_correction() {
    let r = run(vec![
        answer(r#"{"name": "Paris", "population": "about two million"}"#),
        answer(r#"{"name": "Paris", "population": 2100000}"#),
    ]);
    assert_eq!(r.requests.len(), 2);
    let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
    assert!(second.contains("Your previous reply could not be used"), "{second}");
    assert!(second.contains("at /population"), "the correction names the path: {second}");
    assert!(r.transcript.iter().any(|l| l.starts_with("step 0: output retry 1: the reply does not match the schema")));
    let response = r.response.unwrap();
    assert_eq!(response.output, Some(json!({"name": "Paris", "population": 2100000})));
    assert_eq!(response.messages.len(), 3, "invalid reply, correction, valid reply");
}

#[test]
fn gives_up_after_three_corrections_with_the_last_error() {
    let bad = || answer("Paris, about two million people.");
    let r = run(vec![bad(), bad(), bad(), bad()]);
    assert_eq!(r.requests.len(), 4, "the first try and three corrections");
    let response = r.response.unwrap();
    assert_eq!(response.output, None);
    assert!(response.output_error.unwrap().starts_with("the reply is not valid JSON"));
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
}

#[test]
fn a_reply_cut_by_the_token_limit_is_not_retried() {
    let mut cut = text_events(&[r#"{"name": "Par"#]);
    let last = cut.len() - 1;
    cut[last] = cut[last].replace("end_turn", "max_tokens");
    let r = run(vec![paced(&cut, std::time::Duration::ZERO)]);
    assert_eq!(r.requests.len(), 1);
    let response = r.response.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::Length));
    assert!(response.output_error.unwrap().contains("cut by the output token limit"));
}

#[test]
fn a_validator_alone_asks_for_json_with_its_schema() {
    let validator = omni_protocol::schema::JsonSchemaValidator::new(schema().schema).unwrap();
    let mut config = GenerateConfig::new(
        scenarios::model(),
        scenarios::provider("http://replay.invalid/v1"),
        Context::from_prompt("The largest city of France, as JSON."),
        omni_protocol::Options::default(),
    );
    config.api_key = Some("k".into());
    config.output_validator = Some(std::sync::Arc::new(validator));
    let r = simulate(
        config,
        &Scenario { replies: vec![answer(r#"{"name": "Paris", "population": 1}"#)], ..Scenario::default() },
    );
    let body: serde_json::Value = serde_json::from_slice(&r.requests[0].body).unwrap();
    let sent = omni_protocol::schema::adapt::anthropic_output(&schema().schema).0;
    assert_eq!(body["output_config"]["format"]["schema"], sent);
    assert_eq!(r.response.unwrap().output, Some(json!({"name": "Paris", "population": 1})));
}

/// Found by `machine_fuzz`: a reply ending with tool calls the call does not run
/// (`max_steps` reached here; a tool without handler is the same) was "corrected", sending
/// a history whose calls have no results, which every provider refuses. The calls are the
/// caller's: the call finishes with them and says why the output is missing.
#[test]
fn a_reply_with_tool_calls_left_to_the_caller_is_not_corrected() {
    let options =
        omni_protocol::Options { output: Some(schema()), max_steps: Some(1), ..omni_protocol::Options::default() };
    let mut config = GenerateConfig::new(
        scenarios::model(),
        scenarios::provider("http://replay.invalid/v1"),
        Context::from_prompt("The largest city of France, as JSON."),
        options,
    );
    config.api_key = Some("k".into());
    config.tools = scenarios::tools();
    let calls = scenarios::tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]);
    let replies = vec![paced(&calls, std::time::Duration::ZERO), answer(r#"{"name": "Paris", "population": 2}"#)];
    let r = simulate(config, &Scenario { replies, ..Scenario::default() });
    assert_eq!(r.requests.len(), 1, "no correction request: {:?}", r.effects);
    let response = r.response.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(response.message.tool_uses().count(), 1);
    assert!(response.output_error.unwrap().contains("tool calls left to the caller"));
}
