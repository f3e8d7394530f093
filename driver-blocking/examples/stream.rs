//! Streams an answer to the terminal, with one tool.
//!
//! ```text
//! ANTHROPIC_API_KEY=... cargo run -p omni-blocking --example stream -- anthropic:claude-sonnet-4-5 "Weather in Paris?"
//! ```
#![allow(clippy::disallowed_methods)]

use std::io::Write;

use omni_blocking::GenerateEvent;
use omni_blocking::{Client, StreamEvent, Tool, ToolOutput};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args.next().unwrap_or_else(|| "anthropic:claude-sonnet-4-5".into());
    let prompt = args.next().unwrap_or_else(|| "What is the weather in Paris?".into());
    let weather = Tool::new(
        "get_weather",
        "The current weather in a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        |input| Ok(ToolOutput::text(format!("sunny and 21°C in {}", input["city"]))),
    );
    let client = Client::new()?;
    let mut stream = client.call(model, prompt).tool(weather).stream()?;
    for event in stream.by_ref() {
        match event {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { delta, .. }, .. } => {
                print!("{delta}");
                std::io::stdout().flush()?;
            }
            GenerateEvent::ToolResult { result, .. } => println!("\n[tool {}: {:?}]", result.name, result.content),
            GenerateEvent::Retry { attempt, delay, error, .. } => {
                eprintln!("\n[retry {attempt} in {delay:?}: {error}]")
            }
            _ => {}
        }
    }
    let response = stream.response()?;
    println!("\n[{:?}, {} output tokens]", response.stop_reason, response.usage.output_tokens);
    Ok(())
}
