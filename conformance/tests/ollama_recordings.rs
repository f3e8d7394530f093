//! Replays the real Ollama recordings of the shared upstream corpus through this
//! dialect (`../shared/fixtures/upstream/ollama/`, read in place, skipped when absent).
//!
//! Bodies go through the whole pipeline (`omni_protocol::dialect::decode_body`); the
//! containers (httpmock YAML cassettes, httprr transcripts with chunked transfer
//! encoding) are unwrapped by hand.

use std::path::PathBuf;

use omni_protocol::{Dialect, Response, StopReason, StreamError, StreamEvent};

fn corpus_dir() -> Option<PathBuf> {
    omni_conformance::upstream::shared_fixtures_dir().map(|d| d.join("upstream/ollama")).filter(|p| p.is_dir())
}

fn replay(body: &str) -> (Vec<StreamEvent>, Response) {
    omni_protocol::dialect::decode_body(Dialect::OllamaChat, "requested", body.as_bytes())
}

/// The response bodies of an httpmock cassette: each `then:` block's `body: |` scalar.
fn yaml_bodies(text: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(body) = current.as_mut() {
            if let Some(rest) = line.strip_prefix("    ") {
                body.push_str(rest);
                body.push('\n');
                continue;
            }
            bodies.extend(current.take());
        }
        if line == "  body: |" {
            current = Some(String::new());
        }
    }
    bodies.extend(current);
    bodies
}

/// The response body of an httprr transcript, with chunked transfer encoding removed.
fn httprr_body(text: &str) -> Option<String> {
    let response = &text[text.find("HTTP/1.1 200")?..];
    let mut rest = &response[response.find("\r\n\r\n")? + 4..];
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.push_str(after.get(..size)?);
        rest = after.get(size + 2..)?;
    }
}

struct Expect {
    stop: StopReason,
    /// (name, input) of every tool call, in order.
    tools: &'static [(&'static str, &'static str)],
    text_starts: &'static str,
    thinking: bool,
    usage: Option<(u64, u64)>,
}

const TEXT: Expect = Expect { stop: StopReason::Stop, tools: &[], text_starts: "", thinking: false, usage: None };

fn check(name: &str, body: &str, expect: &Expect) {
    let (events, resp) = replay(body);
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })), "{name}: ended with {:?}", events.last());
    assert_eq!(resp.stop_reason, Some(expect.stop), "{name}");
    assert!(!resp.model.is_empty(), "{name}");
    let tools: Vec<(String, String)> =
        resp.message.tool_uses().map(|t| (t.name.clone(), t.input.to_string())).collect();
    let want: Vec<(String, String)> = expect.tools.iter().map(|(n, i)| (n.to_string(), i.to_string())).collect();
    assert_eq!(tools, want, "{name}");
    let mut ids: Vec<&str> = resp.message.tool_uses().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), tools.len(), "{name}: tool ids must be unique");
    assert!(ids.iter().all(|id| !id.is_empty()), "{name}");
    assert!(resp.text().starts_with(expect.text_starts), "{name}: {:?}", resp.text());
    if expect.tools.is_empty() {
        assert!(!resp.text().is_empty(), "{name}: no text");
    }
    let has_thinking =
        resp.message.content.iter().any(|b| matches!(b, omni_protocol::Block::Thinking(t) if !t.text.is_empty()));
    assert_eq!(has_thinking, expect.thinking, "{name}");
    if let Some((input, output)) = expect.usage {
        assert_eq!((resp.usage.input_tokens, resp.usage.output_tokens), (input, output), "{name}");
    }
}

#[test]
fn upstream_recordings_decode() {
    let Some(dir) = corpus_dir() else {
        println!("skipping: upstream corpus not found next to the workspace");
        return;
    };
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let tool = |tools| Expect { stop: StopReason::ToolUse, tools, ..TEXT };

    check(
        "omni text",
        &read("omni__ollama_text.ndjson"),
        &Expect { text_starts: "Soft blue clouds drift by,", usage: Some((20, 22)), ..TEXT },
    );
    check(
        "omni thinking",
        &read("omni__ollama_thinking.ndjson"),
        &Expect { thinking: true, usage: Some((17, 513)), ..TEXT },
    );
    check(
        "omni tool use",
        &read("omni__ollama_tool_use.ndjson"),
        &Expect { usage: Some((173, 21)), ..tool(&[("get_weather", r#"{"city":"London"}"#)]) },
    );
    check(
        "rust-genai cloud",
        &read("rust-genai__ollama_cloud--simple_stream--response_000.txt"),
        &Expect { text_starts: "The sky appears blue", usage: Some((21, 40)), ..TEXT },
    );
    let chat = httprr_body(&read("langchaingo__TestClient_GenerateChatStream.httprr")).expect("httprr body");
    check("langchaingo chat", &chat, &Expect { text_starts: "Okay, here we go!", usage: Some((16, 22)), ..TEXT });

    let yaml = |file: &str| yaml_bodies(&read(file));
    let bodies = yaml("rig__ollama--raw_stream_capture_matrix--stream_raw_exposes_terminal_durations.yaml");
    check("rig length", &bodies[0], &Expect { stop: StopReason::Length, usage: Some((18, 64)), ..TEXT });
    let bodies = yaml("rig__ollama--streaming--streaming_smoke.yaml");
    check("rig smoke", &bodies[0], &TEXT);
    let bodies = yaml("rig__ollama--streaming_grammar--parallel_tool_calls.yaml");
    check(
        "rig parallel",
        &bodies[0],
        &Expect { text_starts: "Okay", ..tool(&[("lookup_harbor_label", "{}"), ("lookup_orchard_label", "{}")]) },
    );
    let bodies = yaml("rig__ollama--streaming_grammar--same_tool_twice.yaml");
    const ADD: &[(&str, &str)] = &[
        ("add", r#"{"x":2,"y":3}"#),
        ("add", r#"{"x":10,"y":20}"#),
        ("add", r#"{"x":2,"y":3}"#),
        ("add", r#"{"x":10,"y":20}"#),
    ];
    check("rig same tool twice", &bodies[0], &tool(ADD));
    let bodies = yaml("rig__ollama--streaming_grammar--thinking_and_tool_call.yaml");
    check("rig thinking+tool", &bodies[0], &Expect { thinking: true, ..tool(&[("lookup_harbor_label", "{}")]) });
    let bodies = yaml("rig__ollama--reasoning_tool_roundtrip--streaming.yaml");
    assert_eq!(bodies.len(), 2);
    check(
        "rig roundtrip 1",
        &bodies[0],
        &Expect { thinking: true, usage: Some((234, 517)), ..tool(&[("get_weather", r#"{"city":"Tokyo"}"#)]) },
    );
    check("rig roundtrip 2", &bodies[1], &Expect { thinking: true, usage: Some((792, 478)), ..TEXT });
    let bodies = yaml("rig__ollama--streaming_tools--streaming_tools_smoke.yaml");
    assert_eq!(bodies.len(), 2);
    check("rig tools 1", &bodies[0], &tool(&[("subtract", r#"{"x":2,"y":5}"#)]));
    check("rig tools 2", &bodies[1], &TEXT);

    let (events, resp) = replay(&read("omni__synthetic--ollama_error.ndjson"));
    let Some(StreamEvent::Error { error }) = events.last() else { panic!("synthetic error: {:?}", events.last()) };
    let StreamError::Provider(e) = &**error else { panic!("synthetic error: {error:?}") };
    assert_eq!(e.message, "an error was encountered while running the model");
    assert_eq!(resp.stop_reason, Some(StopReason::Error));
}
