//! Decisions the drivers once made each in their own way (issue 11), now made once in
//! the core and checked here through every driver's public API:
//!
//! - two tools of one name: the call is refused when it starts, with
//!   [`ClientError::DuplicateTool`], before anything is sent
//!   ([`ClientConfig::prepare`](omni_protocol::client::ClientConfig::prepare));
//! - retry jitter: each call and each agent draws its own seed, unless the client's
//!   policy was set with one (same place);
//! - a call whose machine refuses its configuration fails naming the model
//!   ([`ClientConfig::start`](omni_protocol::client::ClientConfig::start));
//! - a key given for a provider that takes none is sent as a bearer token, never dropped
//!   (`Dialect::build_request`).

use std::time::Duration;

use omni_protocol::agent::AgentEvent;
use omni_protocol::client::ClientError;
use omni_protocol::generate::{GenerateEvent, RetryPolicy};
use omni_protocol::Options;
use omni_protocol::OutputSchema;
use omni_protocol::ToolResultContent;
use omni_shell::Error;

use crate::http_suite::{finished_text, Setup, StreamingDriver, TestTool};
use crate::replay::ReplayServer;
use crate::scenarios::{model, text_events, tool_events};
use crate::sim::Reply;

fn text_reply(words: &[&str]) -> Reply {
    Reply::stream(text_events(words).concat().as_bytes(), 64, Duration::ZERO)
}

fn server_error() -> Reply {
    Reply::error(500, &[], r#"{"type":"error","error":{"type":"api_error","message":"try again"}}"#)
}

/// Two tools of one name: refused, typed, nothing sent. Two names: the call runs and
/// the tool the model calls answers (so the refusal is about the name, not the tools).
pub fn two_tools_of_one_name_are_refused_before_anything_is_sent(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![
        Reply::stream(tool_events(&[("t1", "get_weather", "{}")]).concat().as_bytes(), 64, Duration::ZERO),
        text_reply(&["Sunny."]),
    ])
    .expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let twins = [TestTool::answering("get_weather", "sunny"), TestTool::answering("get_weather", "rainy")];
    match driver.try_stream(&client, Options::default(), &twins) {
        Err(Error::Client(ClientError::DuplicateTool(name))) => assert_eq!(name, "get_weather"),
        other => panic!("two tools named get_weather: {other:?}"),
    }
    assert!(server.requests().is_empty(), "a refused call sends nothing");

    let distinct = [TestTool::answering("get_weather", "sunny"), TestTool::answering("get_time", "noon")];
    let events = driver.try_stream(&client, Options::default(), &distinct).expect("the call starts");
    let answered: Vec<&ToolResultContent> = events
        .iter()
        .filter_map(|e| match e {
            GenerateEvent::ToolResult { result, .. } => Some(&result.content),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(answered, [&ToolResultContent::Text { text: "sunny".into() }], "{events:?}");
    assert!(finished_text(&events).is_some_and(|text| text.ends_with("Sunny.")), "{events:?}");
}

/// The retry delays of two calls that each fail once (500) and then succeed.
fn two_retried_calls<D: StreamingDriver>(driver: &D, retry: Option<RetryPolicy>) -> [Duration; 2] {
    let server = ReplayServer::start(vec![server_error(), text_reply(&["a"]), server_error(), text_reply(&["b"])])
        .expect("server");
    let client = driver.client(&Setup { retry, ..Setup::new(server.base_url(), "k") });
    [(); 2].map(|()| {
        let events = driver.stream(&client);
        assert!(finished_text(&events).is_some(), "the retry succeeds: {events:?}");
        let delays: Vec<Duration> = events
            .iter()
            .filter_map(|e| match e {
                GenerateEvent::Retry { delay, .. } => Some(*delay),
                _ => None,
            })
            .collect();
        assert_eq!(delays.len(), 1, "one retry: {events:?}");
        delays[0]
    })
}

/// Calls of one client that fail together must not retry together: without a policy
/// of the application's each call has its own jitter (two random seeds giving the same
/// delay to the nanosecond is as likely as guessing a 64-bit number); a policy set on
/// the client keeps its seed, so both calls wait exactly what it says.
pub fn each_call_draws_its_own_jitter_seed_unless_the_client_set_one(driver: &impl StreamingDriver) {
    let [first, second] = two_retried_calls(driver, None);
    assert_ne!(first, second, "two calls of one client drew the same jitter");

    let policy = RetryPolicy { initial_backoff: Duration::from_millis(40), seed: 99, ..RetryPolicy::default() };
    let expected = policy.delay(1, None).expect("a delay");
    assert_eq!(two_retried_calls(driver, Some(policy)), [expected, expected], "the client's seed is kept");
}

/// The retry delays of two agents of one client whose first request each fails (500).
fn two_retried_agents<D: StreamingDriver>(driver: &D, retry: Option<RetryPolicy>) -> [Duration; 2] {
    let server = ReplayServer::start(vec![server_error(), text_reply(&["a"]), server_error(), text_reply(&["b"])])
        .expect("server");
    let client = driver.client(&Setup { retry, ..Setup::new(server.base_url(), "k") });
    [(); 2].map(|()| {
        let events = driver.agent_turn(&client);
        assert!(matches!(events.last(), Some(AgentEvent::Turn { .. })), "the retry succeeds: {events:?}");
        let delays: Vec<Duration> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Retry { delay, .. } => Some(*delay),
                _ => None,
            })
            .collect();
        assert_eq!(delays.len(), 1, "one retry: {events:?}");
        delays[0]
    })
}

