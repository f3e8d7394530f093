//! Replays the upstream corpus (`../shared/fixtures/upstream/`) and the local-peer captures
//! (`../shared/fixtures/local-peers/`) through omni's decoders.
//!
//! - `every_file_loads`: the loader unwraps every file; prints counts per dialect and format.
//! - `expectations_cover_the_corpus`: one expectation per recording, none stale.
//! - `replay_matches_expectations`: outcome, stop reason, tool names and text prefix.
//! - `chunking_does_not_change_the_result`: 1-byte, 7-byte and random splits give the same
//!   events and response as the whole body.
//!
//! When the shared fixtures are absent every test prints a message and passes. Set
//! `OMNI_SHARED_FIXTURES` to the folder holding `upstream/` and `local-peers/` to use
//! another location (for example from a git worktree outside the workspace's parent).

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;

use omni_conformance::upstream::expect::{self, Expectation, Outcome};
use omni_conformance::upstream::{self, Recording};
use omni_protocol::{dialect::StreamDecoder, Response, StreamEvent};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const EXPECTATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/upstream-expectations.json");

/// Every recording: the upstream corpus, then the local peers (when present).
fn load_all() -> Option<(Vec<Recording>, Vec<upstream::Skipped>)> {
    let Some(corpus) = upstream::load_shared_recordings() else {
        println!("shared fixtures not found: skipping (set OMNI_SHARED_FIXTURES)");
        return None;
    };
    Some((corpus.recordings, corpus.skipped))
}

fn expectations() -> BTreeMap<(String, usize), Expectation> {
    let file = expect::load_expectations(std::path::Path::new(EXPECTATIONS)).unwrap_or_else(|e| panic!("{e}"));
    let mut map = BTreeMap::new();
    for e in file.recordings {
        let key = (e.file.clone(), e.interaction);
        assert!(map.insert(key.clone(), e).is_none(), "duplicate expectation for {key:?}");
    }
    map
}

#[test]
fn every_file_loads() {
    let Some((recordings, skipped)) = load_all() else { return };
    let mut per_dialect: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_format: BTreeMap<&str, usize> = BTreeMap::new();
    let mut files = std::collections::BTreeSet::new();
    for r in &recordings {
        *per_dialect.entry(r.dialect.name()).or_default() += 1;
        *per_format.entry(r.format.name()).or_default() += 1;
        files.insert(r.file.as_str());
    }
    println!("{} recordings from {} files", recordings.len(), files.len());
    println!("per dialect: {per_dialect:?}");
    println!("per format: {per_format:?}");
    println!("skipped interactions: {}", skipped.len());
    for s in &skipped {
        println!("  skipped {}#{}: {}", s.file, s.interaction, s.reason);
    }
    // Every file of the five dialect folders yields at least one recording or skip.
    let dir = upstream::shared_fixtures_dir().expect("present");
    for folder in ["anthropic", "openai-chat", "openai-responses", "gemini", "ollama"] {
        let entries = std::fs::read_dir(dir.join("upstream").join(folder)).expect("folder");
        for entry in entries {
            let name = format!("{folder}/{}", entry.expect("entry").file_name().to_string_lossy());
            let skipped_here = skipped.iter().any(|s| s.file == name);
            assert!(files.contains(name.as_str()) || skipped_here, "{name} produced no recording");
        }
    }
}

