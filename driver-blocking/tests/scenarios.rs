//! Every generate scenario run through this driver against the replay server, in real
//! time: the transcript must equal `conformance/transcripts/<name>.txt` (the file the
//! pure simulation is held to), and the server must have received exactly the
//! requests the simulation sent. The scenarios of every wire (omni_conformance::wires)
//! go through the same run and are held to the same checks.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets, clocks

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use omni_blocking::protocol::generate::{
    Effect, Generate, GenerateConfig, GenerateEvent, RetryPolicy, ToolDecl, ToolOutcome,
};
use omni_blocking::{CancelToken, Client, Tool, ToolError, ToolOutput};
use omni_conformance::replay::{RecordedRequest, ReplayServer};
use omni_conformance::scenarios::{self, NamedScenario};
use omni_conformance::sim::{simulate, transcript_line, ToolScript};
use omni_conformance::wires::Wire;
use omni_protocol::Dialect;

const ANTHROPIC: Wire = Wire(Dialect::AnthropicMessages);

/// The scenario tools as real handlers: sleep the scripted delay, return the scripted
/// outcome; `Hang` sleeps until its run is cancelled. `live` counts running handlers.
fn scripted_tool(decl: &ToolDecl, script: Option<ToolScript>, live: Arc<AtomicUsize>) -> Tool {
    let name = decl.spec.name.clone();
    Tool::new(&decl.spec.name, &decl.spec.description, decl.spec.input_schema.clone(), move |_input| {
        live.fetch_add(1, Ordering::SeqCst);
        let result = match &script {
            Some(ToolScript::Answer { delay, outcome }) => {
                thread::sleep(*delay);
                match outcome {
                    ToolOutcome::Ok(content) => Ok(ToolOutput::content(content.clone())),
                    ToolOutcome::Err(message) => Err(ToolError::from(message.clone())),
                    ToolOutcome::Panicked(message) => panic!("{message}"),
                }
            }
            Some(ToolScript::Hang) => {
                // Far longer than any timeout; ends when the run is cancelled.
                CancelToken::current().sleep(Duration::from_secs(3600));
                Err(ToolError::from("cancelled"))
            }
            None => Err(ToolError::from(format!("no script for {name}"))),
        };
        live.fetch_sub(1, Ordering::SeqCst);
        result
    })
}

/// The first request a configuration sends.
fn first_request(config: GenerateConfig) -> omni_blocking::dialect::HttpRequest {
    let mut machine = Generate::new(config, Instant::now()).expect("a valid configuration");
    match machine.poll_effect() {
        Some(Effect::SendRequest { request, .. }) => request,
        other => panic!("expected a request, got {other:?}"),
    }
}

struct Run {
    transcript: Vec<String>,
    requests: Vec<RecordedRequest>,
    base_url: String,
    server: ReplayServer,
}

fn scenario(name: &str) -> NamedScenario {
    scenarios::all().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no scenario {name}"))
}

fn run(wire: Wire, named: &NamedScenario) -> Run {
    let name = format!("{}/{}", wire.name(), named.name);
    let server = ReplayServer::start(named.scenario.replies.clone()).expect("replay server");
    let base_url = wire.base_url(&server.base_url());
    let client = wire
        .apply(Client::builder(), &server.base_url())
        .retry(RetryPolicy { seed: 7, ..RetryPolicy::default() })
        .stall_timeout(named.stall_timeout)
        .build()
        .expect("a client");
    let expected = wire.config(named, &base_url);
    let live = Arc::new(AtomicUsize::new(0));
    let tools =
        expected.tools.iter().map(|d| scripted_tool(d, named.scenario.tools.get(&d.spec.name).cloned(), live.clone()));
    let call = client.call(wire.model(), expected.context.clone()).options(named.options.clone()).tools(tools);

    // Built through the public API, the call is the simulation's call.
    let config = call.config().expect("the call resolves");
    assert_eq!(config.retry, expected.retry);
    assert_eq!(config.stall_timeout, expected.stall_timeout);
    let tool_view = |tools: &[omni_protocol::generate::ToolDecl]| -> Vec<_> {
        tools.iter().map(|t| (t.spec.clone(), t.executable, t.timeout)).collect()
    };
    assert_eq!(tool_view(&config.tools), tool_view(&expected.tools));
    assert_eq!(config.options, expected.options);
    assert_eq!(first_request(config), first_request(expected.clone()));

    let stream = call.stream().expect("the call starts");
    if let Some(at) = named.scenario.cancel_at {
        let handle = stream.cancel_handle();
        thread::spawn(move || {
            thread::sleep(at);
            handle.cancel();
        });
    }
    let transcript: Vec<String> = stream.map(|e| transcript_line(&e)).collect();

    // No tool thread outlives its call (hung ones are woken by their cancel token).
    let deadline = Instant::now() + Duration::from_secs(5);
    while live.load(Ordering::SeqCst) > 0 {
        assert!(Instant::now() < deadline, "{name}: a tool handler is still running after the call ended");
        thread::sleep(Duration::from_millis(10));
    }

    // The server saw what the simulation sent: same count, paths, key and bodies.
    let sim = simulate(expected, &named.scenario);
    let requests = server.requests();
    assert_eq!(requests.len(), sim.requests.len(), "{name}: request count");
    for (got, want) in requests.iter().zip(&sim.requests) {
        assert_eq!(got.method, want.method.as_str());
        assert_eq!(format!("{}{}", server.base_url(), got.path), want.url);
        let key = wire.key_header();
        assert_eq!(key.as_ref().map(|(n, _)| got.header(n)), key.as_ref().map(|(_, v)| Some(v.as_str())));
        assert_eq!(got.body, want.body, "{name}: request body");
    }
    Run { transcript, requests, base_url, server }
}