/// The same for agents: each agent of a client has its own jitter, unless the client's
/// policy was set with a seed.
pub fn each_agent_draws_its_own_jitter_seed_unless_the_client_set_one(driver: &impl StreamingDriver) {
    let [first, second] = two_retried_agents(driver, None);
    assert_ne!(first, second, "two agents of one client drew the same jitter");

    let policy = RetryPolicy { initial_backoff: Duration::from_millis(40), seed: 99, ..RetryPolicy::default() };
    let expected = policy.delay(1, None).expect("a delay");
    assert_eq!(two_retried_agents(driver, Some(policy)), [expected, expected], "the client's seed is kept");
}

/// A machine that refuses its configuration (here an output schema that does not
/// compile) fails the call before it starts, its partial response naming the model.
pub fn a_call_refused_before_it_starts_names_the_model(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![text_reply(&["unused"])]).expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let output = OutputSchema { name: "broken".into(), schema: serde_json::json!({"type": 12}) };
    let options = Options { output: Some(output), ..Options::default() };
    match driver.try_stream(&client, options, &[]) {
        Err(Error::Generate { partial, .. }) => assert_eq!(partial.model, model().id),
        other => panic!("an output schema that does not compile: {other:?}"),
    }
    assert!(server.requests().is_empty(), "a refused call sends nothing");
}

/// A key given explicitly for a provider that takes none (`Provider::openai_compatible(..,
/// None)`, then `.api_key(..)` on the client) is sent as a bearer token, never dropped.
pub fn a_key_given_for_a_keyless_provider_is_sent_not_dropped(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![text_reply(&["Hi."])]).expect("server");
    // The suites' provider taking no key, as `Provider::openai_compatible(.., None)` makes
    // one; the key is still given to the client.
    let keyless = omni_protocol::Provider {
        auth: omni_protocol::Auth::None,
        api_key_env: None,
        ..crate::scenarios::provider(&server.base_url())
    };
    let setup = Setup { provider: Some(keyless), ..Setup::new(server.base_url(), "sk-explicit") };
    let client = driver.client(&setup);
    let events = driver.stream(&client);
    assert_eq!(finished_text(&events).as_deref(), Some("Hi."), "{events:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-explicit"), "the key reached the server");
}

