//! Driver behaviour beyond the shared scenarios: dropping a stream, panicking tools,
//! setup errors, redaction.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use omni_conformance::sim::{BodyStep, Reply};
use omni_protocol::generate::GenerateEvent;
use omni_tokio::{Client, Error, SetupError, StopReason, Tool, ToolError, ToolOutput};

fn client(server: &ReplayServer) -> Client {
    Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay-secret")
        .build()
        .expect("client")
}

async fn next(stream: &mut omni_tokio::TextStream) -> Option<GenerateEvent> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

fn schema() -> serde_json::Value {
    scenarios::tools()[0].spec.input_schema.clone()
}

// Multi-threaded: the check below blocks its thread while the driver task runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_closes_the_connection() {
    let mut body = vec![BodyStep::Bytes(text_events(&["Hel"])[0].clone().into_bytes())];
    body.push(BodyStep::Hang);
    let server = ReplayServer::start(vec![Reply::Http { status: 200, headers: vec![], body }]).unwrap();
    let stream = client(&server).stream_text(scenarios::model(), "hi").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(stream);
    assert!(server.wait_for_disconnects(1, Duration::from_secs(5)), "the server never saw the client leave");
}

#[tokio::test]
async fn dropping_the_stream_stops_running_tools() {
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
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, ToolError>(ToolOutput::text("never"))
        }
    });
    let mut stream = client(&server).call(scenarios::model(), "hi").tool(tool).stream().unwrap();
    // Wait until the step ends and the tool is running.
    while let Some(e) = next(&mut stream).await {
        if matches!(e, GenerateEvent::Stream { event: omni_tokio::StreamEvent::Done { .. }, .. }) {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!stopped.load(Ordering::SeqCst));
    drop(stream);
    for _ in 0..100 {
        if stopped.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the tool kept running after the stream was dropped");
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result() {
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
    let response = client(&server).call(scenarios::model(), "hi").tool(tool).generate().await.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
    let second = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(second.contains("weather station on fire") && second.contains("\"is_error\":true"), "{second}");
}

#[tokio::test]
async fn typed_tools_get_typed_input_and_bad_input_goes_back_to_the_model() {
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
    let response = client(&server).call(scenarios::model(), "hi").tool(tool).generate().await.unwrap();
    assert_eq!(response.text(), "Done.");
    let second = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(second.contains("sunny in Paris"), "{second}");
    // The schema check runs before the handler and tells the model what is wrong.
    assert!(second.contains(r#"invalid input for tool \"get_weather\": \"city\" is a required property"#), "{second}");
}

#[tokio::test]
async fn setup_errors_are_typed_and_never_show_the_key() {
    let c = Client::builder().api_key("anthropic", "sk-very-secret").build().unwrap();
    assert!(!format!("{c:?}").contains("sk-very-secret"));
    let err = c.stream_text("nope:model", "hi").unwrap_err();
    assert!(matches!(err, Error::Client(_)), "{err}");
    let err = Client::builder().build().unwrap().stream_text("venice:some-model", "hi");
    if std::env::var("VENICE_API_KEY").is_err() {
        assert!(err.unwrap_err().to_string().contains("VENICE_API_KEY"));
    }
    // A root certificate with no certificate in it is refused at build, as in every driver.
    let err = Client::builder().root_certificate(b"not a certificate".to_vec()).build().unwrap_err();
    assert!(matches!(err, Error::Setup(SetupError::HttpClient { .. })), "{err}");
}

#[test]
fn streaming_outside_a_runtime_is_an_error_not_a_panic() {
    let c = Client::builder().api_key("anthropic", "k").build().unwrap();
    let err = c.stream_text(scenarios::model(), "hi").unwrap_err();
    assert!(err.to_string().contains("tokio runtime"), "{err}");
}

/// A stream may be polled from a thread outside the runtime (here a plain thread): work it
/// starts there (the redirect's request, sent when the reader decodes the 307) goes to the
/// runtime the client was built in.
#[test]
fn a_stream_polled_outside_the_runtime_starts_its_work_on_the_clients_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let redirect =
        Reply::Http { status: 307, headers: vec![("location".to_string(), "/v1/messages".to_string())], body: vec![] };
    let server = ReplayServer::start(vec![redirect, paced(&text_events(&["Moved", " here"]), Duration::ZERO)]).unwrap();
    let stream = runtime.block_on(async { client(&server).stream_text(scenarios::model(), "hi") });
    let stream = stream.unwrap();
    let events = std::thread::spawn(move || {
        let mut stream = stream;
        futures_lite::future::block_on(async move {
            let mut events = Vec::new();
            while let Some(event) = next(&mut stream).await {
                events.push(event);
            }
            events
        })
    })
    .join()
    .unwrap();
    // Sent at once: not failed to start, then retried after a backoff by the watchdog.
    assert!(!events.iter().any(|e| matches!(e, GenerateEvent::Retry { .. })), "{events:?}");
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("{events:?}") };
    assert_eq!(response.text(), "Moved here");
    assert_eq!(server.requests().len(), 2);
}
