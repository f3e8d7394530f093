//! A loopback HTTP/1.1 server that keeps its connections open, for the drivers'
//! connection-reuse tests: every response has a content-length and says
//! `connection: keep-alive`, and what each accepted connection does is scripted
//! ([`Plan`]), so a test can count the connections a run of requests took and make a
//! pooled connection go stale the way real servers do (llama-server closes idle
//! keep-alive connections after a few seconds; others drop the next request on them).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use omni_protocol::generate::GenerateEvent;

use crate::http_suite::{Setup, StreamingDriver};

/// What one accepted connection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Answers every request on it until the client closes it.
    Serve,
    /// Answers `n` requests, then closes the connection at once, idle (a server's
    /// keep-alive timeout).
    CloseAfter(usize),
    /// Answers `n` requests, reads the next one and closes without answering (the race
    /// of a keep-alive timeout with a request already written).
    DropNextAfter(usize),
}

/// The key every request must carry (`x-api-key`, as Anthropic's API takes it): a kept
/// connection must carry it on its second request as on its first.
pub const KEY: &str = "sk-keepalive-test";

/// The server. Connections past the plans given follow the server's default plan.
#[derive(Debug)]
pub struct KeepAliveServer {
    addr: SocketAddr,
    scheme: &'static str,
    /// Requests that came without [`KEY`].
    unkeyed: Arc<AtomicUsize>,
    /// Requests received (answered or not), per accepted connection, in accept order.
    received: Arc<Mutex<Vec<usize>>>,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl KeepAliveServer {
    /// Starts serving `body` (an event stream) to every request over plain HTTP;
    /// connections past `plans` follow [`Plan::Serve`].
    pub fn start(body: String, plans: Vec<Plan>) -> io::Result<Self> {
        Self::start_with(body, plans, Plan::Serve, None)
    }

    /// The same over HTTPS, every connection following `plan`, with a certificate signed
    /// by an authority made for this server alone; returns the authority's certificate
    /// (PEM) for the client to trust.
    pub fn start_tls(body: String, plan: Plan) -> io::Result<(Self, String)> {
        let (config, ca) = omni_testkit::http::tls::server_config().map_err(io::Error::other)?;
        Ok((Self::start_with(body, Vec::new(), plan, Some(config))?, ca))
    }

    fn start_with(
        body: String,
        plans: Vec<Plan>,
        rest: Plan,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> io::Result<Self> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let received = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let unkeyed = Arc::new(AtomicUsize::new(0));
        let (counts, stop, missing) = (received.clone(), stopping.clone(), unkeyed.clone());
        let acceptor = thread::Builder::new().name("keepalive-accept".into()).spawn(move || {
            let body = Arc::new(body);
            for (index, conn) in listener.incoming().enumerate() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let plan = plans.get(index).copied().unwrap_or(rest);
                let slot = {
                    let mut counts = counts.lock().expect("not poisoned");
                    counts.push(0);
                    counts.len() - 1
                };
                let (counts, body, missing, tls) = (counts.clone(), body.clone(), missing.clone(), tls.clone());
                let _ = thread::Builder::new().name("keepalive-conn".into()).spawn(move || {
                    // A client that neither sends nor closes does not keep the thread forever.
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                    // As a real server does: without it, Nagle holds back the response's
                    // second segment until the client's delayed ACK (40 ms on Linux) on
                    // every kept connection, and only fresh ones (in quick-ACK mode) are fast.
                    let _ = conn.set_nodelay(true);
                    let record = |received: usize, keyed: bool| {
                        if !keyed {
                            missing.fetch_add(1, Ordering::SeqCst);
                        }
                        counts.lock().expect("not poisoned")[slot] = received;
                    };
                    match tls.map(rustls::ServerConnection::new) {
                        None => serve(conn, plan, &body, record),
                        Some(Ok(server)) => serve(rustls::StreamOwned::new(server, conn), plan, &body, record),
                        Some(Err(_)) => {}
                    }
                });
            }
        })?;
        Ok(Self { addr, scheme, unkeyed, received, stopping, acceptor: Some(acceptor) })
    }

    /// The base URL of an Anthropic-style provider here (`http://addr/v1`, or https).
    pub fn base_url(&self) -> String {
        format!("{}://{}/v1", self.scheme, self.addr)
    }

    /// Requests received on each connection accepted so far, in accept order (a
    /// request a [`Plan::DropNextAfter`] connection dropped counts).
    pub fn requests_per_connection(&self) -> Vec<usize> {
        self.received.lock().expect("not poisoned").clone()
    }

    /// How many requests came without `x-api-key: KEY`.
    pub fn requests_without_key(&self) -> usize {
        self.unkeyed.load(Ordering::SeqCst)
    }
}