/// A call's usage carries its cost, from the catalogue's prices of the model it names.
pub fn usage_carries_the_cost_from_the_catalogues_prices(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![text_reply(&["Hi."])]).expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let events = driver.stream_model(&client, "anthropic:claude-sonnet-4-5".into());
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
    let catalogue = omni_protocol::Catalogue::builtin().expect("the built-in catalogue");
    let prices = catalogue.model("anthropic:claude-sonnet-4-5").expect("in the catalogue").prices;
    assert!(prices.input > 0.0 && prices.output > 0.0, "the catalogue prices the model: {prices:?}");
    let usage = response.usage;
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0, "{usage:?}");
    let expected = omni_protocol::Usage { cost: None, ..usage }.with_cost(&prices).cost;
    assert!(usage.cost.is_some(), "the usage carries a cost: {usage:?}");
    assert_eq!(usage.cost, expected, "the cost is the usage at the catalogue's prices");
}

/// A server of another API answers (Chat Completions chunks to a Messages request): the
/// call fails at once with the wrong-format error, naming the dialect expected, the
/// content type and the first event, and is not sent again (a retry would get the same).
pub fn a_stream_of_another_format_fails_at_once(driver: &impl StreamingDriver) {
    let body = std::fs::read(crate::fixtures::fixtures_root().join("openai_completions/text/body.sse"))
        .expect("the Chat Completions text fixture");
    let server =
        ReplayServer::start(vec![crate::sim::Reply::stream(&body, 64, std::time::Duration::ZERO)]).expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let events = driver.stream(&client);
    let Some(GenerateEvent::Failed { error, .. }) = events.last() else { panic!("failed: {events:?}") };
    let omni_protocol::generate::GenerateError::Stream(omni_protocol::StreamError::WrongFormat {
        dialect,
        content_type,
        first_event,
    }) = &**error
    else {
        panic!("a wrong format: {error:?}")
    };
    assert_eq!(dialect, "anthropic_messages");
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    assert!(first_event.contains("chat.completion.chunk"), "{first_event}");
    assert!(error.to_string().contains("not a anthropic_messages stream"), "{error}");
    assert_eq!(server.requests().len(), 1, "not retried");
}

/// A provider's error names who answered: the provider, the model and the host, in its
/// message and as data ([`omni_protocol::ServedBy`]), whether it came as an error response
/// or as an error event inside the stream; the key never shows.
pub fn a_provider_error_names_provider_model_and_host(driver: &impl StreamingDriver) {
    // Anthropic's documented error shapes: a 401 response and an `error` event mid-stream.
    let unauthorized = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let overloaded = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n\
        event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}\n\n";
    let server = ReplayServer::start(vec![
        crate::sim::Reply::error(401, &[("content-type", "application/json")], unauthorized),
        crate::sim::Reply::stream(overloaded.as_bytes(), 64, std::time::Duration::ZERO),
    ])
    .expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "sk-secret-key"));
    let host = server.base_url().split_once("://").map(|(_, rest)| rest.trim_end_matches('/').to_owned()).expect("url");
    for _ in 0..2 {
        let events = driver.stream(&client);
        let Some(GenerateEvent::Failed { error, .. }) = events.last() else { panic!("failed: {events:?}") };
        let (omni_protocol::generate::GenerateError::Provider(provider_error)
        | omni_protocol::generate::GenerateError::Stream(omni_protocol::StreamError::Provider(provider_error))) =
            &**error
        else {
            panic!("a provider error: {error:?}")
        };
        let served_by = provider_error.served_by.as_deref().expect("who answered");
        assert_eq!((served_by.provider.as_str(), served_by.model.as_str()), ("anthropic", "claude-sonnet-4-5"));
        assert_eq!(served_by.host, host);
        let message = error.to_string();
        assert!(message.contains(&format!("anthropic model claude-sonnet-4-5 at {host}")), "{message}");
        assert!(!format!("{message} {error:?}").contains("sk-secret-key"), "{message}");
    }
}

