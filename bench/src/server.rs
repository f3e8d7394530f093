//! The loopback server: one pre-rendered response (head and SSE body, `content-length`,
//! `connection: close`) written to each connection in one `write_all`, as fast as the
//! socket takes it, after reading the request; the moment each request has arrived whole
//! is recorded, for the start-up measurement.
//!
//! `omni_conformance::replay::ReplayServer` serves scripted chunked replies, one flush
//! per piece, and does not note when requests arrive; this server does only what the
//! benchmark needs, so that the server's own work stays small and constant (it runs in
//! the harness's process, beside the measured child, on a machine with few cores).
//! Connections are served one after another: the harness runs one client at a time,
//! one call each. [`Server::start_concurrent`] serves each connection on a thread of its
//! own instead, for the concurrency benchmark (N streams at once from one client), with
//! a listen backlog of [`BACKLOG`] so that N connects at once are not dropped and
//! retried; it also notes the most connections open at once.
//! A list of responses can be served in turn ([`Server::serve_in_turn`]): a tool loop's
//! steps, for the telemetry benchmark.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use memchr::memmem;

/// Largest request head and body read.
const MAX_REQUEST: usize = 1 << 20;
/// Longest wait for a client's bytes, or for it to take the response.
const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// The concurrent server's listen backlog (std listens with 128; Linux caps it at
/// `net.core.somaxconn`, 4096 by default).
pub const BACKLOG: i32 = 4096;
/// Stack of a concurrent server's connection thread (it needs a few KiB).
const CONNECTION_STACK: usize = 128 * 1024;

/// A request as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// When its last byte was read.
    pub at: Instant,
    /// The request line's path.
    pub path: String,
}

/// What the server answers: each connection the next response of the list, in turn.
#[derive(Debug)]
struct Responses {
    list: Vec<Arc<Vec<u8>>>,
    next: usize,
}

impl Responses {
    fn take(&mut self) -> Arc<Vec<u8>> {
        let response = self.list[self.next % self.list.len()].clone();
        self.next = self.next.wrapping_add(1);
        response
    }
}

/// The server; dropping it stops it.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    responses: Arc<Mutex<Responses>>,
    arrivals: Receiver<Arrival>,
    stop: Arc<AtomicBool>,
    connections: Arc<Connections>,
    thread: Option<JoinHandle<()>>,
}

/// Connections open now, and the most open at once since the last look.
#[derive(Debug, Default)]
struct Connections {
    open: AtomicUsize,
    peak: AtomicUsize,
}

impl Connections {
    fn opened(&self) {
        let open = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(open, Ordering::SeqCst);
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Server {
    /// Binds 127.0.0.1 on a free port; it answers 404 until [`Server::serve`].
    pub fn start() -> io::Result<Self> {
        Self::start_with(false)
    }

    /// As [`Server::start`], but each connection is served on a thread of its own, as
    /// soon as it is accepted, so that any number of clients are served at once.
    pub fn start_concurrent() -> io::Result<Self> {
        Self::start_with(true)
    }

    fn start_with(concurrent: bool) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        if concurrent {
            listen_deeper(&listener)?;
        }
        let addr = listener.local_addr()?;
        let not_found = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec();
        let responses = Arc::new(Mutex::new(Responses { list: vec![Arc::new(not_found)], next: 0 }));
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Connections::default());
        let (sender, arrivals) = mpsc::channel();
        let thread = {
            let (responses, stop, connections) = (responses.clone(), stop.clone(), connections.clone());
            thread::Builder::new().name("omni-bench-server".into()).spawn(move || {
                if concurrent {
                    accept_concurrently(&listener, &responses, &sender, &stop, &connections);
                } else {
                    accept_loop(&listener, &responses, &sender, &stop);
                }
            })?
        };
        Ok(Self { addr, responses, arrivals, stop, connections, thread: Some(thread) })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on every request gets `body` as an SSE stream (rendered here, once).
    pub fn serve(&self, body: &[u8]) {
        self.serve_in_turn(&[body]);
    }

    /// From now on the requests get `bodies` in turn, the first request the first body,
    /// starting over after the last (each rendered here, once). No body: 404s.
    pub fn serve_in_turn(&self, bodies: &[&[u8]]) {
        if bodies.is_empty() {
            return;
        }
        let list = bodies
            .iter()
            .map(|body| {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let mut response = Vec::with_capacity(head.len() + body.len());
                response.extend_from_slice(head.as_bytes());
                response.extend_from_slice(body);
                Arc::new(response)
            })
            .collect();
        *self.responses.lock().unwrap_or_else(PoisonError::into_inner) = Responses { list, next: 0 };
    }

    /// Every request that arrived since the last call.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.try_iter().collect()
    }

