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
use omni_protocol::transport::MAX_DEPTH;
use omni_protocol::{dialect::decode_body, Dialect, Response, StreamEvent};
use omni_testkit::check::wire::{self, json_pointers};
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

/// A decode by the test kit's `wire::decode`, which catches a panic: one is reported with
/// the seed's name.
fn decode(seed: &Seed, body: &[u8]) -> (Vec<StreamEvent>, Response) {
    match wire::decode(seed.dialect, "model", body, &[]) {
        Ok(decoded) => (decoded.events, decoded.response),
        Err(panicked) => panic!("{}: {panicked}", seed.name),
    }
}

/// The invariants every decode holds, damaged input or not: the test kit's
/// (`omni_testkit::check::wire::well_formed`, what users' formats are held to): exactly
/// one terminal event, last; blocks well formed; no more events than bytes, no more
/// content than bytes.
fn check_well_formed(body: &[u8], events: &[StreamEvent], response: &Response) -> Result<(), String> {
    wire::well_formed(body, &wire::Decoded { events: events.to_vec(), response: response.clone() })
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
            let paths = json_pointers(&value);
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

// ---------------------------------------------------------------------------------------
// Deep structures (issue 10: a 28 KB Gemini event aborted the process).

/// Depths of the deep cases: one past omni's bound (still within serde_json's parser,
/// whose recursion limit is 128), and the 28 KB event of issue 10 (far past both).
const DEPTHS: [usize; 2] = [MAX_DEPTH + 1, 14_000];
/// The stack each deep case is decoded on: a recursion without a bound overflows it
/// at once (and aborts the test binary, naming the case in the thread's name).
const SMALL_STACK: usize = 256 * 1024;
/// Stands for the deep value in a serialised event, before it is spliced in.
const MARK: &str = "\u{1}deep\u{1}";

/// JSON text nested `depth` levels: arrays, or objects.
fn deep_text(objects: bool, depth: usize) -> String {
    if objects {
        format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
    } else {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }
}

/// Runs `f` on a thread with a [`SMALL_STACK`], named `name`.
fn on_small_stack<T: Send + 'static>(name: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .name(name)
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("a thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// What a deep case's decode is held to, on top of [`check_well_formed`]: the response
/// serialises and drops (on the small stack), and no tool input in it is nested deeper
/// than the bound. Returns the tool input errors seen.
fn decode_deep(dialect: Dialect, body: Vec<u8>) -> Result<Vec<String>, String> {
    // Decoded directly, not through the kit's panic-catching `decode`: this measures the
    // decoder's own stack, and the wrapper's frames would eat into the small stack.
    let (events, response) = decode_body(dialect, "model", &body);
    check_well_formed(&body, &events, &response)?;
    serde_json::to_string(&response).map_err(|e| e.to_string())?;
    for call in response.message.tool_uses() {
        if omni_protocol::transport::too_deep(&call.input, MAX_DEPTH) {
            return Err(format!("tool call {} has an input nested deeper than {MAX_DEPTH}", call.id));
        }
    }
    let input_errors = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseEnd { input_error: Some(error), .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    Ok(input_errors)
}

/// Every JSON value of every event of every fixture, once per dialect, event type and
/// place, replaced by a deep array and a deep object (and, where tool arguments travel as
/// text, by a string holding deep JSON), at each of [`DEPTHS`]; each decoded on a small
/// stack.
#[test]
fn deep_structures_in_every_field_decode_on_a_small_stack() {
    let cases = stream_cases(&fixtures_root()).unwrap_or_else(|e| panic!("cannot load fixtures: {e}"));
    let mut seen = BTreeSet::new();
    let mut deep_tool_inputs = BTreeSet::new();
    let mut decoded = 0;
    for case in &cases {
        let Ok(text) = std::str::from_utf8(&case.body) else { continue };
        let lines: Vec<&str> = text.split('\n').collect();
        for (at, line) in lines.iter().enumerate() {
            let Some((prefix, value)) = json_of(line) else { continue };
            let kind = value.get("type").and_then(Value::as_str).unwrap_or("").to_string();
            for path in json_pointers(&value).into_iter().filter(|p| !p.is_empty()) {
                let place = path.split('/').map(|s| if s.parse::<u32>().is_ok() { "#" } else { s });
                let place = place.collect::<Vec<_>>().join("/");
                // Tool arguments stream as pieces of JSON text: each piece is tried (one that
                // is the whole input reaches the check of the parsed input); other places once.
                let arguments = ["partial_json", "arguments", "delta"].iter().any(|k| path.ends_with(&format!("/{k}")));
                let key = (case.dialect.name(), kind.clone(), place.clone());
                let every_piece = arguments && value.pointer(&path).is_some_and(Value::is_string);
                if !seen.insert(key) && !every_piece {
                    continue;
                }
                let mut marked = value.clone();
                *marked.pointer_mut(&path).expect("the path exists") = Value::String(MARK.into());
                let marked = format!("{prefix}{marked}");
                let quoted_mark = serde_json::to_string(MARK).expect("a string");
                for depth in DEPTHS {
                    let mut shapes = vec![("arrays", deep_text(false, depth)), ("objects", deep_text(true, depth))];
                    if arguments {
                        shapes.push(("text", serde_json::to_string(&deep_text(true, depth)).expect("a string")));
                    }
                    for (shape, deep) in shapes {
                        let mut body_lines = lines.clone();
                        let line = marked.replacen(&quoted_mark, &deep, 1);
                        body_lines[at] = &line;
                        let body = body_lines.join("\n").into_bytes();
                        let dialect = case.dialect;
                        let name = format!("{} {}{place} ({kind}): {shape} x{depth}", case.name, dialect.name());
                        let outcome = on_small_stack(name.clone(), move || decode_deep(dialect, body));
                        match outcome {
                            Ok(errors) if errors.iter().any(|e| e.contains("nested deeper")) => {
                                deep_tool_inputs.insert(dialect.name());
                            }
                            Ok(_) => {}
                            Err(e) => panic!("{name}: {e}"),
                        }
                        decoded += 1;
                    }
                }
            }
        }
    }
    println!("{decoded} deep structures decoded on a {} KiB stack", SMALL_STACK / 1024);
    // Each dialect's tool arguments were reached: a too deep input is kept as text, typed.
    let all: BTreeSet<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
    assert_eq!(deep_tool_inputs, all, "a deep tool input was refused in every dialect");
}

/// Gemini's `partialArgs` (Vertex AI's streamed function arguments): a leaf path of
/// 14,000 segments, the 28 KB event that aborted the process, ends the stream with a
/// typed decode error; a path at the bound is assembled.
#[test]
fn a_deep_partial_args_path_is_a_typed_error_on_a_small_stack() {
    for (segments, fails) in [(14_000, true), (MAX_DEPTH, false), (MAX_DEPTH + 1, true)] {
        let body = deep_partial_args_event(segments);
        let name = format!("google_gemini partialArgs x{segments}");
        let (events, input) = on_small_stack(name, move || {
            let (events, response) = decode_body(Dialect::GoogleGemini, "model", &body);
            check_well_formed(&body, &events, &response).unwrap_or_else(|e| panic!("{e}"));
            serde_json::to_string(&response).expect("the response serialises");
            let input = response.message.tool_uses().next().map(|call| call.input.clone());
            (events, input)
        });
        match events.last() {
            Some(StreamEvent::Error { error }) if fails => {
                let omni_protocol::StreamError::Decode { message, .. } = &**error else {
                    panic!("{segments} segments: a decode error, not {error:?}")
                };
                assert!(message.contains("deeper than 64"), "{message}");
            }
            Some(StreamEvent::Done { .. }) if !fails => {
                let input = input.expect("the call");
                assert!(
                    !omni_protocol::transport::too_deep(&input, MAX_DEPTH)
                        && omni_protocol::transport::too_deep(&input, MAX_DEPTH - 1)
                );
            }
            other => panic!("{segments} segments: {other:?}"),
        }
    }
}

/// One Gemini event: a streamed call whose single leaf's path has `segments` segments.
fn deep_partial_args_event(segments: usize) -> Vec<u8> {
    let path = format!("${}", ".a".repeat(segments));
    let chunk = serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {
        "name": "f", "partialArgs": [{"jsonPath": path, "stringValue": "x"}], "willContinue": true
    }}]}}]});
    let end = serde_json::json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {}}]},
        "finishReason": "STOP"}]});
    format!("data: {chunk}\r\n\r\ndata: {end}\r\n\r\n").into_bytes()
}

