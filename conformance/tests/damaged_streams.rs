//! Every decoder against damaged streams (roadmap: fuzzing of every decoder). The seeds are the project's fixtures and every
//! successful recording of the shared corpus (real provider streams); each is cut at a
//! random point, damaged byte by byte, or damaged in its JSON (a key removed, a value
//! swapped for one of another type, an event repeated or dropped), and decoded. Whatever
//! comes in, the decoder must:
//!
//! - not panic, and end with exactly one terminal event (`Done` or `Error`), last;
//! - keep its blocks well formed: a delta or an end only inside a started block, no
//!   block started twice;
//! - stay in proportion to its input: no more events than bytes, no more text than
//!   bytes (nothing amplified, so memory is bounded by the input);
//! - never pass a cut stream off as complete: a prefix of a stream that ends in `Done`
//!   either fails, or ends in `Done` with the very same content and stop reason (the cut
//!   fell after everything that matters, as after Chat Completions' `finish_reason`).
//!   Gemini is the exception the format forces: its stream has no end marker, and a
//!   `finishReason` may come before more content (code execution), so only the
//!   connection's end tells (the drivers report a cut connection as a transport error);
//!   a cut Gemini stream may end in `Done`, but with a prefix of the content, never more.

use std::collections::BTreeSet;

use omni_conformance::fixtures::{fixtures_root, stream_cases};
use omni_conformance::upstream;
use omni_core::{decode_body, Dialect, Response, StreamEvent};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRng, TestRunner};
use serde_json::Value;

/// A stream to damage.
struct Seed {
    name: String,
    dialect: Dialect,
    body: Vec<u8>,
}

fn seeds() -> Vec<Seed> {
    let mut seeds: Vec<Seed> = stream_cases(&fixtures_root())
        .unwrap_or_else(|e| panic!("cannot load fixtures: {e}"))
        .into_iter()
        .map(|case| Seed { name: case.name, dialect: case.dialect, body: case.body })
        .collect();
    match upstream::load_shared_recordings() {
        Some(corpus) => seeds.extend(corpus.recordings.into_iter().filter(|r| r.is_success()).map(|r| Seed {
            name: format!("{}#{}", r.file, r.interaction),
            dialect: r.dialect,
            body: r.body,
        })),
        None => println!("shared fixtures not found: damaging the project's fixtures only"),
    }
    seeds
}

fn decode(seed: &Seed, body: &[u8]) -> (Vec<StreamEvent>, Response) {
    decode_body(seed.dialect, "model", body)
}

/// The invariants every decode holds, damaged input or not.
fn check_well_formed(body: &[u8], events: &[StreamEvent], response: &Response) -> Result<(), String> {
    let terminal = |e: &StreamEvent| matches!(e, StreamEvent::Done { .. } | StreamEvent::Error { .. });
    match events.iter().position(terminal) {
        Some(at) if at + 1 == events.len() => {}
        Some(at) => return Err(format!("terminal event at {at} of {}: {:?}", events.len(), events.get(at + 1))),
        None => return Err(format!("no terminal event among {} events", events.len())),
    }
    let mut open = BTreeSet::new();
    for event in events {
        let (index, step) = match event {
            StreamEvent::TextStart { index, .. }
            | StreamEvent::ThinkingStart { index, .. }
            | StreamEvent::ToolUseStart { index, .. } => (*index, Step::Start),
            StreamEvent::TextDelta { index, .. }
            | StreamEvent::ThinkingDelta { index, .. }
            | StreamEvent::ToolUseDelta { index, .. } => (*index, Step::Delta),
            StreamEvent::TextEnd { index, .. }
            | StreamEvent::ThinkingEnd { index, .. }
            | StreamEvent::ToolUseEnd { index, .. } => (*index, Step::End),
            _ => continue,
        };
        let ok = match step {
            Step::Start => open.insert(index),
            Step::Delta => open.contains(&index),
            Step::End => open.remove(&index),
        };
        if !ok {
            return Err(format!("{step:?} of block {index} out of order: {event:?}"));
        }
    }
    if events.len() > body.len() + 1 {
        return Err(format!("{} events from {} bytes", events.len(), body.len()));
    }
    let content = content_bytes(response);
    if content > body.len() {
        return Err(format!("{content} bytes of content from {} bytes of stream", body.len()));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Start,
    Delta,
    End,
}

/// Bytes of text, thinking and tool input the response holds.
fn content_bytes(response: &Response) -> usize {
    serde_json::to_value(&response.message.content).map(|content| string_bytes(&content)).unwrap_or(0)
}

fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(string_bytes).sum(),
        Value::Object(map) => map.iter().filter(|(k, _)| k.as_str() != "type").map(|(_, v)| string_bytes(v)).sum(),
        _ => 0,
    }
}

