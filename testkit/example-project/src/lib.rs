//! A user's application: a weather bot that asks a model, which may call a tool.

use omni_blocking::{Client, Error, Model, Tool, ToolError};
use serde_json::json;

/// Asks `model` about `city`'s weather; the model may call `get_weather`, answered by
/// `forecast`.
pub fn weather_report(
    client: &Client,
    model: Model,
    city: &str,
    forecast: fn(&str) -> String,
) -> Result<String, Error> {
    let lookup = Tool::new(
        "get_weather",
        "The current weather of a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |input| {
            let city = input["city"].as_str().ok_or(ToolError::from("city is required"))?;
            Ok::<_, ToolError>(forecast(city))
        },
    );
    let reply = client.call(model, format!("What is the weather in {city}?")).tool(lookup).generate()?;
    Ok(reply.text())
}
