//! Time to first event: omni-blocking against a bare ureq read loop, in the same run.
//!
//! Both sides talk to one `omni_conformance::replay::ReplayServer` on loopback (plain
//! HTTP, a new connection per request since the server answers `connection: close`),
//! which serves a short Anthropic Messages text stream with zero delay between events.
//!
//! - `omni`: from calling `client.stream_text(..)` to the iterator yielding the first
//!   `GenerateEvent::Stream { event: TextDelta, .. }`. This covers resolving the model
//!   and key, building the request in the core, starting the loop thread and the request
//!   thread (omni-shell's HTTP/1.1 exchange over a std socket),
//!   the HTTP exchange, SSE framing and JSON decoding of the events before the delta, and
//!   the two channel hops back to the application thread.
//! - `baseline`: ureq configured as the driver configured it before issue 25 (built once), on the bench
//!   thread, sending the very bytes omni sent (method, URL, headers, body captured by the
//!   server in a warm-up call) and reading the body reader in 16 KiB reads (the driver's
//!   size) until the bytes read contain the first `text_delta`: no parsing at all.
//!
//! - `baseline_in_driver_threads`: the baseline's request run in the driver's thread
//!   layout (a loop thread and a request thread per call, a channel hop per read and one
//!   to the application), to attribute the difference.
//!
//! - `tls_*`: the same over HTTPS (the server's own authority trusted through
//!   `root_certificate`, the Mozilla roots plus one), with `tls_baseline_fresh_agent`
//!   making a fresh agent per request as the driver did before issue 25: ureq builds the
//!   rustls configuration per agent, so each request parses the roots again and starts
//!   with an empty session cache (no resumption), the price it paid to cancel through
//!   `Agent::shutdown`.
//!
//! The ratio `omni / baseline` (medians) is what omni adds over the bare client. One
//! iteration per sample: the previous stream is dropped (divan drops a sample's outputs
//! after timing it), its leftovers given 2 ms to finish and the server's reply queued,
//! all outside the timed part.
//!
//! After divan's table, the same two measurements run interleaved in pairs (alternating
//! which goes first), which cancels the load drifting between benchmarks on a shared
//! machine; that prints the medians, quartiles and the ratio.
//!
//! Run: `cargo bench -p omni-blocking --bench ttfe`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::io::Read;
use std::sync::{mpsc, OnceLock};
use std::thread;

use divan::Bencher;
use omni_blocking::{Client, GenerateEvent, StreamEvent, TextStream};
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::Reply;
use omni_conformance::ttfe::{
    contains_text_delta, paired, reply, under_cargo_bench, Captured, MODEL, PROMPT, REPLY_TEXT, SAMPLES, SETTLE,
};

const READ_BUFFER: usize = 16 * 1024;

fn main() {
    divan::main();
    if under_cargo_bench() {
        let f = fixture();
        paired(
            "blocking",
            || f.prepare(),
            || drop(omni_first_delta(&f.client)),
            || drop(bare_first_delta(&f.agent, &f.request)),
        );
        let t = tls_fixture();
        paired(
            "blocking https",
            || t.prepare(),
            || drop(omni_first_delta(&t.client)),
            || drop(bare_first_delta(&t.agent, &t.request)),
        );
    }
}

struct Fixture {
    server: ReplayServer,
    reply: Reply,
    client: Client,
    agent: ureq::Agent,
    request: Captured,
}

impl Fixture {
    /// Before each sample, outside the timed part: lets the previous iteration's
    /// leftovers (the cancelled call's threads, the closing connection) finish, then
    /// queues the reply of the next request.
    fn prepare(&self) {
        std::thread::sleep(SETTLE);
        self.server.push_replies([self.reply.clone()]);
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| build_fixture(false))
}

fn tls_fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| build_fixture(true))
}

/// A replay server (HTTPS with its own certificate authority when `tls`), an omni
/// client and a bare agent that trust it, and the request omni sends.
fn build_fixture(tls: bool) -> Fixture {
    let reply = reply();
    let (server, ca) = if tls {
        let (server, ca) = ReplayServer::start_tls(vec![reply.clone()]).expect("replay server");
        (server, Some(ca))
    } else {
        (ReplayServer::start(vec![reply.clone()]).expect("replay server"), None)
    };
    let mut builder =
        Client::builder().base_url("anthropic", format!("{}/v1", server.base_url())).api_key("anthropic", "sk-replay");
    if let Some(ca) = &ca {
        builder = builder.root_certificate(ca.as_bytes());
    }
    let client = builder.build().expect("omni client");
    // Warm-up call: checks the setup and captures the request omni sends.
    let response = client.generate_text(MODEL, PROMPT).expect("warm-up call");
    assert_eq!(response.text(), REPLY_TEXT);
    let request = Captured::last_request(&server);
    Fixture { server, reply, client, agent: bare_agent(ca.as_deref()), request }
}

