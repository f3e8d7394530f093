//! Replays real Chat Completions recordings (other projects' upstream corpus and the
//! local llama.cpp peers) through `openai_completions`, in place, and checks what each
//! shows: stop reason, text, tool calls, usage. Skipped when `shared/fixtures` is absent.
//!
//! Only raw bodies are read here (`.sse`, `.bin`, `.body`, and JSON-lines `.chunks.txt`
//! wrapped as SSE); cassette containers (YAML, httprr) are left to the corpus loader.
#![allow(clippy::disallowed_methods)]

use std::path::PathBuf;

use omni_protocol::{dialect::decode_body, Dialect, Response, StopReason, StreamError, StreamEvent};

/// `shared/fixtures` (see [`omni_conformance::upstream::shared_fixtures_dir`]).
fn shared_fixtures() -> Option<PathBuf> {
    omni_conformance::upstream::shared_fixtures_dir()
}

/// What a recording must decode to.
struct Expect {
    file: &'static str,
    /// `None`: the stream must end with this error kind instead.
    stop: Result<StopReason, &'static str>,
    text_starts: &'static str,
    tools: &'static [&'static str],
    /// (input, output, cache read, reasoning), when the recording has usage.
    usage: Option<(u64, u64, u64, u64)>,
}

const fn ok(file: &'static str, stop: StopReason, text_starts: &'static str) -> Expect {
    Expect { file, stop: Ok(stop), text_starts, tools: &[], usage: None }
}

fn expectations() -> Vec<Expect> {
    use StopReason::*;
    vec![
        Expect { usage: Some((20, 20, 0, 0)), ..ok("upstream/openai-chat/omni__opencode_text_oaic.sse", Stop, " Scattered") },
        Expect {
            tools: &["get_weather"],
            usage: Some((66, 100, 0, 64)),
            ..ok("upstream/openai-chat/omni__openrouter_tool_use.sse", ToolUse, "")
        },
        Expect { stop: Err("provider"), ..ok("upstream/openai-chat/omni__synthetic--openai_completions_error.sse", Stop, "") },
        Expect {
            tools: &["read_file"],
            ..ok("upstream/openai-chat/vercel-ai__anthropic-fallback-tool-call.sse", ToolUse, "Reading it.")
        },
        Expect {
            usage: Some((15, 78, 0, 64)),
            ..ok("upstream/openai-chat/vercel-ai__azure-model-router.1.chunks.txt", Stop, "Capital of Denmark.")
        },
        Expect {
            tools: &["weather"],
            usage: Some((19, 83, 320, 39)),
            ..ok("upstream/openai-chat/vercel-ai__deepseek-tool-call.chunks.txt", ToolUse, "")
        },
        Expect {
            tools: &["weather"],
            usage: Some((210, 15, 0, 0)),
            ..ok("upstream/openai-chat/vercel-ai__groq-tool-call.chunks.txt", ToolUse, "")
        },
        Expect {
            usage: Some((16, 300, 0, 0)),
            ..ok("upstream/openai-chat/vercel-ai__openai-text.chunks.txt", Stop, "**Holiday Name:**")
        },
        Expect {
            usage: Some((79, 11, 0, 0)),
            ..ok(
                "upstream/openai-chat/openai-python__173417d553406f034f643e5db3f8d591fb691ebac56f5ae39a22cc7d455c5353.bin",
                Refusal,
                "I'm sorry",
            )
        },
        Expect {
            tools: &["GetWeatherArgs", "get_stock_price"],
            ..ok(
                "upstream/openai-chat/openai-python__f82268f2fefd5cfbc7eeb59c297688be2f6ca0849a6e4f17851b517310841d9b.bin",
                ToolUse,
                "",
            )
        },
        ok(
            "upstream/openai-chat/openai-python__4cc50a6135d254573a502310e6af1246f55edb6ad95fa24059f160996b68866d.bin",
            Length,
            "{\"",
        ),
        Expect {
            usage: Some((36, 12, 0, 0)),
            ..ok("local-peers/llama-server--chat_text_usage.body", Stop, "Hello, welcome to my little corner")
        },
        ok("local-peers/llama-server--chat_length.body", Length, "Once upon a time"),
        ok("local-peers/llama-server--chat_json_schema.body", Stop, "{"),
        ok("local-peers/llama-cpp-python--chat_text.body", Length, "I'm so glad"),
        Expect { tools: &["get_weather"], ..ok("local-peers/llama-cpp-python--chat_named_tool_choice.body", ToolUse, "") },
        // 200 with a zero-byte body: an incomplete stream, never an empty success.
        Expect {
            stop: Err("incomplete"),
            ..ok("local-peers/llama-cpp-python--chat_auto_tool_choice_empty_stream.body", Stop, "")
        },
    ]
}

fn body_of(path: &std::path::Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    if !path.to_string_lossy().ends_with(".chunks.txt") {
        return Some(bytes);
    }
    // JSON lines of chunk payloads, without SSE framing or [DONE].
    let text = String::from_utf8(bytes).ok()?;
    let mut body: String = text.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("data: {l}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    Some(body.into_bytes())
}

fn error_kind(events: &[StreamEvent]) -> Option<&'static str> {
    match events.last() {
        Some(StreamEvent::Error { error }) => Some(match &**error {
            StreamError::Provider(_) => "provider",
            StreamError::Incomplete => "incomplete",
            StreamError::Decode { .. } => "decode",
            _ => "other",
        }),
        _ => None,
    }
}

fn check(expect: &Expect, events: &[StreamEvent], resp: &Response) -> Result<(), String> {
    match expect.stop {
        Ok(stop) if resp.stop_reason != Some(stop) || error_kind(events).is_some() => {
            return Err(format!("stop {:?}, want {stop:?}; last event {:?}", resp.stop_reason, events.last()))
        }
        Err(kind) if error_kind(events) != Some(kind) => {
            return Err(format!("want a {kind} error, last event {:?}", events.last()))
        }
        _ => {}
    }
    if !resp.text().starts_with(expect.text_starts) {
        return Err(format!("text {:?}", resp.text()));
    }
    let names: Vec<&str> = resp.message.tool_uses().map(|t| t.name.as_str()).collect();
    if names != expect.tools {
        return Err(format!("tools {names:?}"));
    }
    if let Some(call) = resp.message.tool_uses().find(|t| !t.input.is_object() || t.id.is_empty()) {
        return Err(format!("bad tool call {call:?}"));
    }
    let u = resp.usage;
    let got = (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens);
    match expect.usage {
        Some(want) if got != want => Err(format!("usage {got:?}, want {want:?}")),
        _ => Ok(()),
    }
}

#[test]
fn real_recordings_decode_to_what_they_show() {
    let Some(root) = shared_fixtures() else {
        println!("shared/fixtures not found: skipping the replay of real recordings");
        return;
    };
    let mut failures = Vec::new();
    let mut replayed = 0;
    for expect in expectations() {
        let path = root.join(expect.file);
        let Some(body) = body_of(&path) else {
            println!("{} missing: skipped", path.display());
            continue;
        };
        let (events, resp) = decode_body(Dialect::OpenaiCompletions, "model", &body);
        replayed += 1;
        if let Err(e) = check(&expect, &events, &resp) {
            failures.push(format!("{}: {e}", expect.file));
        }
    }
    println!("openai_completions: {replayed} real recordings replayed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
