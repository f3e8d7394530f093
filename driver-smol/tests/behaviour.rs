//! Driver behaviour beyond the shared scenarios: dropping a stream, panicking tools,
//! typed tools, setup errors, redaction, where tasks run, connection failures.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use omni_conformance::sim::{transcript_line, BodyStep, Reply};
use omni_protocol::generate::GenerateEvent;
use omni_smol::{Client, Error, SetupError, StopReason, Tool, ToolError, ToolOutput};
use smol::{Executor, Timer};

fn client(server: &ReplayServer) -> Client {
    Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay-secret")
        .build()
        .expect("client")
}

fn schema() -> serde_json::Value {
    scenarios::tools()[0].spec.input_schema.clone()
}

#[test]
fn dropping_the_stream_closes_the_connection() {
    let body = vec![BodyStep::Bytes(text_events(&["Hel"])[0].clone().into_bytes()), BodyStep::Hang];
    let server = ReplayServer::start(vec![Reply::Http { status: 200, headers: vec![], body }]).unwrap();
    let stream = client(&server).stream_text(scenarios::model(), "hi").unwrap();
    smol::block_on(Timer::after(Duration::from_millis(200)));
    assert_eq!(server.requests().len(), 1);
    drop(stream);
    // The driver runs on smol's global executor, so blocking this thread is fine.
    assert!(server.wait_for_disconnects(1, Duration::from_secs(5)), "the server never saw the client leave");
}

#[test]
fn dropping_the_stream_stops_running_tools() {
    let server = ReplayServer::start(vec![paced(
        &tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]),
        Duration::ZERO,
    )])
    .unwrap();
    let stopped = Arc::new(AtomicBool::new(false));
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = stopped.clone();
    let tool = Tool::new("get_weather", "weather", schema(), move |_| {
        let guard = SetOnDrop(flag.clone());
        async move {
            let _guard = guard;
            Timer::after(Duration::from_secs(3600)).await;
            Ok::<_, ToolError>(ToolOutput::text("never"))
        }
    });
    smol::block_on(async {
        let mut stream = client(&server).call(scenarios::model(), "hi").tool(tool).stream().unwrap();
        // Wait until the step ends and the tool is running.
        while let Some(e) = stream.next().await {
            if matches!(e, GenerateEvent::Stream { event: omni_smol::StreamEvent::Done { .. }, .. }) {
                break;
            }
        }
        Timer::after(Duration::from_millis(50)).await;
        assert!(!stopped.load(Ordering::SeqCst));
        drop(stream);
        for _ in 0..100 {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            Timer::after(Duration::from_millis(20)).await;
        }
        panic!("the tool kept running after the stream was dropped");
    });
}

#[test]
fn a_panicking_tool_becomes_an_error_result() {
    let server = ReplayServer::start(vec![
        paced(&tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]), Duration::ZERO),
        paced(&text_events(&["Sorry."]), Duration::ZERO),
    ])
    .unwrap();
    let tool = Tool::new("get_weather", "weather", schema(), |_| async move {
        if true {
            panic!("weather station on fire");
        }
        Ok::<_, ToolError>(ToolOutput::text("unreachable"))
    });
    let call = client(&server).call(scenarios::model(), "hi").tool(tool);
    let response = smol::block_on(call.generate()).unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
    let second = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(second.contains("weather station on fire") && second.contains("\"is_error\":true"), "{second}");
}

#[test]
fn a_handler_that_panics_before_its_future_is_caught_too() {
    let server = ReplayServer::start(vec![
        paced(&tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]), Duration::ZERO),
        paced(&text_events(&["Sorry."]), Duration::ZERO),
    ])
    .unwrap();
    let tool =
        Tool::new("get_weather", "weather", schema(), |_| -> std::future::Ready<Result<ToolOutput, ToolError>> {
            panic!("no future for you")
        });
    let response = smol::block_on(client(&server).call(scenarios::model(), "hi").tool(tool).generate()).unwrap();
    assert_eq!(response.text(), "Sorry.");
    let second = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(second.contains("no future for you"), "{second}");
}

