//! Structured output on smol: a reply parsed into a Rust type (`generate_object`), the
//! schema made from the type, the reply validated and corrected if it does not fit.
//!
//! With OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY set it asks that provider
//! (`OMNI_MODEL=provider:model` picks one); with none, omni-testkit's mock provider plays
//! the model: its first reply misses a field, so you see omni ask again, then a valid one.
//!
//! `cargo run -p omni-smol --example structured`

use omni_smol::{Client, Dialect};
use omni_testkit::{MockProvider, Turn};

/// What the model must answer with.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Trip {
    /// Destination city.
    city: String,
    /// Nights to stay.
    nights: u32,
    /// Things to see, most important first.
    sights: Vec<String>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    smol::block_on(async {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut builder = Client::builder();
        let mut _mock = None;
        let model = if let Some(model) = env("OMNI_MODEL") {
            model
        } else if env("OPENAI_API_KEY").is_some() {
            "openai:gpt-5-mini".into()
        } else if env("ANTHROPIC_API_KEY").is_some() {
            "anthropic:claude-sonnet-4-5".into()
        } else if env("GEMINI_API_KEY").is_some() {
            "google:gemini-2.5-flash".into()
        } else {
            let mock = MockProvider::start(Dialect::OpenaiCompletions)?;
            // No `nights`: omni validates the reply against the schema and asks again.
            mock.push(Turn::text(r#"{"city": "Kyoto", "sights": ["Fushimi Inari"]}"#));
            mock.push(Turn::text(
                r#"{"city": "Kyoto", "nights": 4, "sights": ["Fushimi Inari", "Kinkaku-ji", "Arashiyama"]}"#,
            ));
            eprintln!("structured: no provider key found; a mock provider plays the model at {}", mock.base_url());
            builder = builder.provider(mock.provider());
            _mock = Some(mock);
            "mock:mock-model".into()
        };
        let client = builder.build()?;
        let trip: Trip = client.call(model.as_str(), "Plan a short trip to Kyoto, as JSON.").generate_object().await?;
        println!("{} for {} nights: {}", trip.city, trip.nights, trip.sights.join(", "));
        Ok(())
    })
}
