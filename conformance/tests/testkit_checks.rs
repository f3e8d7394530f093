//! omni's own wire formats through the test kit's public checks (`omni_testkit::check`),
//! as a user would run them on theirs: the five dialects with the project's fixtures as
//! samples, and the custom `ticker` format (streamed and whole-body) with its own.

use omni_conformance::custom_wire;
use omni_conformance::fixtures::{fixtures_root, stream_cases};
use omni_protocol::Dialect;
use omni_testkit::check::{wire, Config, Sample};

/// Modest counts: every check of every dialect, in seconds.
fn config() -> Config {
    Config::new().cases(32)
}

/// The fixtures of `dialect` as samples.
fn samples(dialect: Dialect) -> Vec<Sample> {
    let cases = stream_cases(&fixtures_root()).unwrap_or_else(|e| panic!("cannot load fixtures: {e}"));
    cases.into_iter().filter(|c| c.dialect == dialect).map(|c| Sample::new(c.name, c.body)).collect()
}

fn check_dialect(dialect: Dialect) {
    let samples = samples(dialect);
    assert!(samples.len() >= 13, "{}: {} fixtures", dialect.name(), samples.len());
    if let Err(failure) = wire::check_dialect(dialect, &samples, &config()) {
        panic!("{failure}");
    }
}

#[test]
fn anthropic_messages_passes_the_kits_checks() {
    check_dialect(Dialect::AnthropicMessages);
}

#[test]
fn openai_completions_passes_the_kits_checks() {
    check_dialect(Dialect::OpenaiCompletions);
}

#[test]
fn openai_responses_passes_the_kits_checks() {
    check_dialect(Dialect::OpenaiResponses);
}

#[test]
fn google_gemini_passes_the_kits_checks() {
    check_dialect(Dialect::GoogleGemini);
}

#[test]
fn ollama_chat_passes_the_kits_checks() {
    check_dialect(Dialect::OllamaChat);
}

#[test]
fn the_ticker_format_passes_the_kits_checks() {
    let samples: Vec<Sample> =
        ["text", "tool_call", "cut"].into_iter().map(|name| Sample::new(name, custom_wire::fixture(name))).collect();
    if let Err(failure) = wire::check_format(&custom_wire::TICKER, &samples, &config().model_id("tick-1")) {
        panic!("{failure}");
    }
    let whole: Vec<Sample> = ["text", "tool_call"]
        .into_iter()
        .map(|name| Sample::new(format!("{name} (whole)"), custom_wire::whole_fixture(name)))
        .collect();
    if let Err(failure) = wire::check_format(&custom_wire::TICKER_WHOLE, &whole, &config().model_id("tick-1")) {
        panic!("{failure}");
    }
}