#[test]
fn expectations_cover_the_corpus() {
    let Some((recordings, _)) = load_all() else { return };
    let expected = expectations();
    let mut problems = Vec::new();
    for r in &recordings {
        let key = (r.file.clone(), r.interaction);
        match expected.get(&key) {
            None => problems.push(format!("{}#{}: no expectation", r.file, r.interaction)),
            Some(e) => {
                let http = !r.is_success();
                if http != (e.outcome == Outcome::HttpError) {
                    problems
                        .push(format!("{}#{}: status {} vs outcome {:?}", r.file, r.interaction, r.status, e.outcome));
                }
                if e.outcome == Outcome::Done && e.stop_reason.is_none() {
                    problems.push(format!("{}#{}: done without stop_reason", r.file, r.interaction));
                }
                if e.outcome == Outcome::HttpError && e.error_kind.is_none() {
                    problems.push(format!("{}#{}: http_error without error_kind", r.file, r.interaction));
                }
            }
        }
    }
    let loaded: std::collections::BTreeSet<_> = recordings.iter().map(|r| (r.file.clone(), r.interaction)).collect();
    for key in expected.keys() {
        // Local-peer expectations are stale only when the local peers were loaded.
        if !loaded.contains(key)
            && (!key.0.starts_with("local-peers/") || loaded.iter().any(|k| k.0.starts_with("local-peers/")))
        {
            problems.push(format!("{}#{}: expectation without a recording", key.0, key.1));
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn replay_matches_expectations() {
    let Some((recordings, _)) = load_all() else { return };
    let expected = expectations();
    let mut passed = 0;
    let mut failures = Vec::new();
    let mut known_gaps = Vec::new();
    for r in &recordings {
        let Some(e) = expected.get(&(r.file.clone(), r.interaction)) else {
            failures.push(format!("{}#{}: no expectation", r.file, r.interaction));
            continue;
        };
        let observed = expect::replay(r);
        let wrong = expect::mismatches(e, &observed);
        if wrong.is_empty() {
            passed += 1;
        } else if let Some(gap) = &e.known_gap {
            known_gaps.push(format!("{}#{} (known gap: {gap}):\n    {}", r.file, r.interaction, wrong.join("\n    ")));
        } else {
            failures.push(format!("{}#{} [{}]:\n    {}", r.file, r.interaction, r.dialect, wrong.join("\n    ")));
        }
    }
    for g in &known_gaps {
        println!("{g}");
    }
    println!("upstream corpus: {} recordings replayed, {passed} passed", recordings.len());
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Events (as JSON) and the final response (as JSON) from feeding `body` in the given pieces.
fn decode_in_pieces<'a>(
    r: &Recording,
    pieces: impl Iterator<Item = &'a [u8]>,
) -> (serde_json::Value, serde_json::Value) {
    let mut decoder = StreamDecoder::new(r.dialect, "model");
    let mut events: Vec<StreamEvent> = Vec::new();
    for piece in pieces {
        decoder.feed(piece, &mut events);
    }
    decoder.finish(&mut events);
    let response: Response = decoder.into_response();
    (
        serde_json::to_value(&events).expect("events serialise"),
        serde_json::to_value(&response).expect("response serialises"),
    )
}

/// Splits `body` at the given offsets (sorted, clamped, duplicates allowed: empty pieces too).
fn split_at_points(body: &[u8], mut points: Vec<usize>) -> Vec<&[u8]> {
    points.iter_mut().for_each(|p| *p = (*p).min(body.len()));
    points.sort_unstable();
    let mut pieces = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        pieces.push(&body[start..p]);
        start = p;
    }
    pieces.push(&body[start..]);
    pieces
}

#[test]
fn chunking_does_not_change_the_result() {
    let Some((recordings, _)) = load_all() else { return };
    let mut failures = Vec::new();
    let mut checked = 0;
    for r in recordings.iter().filter(|r| r.is_success()) {
        checked += 1;
        let name = format!("{}#{}", r.file, r.interaction);
        let whole = decode_in_pieces(r, std::iter::once(r.body.as_slice()));
        for size in [1, 7] {
            if decode_in_pieces(r, r.body.chunks(size)) != whole {
                failures.push(format!("{name}: {size}-byte chunks differ from the whole body"));
            }
        }
        let config = Config { cases: 12, failure_persistence: None, ..Config::default() };
        let mut runner = TestRunner::new(config);
        let len = r.body.len();
        let strategy = proptest::collection::vec(0..=len, 1..12);
        let result = runner.run(&strategy, |points| {
            let pieces = split_at_points(&r.body, points.clone());
            if decode_in_pieces(r, pieces.into_iter()) == whole {
                Ok(())
            } else {
                Err(TestCaseError::fail(format!("split at {points:?}")))
            }
        });
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    println!("chunking invariance: {checked} recordings checked, {} failed", failures.len());
    assert!(failures.is_empty(), "{} recordings depend on chunking:\n{}", failures.len(), failures.join("\n"));
}

proptest! {
    #![proptest_config(Config { cases: 64, failure_persistence: None, ..Config::default() })]

    /// The splitter itself: pieces always reassemble into the body.
    #[test]
    fn split_points_reassemble(body in proptest::collection::vec(any::<u8>(), 0..64), points in proptest::collection::vec(0usize..80, 0..6)) {
        let pieces = split_at_points(&body, points);
        prop_assert_eq!(pieces.concat(), body);
    }
}

/// The recording of `file` (interaction 0), when the shared fixtures are present.
fn recording(file: &str) -> Option<Recording> {
    let (recordings, _) = load_all()?;
    let found = recordings.into_iter().find(|r| r.file == file && r.interaction == 0);
    assert!(found.is_some(), "{file} is not in the corpus");
    found
}

/// The JSON payload of every SSE `data:` line of a body.
fn data_lines(body: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// Issue 10: the deltas of this recording carry only the first words of each message item;
/// `output_text.done` has the finalized text. omni's text is what the SDK's `output_text`
/// gives (every output_text part of `response.completed`, joined), one block per item.
#[test]
fn responses_final_text_completes_what_the_deltas_left_out() {
    let Some(r) = recording("openai-responses/vercel-ai__openai-phase.1.chunks.txt") else { return };
    let completed = data_lines(&r.body)
        .into_iter()
        .find(|e| e["type"] == "response.completed")
        .expect("a response.completed event");
    let mut sdk_text = String::new();
    let mut item_ids = Vec::new();
    for item in completed["response"]["output"].as_array().expect("output") {
        if item["type"] == "message" {
            item_ids.push(item["id"].as_str().expect("id").to_string());
            for part in item["content"].as_array().expect("content") {
                sdk_text.push_str(part["text"].as_str().unwrap_or_default());
            }
        }
    }
    assert!(sdk_text.len() > 1500, "{}", sdk_text.len());
    let (events, response) = omni_protocol::dialect::decode_body(r.dialect, "model", &r.body);
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })), "{:?}", events.last());
    assert_eq!(response.text(), sdk_text);
    let signatures: Vec<String> = response
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            omni_protocol::Block::Text(t) => t.signature.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(signatures, item_ids, "one text block per message item, each with its item id");
}

