//! A loopback HTTP/1.1 server: serves scripted [`Reply`]s with chosen chunking, delays, statuses and headers,
//! faults (connection closed mid-body, a hang), and records every request.
//!
//! It binds 127.0.0.1 on port 0 only. Bodies go out with chunked transfer encoding, one
//! HTTP chunk per scripted piece, flushed at once, so delays reach the client as gaps.
//! Every wait is bounded, and dropping the server stops it.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::conn::{Conn, TlsConfig};
use super::{BodyStep, RecordedRequest, Reply};

/// Longest a scripted hang keeps a connection open.
const MAX_HANG: Duration = Duration::from_secs(30);
/// Largest request accepted.
const MAX_REQUEST: usize = 16 * 1024 * 1024;

#[derive(Debug, Default)]
struct Shared {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    /// Connections the client closed before the reply was complete.
    client_disconnects: usize,
}

/// The server. Dropping it stops it.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    scheme: &'static str,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MockServer {
    /// Starts a server that answers successive requests with `replies`; once they run
    /// out it answers 500.
    pub fn start(replies: Vec<Reply>) -> io::Result<Self> {
        Self::start_with(replies, None)
    }

    #[cfg(feature = "tls")]
    /// Starts an HTTPS server with a certificate for `127.0.0.1` and `localhost`, signed
    /// by a certificate authority generated for this server alone. Returns the server
    /// and the authority's certificate (PEM) for the client to trust.
    pub fn start_tls(replies: Vec<Reply>) -> io::Result<(Self, String)> {
        let (config, ca_pem) = super::tls::server_config().map_err(io::Error::other)?;
        Ok((Self::start_with(replies, Some(config))?, ca_pem))
    }

    fn start_with(replies: Vec<Reply>, tls: Option<TlsConfig>) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared { replies: replies.into(), ..Shared::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            thread::Builder::new()
                .name("omni-mock-server".into())
                .spawn(move || accept_loop(listener, tls, shared, stop))?
        };
        Ok(Self { addr, scheme, shared, stop, thread: Some(thread) })
    }

    /// `http://127.0.0.1:<port>` (or `https://` for a TLS server).
    pub fn base_url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).requests.clone()
    }

    /// How many connections the client closed before its reply was complete.
    pub fn client_disconnects(&self) -> usize {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).client_disconnects
    }

    /// Waits up to `limit` for `n` client disconnects; true when they happened.
    pub fn wait_for_disconnects(&self, n: usize, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.client_disconnects() >= n {
                return true;
            }
            thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Appends replies to the script.
    pub fn push_replies(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).replies.extend(replies);
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, tls: Option<TlsConfig>, shared: Arc<Mutex<Shared>>, stop: Arc<AtomicBool>) {
    let mut workers = Vec::new();
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let Some(conn) = Conn::accept(stream, tls.as_ref()) else { continue };
        // Finished connections' threads are let go, so the list holds live ones only.
        workers.retain(|w: &JoinHandle<()>| !w.is_finished());
        let (shared, stop) = (shared.clone(), stop.clone());
        if let Ok(w) = thread::Builder::new().name("omni-mock-conn".into()).spawn(move || {
            if let Ok(Outcome::ClientLeft) = serve(conn, &shared, &stop) {
                shared.lock().unwrap_or_else(PoisonError::into_inner).client_disconnects += 1;
            }
        }) {
            workers.push(w);
        }
    }
    for w in workers {
        let _ = w.join();
    }
}

/// How serving one connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The reply was sent as scripted (or the script closed the connection).
    Served,
    /// The client closed the connection before the reply was complete.
    ClientLeft,
}

fn serve(mut conn: Conn, shared: &Mutex<Shared>, stop: &AtomicBool) -> io::Result<Outcome> {
    conn.tcp().set_read_timeout(Some(Duration::from_secs(10)))?;
    conn.tcp().set_nodelay(true)?;
    let Some(request) = read_request(&mut conn)? else { return Ok(Outcome::Served) };
    let reply = {
        let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared.requests.push(request);
        shared.replies.pop_front()
    };
    let sent = match reply {
        None => write_simple(&mut conn, 500, r#"{"error":{"message":"the replay script has no more replies"}}"#),
        Some(Reply::ConnectFail) => conn.tcp().shutdown(Shutdown::Both),
        Some(Reply::Http { status, headers, body }) => send_reply(&mut conn, status, &headers, body, stop),
    };
    match sent {
        Ok(()) => Ok(Outcome::Served),
        Err(e) if is_disconnect(&e) => Ok(Outcome::ClientLeft),
        Err(e) => Err(e),
    }
}

fn is_disconnect(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted)
}