fn ends_done(events: &[StreamEvent]) -> bool {
    matches!(events.last(), Some(StreamEvent::Done { .. }))
}

/// Runs `property` over `cases` random `(seed index, parameters)` pairs: the same sample
/// every run (a test run is repeatable, and CI cannot fail by luck of the draw), a fresh
/// one with `OMNI_DAMAGE_RANDOM=1`; `OMNI_DAMAGE_SCALE=10` runs ten times as many.
fn run(cases: u32, property: impl Fn(&Seed, &[u32]) -> Result<(), TestCaseError>) {
    let scale = std::env::var("OMNI_DAMAGE_SCALE").ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(1);
    let cases = cases.saturating_mul(scale.max(1));
    let seeds = seeds();
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner = if std::env::var_os("OMNI_DAMAGE_RANDOM").is_some() {
        TestRunner::new(config)
    } else {
        let rng = TestRng::deterministic_rng(config.rng_algorithm);
        TestRunner::new_with_rng(config, rng)
    };
    let strategy = (0..seeds.len(), proptest::collection::vec(any::<u32>(), 8));
    let result = runner.run(&strategy, |(index, params)| property(&seeds[index], &params));
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("{cases} damaged streams from {} seeds decoded", seeds.len());
}

#[test]
fn every_seed_decodes_well_formed() {
    let mut failures = Vec::new();
    for seed in seeds() {
        let (events, response) = decode(&seed, &seed.body);
        if let Err(e) = check_well_formed(&seed.body, &events, &response) {
            failures.push(format!("{}: {e}", seed.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_cut_stream_fails_or_is_complete() {
    run(2_000, |seed, params| {
        let (events, response) = decode(seed, &seed.body);
        let cut = params[0] as usize % seed.body.len().max(1);
        let prefix = &seed.body[..cut];
        let (cut_events, cut_response) = decode(seed, prefix);
        check_well_formed(prefix, &cut_events, &cut_response)
            .map_err(|e| TestCaseError::fail(format!("{} cut at {cut}: {e}", seed.name)))?;
        if ends_done(&events) && ends_done(&cut_events) && seed.dialect == Dialect::GoogleGemini {
            let (cut_text, text) = (cut_response.text(), response.text());
            prop_assert!(
                text.starts_with(&cut_text) && cut_response.message.content.len() <= response.message.content.len(),
                "{} cut at {}: {:?} is not a prefix of {:?}",
                seed.name,
                cut,
                cut_text,
                text
            );
        } else if ends_done(&events) && ends_done(&cut_events) {
            prop_assert_eq!(
                (&cut_response.message.content, cut_response.stop_reason),
                (&response.message.content, response.stop_reason),
                "{} cut at {} of {} passed for complete with other content",
                seed.name,
                cut,
                seed.body.len()
            );
        }
        Ok(())
    });
}

#[test]
fn damaged_bytes_decode_well_formed() {
    run(2_000, |seed, params| {
        let mut body = seed.body.clone();
        // Up to four damages: a byte flipped, a byte dropped, a byte repeated, a span cut out.
        for pair in params.chunks(2).take(1 + params[7] as usize % 4) {
            if body.is_empty() {
                break;
            }
            let at = pair[0] as usize % body.len();
            match pair[1] % 4 {
                0 => body[at] ^= 1 << (pair[1] % 8),
                1 => {
                    body.remove(at);
                }
                2 => body.insert(at, body[at]),
                _ => {
                    let end = (at + 1 + pair[1] as usize % 64).min(body.len());
                    body.drain(at..end);
                }
            }
        }
        let (events, response) = decode(seed, &body);
        check_well_formed(&body, &events, &response).map_err(|e| TestCaseError::fail(format!("{}: {e}", seed.name)))
    });
}

#[test]
fn damaged_json_decodes_well_formed() {
    run(4_000, |seed, params| {
        let Some(body) = damage_json(&seed.body, params) else { return Ok(()) };
        let (events, response) = decode(seed, &body);
        check_well_formed(&body, &events, &response).map_err(|e| {
            TestCaseError::fail(format!(
                "{}: {e}\n--- damaged stream ---\n{}",
                seed.name,
                String::from_utf8_lossy(&body)
            ))
        })
    });
}

/// The stream with one of its JSON events damaged (SSE `data:` lines and NDJSON lines
/// alike); `None` when it has no JSON line.
fn damage_json(body: &[u8], params: &[u32]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let json_lines: Vec<usize> = (0..lines.len()).filter(|&i| json_of(&lines[i]).is_some()).collect();
    if json_lines.is_empty() {
        return None;
    }
    let at = json_lines[params[0] as usize % json_lines.len()];
    match params[1] % 8 {
        // The event repeated, or dropped.
        0 => {
            let line = lines[at].clone();
            lines.insert(at, line);
        }
        1 => lines[at].clear(),
        _ => {
            let (prefix, mut value) = json_of(&lines[at])?;
            let paths = paths(&value);
            let path = &paths[params[2] as usize % paths.len()];
            damage_value(&mut value, path, params[3], params[4]);
            lines[at] = format!("{prefix}{value}");
        }
    }
    Some(lines.join("\n").into_bytes())
}

/// The line's prefix (`data: ` or nothing) and its JSON.
fn json_of(line: &str) -> Option<(&'static str, Value)> {
    let (prefix, json) = match line.strip_prefix("data:") {
        Some(rest) => ("data: ", rest.trim_start()),
        None => ("", line),
    };
    let value: Value = serde_json::from_str(json).ok()?;
    value.is_object().then_some((prefix, value))
}

/// JSON pointers of every value below the root.
fn paths(value: &Value) -> Vec<String> {
    let mut out = vec![String::new()];
    fn walk(value: &Value, at: &str, out: &mut Vec<String>) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map.iter().map(|(k, v)| (k.replace('~', "~0").replace('/', "~1"), v)).collect(),
            Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
            _ => return,
        };
        for (key, child) in children {
            let path = format!("{at}/{key}");
            out.push(path.clone());
            walk(child, &path, out);
        }
    }
    walk(value, "", &mut out);
    out
}

/// Removes the value at `path` or replaces it with one of another shape.
fn damage_value(root: &mut Value, path: &str, how: u32, size: u32) {
    let replacement = match how % 10 {
        0 => Value::Null,
        1 => Value::Bool(true),
        2 => serde_json::json!(-1),
        3 => serde_json::json!(1e300),
        4 => serde_json::json!(u64::MAX),
        5 => Value::String(String::new()),
        6 => Value::String("\u{0}\u{fffd}𝄞".repeat(1 + size as usize % 8)),
        7 => Value::Array(Vec::new()),
        8 => serde_json::json!({}),
        _ => {
            // Removed (from an object), or emptied (anywhere else).
            if let Some((parent, key)) = path.rsplit_once('/') {
                if let Some(Value::Object(map)) = root.pointer_mut(parent) {
                    map.remove(&key.replace("~1", "/").replace("~0", "~"));
                    return;
                }
            }
            Value::Null
        }
    };
    if let Some(slot) = root.pointer_mut(path) {
        *slot = replacement;
    }
}
