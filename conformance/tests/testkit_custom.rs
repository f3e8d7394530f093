//! A user's own wire format served by omni-testkit's mock: the `ticker` format's renderer
//! given to `MockProvider::custom`, a tool loop through omni-blocking, a cut stream
//! reported as cut, the requests at the format's own path.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets

use omni_blocking::{Client, Error, RetryPolicy, StopReason, Tool, ToolError};
use omni_conformance::custom_wire;
use omni_testkit::{MockProvider, Turn};
use serde_json::json;

#[test]
fn the_ticker_format_through_the_mock() {
    let mock = MockProvider::custom(custom_wire::dialect(), custom_wire::render).expect("a loopback port");
    mock.push(Turn::text("Looking. ").then_tool_call("get_weather", json!({"city": "Oslo"})).usage(9, 3));
    mock.push(Turn::text("Oslo: ").then_text("snow.").usage(14, 4).chunked(5));
    let client = Client::builder().provider(mock.provider()).build().expect("client");
    let weather = Tool::new("get_weather", "Weather.", json!({"type": "object"}), |input| {
        Ok::<_, ToolError>(format!("snow in {}", input["city"].as_str().unwrap_or("?")))
    });
    let reply = client.call(mock.model(), "Weather in Oslo?").tool(weather).generate().expect("a reply");
    assert_eq!(reply.text(), "Oslo: snow.");
    assert_eq!(reply.stop_reason, Some(StopReason::Stop));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == "/v1/ticker/chat"), "{requests:?}");
    let second = requests[1].json().expect("JSON");
    assert!(second.to_string().contains("snow in Oslo"), "the tool's result in ticker's turns: {second}");

    // Without its `end` line the stream is incomplete.
    let no_retries = RetryPolicy { max_retries: 0, ..RetryPolicy::default() };
    let client = Client::builder().provider(mock.provider()).retry(no_retries).build().expect("client");
    mock.push(Turn::text("It is ").then_text("cut").cut());
    match client.generate_text(mock.model(), "Hi") {
        Err(Error::Generate { partial, .. }) => assert_eq!(partial.text(), "It is cut"),
        other => panic!("a cut ticker stream must fail: {other:?}"),
    }
}

#[test]
fn a_custom_dialect_without_a_renderer_is_refused_with_a_reason() {
    let error = MockProvider::start(custom_wire::dialect()).expect_err("no built-in renderer");
    assert!(error.to_string().contains("MockProvider::custom"), "{error}");
}