/// ureq configured as omni-blocking configured it before issue 25: statuses are responses, no
/// redirects, rustls, no timeouts beyond resolve and connect; with `ca`, the Mozilla
/// roots plus that certificate, as `root_certificate` sets them.
fn bare_agent(ca: Option<&str>) -> ureq::Agent {
    let mut tls = ureq::tls::TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls);
    if let Some(ca) = ca {
        let mut certs: Vec<ureq::tls::Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
            .iter()
            .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
            .collect();
        for item in ureq::tls::parse_pem(ca.as_bytes()) {
            if let Ok(ureq::tls::PemItem::Certificate(cert)) = item {
                certs.push(cert);
            }
        }
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
    }
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_resolve(Some(omni_blocking::CONNECT_TIMEOUT))
        .timeout_connect(Some(omni_blocking::CONNECT_TIMEOUT))
        .tls_config(tls.build())
        .build()
        .new_agent()
}

/// omni: `stream_text` to the first text delta. Returns the stream so that dropping
/// it (cancelling the call) happens after the sample is timed.
fn omni_first_delta(client: &Client) -> TextStream {
    let mut stream = client.stream_text(MODEL, PROMPT).expect("stream_text");
    for event in stream.by_ref() {
        match event {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. } => return stream,
            GenerateEvent::Failed { error, .. } => panic!("the call failed: {error}"),
            _ => {}
        }
    }
    panic!("the stream ended before a text delta")
}

/// Baseline: bare ureq, the same request, reading until the bytes hold the first text
/// delta. Returns the body reader so that closing it happens after timing.
fn bare_first_delta(agent: &ureq::Agent, request: &Captured) -> impl Read {
    let mut builder = agent.post(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let response = builder.send(&request.body[..]).expect("send");
    assert_eq!(response.status(), 200);
    let mut reader = response.into_body().into_reader();
    let mut buffer = vec![0u8; READ_BUFFER];
    let mut seen = Vec::new();
    loop {
        let n = reader.read(&mut buffer).expect("read");
        assert!(n > 0, "the body ended before a text delta");
        if contains_text_delta(&mut seen, &buffer[..n]) {
            return reader;
        }
    }
}

#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn omni(bencher: Bencher) {
    let f = fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| omni_first_delta(&f.client));
}

#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn baseline(bencher: Bencher) {
    let f = fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| bare_first_delta(&f.agent, &f.request));
}

/// The baseline's request in the driver's thread layout, without omni: a loop thread
/// started per call starts a request thread, which sends every read to the loop thread
/// over a channel; the loop thread hands the read holding the delta to the bench thread
/// over another. `omni` minus this is omni's own work; this minus `baseline` is the
/// price of the threads and hops, which grows with the machine's load.
#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn baseline_in_driver_threads(bencher: Bencher) {
    let f = fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| bare_in_driver_threads());
}

fn bare_in_driver_threads() -> mpsc::Receiver<Vec<u8>> {
    let (events_tx, events_rx) = mpsc::channel::<Vec<u8>>();
    thread::spawn(move || {
        let (reads_tx, reads_rx) = mpsc::channel::<Vec<u8>>();
        thread::spawn(move || {
            let f = fixture();
            let mut builder = f.agent.post(&f.request.url);
            for (name, value) in &f.request.headers {
                builder = builder.header(name, value);
            }
            let response = builder.send(&f.request.body[..]).expect("send");
            let mut reader = response.into_body().into_reader();
            let mut buffer = vec![0u8; READ_BUFFER];
            loop {
                let n = reader.read(&mut buffer).expect("read");
                if n == 0 || reads_tx.send(buffer[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        let mut seen = Vec::new();
        while let Ok(read) = reads_rx.recv() {
            if contains_text_delta(&mut seen, &read) {
                let _ = events_tx.send(read);
                return;
            }
        }
    });
    events_rx.recv().expect("a read holding the delta");
    events_rx
}

/// HTTPS (the server's own authority trusted through `root_certificate`): omni.
#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn tls_omni(bencher: Bencher) {
    let f = tls_fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| omni_first_delta(&f.client));
}

/// HTTPS: the bare agent, kept across requests (its rustls configuration, and with it
/// the TLS session cache, is built once).
#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn tls_baseline(bencher: Bencher) {
    let f = tls_fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| bare_first_delta(&f.agent, &f.request));
}

/// HTTPS: a fresh agent from the same configuration per request, as the driver made one
/// per request before issue 25 (so that a cancel could shut its sockets down). ureq builds the
/// rustls configuration per agent, so each request parses the roots again and starts
/// with an empty TLS session cache.
#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn tls_baseline_fresh_agent(bencher: Bencher) {
    let f = tls_fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| {
        let agent = ureq::Agent::new_with_config(f.agent.config().clone());
        bare_first_delta(&agent, &f.request)
    });
}
