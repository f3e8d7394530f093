//! The flood suite every driver runs: a server that sends as fast as it can (keep-alive
//! comments, or content nobody reads), and what a call must still do. Deadlines fire
//! within a bound of their time however fast the server sends; memory stays bounded
//! (measured by a counting allocator, and by what the server managed to write: a
//! consumer that does not read must make the transport stop reading, so the server's
//! writes block); the last event reaches a consumer that reads late; a dropped stream
//! closes the connection at once even when every channel is full; a response past the
//! size limit fails typed, keeping what came.
//!
//! The suite needs a test binary of its own that installs
//! [`CountingAllocator`] as its global allocator and runs
//! [`flood_suite`] as its only test, so that the heap counts are the suite's alone.

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use omni_protocol::agent::AgentEvent;
use omni_protocol::generate::{GenerateError, GenerateEvent};
use omni_protocol::StreamEvent;

use crate::heap::CountingAllocator;
use crate::http_suite::{Setup, StreamingDriver};
use crate::keepalive::read_request;
use crate::scenarios::text_events;

/// The deadline every timed case sets (stall limit or total timeout).
pub const DEADLINE: Duration = Duration::from_secs(2);
/// How late after its deadline a call may end.
pub const SLACK: Duration = Duration::from_millis(1500);
/// How long the consumer of the unread cases leaves its stream alone.
pub const HOLD: Duration = Duration::from_secs(4);
/// Most heap a call may add while a server floods it. The channels between transport,
/// machine and consumer hold a few MiB at most; an unbounded one grows by hundreds of MiB
/// per second under these floods.
pub const HEAP_BOUND: usize = 48 * 1024 * 1024;
/// Most bytes the server may get written while nobody reads: the kernel's socket buffers
/// on both sides plus the bounded channels.
pub const UNREAD_WRITE_BOUND: u64 = 64 * 1024 * 1024;
/// A server sends for at most this long (so a call that never ends fails the case instead
/// of hanging it).
const SERVER_LIMIT: Duration = Duration::from_secs(20);
/// A write that waits this long counts as blocked (the client stopped reading).
const BLOCKED_WRITE: Duration = Duration::from_millis(200);

/// What a flood server sends after the response head, again and again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// `: ping` comments, nothing else.
    Comments,
    /// One text block whose deltas never end.
    Content,
}

/// The text of each delta of [`Flood::Content`] (1 KiB).
fn word() -> String {
    "abcdefghijklmnop".repeat(64)
}

/// The body as chunks of HTTP/1.1 chunked framing: the part sent once, then the block
/// sent again and again (about 64 KiB).
fn body(flood: Flood) -> (Vec<u8>, Vec<u8>) {
    let framed = |data: &str| format!("{:x}\r\n{data}\r\n", data.len()).into_bytes();
    let (prelude, unit) = match flood {
        Flood::Comments => (String::new(), ": ping\n\n".to_string()),
        Flood::Content => {
            let events = text_events(&[&word()]);
            (events[..2].concat(), events[2].clone())
        }
    };
    let mut first =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    if !prelude.is_empty() {
        first.extend(framed(&prelude));
    }
    let block = framed(&unit.repeat((64 * 1024 / unit.len()).max(1)));
    (first, block)
}

/// What the server saw.
#[derive(Debug, Default)]
struct Seen {
    written: AtomicU64,
    blocked: AtomicBool,
    /// When the response started, and when the client closed the connection.
    started: Mutex<Option<Instant>>,
    closed: Mutex<Option<Instant>>,
}

/// A loopback server that answers one request with a flood, until the client closes the
/// connection or 20 s pass.
#[derive(Debug)]
pub struct FloodServer {
    addr: SocketAddr,
    seen: Arc<Seen>,
    thread: Option<JoinHandle<()>>,
}

