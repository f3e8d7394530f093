//! The HTTP fault suite every driver runs: a loopback server that answers with raw bytes
//! (so it can send what no well-behaved server would), and the cases, each with the
//! outcome a call must end in. Whatever the server does, a call ends (no hang: the stall
//! limit is short), with a typed outcome (no panic), keeping what was received.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use omni_protocol::generate::{GenerateError, GenerateEvent};

use crate::http_suite::{Setup, StreamingDriver};
use crate::keepalive::read_request;
use crate::scenarios::text_events;

/// One step of a raw answer.
#[derive(Debug, Clone)]
pub enum Raw {
    /// These bytes, as they are.
    Bytes(Vec<u8>),
    /// Nothing more is sent; the connection stays open until the client leaves.
    Hang,
}

/// How a case's call must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `Finished` with this text.
    Finished(&'static str),
    /// `Failed` with a transport error (the connection or the bytes were bad).
    TransportFailure,
    /// `Failed` by the stall limit.
    Stalled {
        /// The text received before the stall, which the `Failed` event keeps.
        partial: &'static str,
    },
    /// `Failed` with a stream error (the bytes were HTTP, the body was not a whole stream),
    /// keeping what arrived.
    StreamFailure {
        /// The text received before the stream broke, which the `Failed` event keeps.
        partial: &'static str,
    },
    /// `Failed` with the provider's error of this HTTP status.
    ProviderFailure(u16),
}

/// A fault case.
#[derive(Debug, Clone)]
pub struct FaultCase {
    /// What the server does wrong (or right, but oddly).
    pub name: &'static str,
    /// The server's answer.
    pub answer: Vec<Raw>,
    /// The outcome.
    pub expect: Expect,
}

/// The stall limit the fault clients are built with (and no retries).
pub const STALL: Duration = Duration::from_millis(400);

fn sse(words: &[&str]) -> Vec<u8> {
    text_events(words).concat().into_bytes()
}

fn head(lines: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\n{lines}\r\n").into_bytes()
}

