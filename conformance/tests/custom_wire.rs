//! A wire format of the application's (`omni_conformance::custom_wire`, the made-up
//! `ticker`) wherever a built-in dialect goes: decoded from its fixtures, in the
//! simulation's generate loop with a tool (transcripts in `transcripts/custom/`), in the
//! agent, in the catalogue by name, written and read back by name. The drivers run it
//! through their public API in their HTTP suites (`http_suite_tests!`).
#![allow(clippy::disallowed_methods)] // the simulations read the clock once

use std::path::Path;

use omni_conformance::custom_wire::{self, dialect, fixture, model, provider, reply};
use omni_conformance::fixtures::check_or_bless;
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{simulate, Scenario};
use omni_protocol::agent::{Agent, AgentConfig, AgentEvent, AgentInput, NoCallbacks};
use omni_protocol::dialect::{register, RegisterError, WireFormat};
use omni_protocol::generate::GenerateError;
use omni_protocol::{dialect::decode_body, Catalogue, Dialect, Model, Options, StopReason, StreamError};
use serde_json::json;

fn named(name: &'static str, replies: Vec<omni_conformance::sim::Reply>) -> NamedScenario {
    let base = scenarios::all().into_iter().find(|s| s.name == "two_step_tool_loop").expect("a scenario");
    NamedScenario { name, scenario: Scenario { replies, ..base.scenario }, ..base }
}

fn run(named: &NamedScenario) -> omni_conformance::sim::SimResult {
    let mut config = scenarios::config(named, "http://ticker.invalid");
    config.model = model();
    config.provider = provider("http://ticker.invalid");
    let result = simulate(config, &named.scenario);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts/custom").join(format!("{}.txt", named.name));
    if let Err(diff) = check_or_bless(&path, &(result.transcript.join("\n") + "\n")) {
        panic!("{diff}\n{}", result.transcript.join("\n"));
    }
    result
}

#[test]
fn its_fixtures_decode_however_they_are_split() {
    let whole = decode_body(dialect(), "tick-1", &fixture("text"));
    assert_eq!(whole.1.text(), "It is sunny and noon.");
    assert_eq!(whole.1.stop_reason, Some(StopReason::Stop));
    assert_eq!((whole.1.usage.input_tokens, whole.1.usage.output_tokens), (12, 5));
    let tool = decode_body(dialect(), "tick-1", &fixture("tool_call")).1;
    assert_eq!(tool.stop_reason, Some(StopReason::ToolUse));
    let call = tool.message.tool_uses().next().expect("a call");
    assert_eq!((call.id.as_str(), call.name.as_str(), &call.input), ("c1", "get_weather", &json!({"city": "Paris"})));
    // A stream without its `end` line is incomplete, as with every dialect.
    let cut = decode_body(dialect(), "tick-1", &fixture("cut"));
    assert!(
        matches!(cut.0.last(), Some(omni_protocol::StreamEvent::Error { error }) if **error == StreamError::Incomplete)
    );
}

#[test]
fn a_text_reply_in_the_simulation() {
    let r = run(&named("ticker_text", vec![reply(&fixture("text"), 7)]));
    assert_eq!(r.response.expect("a response").text(), "It is sunny and noon.");
    assert_eq!(r.requests[0].url, "http://ticker.invalid/ticker/chat");
}