/// Issue 10: this body ends inside its last event (no blank line after the data line that
/// carries `finishReason`). A WHATWG client never dispatches that event, so the stream never
/// finished: omni reports it incomplete, keeping the content. With the blank line it is done.
#[test]
fn sse_stream_finished_only_by_an_undispatched_event_is_incomplete() {
    let Some(r) = recording("gemini/omni__google_thinking.sse") else { return };
    assert!(!r.body.ends_with(b"\n\n") && !r.body.ends_with(b"\r\n\r\n"), "the recording ends inside an event");
    let (events, response) = omni_protocol::dialect::decode_body(r.dialect, "model", &r.body);
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { error}) if matches!(**error, omni_protocol::StreamError::Incomplete)),
        "{:?}",
        events.last()
    );
    let text = "There are **3** R's in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.";
    assert_eq!(response.text(), text, "the content received is kept");

    let mut whole = r.body.clone();
    whole.extend_from_slice(b"\r\n");
    let (events, response) = omni_protocol::dialect::decode_body(r.dialect, "model", &whole);
    assert!(
        matches!(events.last(), Some(StreamEvent::Done { stop_reason: omni_protocol::StopReason::Stop, .. })),
        "{:?}",
        events.last()
    );
    assert_eq!(response.text(), text);
}

/// Issue 10: Gemini's code execution feeds its results back to the model within the
/// request (`toolUsePromptTokenCount`), billed as input and counted in `totalTokenCount`:
/// omni's input is the prompt plus them, and input + output is the total.
#[test]
fn gemini_input_tokens_include_the_tool_use_prompt() {
    let file =
        "gemini/rig__gemini--stream_terminal_matrix--two_terminal_stream_keeps_the_text_after_the_first_finish.yaml";
    let Some(r) = recording(file) else { return };
    let last = data_lines(&r.body).into_iter().rev().find_map(|e| e.get("usageMetadata").cloned()).expect("usage");
    let count = |k: &str| last[k].as_u64().unwrap_or(0);
    assert_eq!((count("promptTokenCount"), count("toolUsePromptTokenCount")), (91, 574));
    let (_, response) = omni_protocol::dialect::decode_body(r.dialect, "model", &r.body);
    let usage = response.usage;
    assert_eq!(usage.input_tokens, 91 + 574);
    assert_eq!(usage.input_tokens + usage.output_tokens + usage.cache_read_tokens, count("totalTokenCount"));
}