/// The cases.
pub fn fault_cases() -> Vec<FaultCase> {
    let whole = sse(&["Hi"]);
    // The first three events (message_start, content_block_start, one delta): "Hel" so far.
    let partial: Vec<u8> = text_events(&["Hel", "lo"])[..3].concat().into_bytes();
    let sized = |body: &[u8]| {
        let mut bytes = head(&format!("content-type: text/event-stream\r\ncontent-length: {}\r\n", body.len()));
        bytes.extend_from_slice(body);
        bytes
    };
    let mut chunked_bad = head("content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n");
    chunked_bad.extend_from_slice(b"zz\r\nnot a chunk\r\n0\r\n\r\n");
    let mut informational = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
    informational.extend(sized(&whole));
    let mut http10 = b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
    http10.extend_from_slice(&whole);
    let mut long_body =
        head(&format!("content-type: text/event-stream\r\ncontent-length: {}\r\n", partial.len() + 500));
    long_body.extend_from_slice(&partial);
    let mut huge_header = b"HTTP/1.1 200 OK\r\nx-padding: ".to_vec();
    huge_header.extend(std::iter::repeat_n(b'a', 4 * 1024 * 1024));
    huge_header.extend_from_slice(b"\r\n\r\n");
    let no_content = b"HTTP/1.1 204 No Content\r\n\r\n".to_vec();
    // An error page of 16 MiB: the call keeps at most a bounded part of it.
    let huge_error_body = "<html>overloaded</html>".repeat(16 * 1024 * 1024 / 23);
    let mut huge_error = format!(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n",
        huge_error_body.len()
    )
    .into_bytes();
    huge_error.extend_from_slice(huge_error_body.as_bytes());
    // Chunked framing with a chunk extension, and a body both chunked and sized (chunked wins:
    // RFC 9112 6.3).
    let mut extended = head("content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n");
    extended.extend_from_slice(format!("{:x};note=x\r\n", whole.len()).as_bytes());
    extended.extend_from_slice(&whole);
    extended.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut both = head(&format!(
        "content-type: text/event-stream\r\ncontent-length: {}\r\ntransfer-encoding: chunked\r\n",
        whole.len() + 3
    ));
    both.extend_from_slice(format!("{:x}\r\n", whole.len()).as_bytes());
    both.extend_from_slice(&whole);
    both.extend_from_slice(b"\r\n0\r\n\r\n");
    // A gzip body nobody asked for (omni never sends accept-encoding): bytes, not events.
    let gzip_junk: Vec<u8> =
        [0x1f, 0x8b, 0x08, 0x00].iter().copied().chain((0..200u8).map(|b| b.wrapping_mul(37))).collect();
    let mut gzipped = head(&format!(
        "content-type: text/event-stream\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n",
        gzip_junk.len()
    ));
    gzipped.extend_from_slice(&gzip_junk);
    vec![
        FaultCase {
            name: "a well-formed answer",
            answer: vec![Raw::Bytes(sized(&whole))],
            expect: Expect::Finished("Hi"),
        },
        FaultCase {
            name: "an informational 100 before the answer",
            answer: vec![Raw::Bytes(informational)],
            expect: Expect::Finished("Hi"),
        },
        FaultCase {
            name: "HTTP/1.0, the body ended by closing",
            answer: vec![Raw::Bytes(http10)],
            expect: Expect::Finished("Hi"),
        },
        FaultCase {
            name: "a chunk with an extension",
            answer: vec![Raw::Bytes(extended)],
            expect: Expect::Finished("Hi"),
        },
        FaultCase {
            name: "a body both chunked and sized",
            answer: vec![Raw::Bytes(both)],
            expect: Expect::Finished("Hi"),
        },
        FaultCase {
            name: "a gzip body nobody asked for",
            answer: vec![Raw::Bytes(gzipped)],
            expect: Expect::StreamFailure { partial: "" },
        },
        FaultCase {
            name: "bytes that are not HTTP",
            answer: vec![Raw::Bytes(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec())],
            expect: Expect::TransportFailure,
        },
        FaultCase {
            name: "a head that never ends",
            answer: vec![Raw::Bytes(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n".to_vec()), Raw::Hang],
            expect: Expect::Stalled { partial: "" },
        },
        FaultCase {
            name: "a header line of 4 MiB",
            answer: vec![Raw::Bytes(huge_header)],
            expect: Expect::TransportFailure,
        },
        FaultCase {
            name: "an invalid chunk size",
            answer: vec![Raw::Bytes(chunked_bad)],
            expect: Expect::TransportFailure,
        },
        FaultCase {
            name: "a body shorter than its content-length, then the connection closes",
            answer: vec![Raw::Bytes(long_body)],
            expect: Expect::TransportFailure,
        },
        FaultCase {
            name: "a stream that stops mid-message and hangs",
            answer: vec![
                Raw::Bytes(head("content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n")),
                Raw::Bytes(format!("{:x}\r\n", partial.len()).into_bytes()),
                Raw::Bytes(partial.clone()),
                Raw::Bytes(b"\r\n".to_vec()),
                Raw::Hang,
            ],
            expect: Expect::Stalled { partial: "Hel" },
        },
        FaultCase {
            name: "a whole body that is only part of a stream",
            answer: vec![Raw::Bytes(sized(&partial))],
            expect: Expect::StreamFailure { partial: "Hel" },
        },
        FaultCase {
            name: "an error status with a 16 MiB HTML body",
            answer: vec![Raw::Bytes(huge_error)],
            expect: Expect::ProviderFailure(500),
        },
        FaultCase {
            name: "204 No Content to a streaming request",
            answer: vec![Raw::Bytes(no_content)],
            expect: Expect::StreamFailure { partial: "" },
        },
    ]
}

/// A server that answers every connection with `answer`, then closes it (unless the
/// answer hangs).
#[derive(Debug)]
pub struct RawServer {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl RawServer {
    /// Starts the server.
    pub fn start(answer: Vec<Raw>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = stopping.clone();
        let answer = Arc::new(answer);
        let acceptor = thread::Builder::new().name("raw-server".into()).spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (answer, stop) = (answer.clone(), stop.clone());
                let _ =
                    thread::Builder::new().name("raw-server-conn".into()).spawn(move || serve(conn, &answer, &stop));
            }
        })?;
        Ok(Self { addr, stopping, acceptor: Some(acceptor) })
    }

    /// The base URL of an Anthropic-style provider here.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn serve(mut conn: TcpStream, answer: &[Raw], stop: &AtomicBool) {
    // The whole request (head and content-length body) is read before answering: a
    // socket closed with unread bytes sends a reset, which would cut the answer short
    // at the client whatever it was.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = read_request(&mut conn, &mut Vec::new());
    let mut buf = [0u8; 4096];
    for step in answer {
        match step {
            Raw::Bytes(bytes) => {
                if conn.write_all(bytes).is_err() {
                    return;
                }
            }
            Raw::Hang => {
                // Until the client closes (a read returns 0) or the server stops.
                let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
                loop {
                    match conn.read(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                            if stop.load(Ordering::SeqCst) {
                                return;
                            }
                        }
                        Err(_) => return,
                    }
                }
            }
        }
    }
}

