//! Time to first event: omni-smol against a bare read loop of the same HTTP stack
//! (ureq-proto's sans-IO HTTP/1.1 over smol's TCP), in the same run.
//!
//! Both sides talk to one `omni_conformance::replay::ReplayServer` on loopback (plain
//! HTTP, a new connection per request: the server answers `connection: close`), which
//! serves a short Anthropic Messages text stream with zero delay
//! between events.
//!
//! - `omni`: from calling `client.stream_text(..)` to receiving the first
//!   `GenerateEvent::Stream { event: TextDelta, .. }` in `smol::block_on` on the bench
//!   thread. This covers resolving the model and key, building the request in the core,
//!   spawning the driver task and the request task on smol's global executor, the HTTP
//!   exchange, SSE framing and JSON decoding of the events before the delta, and the
//!   channel hops back to the application.
//! - `baseline`: the same stack used bare, in `smol::block_on` on the bench thread with no
//!   task spawned: `smol::net::TcpStream` (no delay, as the driver sets), a ureq-proto
//!   `Call` carrying the very request omni sent (method, URL, headers and body captured
//!   by the server in a warm-up call, plus `content-length` as the driver adds, and
//!   `connection: close`, as the server closes it anyway), the head parsed by
//!   ureq-proto, then the chunked body decoded until a decoded piece contains the first
//!   `text_delta`: no SSE or JSON parsing.
//!
//! - `omni_one_thread`: `omni` with the client's tasks on an executor the bench thread
//!   drives (`ClientBuilder::executor`), so no hop crosses threads: omni's own work.
//!
//! The ratio `omni / baseline` (medians) is what omni adds over the bare stack. One
//! iteration per sample: the previous stream is dropped (divan drops a sample's outputs
//! after timing it), its leftovers given 2 ms to finish and the server's reply queued,
//! all outside the timed part.
//!
//! After divan's table, the same two measurements run interleaved in pairs (alternating
//! which goes first), which cancels the load drifting between benchmarks on a shared
//! machine; that prints the medians, quartiles and the ratio.
//!
//! Run: `cargo bench -p omni-smol --bench ttfe`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::sync::{Arc, OnceLock};

use divan::Bencher;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::Reply;
use omni_conformance::ttfe::{
    contains_text_delta, paired, reply, under_cargo_bench, Captured, MODEL, PROMPT, REPLY_TEXT, SAMPLES, SETTLE,
};
use omni_smol::{Client, GenerateEvent, StreamEvent, TextStream};
use smol::net::TcpStream;
use smol::{Executor, Timer};
use ureq_proto::client::{Call, RecvResponseResult, SendRequestResult};
use ureq_proto::http;

const READ_SIZE: usize = 16 * 1024;

fn main() {
    divan::main();
    if under_cargo_bench() {
        let f = fixture();
        paired(
            "smol",
            || f.prepare(),
            || drop(smol::block_on(omni_first_delta(&f.client))),
            || drop(smol::block_on(bare_first_delta(&f.request))),
        );
        paired(
            "smol, omni on the bench thread's executor",
            || f.prepare(),
            || drop(smol::block_on(f.executor.run(omni_first_delta(&f.local_client)))),
            || drop(smol::block_on(bare_first_delta(&f.request))),
        );
    }
}

struct Fixture {
    server: ReplayServer,
    reply: Reply,
    client: Client,
    /// The same client with its tasks on `executor`, which the bench thread drives.
    local_client: Client,
    executor: Arc<Executor<'static>>,
    request: Captured,
}

impl Fixture {
    /// Before each sample, outside the timed part: lets the previous iteration's
    /// leftovers (the cancelled call's tasks, the closing connection) finish, then
    /// queues the reply of the next request.
    fn prepare(&self) {
        // Driving the bench thread's executor meanwhile, for the `omni_one_thread` tasks.
        smol::block_on(self.executor.run(Timer::after(SETTLE)));
        self.server.push_replies([self.reply.clone()]);
    }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let reply = reply();
        let server = ReplayServer::start(vec![reply.clone()]).expect("replay server");
        let client = Client::builder()
            .base_url("anthropic", format!("{}/v1", server.base_url()))
            .api_key("anthropic", "sk-replay")
            .build()
            .expect("omni client");
        // Warm-up call: checks the setup and captures the request omni sends.
        let response = smol::block_on(client.generate_text(MODEL, PROMPT)).expect("warm-up call");
        assert_eq!(response.text(), REPLY_TEXT);
        let request = Captured::last_request(&server);
        let executor = Arc::new(Executor::new());
        let local_client = Client::builder()
            .base_url("anthropic", format!("{}/v1", server.base_url()))
            .api_key("anthropic", "sk-replay")
            .build()
            .expect("omni client")
            .on_executor(executor.clone());
        Fixture { server, reply, client, local_client, executor, request }
    })
}

