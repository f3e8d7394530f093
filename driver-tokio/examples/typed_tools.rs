//! Typed tools on tokio: each tool's input schema made from a Rust type, its input
//! validated and decoded before the handler runs; parallel calls run at once, and a bad
//! input goes back to the model as an error result instead of reaching the handler.
//!
//! With ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY set it asks that provider
//! (`OMNI_MODEL=provider:model` picks one); with none, omni-testkit's mock provider (Gemini's
//! stream format) plays a model that calls both tools, one of them wrongly at first.
//!
//! `cargo run -p omni-tokio --example typed_tools`

use omni_testkit::{MockProvider, Turn};
use omni_tokio::{Client, Dialect, GenerateEvent, Role, Tool, ToolError};
use serde_json::json;

/// Converts an amount between currencies.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Convert {
    /// Amount in the `from` currency.
    amount: f64,
    /// ISO code, e.g. `EUR`.
    from: String,
    /// ISO code, e.g. `JPY`.
    to: String,
}

/// The local time of a city.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct LocalTime {
    /// City name.
    city: String,
}

fn tools() -> [Tool; 2] {
    let convert = Tool::from_type("convert", "Converts money between currencies.", |c: Convert| async move {
        let rate = match (c.from.as_str(), c.to.as_str()) {
            ("EUR", "JPY") => 162.4,
            ("JPY", "EUR") => 1.0 / 162.4,
            _ => return Err(ToolError::from(format!("no rate for {} to {}", c.from, c.to))),
        };
        Ok(format!("{:.0} {}", c.amount * rate, c.to))
    });
    let time = Tool::from_type("local_time", "The local time of a city.", |t: LocalTime| async move {
        Ok::<_, ToolError>(format!("14:05 in {}", t.city))
    });
    [convert, time]
}

/// The mock's model: both calls at once, `amount` sent as text the first time (the schema
/// says number: the model is told and calls again), then the answer.
fn script(mock: &MockProvider) {
    mock.push(
        Turn::reply()
            .then_tool_call("convert", json!({"amount": "100", "from": "EUR", "to": "JPY"}))
            .then_tool_call("local_time", json!({"city": "Tokyo"})),
    );
    mock.push(Turn::tool_call("convert", json!({"amount": 100, "from": "EUR", "to": "JPY"})));
    mock.push(Turn::text("100 EUR is about 16240 JPY, and it is 14:05 in Tokyo."));
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut builder = Client::builder();
    let mut _mock = None;
    let model = if let Some(model) = env("OMNI_MODEL") {
        model
    } else if env("ANTHROPIC_API_KEY").is_some() {
        "anthropic:claude-sonnet-4-5".into()
    } else if env("OPENAI_API_KEY").is_some() {
        "openai:gpt-5-mini".into()
    } else if env("GEMINI_API_KEY").is_some() {
        "google:gemini-2.5-flash".into()
    } else {
        let mock = MockProvider::start(Dialect::GoogleGemini)?;
        script(&mock);
        eprintln!("typed_tools: no provider key found; a mock provider plays the model at {}", mock.base_url());
        builder = builder.provider(mock.provider());
        _mock = Some(mock);
        "mock:mock-model".into()
    };
    let client = builder.build()?;
    let prompt = "How much is 100 EUR in JPY, and what time is it in Tokyo? Use the tools.";
    let mut stream = client.call(model.as_str(), prompt).tools(tools()).stream()?;
    while let Some(event) = stream.next().await {
        if let Some(text) = event.text_delta() {
            print!("{text}");
        }
        if let GenerateEvent::ToolResult { result, .. } = &event {
            let mark = if result.is_error { "error" } else { "result" };
            println!("[{mark} of {}] {}", result.name, result.text_content());
        }
    }
    println!();
    let response = stream.response().await?;
    let steps = response.messages.iter().filter(|m| m.role == Role::Assistant).count();
    println!("[{steps} steps, stop: {:?}]", response.stop_reason);
    Ok(())
}