fn check(name: &str) -> Run {
    let run = run(ANTHROPIC, &scenario(name));
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/transcripts").join(format!("{name}.txt"));
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let actual = run.transcript.join("\n") + "\n";
    if expected != actual {
        panic!("{name}: transcript differs from {}\n--- expected\n{expected}--- actual\n{actual}", path.display());
    }
    run
}

#[test]
fn text_stream() {
    let run = check("text_stream");
    assert_eq!(run.requests[0].path, "/v1/messages");
    assert!(run.base_url.ends_with("/v1"));
}

#[test]
fn two_step_tool_loop() {
    let run = check("two_step_tool_loop");
    assert_eq!(run.requests.len(), 2);
    let second = String::from_utf8_lossy(&run.requests[1].body);
    assert!(second.contains("tool_result") && second.contains("sunny") && second.contains("12:00"), "{second}");
    // Results travel in call order although get_time finished first.
    assert!(second.find("toolu_1\"").zip(second.rfind("toolu_2\"")).is_some_and(|(a, b)| a < b), "{second}");
}

#[test]
fn tool_timeout() {
    let run = check("tool_timeout");
    let second = String::from_utf8_lossy(&run.requests[1].body);
    assert!(second.contains("timed out after 300ms"), "{second}");
}

#[test]
fn rate_limited_then_ok() {
    assert_eq!(check("rate_limited_then_ok").requests.len(), 2);
}

#[test]
fn server_error_twice_then_ok() {
    assert_eq!(check("server_error_twice_then_ok").requests.len(), 3);
}

#[test]
fn unauthorized() {
    assert_eq!(check("unauthorized").requests.len(), 1);
}

#[test]
fn stall_of_pings_then_ok() {
    let run = check("stall_of_pings_then_ok");
    assert_eq!(run.requests.len(), 2);
    // The stalled request was abandoned: its connection closed, not left hanging.
    assert!(run.server.wait_for_disconnects(1, Duration::from_secs(3)), "the stalled connection stays open");
}

#[test]
fn cancel_mid_stream() {
    let run = check("cancel_mid_stream");
    assert!(run.server.wait_for_disconnects(1, Duration::from_secs(3)), "the server never saw the client go away");
}

#[test]
fn cancel_during_tool_call() {
    assert_eq!(check("cancel_during_tool_call").requests.len(), 1);
}

#[test]
fn generate_returns_the_final_response_and_the_events_agree() {
    let run = run(ANTHROPIC, &scenario("two_step_tool_loop"));
    assert!(run.transcript.last().is_some_and(|l| l.starts_with("finished stop messages=3")));
    let named = scenarios::all().into_iter().find(|s| s.name == "text_stream").expect("scenario");
    let server = ReplayServer::start(named.scenario.replies.clone()).expect("replay server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("a client");
    let response = client.generate_text(scenarios::model(), "What is the weather?").expect("a response");
    assert_eq!(response.text(), "It is sunny and noon.");
    // A stream read to the end still gives its response.
    server.push_replies(named.scenario.replies.clone());
    let mut stream = client.stream_text(scenarios::model(), "again").expect("a stream");
    assert!(stream.by_ref().any(|e| matches!(e, GenerateEvent::Finished(_))));
    assert_eq!(stream.response().expect("a response").text(), "It is sunny and noon.");
}

fn transcript_and_server(wire: Wire, scenario: &NamedScenario) -> (Vec<String>, ReplayServer) {
    let run = run(wire, scenario);
    (run.transcript, run.server)
}

// Every scenario (the tests above add what only this driver can check), and every wire.
omni_conformance::wire_suite_tests!(transcript_and_server);