fn send_reply(
    out: &mut Conn,
    status: u16,
    headers: &[(String, String)],
    body: Vec<BodyStep>,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    out.write_all(head.as_bytes())?;
    out.flush()?;
    for step in body {
        match step {
            BodyStep::Bytes(bytes) if bytes.is_empty() => {}
            BodyStep::Bytes(bytes) => {
                out.write_all(format!("{:x}\r\n", bytes.len()).as_bytes())?;
                out.write_all(&bytes)?;
                out.write_all(b"\r\n")?;
                out.flush()?;
            }
            BodyStep::Wait(d) => thread::sleep(d),
            BodyStep::Reset => return out.tcp().shutdown(Shutdown::Both),
            BodyStep::Hang => return hang(out, stop),
        }
    }
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

/// Keeps the connection open, sending nothing, until the client goes away, the server
/// stops, or [`MAX_HANG`] passes.
fn hang(conn: &mut Conn, stop: &AtomicBool) -> io::Result<()> {
    conn.tcp().set_read_timeout(Some(Duration::from_millis(50)))?;
    let started = Instant::now();
    let mut probe = [0u8; 64];
    while started.elapsed() < MAX_HANG && !stop.load(Ordering::SeqCst) {
        match conn.read(&mut probe) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client closed the connection")),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    conn.tcp().shutdown(Shutdown::Both)
}

fn read_request(conn: &mut Conn) -> io::Result<Option<RecordedRequest>> {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else { return Ok(None) };
    let (method, path) = (method.to_string(), path.to_string());
    let mut headers = Vec::new();
    let mut total = line.len();
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        total += n;
        if n == 0 || total > MAX_REQUEST {
            return Ok(None);
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { read_chunked(&mut reader)? } else { read_exact_vec(&mut reader, length)? };
    Ok(Some(RecordedRequest::new(method, path, headers, body)))
}

fn read_exact_vec(reader: &mut impl Read, n: usize) -> io::Result<Vec<u8>> {
    let mut body = vec![0; n];
    reader.read_exact(&mut body)?;
    Ok(body)
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line)?;
        let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            let mut trailer = String::new();
            reader.read_line(&mut trailer)?;
            return Ok(body);
        }
        if body.len() + size > MAX_REQUEST {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request body too large"));
        }
        body.extend(read_exact_vec(reader, size)?);
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn write_simple(out: &mut impl Write, status: u16, body: &str) -> io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    )?;
    out.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "tls")]
    #[test]
    fn tls_server_starts_and_gives_a_ca() {
        let (server, ca) = MockServer::start_tls(vec![]).unwrap();
        assert!(server.base_url().starts_with("https://127.0.0.1:"));
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    }

    fn get(addr: SocketAddr, body: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}", body.len()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_scripted_replies_in_chunks_and_records_requests() {
        let server = MockServer::start(vec![Reply::stream(b"data: hi\n\n", 4, Duration::from_millis(1))]).unwrap();
        let out = get(server.addr(), "{\"a\":1}");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("4\r\ndata\r\n"), "{out}");
        assert!(out.ends_with("0\r\n\r\n"), "{out}");
        let reqs = server.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].path, "/v1/messages");
        assert_eq!(reqs[0].body, b"{\"a\":1}");
        // Out of replies: a 500 that says so.
        assert!(get(server.addr(), "").starts_with("HTTP/1.1 500"));
    }

    #[test]
    fn reset_closes_mid_body() {
        let server = MockServer::start(vec![Reply::Http {
            status: 200,
            headers: vec![],
            body: vec![BodyStep::Bytes(b"partial".to_vec()), BodyStep::Reset],
        }])
        .unwrap();
        let out = get(server.addr(), "");
        assert!(out.contains("partial") && !out.ends_with("0\r\n\r\n"), "{out}");
    }
}