/// omni: `stream_text` to the first text delta. Returns the stream so that dropping
/// it (cancelling the call) happens after the sample is timed.
async fn omni_first_delta(client: &Client) -> TextStream {
    let mut stream = client.stream_text(MODEL, PROMPT).expect("stream_text");
    while let Some(event) = stream.next().await {
        match event {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. } => return stream,
            GenerateEvent::Failed { error, .. } => panic!("the call failed: {error}"),
            _ => {}
        }
    }
    panic!("the stream ended before a text delta")
}

/// Baseline: ureq-proto over smol's TCP, the same request, decoding the body until a
/// piece holds the first text delta. Returns the connection so that closing it happens
/// after timing.
async fn bare_first_delta(request: &Captured) -> TcpStream {
    let uri: http::Uri = request.url.parse().expect("url");
    let mut builder = http::Request::post(uri.clone());
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let built = builder
        .header(http::header::CONTENT_LENGTH, request.body.len())
        .header(http::header::CONNECTION, "close")
        .body(())
        .expect("request");
    let host = uri.host().expect("host");
    let tcp = TcpStream::connect((host, uri.port_u16().unwrap_or(80))).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let mut tcp = tcp;

    // The head, then the body as is.
    let mut call = Call::new(built).expect("call").proceed();
    let mut buffer = vec![0u8; READ_SIZE];
    while !call.can_proceed() {
        let n = call.write(&mut buffer).expect("head");
        tcp.write_all(&buffer[..n]).await.expect("write head");
    }
    let Some(SendRequestResult::SendBody(mut sending)) = call.proceed().expect("send") else {
        panic!("expected to send a body")
    };
    sending.consume_direct_write(request.body.len()).expect("body");
    tcp.write_all(&request.body).await.expect("write body");
    tcp.flush().await.expect("flush");
    let mut call = sending.proceed().expect("receive");

    // The response head.
    let mut carry = Vec::with_capacity(READ_SIZE);
    loop {
        let filled = carry.len();
        carry.resize(filled + READ_SIZE, 0);
        let n = tcp.read(&mut carry[filled..]).await.expect("read head");
        carry.truncate(filled + n);
        assert!(n > 0, "the connection closed before a response");
        let (used, response) = call.try_response(&carry, false).expect("response head");
        if let Some(response) = response {
            assert_eq!(response.status(), 200);
            carry.drain(..used);
            break;
        }
    }
    let Some(RecvResponseResult::RecvBody(mut call)) = call.proceed() else { panic!("expected a body") };

    // The body: decode what arrived, read more, until the delta shows.
    let mut decoded = vec![0u8; READ_SIZE];
    let mut seen = Vec::new();
    loop {
        let mut start = 0;
        while start < carry.len() {
            let (used, produced) = call.read(&carry[start..], &mut decoded).expect("body");
            start += used;
            if contains_text_delta(&mut seen, &decoded[..produced]) {
                return tcp;
            }
            if used == 0 && produced == 0 {
                break;
            }
        }
        carry.drain(..start);
        let filled = carry.len();
        carry.resize(filled + READ_SIZE, 0);
        let n = tcp.read(&mut carry[filled..]).await.expect("read body");
        carry.truncate(filled + n);
        assert!(n > 0, "the body ended before a text delta");
    }
}

#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn omni(bencher: Bencher) {
    let f = fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| smol::block_on(omni_first_delta(&f.client)));
}

#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn baseline(bencher: Bencher) {
    let f = fixture();
    bencher.with_inputs(|| f.prepare()).bench_local_values(|()| smol::block_on(bare_first_delta(&f.request)));
}

/// omni with its tasks on an executor the bench thread drives (`ClientBuilder::executor`),
/// so every hop stays on one thread like the baseline's: what omni's own work costs.
#[divan::bench(sample_size = 1, sample_count = SAMPLES)]
fn omni_one_thread(bencher: Bencher) {
    let f = fixture();
    bencher
        .with_inputs(|| f.prepare())
        .bench_local_values(|()| smol::block_on(f.executor.run(omni_first_delta(&f.local_client))));
}
