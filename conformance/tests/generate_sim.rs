//! The generate scenarios on the virtual clock: each transcript must match the file in
//! `conformance/transcripts/` (the drivers are held to the same files), and each
//! scenario's defining property is asserted here explicitly.

use std::path::Path;
use std::time::Duration;

use omni_conformance::fixtures::check_or_bless;
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{simulate, BodyStep, Reply, SimResult};
use omni_protocol::generate::{GenerateConfig, GenerateError};
use omni_protocol::{Block, ProviderErrorKind, Role, StopReason};

fn run(name: &str) -> (NamedScenario, SimResult) {
    let scenario =
        scenarios::all().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no scenario {name}"));
    let result = simulate(scenarios::config(&scenario, "http://replay.invalid/v1"), &scenario.scenario);
    (scenario, result)
}

fn transcripts_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts")
}

#[test]
fn every_scenario_matches_its_transcript() {
    let mut failures = Vec::new();
    for scenario in scenarios::all() {
        let result = simulate(scenarios::config(&scenario, "http://replay.invalid/v1"), &scenario.scenario);
        let text = result.transcript.join("\n") + "\n";
        if let Err(diff) = check_or_bless(&transcripts_dir().join(format!("{}.txt", scenario.name)), &text) {
            failures.push(diff);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn text_stream_finishes_with_the_text() {
    let (_, r) = run("text_stream");
    let response = r.response.expect("a response");
    assert_eq!(response.text(), "It is sunny and noon.");
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
    assert_eq!(r.requests.len(), 1);
    assert_eq!(r.requests[0].header("x-api-key"), Some("sk-replay"));
}

#[test]
fn two_step_loop_runs_both_tools_in_parallel_and_sends_results_in_call_order() {
    let (_, r) = run("two_step_tool_loop");
    let response = r.response.expect("a response");
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
    assert_eq!(response.messages.len(), 3, "assistant (tools), user (results), assistant (answer)");
    // Both tools were started before either finished.
    let runs: Vec<&String> = r.effects.iter().filter(|e| e.starts_with("run tool")).collect();
    assert_eq!(runs.len(), 2);
    // Results keep the order of the calls, whatever order they finished in.
    let results: Vec<String> = response.messages[1]
        .content
        .iter()
        .filter_map(|b| if let Block::ToolResult(r) = b { Some(r.tool_use_id.clone()) } else { None })
        .collect();
    assert_eq!(results, ["toolu_1", "toolu_2"]);
    assert_eq!(response.messages[1].role, Role::User);
    let second: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
    let text = second.to_string();
    assert!(text.contains("tool_result") && text.contains("sunny") && text.contains("12:00"), "{text}");
    // Parallel, not in sequence: get_time (10 ms) reports before get_weather (150 ms)
    // although it was called second.
    let order: Vec<usize> = ["get_time", "get_weather"]
        .iter()
        .map(|t| r.transcript.iter().position(|l| l.contains("tool_result") && l.contains(t)).expect("a result"))
        .collect();
    assert!(order[0] < order[1], "{:?}", r.transcript);
}

#[test]
fn a_hung_tool_times_out_into_an_error_result() {
    let (_, r) = run("tool_timeout");
    assert!(r.effects.iter().any(|e| e.starts_with("cancel tool")), "{:?}", r.effects);
    let response = r.response.expect("a response");
    let result = response.messages[1]
        .content
        .iter()
        .find_map(|b| if let Block::ToolResult(r) = b { Some(r.clone()) } else { None })
        .expect("a tool result");
    assert!(result.is_error);
    assert!(result.text_content().contains("timed out"), "{}", result.text_content());
}

#[test]
fn a_hermes_call_runs_and_its_result_goes_back_as_a_tool_response() {
    let (_, r) = run("hermes_tool_loop");
    let runs: Vec<&String> = r.effects.iter().filter(|e| e.starts_with("run tool")).collect();
    assert!(runs.len() == 1 && runs[0].ends_with(r#"get_weather {"city":"Paris"}"#), "{:?}", r.effects);
    assert_eq!(r.requests.len(), 2);
    let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
    // The call written back as the Hermes/Qwen templates write it, the result in their
    // <tool_response> layout, not omni's default <tool_result> element.
    let call = r#"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"#;
    assert!(second.contains(call), "{second}");
    assert!(second.contains(r#"<tool_response>\nsunny\n</tool_response>"#), "{second}");
    assert!(!second.contains("<tool_result"), "{second}");
    assert_eq!(r.response.expect("a response").text(), "It is sunny and noon.");
}

#[test]
fn an_unknown_tool_gets_an_error_result_the_model_sees() {
    let (_, r) = run("unknown_tool");
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
    let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
    assert!(second.contains("unknown tool"), "{second}");
    assert_eq!(r.response.expect("a response").stop_reason, Some(StopReason::Stop));
}

#[test]
fn rate_limit_waits_for_retry_after() {
    let (_, r) = run("rate_limited_then_ok");
    assert_eq!(r.requests.len(), 2);
    assert!(r.elapsed >= Duration::from_secs(1), "retry-after: 1 was honoured: {:?}", r.elapsed);
    assert_eq!(r.response.expect("a response").stop_reason, Some(StopReason::Stop));
}

#[test]
fn server_errors_are_retried_twice() {
    let (_, r) = run("server_error_twice_then_ok");
    assert_eq!(r.requests.len(), 3);
    assert!(r.error.is_none());
}

#[test]
fn unauthorized_is_not_retried() {
    let (_, r) = run("unauthorized");
    assert_eq!(r.requests.len(), 1);
    match r.error {
        Some(GenerateError::Provider(e)) => {
            assert_eq!(e.kind, ProviderErrorKind::Authentication);
            assert!(e.body.unwrap_or_default().contains("invalid x-api-key"));
        }
        other => panic!("expected an authentication error, got {other:?}"),
    }
}

#[test]
fn a_reset_after_content_fails_with_the_partial_response() {
    let (_, r) = run("reset_after_content");
    assert_eq!(r.requests.len(), 1, "content reached the caller: no silent retry");
    assert!(matches!(r.error, Some(GenerateError::Transport(_))), "{:?}", r.error);
    assert_eq!(r.response.expect("partial").text(), "It is ");
}

#[test]
fn pings_alone_stall_and_the_request_is_retried() {
    let (_, r) = run("stall_of_pings_then_ok");
    assert_eq!(r.requests.len(), 2);
    assert!(r.transcript.iter().any(|l| l.contains("retry 1 after stalled")), "{:?}", r.transcript);
    assert!(r.effects.iter().any(|e| e == "cancel request #0"));
    assert_eq!(r.response.expect("a response").text(), "It is sunny and noon.");
}

#[test]
fn cancel_mid_stream_keeps_what_was_received() {
    let (_, r) = run("cancel_mid_stream");
    assert!(r.effects.iter().any(|e| e == "cancel request #0"));
    let response = r.response.expect("a response");
    assert_eq!(response.stop_reason, Some(StopReason::Cancelled));
    assert_eq!(response.text(), "It is ");
}

#[test]
fn cancel_during_a_tool_call_cancels_the_tool() {
    let (_, r) = run("cancel_during_tool_call");
    assert!(r.effects.iter().any(|e| e.starts_with("cancel tool")), "{:?}", r.effects);
    let response = r.response.expect("a response");
    assert_eq!(response.stop_reason, Some(StopReason::Cancelled));
    assert_eq!(r.requests.len(), 1);
}

#[test]
fn a_tool_without_handler_ends_the_loop_and_returns_the_calls() {
    use omni_conformance::scenarios::{paced, tool_events};
    use omni_conformance::sim::Scenario;
    let named = scenarios::all().into_iter().find(|s| s.name == "text_stream").expect("scenario");
    let mut config = scenarios::config(&named, "http://replay.invalid/v1");
    for tool in &mut config.tools {
        tool.executable = false; // schema-only: the caller handles the calls
    }
    let reply = paced(&tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]), Duration::ZERO);
    let r = simulate(config, &Scenario { replies: vec![reply], ..Scenario::default() });
    assert_eq!(r.requests.len(), 1);
    assert!(!r.effects.iter().any(|e| e.starts_with("run tool")));
    let response = r.response.expect("a response");
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    let calls: Vec<_> = response.message.tool_uses().map(|t| (t.name.clone(), t.input.clone())).collect();
    assert_eq!(calls, [("get_weather".to_string(), serde_json::json!({"city": "Paris"}))]);
}

#[test]
fn max_steps_stops_the_loop_with_the_pending_calls() {
    use omni_conformance::scenarios::{paced, tool_events};
    use omni_conformance::sim::Scenario;
    let named = scenarios::all().into_iter().find(|s| s.name == "two_step_tool_loop").expect("scenario");
    let mut config = scenarios::config(&named, "http://replay.invalid/v1");
    config.options.max_steps = Some(1);
    let reply = paced(&tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]), Duration::ZERO);
    let r = simulate(config, &Scenario { replies: vec![reply], tools: named.scenario.tools.clone(), cancel_at: None });
    assert_eq!(r.requests.len(), 1, "one step allowed");
    assert_eq!(r.response.expect("a response").stop_reason, Some(StopReason::ToolUse));
}

#[test]
fn a_forced_tool_choice_is_released_once_a_tool_was_called() {
    let scenario = scenarios::all().into_iter().find(|s| s.name == "two_step_tool_loop").expect("scenario");
    let mut config = scenarios::config(&scenario, "http://replay.invalid/v1");
    config.options.tool_choice = Some(omni_protocol::ToolChoice::Tool("get_weather".into()));
    let r = simulate(config, &scenario.scenario);
    assert_eq!(r.response.expect("a response").stop_reason, Some(StopReason::Stop));
    let bodies: Vec<serde_json::Value> =
        r.requests.iter().map(|q| serde_json::from_slice(&q.body).expect("JSON body")).collect();
    assert_eq!(bodies.len(), 2);
    // The first step is forced; forcing the second too would loop until max_steps.
    assert_eq!(bodies[0]["tool_choice"], serde_json::json!({"type": "tool", "name": "get_weather"}));
    assert!(bodies[1].get("tool_choice").is_none(), "{}", bodies[1]);
    assert!(bodies[1]["tools"].is_array(), "the tools are still offered");
}

/// `rate_limited_then_ok` with the 429's `retry-after` set to `wait`, and `policy`.
fn rate_limited_for(wait: &str, policy: omni_protocol::generate::RetryPolicy) -> SimResult {
    let mut scenario = scenarios::all().into_iter().find(|s| s.name == "rate_limited_then_ok").expect("the scenario");
    let Reply::Http { headers, .. } = &mut scenario.scenario.replies[0] else { panic!("an HTTP reply") };
    *headers = vec![("retry-after".into(), wait.into())];
    let mut config = scenarios::config(&scenario, "http://replay.invalid/v1");
    config.retry = policy;
    simulate(config, &scenario.scenario)
}

#[test]
fn a_retry_after_past_the_policy_fails_at_once_with_the_wait_it_asked_for() {
    let policy = omni_protocol::generate::RetryPolicy { seed: 7, ..Default::default() };
    for wait in ["86400", "172800", "61"] {
        let r = rate_limited_for(wait, policy);
        assert_eq!(r.requests.len(), 1, "retry-after {wait}: not retried after a short backoff");
        assert!(r.elapsed < Duration::from_secs(1), "retry-after {wait}: failed at once: {:?}", r.elapsed);
        match r.error {
            Some(GenerateError::Provider(e)) => {
                assert_eq!(e.kind, ProviderErrorKind::RateLimited);
                assert_eq!(e.retry_after, Some(Duration::from_secs(wait.parse().expect("seconds"))));
            }
            other => panic!("retry-after {wait}: expected a rate-limit error, got {other:?}"),
        }
    }
}

#[test]
fn a_retry_after_within_the_policy_is_waited_for() {
    let day = Duration::from_secs(86_400);
    let policy = omni_protocol::generate::RetryPolicy { seed: 7, max_retry_after: 2 * day, ..Default::default() };
    let r = rate_limited_for("86400", policy);
    assert_eq!(r.requests.len(), 2);
    assert!(r.elapsed >= day && r.elapsed < day + Duration::from_secs(5), "waited the day: {:?}", r.elapsed);
    assert!(r.transcript.iter().any(|l| l.contains("retry 1 after")), "{:?}", r.transcript);
    assert_eq!(r.response.expect("a response").stop_reason, Some(StopReason::Stop));
    // The default maximum is the official SDKs' 60 s: waited for, to the second.
    let r = rate_limited_for("60", omni_protocol::generate::RetryPolicy { seed: 7, ..Default::default() });
    assert_eq!(r.requests.len(), 2);
    assert!(r.elapsed >= Duration::from_secs(60), "{:?}", r.elapsed);
}

/// A server that accepts every request and never sends a byte.
fn silent_server(policy: omni_protocol::generate::RetryPolicy) -> SimResult {
    let mut scenario = scenarios::all().into_iter().find(|s| s.name == "text_stream").expect("the scenario");
    let silent = Reply::Http { status: 200, headers: Vec::new(), body: vec![BodyStep::Hang] };
    scenario.scenario.replies = vec![silent; 4];
    let mut config = scenarios::config(&scenario, "http://replay.invalid/v1");
    config.stall_timeout = omni_protocol::generate::DEFAULT_STALL_TIMEOUT;
    config.retry = policy;
    simulate(config, &scenario.scenario)
}

#[test]
fn by_default_a_silent_server_holds_a_call_two_stalls_not_three() {
    let stall = omni_protocol::generate::DEFAULT_STALL_TIMEOUT;
    assert_eq!(stall, Duration::from_secs(120));
    let r = silent_server(omni_protocol::generate::RetryPolicy { seed: 7, ..Default::default() });
    assert_eq!(r.requests.len(), 2, "one retry after a stall: {:?}", r.transcript);
    assert!(matches!(r.error, Some(GenerateError::Stalled(_))), "{:?}", r.error);
    // Two stalls and one backoff (at most 0.5 s before jitter).
    assert!(r.elapsed >= 2 * stall && r.elapsed < 2 * stall + Duration::from_secs(1), "{:?}", r.elapsed);
    // The knob gives the old behaviour back: three stalls, six minutes.
    let patient = omni_protocol::generate::RetryPolicy { seed: 7, max_stall_retries: 2, ..Default::default() };
    let r = silent_server(patient);
    assert_eq!(r.requests.len(), 3);
    assert!(r.elapsed >= 3 * stall, "{:?}", r.elapsed);
    // Other failures keep both retries: stalls are counted on their own.
    let (_, r) = run("server_error_twice_then_ok");
    assert_eq!(r.requests.len(), 3);
}

// ---- Every wire: the same five scenarios in each dialect's documented format ----

mod wires {
    use std::time::Duration;

    use std::collections::{BTreeMap, BTreeSet};

    use omni_conformance::fixtures::{check_or_bless, fixtures_root};
    use omni_conformance::scenarios::NamedScenario;
    use omni_conformance::sim::{simulate, BodyStep, Reply, SimResult};
    use omni_conformance::wires::{Wire, KEY};
    use omni_protocol::generate::GenerateError;
    use omni_protocol::{StopReason, StreamError};

    const BASE: &str = "http://replay.invalid";

    fn run(wire: Wire, name: &str) -> (NamedScenario, SimResult) {
        let mut all = wire.scenarios();
        all.extend(wire.cuts_inside_an_event());
        let scenario = all.into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no {name}"));
        let result = simulate(wire.config(&scenario, &wire.base_url(BASE)), &scenario.scenario);
        (scenario, result)
    }

    /// Runs `check` on `scenario` of every wire, naming the wire in a failure.
    fn each_wire(scenario: &str, check: impl Fn(Wire, SimResult)) {
        for wire in Wire::all() {
            let (_, result) = run(wire, scenario);
            let transcript = result.transcript.clone();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(wire, result)));
            if let Err(panic) = outcome {
                let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                panic!("{}/{scenario}: {message}\ntranscript: {transcript:#?}", wire.name());
            }
        }
    }

    #[test]
    fn every_wire_scenario_matches_its_transcript() {
        let mut failures = Vec::new();
        for wire in Wire::all() {
            for scenario in wire.scenarios() {
                let result = simulate(wire.config(&scenario, &wire.base_url(BASE)), &scenario.scenario);
                let text = result.transcript.join("\n") + "\n";
                if let Err(diff) = check_or_bless(&wire.transcript_path(scenario.name), &text) {
                    failures.push(diff);
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// Every key path of a JSON value (`choices[].delta.content`), array items merged.
    fn key_paths(value: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    let path = format!("{prefix}.{key}");
                    // A tool call's arguments are the model's own data, not the format.
                    if !matches!(key.as_str(), "args" | "arguments" | "input") {
                        key_paths(inner, &path, out);
                    }
                    out.insert(path);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| key_paths(v, &format!("{prefix}[]"), out)),
            _ => {}
        }
    }

    /// The events of a streamed body, each as (kind, key paths): the kind is the SSE
    /// `event:` name, else the payload's `type`, else empty (NDJSON lines, chunks).
    fn event_shapes(body: &str) -> Vec<(String, BTreeSet<String>)> {
        let body = body.replace("\r\n", "\n");
        let payloads: Vec<(String, &str)> = if body.trim_start().starts_with('{') {
            body.lines().filter(|l| !l.trim().is_empty()).map(|l| (String::new(), l)).collect()
        } else {
            body.split("\n\n")
                .filter(|e| !e.trim().is_empty())
                .map(|event| {
                    let field = |name: &str| event.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
                    (field("event:").unwrap_or_default().to_string(), field("data:").unwrap_or_default())
                })
                .collect()
        };
        payloads
            .into_iter()
            .map(|(event, data)| {
                let value: serde_json::Value = serde_json::from_str(data).unwrap_or(serde_json::Value::Null);
                let kind =
                    if event.is_empty() { value["type"].as_str().unwrap_or_default().to_string() } else { event };
                let mut paths = BTreeSet::new();
                key_paths(&value, "", &mut paths);
                (if data == "[DONE]" { data.to_string() } else { kind }, paths)
            })
            .collect()
    }

    /// The scripted bodies use only what the project's fixtures of the same wire use
    /// (`conformance/fixtures/<dialect>/`, each citing the provider's documentation and
    /// real recordings): every event kind, and every field at its place in that kind.
    #[test]
    fn every_wire_body_uses_only_the_documented_shapes_of_its_fixtures() {
        let mut failures = Vec::new();
        for wire in Wire::all() {
            let mut known: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for case in ["text", "tool_call", "parallel_tool_calls", "multi_block_text", "cut_before_stop"] {
                let dir = fixtures_root().join(wire.name()).join(case);
                let body = ["body.sse", "body.ndjson"]
                    .iter()
                    .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
                    .unwrap_or_else(|| panic!("{}: no body", dir.display()));
                for (kind, paths) in event_shapes(&body) {
                    known.entry(kind).or_default().extend(paths);
                }
            }
            let scenarios = wire.scenarios().into_iter().chain(wire.cuts_inside_an_event());
            for reply in scenarios.flat_map(|s| s.scenario.replies) {
                let Reply::Http { status: 200, body, .. } = reply else { continue };
                let bytes: Vec<u8> = body
                    .into_iter()
                    .filter_map(|step| if let BodyStep::Bytes(b) = step { Some(b) } else { None })
                    .flatten()
                    .collect();
                for (kind, paths) in event_shapes(&String::from_utf8_lossy(&bytes)) {
                    match known.get(&kind) {
                        // A cut event is no event: only whole ones are compared.
                        _ if paths.is_empty() && kind != "[DONE]" => {}
                        None => failures.push(format!("{}: event {kind:?} is in no fixture", wire.name())),
                        Some(documented) => {
                            let extra: Vec<_> = paths.difference(documented).collect();
                            if !extra.is_empty() {
                                failures
                                    .push(format!("{}: {kind:?} has fields no fixture has: {extra:?}", wire.name()));
                            }
                        }
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn every_wire_has_the_same_scenarios() {
        for wire in Wire::all() {
            let names: Vec<_> = wire.scenarios().iter().map(|s| s.name).collect();
            assert_eq!(
                names,
                [
                    "text_stream",
                    "two_step_tool_loop",
                    "xml_tool_loop",
                    "json_tool_loop",
                    "provider_error",
                    "rate_limited_then_ok",
                    "cut_stream",
                    "text_in_small_chunks"
                ],
                "{}",
                wire.name()
            );
        }
    }

    #[test]
    fn every_wire_streams_the_text_to_the_documented_endpoint_with_its_key() {
        each_wire("text_stream", |wire, r| {
            let response = r.response.expect("a response");
            assert_eq!(response.text(), "It is sunny and noon.");
            assert_eq!(response.stop_reason, Some(StopReason::Stop));
            assert!(response.usage.output_tokens > 0, "usage was read: {:?}", response.usage);
            assert_eq!(r.requests.len(), 1);
            let path = r.requests[0].url.trim_start_matches(BASE).to_string();
            let documented = match wire.name() {
                "anthropic_messages" => "/v1/messages",
                "openai_completions" => "/v1/chat/completions",
                "openai_responses" => "/v1/responses",
                "google_gemini" => "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                _ => "/api/chat",
            };
            assert_eq!(path, documented);
            match wire.key_header() {
                Some((name, value)) => assert_eq!(r.requests[0].header(name), Some(value.as_str())),
                None => assert!(!String::from_utf8_lossy(&r.requests[0].body).contains(KEY)),
            }
        });
    }

    #[test]
    fn every_wire_reads_the_text_the_same_in_7_byte_chunks() {
        each_wire("text_in_small_chunks", |wire, r| {
            let expected = std::fs::read_to_string(wire.transcript_path("text_stream")).expect("transcript");
            assert_eq!(r.transcript.join("\n") + "\n", expected);
            let Some(Reply::Http { body, .. }) = wire.scenarios().pop().map(|s| s.scenario.replies[0].clone()) else {
                panic!("a reply")
            };
            assert!(body.len() > 100, "the body really goes in many pieces: {}", body.len());
        });
    }

    #[test]
    fn every_wire_runs_both_tools_and_sends_the_results_back_in_its_own_shape() {
        each_wire("two_step_tool_loop", |wire, r| {
            let runs: Vec<&String> = r.effects.iter().filter(|e| e.starts_with("run tool")).collect();
            assert_eq!(runs.len(), 2, "{:?}", r.effects);
            assert!(runs.iter().all(|e| e.ends_with(r#"{"city":"Paris"}"#)), "arguments were joined: {runs:?}");
            let response = r.response.expect("a response");
            assert_eq!(response.stop_reason, Some(StopReason::Stop));
            assert_eq!(response.messages.len(), 3, "assistant (tools), user (results), assistant (answer)");
            assert_eq!(response.text(), "It is sunny and noon.");
            assert_eq!(r.requests.len(), 2);
            let second: serde_json::Value = serde_json::from_slice(&r.requests[1].body).expect("JSON body");
            let keys = wire.result_keys();
            let expected = vec![(keys[0].clone(), "sunny".to_string()), (keys[1].clone(), "12:00".to_string())];
            assert_eq!(wire.tool_results(&second), expected, "{second}");
        });
    }

    #[test]
    fn every_wire_runs_a_text_protocol_call_and_sends_the_result_back_as_text() {
        for (scenario, opener) in [("xml_tool_loop", "<tool_call>"), ("json_tool_loop", "```tool_call")] {
            each_wire(scenario, |wire, r| {
                let runs: Vec<&String> = r.effects.iter().filter(|e| e.starts_with("run tool")).collect();
                assert_eq!(runs.len(), 1, "{:?}", r.effects);
                assert!(runs[0].ends_with(r#"get_weather {"city":"Paris"}"#), "{runs:?}");
                let response = r.response.expect("a response");
                assert_eq!(response.stop_reason, Some(StopReason::Stop));
                assert_eq!(response.text(), "It is sunny and noon.");
                assert_eq!(r.requests.len(), 2);
                for (i, request) in r.requests.iter().enumerate() {
                    let body = String::from_utf8_lossy(&request.body);
                    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
                    // No native tool field: the tools are in the system prompt, in the protocol's format.
                    assert!(json.get("tools").is_none() && json.get("tool_choice").is_none(), "request {i}: {json}");
                    assert!(body.contains("get_weather") && body.contains(opener), "request {i}: {body}");
                    if i == 1 {
                        // The call written back in the protocol's format, the result as text.
                        assert!(
                            body.contains(r#"<tool_result tool=\"get_weather\">\nsunny\n</tool_result>"#),
                            "{body}"
                        );
                        assert!(wire.tool_results(&json).is_empty(), "no native result: {json}");
                    }
                }
            });
        }
    }

    #[test]
    fn every_wire_types_the_documented_error_body_and_does_not_retry_it() {
        each_wire("provider_error", |wire, r| {
            assert_eq!(r.requests.len(), 1);
            let (status, body, kind) = wire.not_found();
            match r.error {
                Some(GenerateError::Provider(e)) => {
                    assert_eq!(e.kind, kind);
                    assert_eq!(e.status, Some(status));
                    let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON error body");
                    let message = doc["error"]["message"].as_str().or(doc["error"].as_str());
                    assert_eq!(Some(e.message.as_str()), message, "the provider's message is kept");
                    assert_eq!(e.body.as_deref(), Some(body.as_str()));
                }
                other => panic!("expected a provider error, got {other:?}"),
            }
        });
    }

    #[test]
    fn every_wire_waits_for_retry_after_then_succeeds() {
        each_wire("rate_limited_then_ok", |_, r| {
            assert_eq!(r.requests.len(), 2);
            assert!(r.elapsed >= Duration::from_secs(1), "retry-after: 1 was honoured: {:?}", r.elapsed);
            assert!(r.transcript.iter().any(|l| l == "step 0: retry 1 after provider RateLimited 429"));
            assert_eq!(r.response.expect("a response").text(), "It is sunny and noon.");
        });
    }

    /// A cut body: one request (content reached the caller, so no silent retry), a typed
    /// incomplete-stream error, the text received so far kept, and the transcript of a cut.
    fn assert_cut(wire: Wire, r: SimResult) {
        assert_eq!(r.requests.len(), 1, "content reached the caller: no silent retry");
        assert!(matches!(r.error, Some(GenerateError::Stream(StreamError::Incomplete))), "{:?}", r.error);
        assert_eq!(r.response.expect("partial").text(), "It is sunny and ");
        let expected = std::fs::read_to_string(wire.transcript_path("cut_stream")).expect("transcript");
        assert_eq!(r.transcript.join("\n") + "\n", expected);
    }

    #[test]
    fn every_wire_fails_a_cut_stream_as_incomplete_keeping_the_text() {
        each_wire("cut_stream", assert_cut);
    }

    #[test]
    fn every_wire_fails_a_body_cut_inside_an_event_as_incomplete_keeping_the_text() {
        each_wire("cut_mid_event", assert_cut);
    }

    #[test]
    fn every_wire_retries_a_body_cut_inside_its_first_event() {
        each_wire("cut_in_first_event_then_ok", |wire, r| {
            assert_eq!(r.requests.len(), 2, "nothing reached the caller: the cut is retried");
            assert_eq!(r.response.expect("a response").text(), "It is sunny and noon.");
            let expected =
                std::fs::read_to_string(wire.transcript_path("cut_in_first_event_then_ok")).expect("transcript");
            assert_eq!(r.transcript.join("\n") + "\n", expected);
        });
    }
}

/// Issue 23, A and B: a call the text protocol's parser rejects never runs, though its
/// arguments read as a whole object; the model is told the parser's reason and what it
/// wrote, and the next request sends the call back as written, not as a clean call.
#[test]
fn a_call_the_parser_rejects_never_runs_and_the_model_sees_why_and_what_it_wrote() {
    for (name, reason, written) in [
        (
            "xml_malformed_call_never_runs",
            "`</get_weather>` where `</tool_call>` was due",
            "</get_weather>\\n</get_weather>",
        ),
        (
            "json_malformed_call_never_runs",
            "expected the closing ``` after the object",
            "{\\\"tool\\\": \\\"get_weather\\\", \\\"arguments\\\": {\\\"city\\\": \\\"Rome\\\"}}",
        ),
    ] {
        let (_, r) = run(name);
        assert!(!r.effects.iter().any(|e| e.starts_with("run tool")), "{name}: nothing ran: {:?}", r.effects);
        let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
        assert!(second.contains(reason), "{name}: the parser's reason: {second}");
        assert!(second.contains("was not run"), "{name}: {second}");
        // Twice: in the assistant's turn as written, and quoted in the error result.
        assert!(second.matches(written).count() >= 2, "{name}: the call as written: {second}");
        assert_eq!(r.response.expect("a response").stop_reason, Some(StopReason::Stop));
    }
}

/// Issue 23, C: a reply whose call broke before the tool's name is answered with a
/// correction naming what was wrong and showing the layout; the second try runs.
#[test]
fn a_call_broken_before_its_name_gets_a_correction_with_the_layout() {
    let (_, r) = run("xml_unread_call_corrected");
    assert_eq!(r.requests.len(), 3);
    let second = String::from_utf8_lossy(&r.requests[1].body).into_owned();
    assert!(second.contains("could not be read, so no tool was run"), "{second}");
    assert!(second.contains("<tool_call>\\n<get_weather>"), "the layout: {second}");
    assert!(r.effects.iter().any(|e| e.starts_with("run tool")), "the second try ran: {:?}", r.effects);
    // Once only by default: the same broken reply again is the answer.
    let mut scenario = scenarios::all().into_iter().find(|s| s.name == "xml_unread_call_corrected").expect("scenario");
    let broken = scenario.scenario.replies[0].clone();
    scenario.scenario.replies = vec![broken.clone(), broken.clone(), broken];
    let r =
        omni_conformance::sim::simulate(scenarios::config(&scenario, "http://replay.invalid/v1"), &scenario.scenario);
    assert_eq!(r.requests.len(), 2, "one correction, then the reply stands");
    // And never with `tool_call_retries: 0`.
    scenario.options.tool_call_retries = Some(0);
    let r =
        omni_conformance::sim::simulate(scenarios::config(&scenario, "http://replay.invalid/v1"), &scenario.scenario);
    assert_eq!(r.requests.len(), 1);
}

/// Issue 23, D: mentions of the opener (in a thinking block written in the text, in
/// inline code) stay text and do not swallow the call that follows, which runs.
#[test]
fn mentions_of_the_opener_stay_text_and_the_call_after_them_runs() {
    let (_, r) = run("xml_mentions_then_a_call");
    let runs: Vec<&String> = r.effects.iter().filter(|e| e.starts_with("run tool")).collect();
    assert_eq!(runs.len(), 1, "{:?}", r.effects);
    assert!(runs[0].contains(r#"get_weather {"city":"Paris"}"#), "{runs:?}");
    let response = r.response.expect("a response");
    assert!(response.warnings.iter().all(|w| w.code != "invalid_tool_call"), "{:?}", response.warnings);
}

/// Observing changes nothing: every scenario run with telemetry on (content included)
/// gives the same transcript and the same effects as with it off, and with it off the
/// machine builds no observation at all; with it on, each inference begins and ends.
#[test]
fn observing_a_call_changes_nothing_it_does() {
    use omni_protocol::observe::{Observation, Observe};
    for scenario in scenarios::all() {
        let config = scenarios::config(&scenario, "http://replay.invalid/v1");
        let off = simulate(config.clone(), &scenario.scenario);
        let on = simulate(GenerateConfig { observe: Observe::Content, ..config }, &scenario.scenario);
        assert_eq!(off.transcript, on.transcript, "{}", scenario.name);
        assert_eq!(off.effects, on.effects, "{}", scenario.name);
        assert!(off.observations.is_empty(), "{}: observed while off", scenario.name);
        let started = on.observations.iter().filter(|o| matches!(o, Observation::InferenceStarted(_))).count();
        let ended = on.observations.iter().filter(|o| matches!(o, Observation::InferenceEnded(_))).count();
        let sent = on.effects.iter().filter(|e| e.starts_with("send ")).count();
        assert!(started >= 1 && started == ended, "{}: {:?}", scenario.name, on.observations);
        assert!(started <= sent, "{}: an inference per step, its retries inside it", scenario.name);
    }
}
