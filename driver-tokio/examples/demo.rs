//! omni's demo: a prompt that makes the model call a tool, streamed to the terminal.
//!
//! With a provider key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY,
//! GEMINI_API_KEY) it talks to that provider; with `OMNI_DEMO_MODEL=ollama:<model>` to a
//! local Ollama. With none, it starts omni-testkit's mock provider on loopback, speaking
//! Anthropic's Messages stream, and plays a tool-calling conversation through the real
//! HTTP stack.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Write;
use std::time::Duration;

use omni_testkit::{MockProvider, Turn};
use omni_tokio::{Client, GenerateEvent, Options, StreamEvent, Tool, ToolError};
use serde_json::json;

const PROMPT: &str = "What's the weather like in Paris right now? Use the tool.";

/// The first model of a local Ollama, if one answers within a moment.
async fn local_ollama_model() -> Option<String> {
    let host = std::env::var("OLLAMA_HOST").unwrap_or_else(|_| "127.0.0.1:11434".into());
    let host = host.trim_start_matches("http://").trim_end_matches('/').to_string();
    let addr = tokio::net::lookup_host(host).await.ok()?.next()?;
    let connect = tokio::net::TcpStream::connect(addr);
    let mut stream = tokio::time::timeout(std::time::Duration::from_millis(300), connect).await.ok()?.ok()?;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET /api/tags HTTP/1.0\r\nhost: localhost\r\n\r\n").await.ok()?;
    let mut reply = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(2), stream.read_to_end(&mut reply)).await.ok()?.ok()?;
    let reply = String::from_utf8_lossy(&reply);
    let body = reply.split("\r\n\r\n").nth(1)?;
    let tags: serde_json::Value = serde_json::from_str(body).ok()?;
    tags["models"].get(0)?["name"].as_str().map(str::to_string)
}

/// The conversation the mock plays: thinking, a tool call, then the answer, a word per
/// streamed delta.
fn conversation() -> [Turn; 2] {
    let words = |turn: Turn, text: &str, thinking: bool| {
        text.split_inclusive(' ').fold(turn, |turn, w| if thinking { turn.then_thinking(w) } else { turn.then_text(w) })
    };
    let first =
        words(Turn::reply(), "The user wants the weather in Paris. I should call get_weather rather than guess.", true);
    let first = words(first, "Let me look that up for you.", false)
        .then_tool_call_with_id("toolu_demo_01", "get_weather", json!({"city": "Paris", "unit": "celsius"}))
        .usage(412, 96);
    let answer =
        "It is 18 °C and partly cloudy in Paris right now, with a light westerly breeze. A light jacket will do.";
    let second = words(Turn::reply(), answer, false).usage(540, 31);
    [first, second].map(|turn| turn.gap(Duration::from_millis(25)))
}

/// ANSI styling, only on a terminal.
fn style(code: &str) -> &str {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        code
    } else {
        ""
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut builder = Client::builder();
    let mut _mock = None;
    let model = if let Some(m) = env("OMNI_DEMO_MODEL") {
        m
    } else if env("ANTHROPIC_API_KEY").is_some() {
        "anthropic:claude-sonnet-4-5".into()
    } else if env("OPENAI_API_KEY").is_some() {
        "openai:gpt-5-mini".into()
    } else if env("GEMINI_API_KEY").is_some() {
        "google:gemini-2.5-flash".into()
    } else if let Some(local) = local_ollama_model().await {
        format!("ollama:{local}")
    } else {
        let mock = MockProvider::start(omni_tokio::Dialect::AnthropicMessages)?;
        for turn in conversation() {
            mock.push(turn);
        }
        eprintln!(
            "omni demo: no provider key found; playing a conversation from a mock provider at {}",
            mock.base_url()
        );
        builder = builder.provider(mock.provider());
        _mock = Some(mock);
        format!("{}:{}", omni_testkit::PROVIDER_ID, omni_testkit::MODEL_ID)
    };
    let client = builder.build()?;
    let weather = Tool::new(
        "get_weather",
        "Current weather for a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}),
        |input| async move {
            let city = input.get("city").and_then(|c| c.as_str()).ok_or(ToolError::from("city is required"))?;
            Ok::<_, ToolError>(
                json!({"city": city, "temperature_c": 18, "sky": "partly cloudy", "wind": "light westerly"}),
            )
        },
    );
    println!("{}> {PROMPT}{}  ({model})", style("\x1b[1m"), style("\x1b[0m"));
    let mut stream =
        client.call(model.as_str(), PROMPT).options(Options::default().max_tokens(2048)).tool(weather).stream()?;
    let mut out = std::io::stdout();
    while let Some(event) = stream.next().await {
        match event {
            GenerateEvent::Stream { event, .. } => match event {
                StreamEvent::ThinkingStart { .. } => write!(out, "{}[thinking] ", style("\x1b[2m"))?,
                StreamEvent::ThinkingDelta { delta, .. } => write!(out, "{delta}")?,
                StreamEvent::ThinkingEnd { .. } => writeln!(out, "{}", style("\x1b[0m"))?,
                StreamEvent::TextDelta { delta, .. } => write!(out, "{delta}")?,
                StreamEvent::TextEnd { .. } => writeln!(out)?,
                StreamEvent::ToolUseEnd { tool_use, .. } => writeln!(
                    out,
                    "{}[tool call] {}({}){}",
                    style("\x1b[36m"),
                    tool_use.name,
                    tool_use.input,
                    style("\x1b[0m")
                )?,
                _ => {}
            },
            GenerateEvent::ToolResult { result, .. } => {
                writeln!(out, "{}[tool result] {}{}", style("\x1b[33m"), result.text_content(), style("\x1b[0m"))?
            }
            GenerateEvent::Retry { attempt, delay, error, .. } => {
                eprintln!("[retry {attempt} in {delay:?}: {error}]")
            }
            GenerateEvent::Finished(response) => {
                let u = response.usage;
                writeln!(
                    out,
                    "{}[done: {:?}; {} steps; tokens in {} (cached {}), out {}]{}",
                    style("\x1b[2m"),
                    response.stop_reason.unwrap_or(omni_tokio::StopReason::Stop),
                    response.messages.iter().filter(|m| m.role == omni_tokio::Role::Assistant).count(),
                    u.input_tokens,
                    u.cache_read_tokens,
                    u.output_tokens,
                    style("\x1b[0m")
                )?;
            }
            GenerateEvent::Failed { error, .. } => {
                eprintln!("omni demo failed: {error}");
                std::process::exit(1);
            }
            _ => {}
        }
        out.flush()?;
    }
    Ok(())
}
