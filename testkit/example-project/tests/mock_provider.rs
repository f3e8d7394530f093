//! The bot tested against omni-testkit's mock provider, in two dialects.

use omni_blocking::{Client, Dialect};
use omni_testkit::{MockProvider, Turn};
use serde_json::json;
use weather_bot::weather_report;

fn sunny(city: &str) -> String {
    format!("{city}: sunny, 24 °C")
}

#[test]
fn the_bot_answers_with_the_tools_forecast() {
    for dialect in [Dialect::AnthropicMessages, Dialect::GoogleGemini] {
        let mock = MockProvider::start(dialect).expect("a loopback port");
        mock.push(Turn::text("Let me check. ").then_tool_call("get_weather", json!({"city": "Lyon"})));
        mock.push(Turn::text("It is sunny in Lyon, 24 °C."));
        let client = Client::builder().provider(mock.provider()).build().expect("client");
        let report = weather_report(&client, mock.model(), "Lyon", sunny).expect("a report");
        assert_eq!(report, "It is sunny in Lyon, 24 °C.");
        let requests = mock.requests();
        assert_eq!(requests.len(), 2);
        let second = requests[1].json().expect("JSON").to_string();
        assert!(second.contains("Lyon: sunny, 24 °C"), "the tool's output went to the model: {second}");
    }
}

#[test]
fn a_provider_error_reaches_the_caller() {
    let mock = MockProvider::start(Dialect::OpenaiCompletions).expect("a loopback port");
    mock.push(Turn::error(401, "invalid api key"));
    let client = Client::builder().provider(mock.provider()).build().expect("client");
    let error = weather_report(&client, mock.model(), "Lyon", sunny).expect_err("a 401");
    assert!(error.to_string().contains("invalid api key"), "{error}");
}