impl FaultCase {
    /// Checks the events of this case's call.
    pub fn check(&self, events: &[GenerateEvent]) {
        let name = self.name;
        let retries = events.iter().filter(|e| matches!(e, GenerateEvent::Retry { .. })).count();
        assert_eq!(retries, 0, "{name}: the fault clients do not retry");
        let outcome =
            events.iter().rev().find(|e| matches!(e, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. }));
        match (self.expect, outcome) {
            (Expect::Finished(text), Some(GenerateEvent::Finished(response))) => {
                assert_eq!(response.text(), text, "{name}")
            }
            (Expect::TransportFailure, Some(GenerateEvent::Failed { error, .. }))
                if matches!(**error, GenerateError::Transport(_)) => {}
            (Expect::Stalled { partial: text }, Some(GenerateEvent::Failed { error, partial })) => {
                assert!(matches!(**error, GenerateError::Stalled(_)), "{name}: {error:?}");
                assert_eq!(partial.text(), text, "{name}: what came before the stall is kept");
            }
            (Expect::StreamFailure { partial: text }, Some(GenerateEvent::Failed { error, partial })) => {
                assert!(matches!(**error, GenerateError::Stream(_)), "{name}: {error:?}");
                assert_eq!(partial.text(), text, "{name}: what came is kept");
            }
            (Expect::ProviderFailure(status), Some(GenerateEvent::Failed { error, .. }))
                if matches!(**error, GenerateError::Provider(_)) =>
            {
                let GenerateError::Provider(e) = &**error else { panic!("{name}: {error:?}") };
                assert_eq!(e.status, Some(status), "{name}");
                let kept = e.message.len() + e.body.as_ref().map_or(0, String::len);
                assert!(kept <= 2 * 64 * 1024, "{name}: a bounded part of the body is kept ({kept} bytes)");
            }
            (expect, outcome) => panic!("{name}: expected {expect:?}, got {outcome:?}"),
        }
    }
}

/// Runs every case through `driver` (clients with the stall limit [`STALL`] and no
/// retries). A call that has not ended after 20 s fails the case: a hang is a bug.
pub fn fault_suite<D: StreamingDriver>(driver: D) {
    let driver = Arc::new(driver);
    for case in fault_cases() {
        let server = RawServer::start(case.answer.clone()).expect("raw server");
        let setup =
            Setup { stall_timeout: Some(STALL), no_retries: true, ..Setup::new(server.base_url(), "sk-faults") };
        let (tx, rx) = std::sync::mpsc::channel();
        let driver = driver.clone();
        thread::spawn(move || {
            let client = driver.client(&setup);
            let _ = tx.send(driver.stream(&client));
        });
        let events = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{}: the call did not end (or panicked)", case.name));
        case.check(&events);
    }
}
