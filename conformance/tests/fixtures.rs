//! Replays the project's fixtures: every stream decodes to exactly its expected events
//! and response, however its bytes are split; every request case builds exactly its
//! expected request.

use omni_conformance::fixtures::*;
use omni_protocol::{dialect::RequestSpec, ApiKey, Dialect};
use omni_testkit::check::{wire, Config, Sample};

/// Cases every dialect must have (the list); `redacted_thinking` is Anthropic's.
const REQUIRED_CASES: &[&str] = &[
    "text",
    "multi_block_text",
    "thinking",
    "tool_call",
    "parallel_tool_calls",
    "tool_call_no_arguments",
    "unicode",
    "max_tokens",
    "refusal",
    "error_mid_stream",
    "cut_before_stop",
    "keepalive",
    "usage_only_final_chunk",
];

fn cases() -> Vec<StreamCase> {
    stream_cases(&fixtures_root()).unwrap_or_else(|e| panic!("cannot load fixtures: {e}"))
}

#[test]
fn every_dialect_has_the_required_cases() {
    let cases = cases();
    let mut missing = Vec::new();
    for dialect in Dialect::ALL {
        let mut required: Vec<&str> = REQUIRED_CASES.to_vec();
        if dialect == Dialect::AnthropicMessages {
            required.push("redacted_thinking");
        }
        for case in required {
            let name = format!("{}/{case}", dialect.name());
            if !cases.iter().any(|c| c.name == name) {
                missing.push(name);
            }
        }
    }
    assert!(missing.is_empty(), "missing fixtures: {missing:?}");
}

#[test]
fn streams_decode_to_their_expected_events_and_response() {
    let mut failures = Vec::new();
    let cases = cases();
    for case in &cases {
        let (events, response) = decode_split(case.dialect, &case.info.model, &case.body, &[]);
        for (file, actual) in
            [("events.jsonl", events_to_jsonl(&events)), ("response.json", response_to_json(&response))]
        {
            if let Err(diff) = check_or_bless(&case.dir.join(file), &actual) {
                failures.push(format!("{}: {diff}", case.name));
            }
        }
        // Byte by byte must give the very same result.
        let (bytewise_events, bytewise_response) = decode_chunked(case.dialect, &case.info.model, &case.body, 1);
        if bytewise_events != events || bytewise_response != response {
            failures.push(format!("{}: byte-by-byte decoding differs from whole-body decoding", case.name));
        }
    }
    println!("project fixtures: {} streams checked", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Split anywhere, every fixture gives the same events and response: the test kit's split
/// check, the one users run on their formats (whole, byte by byte, inside every multi-byte
/// character and CRLF pair, after every line break, and 48 generated splits per dialect).
#[test]
fn any_split_of_any_fixture_gives_the_same_result() {
    let cases = cases();
    for dialect in Dialect::ALL {
        let samples: Vec<Sample> = cases
            .iter()
            .filter(|c| c.dialect == dialect)
            .map(|c| Sample::new(c.name.clone(), c.body.clone()))
            .collect();
        if let Err(failure) = wire::check_splits(dialect, &samples, &Config::new().cases(48)) {
            panic!("{failure}");
        }
    }
}

#[test]
fn requests_build_to_their_expected_form() {
    let cases = request_cases(&fixtures_root()).unwrap_or_else(|e| panic!("cannot load request fixtures: {e}"));
    let key = ApiKey::new("sk-test-secret");
    let mut failures = Vec::new();
    for case in &cases {
        let input = &case.input;
        let provider = match provider_for(input) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {e}", case.name));
                continue;
            }
        };
        let spec = RequestSpec {
            model: &input.model,
            provider: &provider,
            context: &input.context,
            options: &input.options,
            // A keyless provider (Ollama) is given no key: one given is always sent.
            api_key: (provider.auth != omni_protocol::Auth::None).then_some(&key),
        };
        match input.model.dialect.build_request(&spec) {
            Ok(built) => {
                let text = request_to_json(&built.request);
                assert!(!text.contains("sk-test-secret"), "{}: the key leaked into the request dump", case.name);
                if let Err(diff) = check_or_bless(&case.dir.join("request.json"), &text) {
                    failures.push(format!("{}: {diff}", case.name));
                }
            }
            Err(e) => failures.push(format!("{}: cannot build: {e}", case.name)),
        }
    }
    println!("project fixtures: {} requests checked", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