#[test]
fn a_tool_loop_in_the_simulation_sends_the_results_in_its_own_shape() {
    let r = run(&named("ticker_tool_loop", vec![reply(&fixture("tool_call"), 7), reply(&fixture("text"), 7)]));
    assert_eq!(r.response.as_ref().expect("a response").text(), "It is sunny and noon.");
    assert!(r.effects.iter().any(|e| e == r#"run tool #1 get_weather {"city":"Paris"}"#), "{:?}", r.effects);
    let second: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
    assert_eq!(second["turns"][1]["calls"][0], json!({"id": "c1", "tool": "get_weather", "args": {"city": "Paris"}}));
    assert_eq!(second["turns"][2], json!({"who": "tool", "results": [{"id": "c1", "out": "sunny", "failed": false}]}));
    assert_eq!(second["tools"][0]["name"], "get_weather", "{second}");
}

#[test]
fn an_error_body_is_typed_by_the_format() {
    let body = r#"{"problem":"the ticker is closed"}"#;
    let r = run(&named("ticker_error", vec![omni_conformance::sim::Reply::error(400, &[], body)]));
    match r.error {
        Some(GenerateError::Provider(e)) => {
            assert_eq!(e.status, Some(400));
            assert_eq!(e.message, "the ticker is closed");
        }
        other => panic!("a provider error: {other:?}"),
    }
}

#[test]
fn the_agent_runs_on_it() {
    let mut config = AgentConfig::new(model(), provider("http://ticker.invalid"));
    config.api_key = Some("sk".into());
    let now = std::time::Instant::now();
    let mut agent = Agent::new(config, NoCallbacks, now).expect("an agent");
    agent.handle_input(AgentInput::Prompt("hi".into()), now).expect("a turn starts");
    let scenario =
        omni_conformance::agent_sim::AgentScenario { replies: vec![reply(&fixture("text"), 7)], ..Default::default() };
    let (result, agent) = omni_conformance::agent_sim::simulate_agent(agent, &scenario);
    assert!(result.events.iter().any(|e| matches!(e, AgentEvent::Turn { .. })), "{:#?}", result.transcript);
    assert_eq!(agent.messages().last().map(|m| m.text()).as_deref(), Some("It is sunny and noon."));
}

#[test]
fn it_is_named_in_catalogues_and_models_and_read_back() {
    let ticker = dialect();
    assert_eq!("ticker".parse::<Dialect>(), Ok(ticker));
    let model: Model = serde_json::from_value(json!({"id": "tick-2", "provider": "ticker", "dialect": "ticker"}))
        .expect("a model naming the format");
    assert_eq!(model.dialect, ticker);
    assert_eq!(serde_json::to_value(model.dialect).expect("JSON"), json!("ticker"));
    let mut catalogue = Catalogue::builtin().expect("the built-in catalogue");
    let file = r#"{ "provider": { "id": "ticker", "base_url": "http://ticker.invalid", "dialect": "ticker",
        "auth": { "kind": "bearer" } }, "models": [ { "id": "tick-9" } ] }"#;
    catalogue.load_json(file).expect("a catalogue file naming the format");
    assert_eq!(catalogue.model("ticker:tick-9").map(|m| m.dialect), Ok(ticker));
    // Its name cannot be a built-in's, nor taken by another format.
    #[derive(Debug)]
    struct Impostor(&'static str);
    impl WireFormat for Impostor {
        fn name(&self) -> &'static str {
            self.0
        }
        fn framing(&self) -> omni_protocol::dialect::Framing {
            omni_protocol::dialect::Framing::Sse
        }
        fn build_request(
            &self,
            _: &omni_protocol::dialect::RequestSpec<'_>,
            _: &mut Vec<omni_protocol::Warning>,
        ) -> Result<omni_protocol::dialect::DialectRequest, omni_protocol::RequestError> {
            Err(omni_protocol::RequestError::Unsupported { message: "impostor".into() })
        }
        fn new_stream(&self) -> Box<dyn omni_protocol::dialect::WireStream> {
            custom_wire::TICKER.new_stream()
        }
    }
    static BUILT_IN: Impostor = Impostor("ollama_chat");
    static TAKEN: Impostor = Impostor("ticker");
    assert_eq!(register(&BUILT_IN), Err(RegisterError::BuiltIn("ollama_chat".into())));
    assert_eq!(register(&TAKEN), Err(RegisterError::Taken("ticker".into())));
    assert_eq!(register(&custom_wire::TICKER), Ok(ticker), "the same format again is fine");
}

#[test]
fn extra_options_go_top_level_with_a_warning_as_it_declares_none() {
    let mut named = named("ticker_extra", vec![reply(&fixture("text"), 7)]);
    named.options = Options::default().extra("seed", 3);
    let r = run(&named);
    let body: serde_json::Value = serde_json::from_slice(&r.requests[0].body).expect("JSON body");
    assert_eq!(body["seed"], 3, "{body}");
    let warnings = r.response.expect("a response").warnings;
    assert!(warnings.iter().any(|w| w.code == "unknown_extra_option"), "{warnings:?}");
}

#[test]
fn a_format_that_answers_in_one_json_document() {
    let whole = register(&custom_wire::TICKER_WHOLE).expect("registered");
    assert_eq!(whole.framing(), omni_protocol::dialect::Framing::Json);
    let body = custom_wire::whole_fixture("text");
    for piece in [1, 7, body.len()] {
        let mut decoder = omni_protocol::dialect::StreamDecoder::new(whole, "tick-1");
        let mut events = Vec::new();
        for chunk in body.chunks(piece) {
            decoder.feed(chunk, &mut events);
        }
        decoder.finish(&mut events);
        let response = decoder.into_response();
        assert_eq!(response.text(), "It is sunny and noon.", "in pieces of {piece}");
        assert_eq!(response.stop_reason, Some(StopReason::Stop));
    }
    // A document cut short does not parse: a decode error, not a success.
    let cut = decode_body(whole, "tick-1", &body[..body.len() / 2]);
    assert!(matches!(cut.0.last(), Some(omni_protocol::StreamEvent::Error { .. })), "{:?}", cut.0.last());
}