impl Drop for KeepAliveServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Follows `plan` on one connection; `record` is told the running count of requests and
/// whether the last one carried the key.
fn serve(mut conn: impl Read + Write, plan: Plan, body: &str, record: impl Fn(usize, bool)) {
    let limit = match plan {
        Plan::Serve => usize::MAX,
        Plan::CloseAfter(n) | Plan::DropNextAfter(n) => n,
    };
    let mut received = 0;
    let mut pending = Vec::new();
    while let Some(keyed) = read_request(&mut conn, &mut pending) {
        // Counted before the answer, so a client that has its response sees the count.
        received += 1;
        record(received, keyed);
        if received > limit || respond(&mut conn, body).is_err() {
            break; // DropNextAfter: this one goes unanswered
        }
        if received == limit && matches!(plan, Plan::CloseAfter(_)) {
            break;
        }
    }
    // Dropping closes the connection without a response.
}

/// Reads one request (head and content-length body) from `conn`, keeping bytes of a
/// following request in `pending`: whether it carried [`KEY`], or `None` when the client
/// closed or sent garbage.
pub(crate) fn read_request(conn: &mut impl Read, pending: &mut Vec<u8>) -> Option<bool> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            let total = end + 4 + length;
            if pending.len() >= total {
                let keyed = head.lines().any(|l| l == format!("x-api-key: {}", KEY.to_ascii_lowercase()));
                pending.drain(..total);
                return Some(keyed);
            }
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes the whole response at once (one TLS record, as few segments as fit).
fn respond(conn: &mut impl Write, body: &str) -> io::Result<()> {
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes())?;
    conn.flush()
}

/// What a driver's connection-reuse test runs: `requests` calls one after another (with
/// a short pause, so a close has arrived), each of which must succeed with no retry,
/// against a server whose connections follow `plans`; then the requests each connection
/// carried must be `expected`.
#[derive(Debug, Clone)]
pub struct ReuseCase {
    /// What the case shows.
    pub name: &'static str,
    /// The connections' plans, in accept order.
    pub plans: Vec<Plan>,
    /// Calls made, one after another.
    pub requests: usize,
    /// Requests received per connection.
    pub expected: Vec<usize>,
    /// Over HTTPS (every connection then follows the first plan).
    pub tls: bool,
}

/// Runs every reuse case through `driver`.
pub fn reuse_suite(driver: &impl StreamingDriver) {
    for case in reuse_cases() {
        case.run(driver);
    }
}

/// The cases every driver passes.
pub fn reuse_cases() -> Vec<ReuseCase> {
    vec![
        ReuseCase {
            name: "calls one after another share one connection",
            plans: vec![Plan::Serve],
            requests: 3,
            expected: vec![3],
            tls: false,
        },
        ReuseCase {
            name: "calls over https share one connection",
            plans: vec![Plan::Serve],
            requests: 3,
            expected: vec![3],
            tls: true,
        },
        ReuseCase {
            name: "an https connection the server closed while idle is not used",
            plans: vec![Plan::CloseAfter(1)],
            requests: 2,
            expected: vec![1, 1],
            tls: true,
        },
        ReuseCase {
            name: "a connection the server closed while idle is not used",
            plans: vec![Plan::CloseAfter(1)],
            requests: 2,
            expected: vec![1, 1],
            tls: false,
        },
        ReuseCase {
            name: "a request the server dropped on a pooled connection is resent at once on a new one",
            plans: vec![Plan::DropNextAfter(1)],
            requests: 2,
            expected: vec![2, 1],
            tls: false,
        },
    ]
}

/// The event stream every request of a reuse case is answered with; its text is "Hi".
pub fn reuse_body() -> String {
    crate::scenarios::text_events(&["Hi"]).concat()
}

/// The pause between the calls of a case.
pub const PAUSE: Duration = Duration::from_millis(30);

impl ReuseCase {
    /// The text of a call's events and how many retries they hold; a failed call fails
    /// the case.
    pub fn outcome(&self, events: impl IntoIterator<Item = GenerateEvent>) -> (String, usize) {
        let (mut text, mut retries) = (String::new(), 0);
        for event in events {
            match event {
                GenerateEvent::Retry { .. } => retries += 1,
                GenerateEvent::Finished(response) => text = response.text(),
                GenerateEvent::Failed { error, .. } => panic!("{}: failed: {error}", self.name),
                _ => {}
            }
        }
        (text, retries)
    }

    /// Runs the case through `driver`.
    pub fn run(&self, driver: &impl StreamingDriver) {
        let (server, ca) = if self.tls {
            let (server, ca) = KeepAliveServer::start_tls(reuse_body(), self.plans[0]).expect("keep-alive server");
            (server, Some(ca))
        } else {
            (KeepAliveServer::start(reuse_body(), self.plans.clone()).expect("keep-alive server"), None)
        };
        let setup = Setup { root_certificate: ca, ..Setup::new(server.base_url(), KEY) };
        let client = driver.client(&setup);
        for n in 0..self.requests {
            let (text, retries) = self.outcome(driver.stream(&client));
            assert_eq!(text, "Hi", "{}: call {n}", self.name);
            assert_eq!(retries, 0, "{}: call {n} went through no retry and no backoff", self.name);
            thread::sleep(PAUSE);
        }
        assert_eq!(server.requests_per_connection(), self.expected, "{}", self.name);
        assert_eq!(server.requests_without_key(), 0, "{}: every request carried the key", self.name);
    }
}