    /// The most connections a concurrent server had open at once since the last call
    /// (then counting starts again from those open now). Zero for a serial server.
    pub fn peak_connections(&self) -> usize {
        let now = self.connections.open.load(Ordering::SeqCst);
        self.connections.peak.swap(now, Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, responses: &Mutex<Responses>, arrivals: &Sender<Arrival>, stop: &AtomicBool) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let response = responses.lock().unwrap_or_else(PoisonError::into_inner).take();
        // A client that goes away early is its own failure, reported by the harness.
        let _ = serve(conn, &response, arrivals);
    }
}

fn accept_concurrently(
    listener: &TcpListener,
    responses: &Mutex<Responses>,
    arrivals: &Sender<Arrival>,
    stop: &AtomicBool,
    connections: &Arc<Connections>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let response = responses.lock().unwrap_or_else(PoisonError::into_inner).take();
        let (arrivals, connections) = (arrivals.clone(), connections.clone());
        connections.opened();
        let spawned = thread::Builder::new().stack_size(CONNECTION_STACK).spawn({
            let connections = connections.clone();
            move || {
                let _ = serve(conn, &response, &arrivals);
                connections.closed();
            }
        });
        // No thread: the connection was dropped with the closure (the client sees it
        // closed and fails its run).
        if spawned.is_err() {
            connections.closed();
        }
    }
}

/// Listens again with a backlog of [`BACKLOG`] (on Linux, `listen` on a listening
/// socket sets its backlog anew).
// `listen` is a foreign function.
#[allow(unsafe_code)]
fn listen_deeper(listener: &TcpListener) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is the listener's, open for the call.
    if unsafe { libc::listen(listener.as_raw_fd(), BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn serve(mut conn: TcpStream, response: &[u8], arrivals: &Sender<Arrival>) -> io::Result<()> {
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    conn.set_nodelay(true)?;
    let Some(path) = read_request(&mut conn)? else { return Ok(()) };
    let _ = arrivals.send(Arrival { at: Instant::now(), path });
    conn.write_all(response)?;
    // Closing with unread bytes would reset the connection and could cut the response
    // short: send the end of file, then wait for the client's.
    conn.shutdown(Shutdown::Write)?;
    let mut rest = [0u8; 256];
    while conn.read(&mut rest)? > 0 {}
    Ok(())
}

/// Reads a request's head and its `content-length` body; returns the path, or `None`
/// when the connection ends first.
fn read_request(conn: &mut TcpStream) -> io::Result<Option<String>> {
    let mut request = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = memmem::find(&request, b"\r\n\r\n") {
            break end + 4;
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 || request.len() + n > MAX_REQUEST {
            return Ok(None);
        }
        request.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&request[..head_end]).into_owned();
    let length = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    let mut have = request.len() - head_end;
    while have < length {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        have += n;
    }
    Ok(head.split_whitespace().nth(1).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_serves_the_body_and_notes_the_request() {
        let server = Server::start().unwrap();
        server.serve(b"data: x\n\n");
        let mut conn = TcpStream::connect(server.addr).unwrap();
        conn.write_all(b"POST /v1/messages HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\ndata: x\n\n"), "{answer}");
        drop(conn);
        let arrivals = server.arrivals();
        assert_eq!(arrivals.len(), 1);
        assert_eq!(arrivals[0].path, "/v1/messages");
    }

    #[test]
    fn a_concurrent_server_serves_every_connection_at_once() {
        let server = Server::start_concurrent().unwrap();
        server.serve(b"data: x\n\n");
        // Every connection's request written before any answer is read: a serial server
        // would hold all but the first.
        let mut conns: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
        for conn in &mut conns {
            conn.write_all(b"POST /v1/messages HTTP/1.1\r\ncontent-length: 0\r\n\r\n").unwrap();
        }
        for conn in conns.iter_mut().rev() {
            let mut answer = String::new();
            conn.read_to_string(&mut answer).unwrap();
            assert!(answer.ends_with("\r\n\r\ndata: x\n\n"), "{answer}");
        }
        drop(conns);
        assert_eq!(server.arrivals().len(), 50);
        // Each connection thread counts itself closed once the client's end has come.
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.connections.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(server.peak_connections(), 50);
        assert_eq!(server.peak_connections(), 0);
    }

    #[test]
    fn it_serves_a_list_in_turn() {
        let server = Server::start().unwrap();
        server.serve_in_turn(&[b"data: 1\n\n", b"data: 2\n\n"]);
        let answer = || {
            let mut conn = TcpStream::connect(server.addr).unwrap();
            conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 0\r\n\r\n").unwrap();
            let mut answer = String::new();
            conn.read_to_string(&mut answer).unwrap();
            answer
        };
        for expected in ["data: 1", "data: 2", "data: 1"] {
            let answer = answer();
            assert!(answer.ends_with(&format!("\r\n\r\n{expected}\n\n")), "{answer}");
        }
    }
}
