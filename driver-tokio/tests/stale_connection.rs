//! A pooled connection that the server closed after its response (keep-alive announced,
//! then the request on it is dropped) costs no retry and no backoff: the request goes
//! out again at once on a fresh connection.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use omni_conformance::scenarios::{self, text_events};
use omni_tokio::{Client, GenerateEvent, Options};

/// Reads one request head and body (content-length) from `conn`; false if the peer sent nothing.
fn read_request(conn: &mut TcpStream) -> bool {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = conn.read(&mut buf) else { return false };
        if n == 0 {
            return false;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return true;
            }
        }
    }
}

fn respond(conn: &mut TcpStream, body: &str) {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(body.as_bytes())).expect("respond");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_connection_the_server_closed_is_resent_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let body = text_events(&["Hi"]).concat();
    let server = std::thread::spawn(move || {
        let mut connections = 0;
        // First connection: answers one request, then drops the next one sent on it.
        let (mut first, _) = listener.accept().expect("accept");
        connections += 1;
        assert!(read_request(&mut first));
        respond(&mut first, &body);
        assert!(read_request(&mut first), "the client reused the connection");
        drop(first);
        // The resend arrives on a new connection.
        let (mut second, _) = listener.accept().expect("accept");
        connections += 1;
        assert!(read_request(&mut second));
        respond(&mut second, &body);
        connections
    });
    let client = Client::builder()
        .base_url("anthropic", format!("http://{addr}/v1"))
        .api_key("anthropic", "sk-test")
        .build()
        .expect("client");
    for _ in 0..2 {
        let mut stream = client.stream_text(scenarios::model(), "hi", Options::default()).expect("stream");
        let mut retries = 0;
        let mut text = String::new();
        while let Some(event) = next_event(&mut stream).await {
            match event {
                GenerateEvent::Retry { .. } => retries += 1,
                GenerateEvent::Finished(response) => text = response.text(),
                GenerateEvent::Failed { error, .. } => panic!("failed: {error}"),
                _ => {}
            }
        }
        assert_eq!(text, "Hi");
        assert_eq!(retries, 0, "no retry, no backoff");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.join().expect("server"), 2);
}

async fn next_event(stream: &mut omni_tokio::TextStream) -> Option<GenerateEvent> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}
