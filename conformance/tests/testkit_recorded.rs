//! Every fixture of the project replayed through omni-testkit's mock provider
//! (`Turn::recorded`) and omni-blocking's public API: the reply a user's code gets is the
//! one the pure decoder makes of the same bytes (text, thinking, tool calls, stop reason),
//! or, for a stream that fails, an error keeping the same text.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets

use omni_blocking::{Block, Client, Error, Options, Response, RetryPolicy, StopReason};
use omni_conformance::fixtures::{fixtures_root, stream_cases};
use omni_protocol::dialect::decode_body;
use omni_testkit::{MockProvider, Turn};

/// What a reply says: text, thinking, tool calls.
fn said(response: &Response) -> (String, String, Vec<(String, serde_json::Value)>) {
    let mut thinking = String::new();
    let mut calls = Vec::new();
    for block in &response.message.content {
        match block {
            Block::Thinking(t) => thinking.push_str(&t.text),
            Block::ToolUse(call) => calls.push((call.name.clone(), call.input.clone())),
            _ => {}
        }
    }
    (response.text(), thinking, calls)
}

#[test]
fn every_fixture_replays_through_the_mock_as_the_decoder_reads_it() {
    let cases = stream_cases(&fixtures_root()).expect("the fixtures load");
    assert!(cases.len() > 50, "{} fixtures", cases.len());
    let mut failures = Vec::new();
    // As recorded (an event per write), and in 7-byte writes (events, lines and characters split).
    let runs = cases.iter().flat_map(|case| [(case, None), (case, Some(7))]);
    for (case, chunk) in runs {
        let (_, expected) = decode_body(case.dialect, &case.info.model, &case.body);
        let mock = MockProvider::start(case.dialect).expect("a loopback port");
        let recorded = Turn::recorded(&case.dir).expect("a recorded body");
        mock.push(match chunk {
            Some(bytes) => recorded.chunked(bytes),
            None => recorded,
        });
        let no_retries = RetryPolicy { max_retries: 0, max_stall_retries: 0, ..RetryPolicy::default() };
        let client = Client::builder().provider(mock.provider()).retry(no_retries).build().expect("client");
        let one_step = Options { max_steps: Some(1), ..Options::default() };
        let outcome = client.call(mock.model(), "Hi").options(one_step).generate();
        let got = match &outcome {
            Ok(response) => response,
            Err(Error::Generate { partial, .. }) => partial,
            Err(other) => {
                failures.push(format!("{} ({chunk:?}): {other}", case.name));
                continue;
            }
        };
        if said(got) != said(&expected) {
            failures.push(format!(
                "{} ({chunk:?}): the client got {:?}, the decoder read {:?}",
                case.name,
                said(got),
                said(&expected)
            ));
        }
        let failed = expected.stop_reason == Some(StopReason::Error);
        if failed != outcome.is_err() {
            failures.push(format!(
                "{}: decoder stop {:?}, client {:?}",
                case.name,
                expected.stop_reason,
                outcome.err()
            ));
        } else if !failed && got.stop_reason != expected.stop_reason {
            failures.push(format!(
                "{}: stop {:?}, the decoder read {:?}",
                case.name, got.stop_reason, expected.stop_reason
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