/// A model id of a catalogue provider that the catalogue does not know, but close to one
/// it does (a typo), is sent as it is (catalogues lag new models) and the response says
/// "did you mean"; a known id gets no such warning.
pub fn a_mistyped_model_is_sent_with_a_warning(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![text_reply(&["Hi."]), text_reply(&["Hi."])]).expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let events = driver.stream_model(&client, "anthropic:claude-sonet-4-5".into());
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
    let warning = response.warnings.iter().find(|w| w.code == "unknown_model").expect("a warning");
    assert!(warning.message.contains("did you mean anthropic:claude-sonnet-4-5"), "{warning:?}");
    let body = String::from_utf8_lossy(&server.requests()[0].body).into_owned();
    assert!(body.contains("\"model\":\"claude-sonet-4-5\""), "sent as it is: {body}");
    let events = driver.stream_model(&client, "anthropic:claude-sonnet-4-5".into());
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
    assert!(!response.warnings.iter().any(|w| w.code == "unknown_model"), "{:?}", response.warnings);
}

/// What the dialect could not send reaches the response as a warning: Anthropic keeps
/// only `user_id` of the metadata.
pub fn warnings_reach_the_response(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![text_reply(&["Hi."])]).expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let mut options = Options::default();
    options.metadata.insert("trace".into(), "t-1".into());
    let events = driver.try_stream(&client, options, &[]).expect("the call starts");
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
    assert!(
        response.warnings.iter().any(|w| w.code == "unsupported_option" && w.message.contains("trace")),
        "{:?}",
        response.warnings
    );
}

/// A tool's own time limit wins over the call's: the call allows a minute, the tool 200 ms;
/// its handler never answers, and the model is told of the timeout after the tool's limit.
pub fn a_tools_own_timeout_overrides_the_calls(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![
        Reply::stream(tool_events(&[("t1", "slow", "{}")]).concat().as_bytes(), 64, Duration::ZERO),
        text_reply(&["Too slow."]),
    ])
    .expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let options = Options { tool_timeout: Some(Duration::from_secs(60)), ..Options::default() };
    let slow = TestTool { own_timeout: Some(Duration::from_millis(200)), ..TestTool::answering("slow", "never") };
    let events = driver.try_stream(&client, options, &[slow]).expect("the call starts");
    assert_eq!(finished_text(&events).as_deref(), Some("Too slow."), "{events:?}");
    let result = events
        .iter()
        .find_map(|e| match e {
            GenerateEvent::ToolResult { result, .. } => Some(result),
            _ => None,
        })
        .expect("a tool result");
    assert!(result.is_error, "the timed-out run is an error for the model: {result:?}");
    // The limit that decided is named in what the model is told: the tool's, not the call's.
    let told: Vec<&ToolResultContent> = result.content.iter().collect();
    assert_eq!(told, [&ToolResultContent::Text { text: "the tool timed out after 200ms".into() }]);
}

/// Provider-specific options reach the wire through every driver: a key the dialect knows
/// (Anthropic's `top_k`) goes into the body; an unknown one goes too, with a warning naming
/// the closest known key.
pub fn provider_specific_options_reach_the_body(driver: &impl StreamingDriver) {
    let server = ReplayServer::start(vec![text_reply(&["Hi."])]).expect("server");
    let client = driver.client(&Setup::new(server.base_url(), "k"));
    let options = Options::default().extra("top_k", 5).extra("topk", 7);
    let events = driver.try_stream(&client, options, &[]).expect("the call starts");
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
    let requests = server.requests();
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).expect("a JSON body");
    assert_eq!(body["top_k"], 5, "{body}");
    assert_eq!(body["topk"], 7, "an unknown key is still sent: {body}");
    assert!(
        response.warnings.iter().any(|w| w.code == "unknown_extra_option" && w.message.contains("top_k")),
        "{:?}",
        response.warnings
    );
}
