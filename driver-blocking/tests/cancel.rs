//! Cancellation and failure isolation in real time: dropping a stream closes its
//! connection (even one blocked on a silent server) and stops its tools; a panicking
//! tool becomes an error result and the call goes on.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets, clocks

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use omni_blocking::GenerateEvent;
use omni_blocking::{CancelToken, Client, StreamEvent, Tool, ToolError, ToolOutput};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use serde_json::json;

const GAP: Duration = Duration::from_millis(5);

fn client(base: &str) -> Client {
    Client::builder()
        .base_url("anthropic", format!("{base}/v1"))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client")
}

fn weather_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
}

/// A server that answers one request with a stream head and a first text event, then
/// sends nothing more and reports when the client closes the connection.
fn silent_server() -> (SocketAddr, mpsc::Receiver<Instant>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (closed_tx, closed_rx) = mpsc::channel();
    thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else { return };
        conn.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        // Read the head and the body (content-length), enough to answer.
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let body_complete = |seen: &[u8]| {
            let text = String::from_utf8_lossy(seen);
            let Some(end) = text.find("\r\n\r\n") else { return false };
            let length = text
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            seen.len() >= end + 4 + length
        };
        while !body_complete(&seen) {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        let events = text_events(&["It is ", "sunny"]);
        let first: String = events.iter().take(3).cloned().collect();
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:x}\r\n{first}\r\n", first.len());
        if conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(chunk.as_bytes())).is_err() {
            return;
        }
        // Silent from here on: wait for the client to go away.
        loop {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed_tx.send(Instant::now());
    });
    (addr, closed_rx)
}

#[test]
fn dropping_a_stream_closes_a_connection_blocked_on_a_silent_server() {
    let (addr, closed) = silent_server();
    let client = client(&format!("http://{addr}"));
    let mut stream = client.stream_text(scenarios::model(), "hi").expect("stream");
    // Wait until text arrives: the request thread is now blocked reading a silent socket.
    let first_text =
        stream.by_ref().find(|e| matches!(e, GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. }));
    assert!(first_text.is_some());
    assert!(closed.recv_timeout(Duration::from_millis(200)).is_err(), "the connection is open while streaming");
    let dropped = Instant::now();
    drop(stream);
    let closed_at = closed.recv_timeout(Duration::from_secs(5)).expect("the server sees the client go away");
    assert!(closed_at.duration_since(dropped) < Duration::from_secs(1), "{:?}", closed_at.duration_since(dropped));
}

#[test]
fn cancel_keeps_the_stream_and_ends_it_cancelled() {
    let (addr, closed) = silent_server();
    let client = client(&format!("http://{addr}"));
    let mut stream = client.stream_text(scenarios::model(), "hi").expect("stream");
    assert!(stream.by_ref().any(|e| matches!(e, GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. })));
    stream.cancel();
    let response = stream.response().expect("a cancelled call is not an error");
    assert_eq!(response.stop_reason, Some(omni_blocking::StopReason::Cancelled));
    assert_eq!(response.text(), "It is ");
    closed.recv_timeout(Duration::from_secs(5)).expect("the connection is closed");
}

#[test]
fn dropping_a_stream_stops_its_running_tools() {
    let calls = tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]);
    let server = ReplayServer::start(vec![paced(&calls, GAP)]).expect("server");
    let (tx, rx) = mpsc::channel();
    let tool = Tool::new("get_weather", "weather", weather_schema(), move |_| {
        let _ = tx.send("started");
        let cancelled = CancelToken::current().sleep(Duration::from_secs(3600));
        let _ = tx.send(if cancelled { "cancelled" } else { "slept" });
        Ok(ToolOutput::text("late"))
    });
    let mut stream =
        client(&server.base_url()).call(scenarios::model(), "weather?").tool(tool).stream().expect("stream");
    // The step is read to its end (a stream decodes as it is read); its tool call then runs.
    let step_done =
        stream.by_ref().find(|e| matches!(e, GenerateEvent::Stream { event: StreamEvent::Done { .. }, .. }));
    assert!(step_done.is_some());
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("started"));
    let dropped = Instant::now();
    drop(stream);
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("cancelled"));
    assert!(dropped.elapsed() < Duration::from_secs(1));
    assert_eq!(server.requests().len(), 1, "no second step after the drop");
}

#[test]
fn a_panicking_tool_becomes_an_error_result_and_the_call_goes_on() {
    let calls = tool_events(&[("toolu_1", "get_weather", r#"{"city":"Paris"}"#)]);
    let answer = text_events(&["It is ", "sunny and ", "noon."]);
    let server = ReplayServer::start(vec![paced(&calls, GAP), paced(&answer, GAP)]).expect("server");
    let tool = Tool::new("get_weather", "weather", weather_schema(), |_| -> Result<ToolOutput, ToolError> {
        panic!("kaboom")
    });
    let events: Vec<GenerateEvent> =
        client(&server.base_url()).call(scenarios::model(), "weather?").tool(tool).stream().expect("stream").collect();
    let result = events
        .iter()
        .find_map(|e| if let GenerateEvent::ToolResult { result, .. } = e { Some(result) } else { None })
        .expect("a tool result");
    assert!(result.is_error);
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
    assert_eq!(response.text(), "It is sunny and noon.");
    let second = String::from_utf8_lossy(&server.requests()[1].body).into_owned();
    assert!(second.contains("the tool failed unexpectedly: kaboom"), "{second}");
}

/// `cancel` (which keeps the stream) gets through while the application has left its
/// events unread and every channel is full: the connection closes at once, and the
/// events read afterwards end with `Finished`, stop reason `cancelled`, keeping the text.
#[test]
fn cancel_gets_through_full_channels() {
    use omni_conformance::floods::{Flood, FloodServer};
    let server = FloodServer::start(Flood::Content).expect("flood server");
    let client = Client::builder()
        .base_url("anthropic", server.base_url())
        .api_key("anthropic", "sk-floods")
        .stall_timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    let stream = client.stream_text(scenarios::model(), "hi").expect("stream");
    thread::sleep(Duration::from_secs(1));
    assert!(server.blocked(), "the server's writes block: nobody reads");
    let cancelled = Instant::now();
    stream.cancel();
    let closed = server.wait_closed(Duration::from_secs(5)).expect("the connection closes");
    assert!(closed.saturating_duration_since(cancelled) < Duration::from_millis(1500));
    let events: Vec<GenerateEvent> = stream.collect();
    let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {:?}", events.last()) };
    assert_eq!(response.stop_reason, Some(omni_blocking::StopReason::Cancelled));
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { delta, .. }, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(!deltas.is_empty());
    assert_eq!(response.text(), deltas, "every delta delivered, the text kept");
}