#[test]
fn typed_tools_get_typed_input_and_bad_input_goes_back_to_the_model() {
    #[derive(serde::Deserialize)]
    struct Args {
        city: String,
    }
    let server = ReplayServer::start(vec![
        paced(
            &tool_events(&[
                ("toolu_1", "get_weather", r#"{"city":"Paris"}"#),
                ("toolu_2", "get_weather", r#"{"town":"Lyon"}"#),
            ]),
            Duration::ZERO,
        ),
        paced(&text_events(&["Done."]), Duration::ZERO),
    ])
    .unwrap();
    let tool = Tool::typed("get_weather", "weather", schema(), |args: Args| async move {
        Ok::<_, ToolError>(format!("sunny in {}", args.city))
    });
    let response = smol::block_on(client(&server).call(scenarios::model(), "hi").tool(tool).generate()).unwrap();
    assert_eq!(response.text(), "Done.");
    let second = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(second.contains("sunny in Paris"), "{second}");
    // The schema check runs before the handler and tells the model what is wrong.
    assert!(second.contains(r#"invalid input for tool \"get_weather\": \"city\" is a required property"#), "{second}");
}

#[test]
fn setup_errors_are_typed_and_never_show_the_key() {
    let c = Client::builder().api_key("anthropic", "sk-very-secret").build().unwrap();
    assert!(!format!("{c:?}").contains("sk-very-secret"));
    let err = c.stream_text("nope:model", "hi").unwrap_err();
    assert!(matches!(err, Error::Client(_)), "{err}");
    assert!(!format!("{err} {err:?}").contains("sk-very-secret"));
    let err = Client::builder().build().unwrap().stream_text("venice:some-model", "hi");
    if std::env::var("VENICE_API_KEY").is_err() {
        assert!(err.unwrap_err().to_string().contains("VENICE_API_KEY"));
    }
    let err = Client::builder().root_certificate(b"not a certificate".to_vec()).build().unwrap_err();
    assert!(matches!(err, Error::Setup(SetupError::HttpClient { .. })), "{err}");
}

#[test]
fn a_call_started_outside_any_executor_runs_on_the_global_one() {
    let server = ReplayServer::start(vec![paced(&text_events(&["Hi", " there"]), Duration::ZERO)]).unwrap();
    // Started from a plain thread: no executor is running here.
    let stream = client(&server).stream_text(scenarios::model(), "hi").unwrap();
    let lines: Vec<String> = futures_lite::stream::block_on(stream).map(|e| transcript_line(&e)).collect();
    assert_eq!(lines.last().map(String::as_str), Some("finished stop messages=1 text=\"Hi there\""), "{lines:#?}");
}

#[test]
fn calls_run_on_the_executor_the_application_gives() {
    let server = ReplayServer::start(vec![paced(&text_events(&["Mine."]), Duration::ZERO)]).unwrap();
    let executor = Arc::new(Executor::new());
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .unwrap()
        .on_executor(executor.clone());
    let stream = client.stream_text(scenarios::model(), "hi").unwrap();
    // Nobody drives the executor yet: nothing may have been sent.
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.requests().is_empty(), "the call ran somewhere else");
    let response = smol::block_on(executor.run(stream.response())).unwrap();
    assert_eq!(response.text(), "Mine.");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_connection_dropped_before_the_response_is_a_connect_failure_and_retried() {
    let server =
        ReplayServer::start(vec![Reply::ConnectFail, paced(&text_events(&["Back."]), Duration::ZERO)]).unwrap();
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .retry(omni_smol::RetryPolicy { seed: 7, ..Default::default() })
        .build()
        .unwrap();
    let stream = client.stream_text(scenarios::model(), "hi").unwrap();
    let lines: Vec<String> = futures_lite::stream::block_on(stream).map(|e| transcript_line(&e)).collect();
    assert_eq!(lines.first().map(String::as_str), Some("step 0: retry 1 after transport Connect"), "{lines:#?}");
    assert_eq!(lines.last().map(String::as_str), Some("finished stop messages=1 text=\"Back.\""), "{lines:#?}");
}

#[test]
fn nothing_listening_is_a_connect_failure() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let client = Client::builder()
        .base_url("anthropic", format!("http://127.0.0.1:{port}/v1"))
        .api_key("anthropic", "sk-replay")
        .retry(omni_smol::RetryPolicy { max_retries: 0, ..Default::default() })
        .build()
        .unwrap();
    let err = smol::block_on(client.generate_text(scenarios::model(), "hi")).unwrap_err();
    match err {
        Error::Generate { error: omni_smol::GenerateError::Transport(t), .. } => {
            assert_eq!(t.kind, omni_protocol::generate::TransportErrorKind::Connect, "{t}")
        }
        other => panic!("{other}"),
    }
}