// ---------------------------------------------------------------------------------------
// Deep schemas and deep tool inputs, from an application or a model.

/// The deepest value JSON text can give (serde_json's parser stops at 128 levels).
const PARSER_DEPTH: usize = 127;

/// A value nested `depth` levels of objects, parsed from text as an application or a
/// model would hand it over.
fn deep_value(depth: usize) -> Value {
    serde_json::from_str(&deep_text(true, depth)).expect("within the parser's limit")
}

/// A schema of `levels` nested object properties (two JSON levels each).
fn deep_schema(levels: usize) -> Value {
    let text = format!(
        "{}{{\"type\":\"string\"}}{}",
        r#"{"type":"object","properties":{"a":"#.repeat(levels),
        "}}".repeat(levels)
    );
    serde_json::from_str(&text).expect("within the parser's limit")
}

/// Definitions that chain one into the next, each referenced with a sibling keyword (so
/// adapters inline it): a schema a few levels deep that inlines into thousands of levels.
fn chained_definitions(links: usize, all_of: bool) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..links {
        let next = serde_json::json!({"$ref": format!("#/$defs/d{}", i + 1), "description": "next"});
        let def = if all_of {
            serde_json::json!({"allOf": [next], "description": "link"})
        } else {
            serde_json::json!({"type": "object", "properties": {"n": next}, "required": ["n"]})
        };
        defs.insert(format!("d{i}"), def);
    }
    defs.insert(format!("d{links}"), serde_json::json!({"type": "object", "properties": {}}));
    serde_json::json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/d0", "description": "start"}},
        "required": ["root"], "$defs": defs})
}