impl FloodServer {
    /// Starts the server.
    pub fn start(flood: Flood) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let seen = Arc::new(Seen::default());
        let record = seen.clone();
        let thread = thread::Builder::new().name("flood-server".into()).spawn(move || {
            let until = Instant::now() + SERVER_LIMIT;
            while Instant::now() < until {
                match listener.accept() {
                    Ok((conn, _)) => return serve(conn, flood, &record, until),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(5)),
                    Err(_) => return,
                }
            }
        })?;
        Ok(Self { addr, seen, thread: Some(thread) })
    }

    /// The base URL of an Anthropic-style provider here.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.seen.written.load(Ordering::SeqCst)
    }

    /// True once a write waited 200 ms: the client had stopped reading.
    pub fn blocked(&self) -> bool {
        self.seen.blocked.load(Ordering::SeqCst)
    }

    /// How long after the response started the client closed the connection, if it did.
    pub fn closed_after(&self) -> Option<Duration> {
        let started = (*self.seen.started.lock().ok()?)?;
        let closed = (*self.seen.closed.lock().ok()?)?;
        Some(closed.saturating_duration_since(started))
    }

    /// Waits (at most `limit`) for the client to close the connection.
    pub fn wait_closed(&self, limit: Duration) -> Option<Instant> {
        let until = Instant::now() + limit;
        loop {
            if let Some(closed) = self.seen.closed.lock().ok().and_then(|c| *c) {
                return Some(closed);
            }
            if Instant::now() >= until {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FloodServer {
    fn drop(&mut self) {
        // The serving thread ends by itself (the client gone, or the server's limit).
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut conn: TcpStream, flood: Flood, seen: &Seen, until: Instant) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = read_request(&mut conn, &mut Vec::new());
    let _ = conn.set_write_timeout(Some(BLOCKED_WRITE));
    let (first, block) = body(flood);
    if let Ok(mut started) = seen.started.lock() {
        *started = Some(Instant::now());
    }
    let mut pending: &[u8] = &first;
    while Instant::now() < until {
        if pending.is_empty() {
            pending = &block;
        }
        match conn.write(pending) {
            Ok(0) => break,
            Ok(n) => {
                seen.written.fetch_add(n as u64, Ordering::SeqCst);
                pending = pending.get(n..).unwrap_or_default();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                seen.blocked.store(true, Ordering::SeqCst);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                if let Ok(mut closed) = seen.closed.lock() {
                    *closed = Some(Instant::now());
                }
                return;
            }
        }
    }
}

/// A client for `server` with no retries, `setup_more` applied.
fn setup(server: &FloodServer, more: impl FnOnce(Setup) -> Setup) -> Setup {
    more(Setup { no_retries: true, ..Setup::new(server.base_url(), "sk-floods") })
}

/// The text of the call's text deltas, in order.
fn delta_text(events: &[GenerateEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { delta, .. }, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// Runs `f` on its own thread; a call that has not ended after 30 s fails the case.
fn bounded<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("{name}: the call did not end (or panicked)"))
}

/// Checks that the heap grew by less than [`HEAP_BOUND`] during a case; returns the growth.
fn check_heap(name: &str, heap: &CountingAllocator, baseline: usize) -> usize {
    let grew = heap.peak().saturating_sub(baseline);
    assert!(grew < HEAP_BOUND, "{name}: the heap grew by {} MiB (bound: {} MiB)", grew >> 20, HEAP_BOUND >> 20);
    grew
}

/// A comment flood against a deadline (the stall limit, or the total timeout): the call
/// fails by that deadline, within [`SLACK`] of it, and the heap stays bounded.
fn comments_against<D: StreamingDriver>(driver: &Arc<D>, heap: &'static CountingAllocator, total_timeout: bool) {
    let name = if total_timeout { "a comment flood, total timeout" } else { "a comment flood, stall limit" };
    let server = FloodServer::start(Flood::Comments).expect("flood server");
    // Only the deadline under test can end the call (the size limit is lifted).
    let setup = setup(&server, |s| Setup {
        stall_timeout: Some(if total_timeout { Duration::from_secs(60) } else { DEADLINE }),
        timeout: total_timeout.then_some(DEADLINE),
        max_response_bytes: Some(u64::MAX),
        ..s
    });
    let baseline = heap.reset_peak();
    let driver = driver.clone();
    let (events, took) = bounded(name, move || {
        let client = driver.client(&setup);
        let start = Instant::now();
        let events = driver.stream(&client);
        (events, start.elapsed())
    });
    let grew = check_heap(name, heap, baseline);
    match events.last() {
        Some(GenerateEvent::Failed { error, .. }) if !total_timeout && matches!(**error, GenerateError::Stalled(_)) => {
        }
        Some(GenerateEvent::Failed { error, .. }) if total_timeout && matches!(**error, GenerateError::Timeout(_)) => {}
        other => panic!("{name}: expected the deadline's failure, got {other:?}"),
    }
    assert!(took >= DEADLINE - Duration::from_millis(50), "{name}: ended after {took:?}, before its deadline");
    assert!(took < DEADLINE + SLACK, "{name}: ended {took:?} after the start, deadline {DEADLINE:?}");
    println!(
        "{name}: failed after {took:?}; the server wrote {} MiB; heap +{} KiB",
        server.written() >> 20,
        grew >> 10
    );
}

/// A comment flood against an agent's step, with a stall limit of [`DEADLINE`]: the turn
/// fails by the stall within [`SLACK`] of it, and the heap stays bounded.
fn comments_against_an_agent<D: StreamingDriver>(driver: &Arc<D>, heap: &'static CountingAllocator) {
    let name = "a comment flood against an agent, stall limit";
    let server = FloodServer::start(Flood::Comments).expect("flood server");
    let setup = setup(&server, |s| Setup { stall_timeout: Some(DEADLINE), max_response_bytes: Some(u64::MAX), ..s });
    let baseline = heap.reset_peak();
    let driver = driver.clone();
    let (events, took) = bounded(name, move || {
        let client = driver.client(&setup);
        let start = Instant::now();
        let events = driver.agent_turn(&client);
        (events, start.elapsed())
    });
    let grew = check_heap(name, heap, baseline);
    assert!(
        matches!(events.last(), Some(AgentEvent::Error(error)) if matches!(**error, GenerateError::Stalled(_))),
        "{name}: expected the stall, got {:?}",
        events.last()
    );
    assert!(took < DEADLINE + SLACK, "{name}: the turn ended {took:?} after the prompt, deadline {DEADLINE:?}");
    println!(
        "{name}: failed after {took:?}; the server wrote {} MiB; heap +{} KiB",
        server.written() >> 20,
        grew >> 10
    );
}

/// A content flood nobody reads for [`HOLD`], with a total timeout of [`DEADLINE`]: the
/// server's writes block (TCP pushes back), it writes little, the heap stays bounded, the
/// call still ends at its deadline (the connection closes then, unread), and a consumer
/// reading late gets every event, the terminal one last, with nothing lost.
fn unread_stream_ends_at_its_deadline<D: StreamingDriver>(driver: &Arc<D>, heap: &'static CountingAllocator) {
    let name = "content nobody reads, total timeout";
    let server = FloodServer::start(Flood::Content).expect("flood server");
    let setup = setup(&server, |s| Setup {
        stall_timeout: Some(Duration::from_secs(60)),
        timeout: Some(DEADLINE),
        max_response_bytes: Some(u64::MAX),
        ..s
    });
    let baseline = heap.reset_peak();
    let driver = driver.clone();
    let events = bounded(name, move || {
        let client = driver.client(&setup);
        let events = driver.open(&client);
        thread::sleep(HOLD);
        events.collect::<Vec<_>>()
    });
    let grew = check_heap(name, heap, baseline);
    assert!(server.blocked(), "{name}: the server's writes never blocked: the client kept reading");
    let written = server.written();
    assert!(written < UNREAD_WRITE_BOUND, "{name}: the server wrote {} MiB to a stream nobody read", written >> 20);
    let closed = server.closed_after().unwrap_or_else(|| panic!("{name}: the connection was not closed"));
    assert!(closed < DEADLINE + SLACK, "{name}: the connection closed {closed:?} after the response started");
    let Some(GenerateEvent::Failed { error, partial }) = events.last() else {
        panic!("{name}: expected the timeout, got {:?}", events.last());
    };
    assert!(matches!(**error, GenerateError::Timeout(_)), "{name}: expected the timeout, got {error:?}");
    let text = delta_text(&events);
    assert!(!text.is_empty() && text.len().is_multiple_of(word().len()), "{name}: whole deltas arrived");
    assert_eq!(partial.text(), text, "{name}: what arrived is kept and every delta was delivered");
    println!(
        "{name}: closed after {closed:?}; the server wrote {} KiB; {} KiB of text; heap +{} KiB",
        written >> 10,
        text.len() >> 10,
        grew >> 10
    );
}

/// A content flood nobody reads, then the stream dropped: the connection closes at once,
/// though every channel between the server and the consumer is full.
fn dropped_unread_stream_closes_the_connection<D: StreamingDriver>(driver: &Arc<D>) {
    let name = "content nobody reads, stream dropped";
    let server = FloodServer::start(Flood::Content).expect("flood server");
    let setup = setup(&server, |s| Setup { stall_timeout: Some(Duration::from_secs(60)), ..s });
    let driver = driver.clone();
    let dropped = bounded(name, move || {
        let client = driver.client(&setup);
        let events = driver.open(&client);
        thread::sleep(HOLD / 2);
        let dropped = Instant::now();
        drop(events);
        dropped
    });
    assert!(server.blocked(), "{name}: the server's writes never blocked: the client kept reading");
    let closed = server.wait_closed(DEADLINE + SLACK).unwrap_or_else(|| panic!("{name}: the connection stayed open"));
    let after = closed.saturating_duration_since(dropped);
    assert!(after < SLACK, "{name}: the connection closed {after:?} after the drop");
}

/// A response past the size limit (1 MiB): the call fails typed, keeping what arrived.
fn past_the_size_limit<D: StreamingDriver>(driver: &Arc<D>, heap: &'static CountingAllocator) {
    let name = "content past the size limit";
    const LIMIT: u64 = 1024 * 1024;
    let server = FloodServer::start(Flood::Content).expect("flood server");
    let setup = setup(&server, |s| Setup { max_response_bytes: Some(LIMIT), ..s });
    let baseline = heap.reset_peak();
    let driver = driver.clone();
    let events = bounded(name, move || {
        let client = driver.client(&setup);
        driver.stream(&client)
    });
    check_heap(name, heap, baseline);
    let Some(GenerateEvent::Failed { error, partial }) = events.last() else {
        panic!("{name}: expected a failure, got {:?}", events.last());
    };
    assert_eq!(**error, GenerateError::ResponseTooLarge(LIMIT), "{name}");
    let text = delta_text(&events);
    // Everything but the framing of the limit's worth of events (about 1.1 KiB each).
    assert!(text.len() as u64 > LIMIT * 3 / 4, "{name}: {} bytes of text kept", text.len());
    assert_eq!(partial.text(), text, "{name}: what arrived is kept");
    assert!(server.wait_closed(SLACK).is_some(), "{name}: the connection was closed");
}

/// Runs every case through `driver`, one after another, measuring with `heap` (the test
/// binary's global allocator).
pub fn flood_suite<D: StreamingDriver>(driver: D, heap: &'static CountingAllocator) {
    let driver = Arc::new(driver);
    comments_against(&driver, heap, false);
    comments_against(&driver, heap, true);
    comments_against_an_agent(&driver, heap);
    unread_stream_ends_at_its_deadline(&driver, heap);
    dropped_unread_stream_closes_the_connection(&driver);
    past_the_size_limit(&driver, heap);
}

/// The flood suite's test for a driver's test binary of its own:
/// `omni_conformance::flood_suite_test!(Driver::new());` installs the counting allocator as
/// the binary's global allocator and runs [`flood_suite`] through the driver. One
/// definition for every driver.
#[macro_export]
macro_rules! flood_suite_test {
    ($driver:expr) => {
        #[global_allocator]
        static HEAP: $crate::heap::CountingAllocator = $crate::heap::CountingAllocator::new();

        #[test]
        fn floods_cost_bounded_memory_and_never_hold_off_a_deadline() {
            $crate::floods::flood_suite($driver, &HEAP);
        }
    };
}
