//! A loopback HTTP proxy that speaks `CONNECT` only, as corporate proxies do for HTTPS,
//! for the drivers' proxy tests: it records each tunnel's request head, checks Basic
//! credentials when told to (answering 407 otherwise), and pipes bytes both ways.
//! The cases every driver passes are [`proxy_suite`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use omni_protocol::generate::{GenerateError, GenerateEvent, TransportErrorKind};

use crate::http_suite::{finished_text, Setup, StreamingDriver};
use crate::keepalive::{reuse_body, KeepAliveServer, Plan, KEY};

/// The proxy.
#[derive(Debug)]
pub struct ConnectProxy {
    addr: SocketAddr,
    /// Each `CONNECT` request head received, in order.
    heads: Arc<Mutex<Vec<String>>>,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl ConnectProxy {
    /// Starts the proxy; with `credentials` (`user:password`), a tunnel needs them.
    pub fn start(credentials: Option<&str>) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let heads = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let expected = credentials.map(|c| base64(c.as_bytes()));
        let (seen, stop) = (heads.clone(), stopping.clone());
        let acceptor = thread::Builder::new().name("connect-proxy".into()).spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (seen, expected) = (seen.clone(), expected.clone());
                let _ = thread::Builder::new().name("connect-proxy-conn".into()).spawn(move || {
                    let _ = tunnel(conn, &seen, expected.as_deref());
                });
            }
        })?;
        Ok(Self { addr, heads, stopping, acceptor: Some(acceptor) })
    }

    /// The proxy URL, with `credentials` (`user:password`, percent-encoded) if given.
    pub fn url(&self, credentials: Option<&str>) -> String {
        match credentials {
            Some(c) => format!("http://{c}@{}", self.addr),
            None => format!("http://{}", self.addr),
        }
    }

    /// The `CONNECT` request heads received so far.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("not poisoned").clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Serves one proxy connection: the `CONNECT` head, then the tunnel.
fn tunnel(mut client: TcpStream, seen: &Mutex<Vec<String>>, expected: Option<&str>) -> io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte)? == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    seen.lock().expect("not poisoned").push(head.clone());
    let mut words = head.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        return client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n");
    };
    if expected.is_some_and(|credentials| !has_basic_auth(&head, credentials)) {
        return client.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n");
    }
    let Ok(upstream) = TcpStream::connect(target) else {
        return client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
    };
    client.set_read_timeout(None)?;
    client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")?;
    let (mut client_in, mut upstream_out) = (client.try_clone()?, upstream.try_clone()?);
    let up = thread::spawn(move || {
        let _ = io::copy(&mut client_in, &mut upstream_out);
        let _ = upstream_out.shutdown(Shutdown::Write);
    });
    let (mut upstream_in, mut client_out) = (upstream, client);
    let _ = io::copy(&mut upstream_in, &mut client_out);
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = up.join();
    Ok(())
}

/// True when `head` has `Proxy-Authorization: Basic <credentials>` (names and scheme
/// case-insensitive, the credentials exact).
fn has_basic_auth(head: &str, credentials: &str) -> bool {
    head.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.eq_ignore_ascii_case("proxy-authorization")
                && value
                    .trim()
                    .split_once(' ')
                    .is_some_and(|(scheme, given)| scheme.eq_ignore_ascii_case("basic") && given.trim() == credentials)
        })
    })
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]) } else { '=' });
        }
    }
    out
}

/// The credentials the proxy of [`proxy_suite`] requires.
pub const CREDENTIALS: &str = "omni:pr0xy-pa55";
/// The password part of [`CREDENTIALS`].
pub const PASSWORD: &str = "pr0xy-pa55";

/// The `Proxy-Authorization` credentials of [`CREDENTIALS`] as sent (base64).
pub fn encoded_credentials() -> String {
    base64(CREDENTIALS.as_bytes())
}

/// The proxy cases every driver passes:
///
/// - two calls to an HTTPS server through the proxy, with credentials, succeed over one
///   tunnel (`CONNECT 127.0.0.1:port` with `Proxy-Authorization: Basic ..`) that the
///   second call reuses; the API key never reaches the proxy in the clear;
/// - with wrong credentials, the call fails at once (the proxy answered 407: a
///   `ProxyAuth` transport error, not retried) with an error that does not show the
///   password.
pub fn proxy_suite(driver: &impl StreamingDriver) {
    let proxy = ConnectProxy::start(Some(CREDENTIALS)).expect("proxy");
    let (server, ca) = KeepAliveServer::start_tls(reuse_body(), Plan::Serve).expect("server");
    let setup = |credentials| Setup {
        root_certificate: Some(ca.clone()),
        proxy: Some(proxy.url(Some(credentials))),
        no_retries: true,
        ..Setup::new(server.base_url(), KEY)
    };
    let through = driver.client(&setup(CREDENTIALS));
    for n in 0..2 {
        let events = driver.stream(&through);
        assert_eq!(finished_text(&events).as_deref(), Some("Hi"), "call {n} through the proxy: {events:?}");
    }
    let heads = proxy.heads();
    assert_eq!(heads.len(), 1, "one tunnel, reused by the second call: {heads:?}");
    let port = server.base_url().rsplit(':').next().and_then(|p| p.split('/').next()).unwrap_or_default().to_string();
    assert!(heads[0].starts_with(&format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n")), "{}", heads[0]);
    let auth = format!("proxy-authorization: basic {}", base64(CREDENTIALS.as_bytes()));
    assert!(
        heads[0].lines().any(|l| l.len() == auth.len() && l.eq_ignore_ascii_case(&auth) && l.ends_with(&auth[27..])),
        "{}",
        heads[0]
    );
    assert!(!heads[0].contains(KEY), "the API key goes inside the tunnel only");
    assert_eq!(server.requests_per_connection(), vec![2]);
    assert_eq!(server.requests_without_key(), 0);

    // With the default retry policy: a refusal is not worth sending again.
    let refused = driver.client(&Setup { no_retries: false, ..setup("omni:wrong-pa55") });
    let events = driver.stream(&refused);
    assert!(!events.iter().any(|e| matches!(e, GenerateEvent::Retry { .. })), "a 407 is not retried: {events:?}");
    let kind = events.iter().find_map(|e| match e {
        GenerateEvent::Failed { error, .. } => match &**error {
            GenerateError::Transport(t) => Some(t.kind),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(kind, Some(TransportErrorKind::ProxyAuth), "{events:?}");
    let failure = events.iter().find_map(|e| match e {
        GenerateEvent::Failed { error, .. } => Some(error.to_string()),
        _ => None,
    });
    let failure = failure.unwrap_or_else(|| panic!("a refused tunnel fails the call: {events:?}"));
    assert!(!failure.contains("wrong-pa55"), "{failure}");
}