/// A schema adapter of `omni_protocol::schema::adapt`.
type Adapter = fn(&Value) -> (Value, Vec<omni_protocol::Warning>);

#[test]
fn deep_schemas_are_refused_or_adapted_within_the_bound_on_a_small_stack() {
    use omni_protocol::schema::{adapt, JsonSchemaValidator};
    on_small_stack("deep schemas".into(), || {
        // Compiling: at the bound it works, past it a typed refusal.
        assert!(JsonSchemaValidator::new(deep_schema(MAX_DEPTH / 2 - 1)).is_ok());
        for levels in [MAX_DEPTH / 2 + 1, PARSER_DEPTH / 2] {
            let err = JsonSchemaValidator::new(deep_schema(levels)).expect_err("too deep");
            assert!(err.to_string().contains("deeper than 64 levels"), "{err}");
        }
        // Adapting: a schema as deep as text allows, and chains of references that inline
        // into thousands of levels, come back within twice the bound, with a warning.
        let adapters: [(&str, Adapter); 3] =
            [("openai", adapt::openai_strict), ("gemini", adapt::gemini), ("anthropic", adapt::anthropic_output)];
        for schema in [chained_definitions(200, false), chained_definitions(200, true), deep_schema(PARSER_DEPTH / 2)] {
            for (name, adapter) in adapters {
                let (adapted, warnings) = adapter(&schema);
                assert!(!omni_protocol::transport::too_deep(&adapted, 2 * MAX_DEPTH), "{name}: adapted too deep");
                assert!(!warnings.is_empty(), "{name}: the change is reported");
                serde_json::to_string(&adapted).expect("serialises");
            }
        }
    });
}

#[test]
fn deep_tool_inputs_are_refused_by_validation_and_request_building_on_a_small_stack() {
    use omni_protocol::schema::{adapt, JsonSchemaValidator, Validator};
    use omni_protocol::Catalogue;
    use omni_protocol::{
        dialect::RequestSpec, ApiKey, Block, Context, Message, Model, Options, RequestError, Role, ToolUse,
    };
    on_small_stack("deep tool inputs".into(), || {
        // A recursive schema, so the validator would follow the value all the way down.
        let schema = serde_json::json!({"$defs": {"n": {"type": ["object", "integer"],
            "properties": {"a": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"});
        let validator = JsonSchemaValidator::new(schema).expect("a schema");
        assert!(validator.validate(&deep_value(MAX_DEPTH)).is_ok(), "at the bound");
        for depth in [MAX_DEPTH + 1, PARSER_DEPTH] {
            let err = validator.validate(&deep_value(depth)).expect_err("too deep");
            assert!(err.message.contains("deeper than 64 levels"), "{err}");
            let err = adapt::validate_adapted(&validator, &deep_value(depth)).expect_err("too deep");
            assert!(err.message.contains("deeper than 64 levels"), "{err}");
        }
        // A tool call in the history with an input past the bound: a typed refusal.
        let catalogue = Catalogue::builtin().expect("the catalogue");
        let call = ToolUse {
            invalid: None,
            id: "call_1".into(),
            name: "f".into(),
            input: deep_value(PARSER_DEPTH),
            signature: None,
        };
        let context = Context {
            messages: vec![Message::user("hi"), Message::new(Role::Assistant, vec![Block::ToolUse(call)])],
            ..Context::default()
        };
        for dialect in Dialect::ALL {
            let provider = catalogue.providers().find(|p| p.id == provider_of(dialect)).expect("a provider");
            let model = Model::new(provider.id.clone(), "m", dialect);
            let options = Options::default();
            let key = ApiKey::new("sk-deep");
            let spec =
                RequestSpec { model: &model, provider, context: &context, options: &options, api_key: Some(&key) };
            match dialect.build_request(&spec) {
                Err(RequestError::TooDeep { what }) => assert!(what.contains("call_1"), "{what}"),
                other => panic!("{}: {other:?}", dialect.name()),
            }
        }
    });
}

fn provider_of(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::AnthropicMessages => "anthropic",
        Dialect::OpenaiCompletions | Dialect::OpenaiResponses => "openai",
        Dialect::GoogleGemini => "google",
        _ => "ollama",
    }
}
