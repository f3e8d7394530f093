//! Time to first event: omni-tokio against a bare reqwest read loop, in the same run.
//!
//! Both sides talk to one `omni_conformance::replay::ReplayServer` on loopback (plain
//! HTTP, a new connection per request since the server answers `connection: close`),
//! which serves a short Anthropic Messages text stream with zero delay between events.
//!
//! - `omni`: from calling `client.stream_text(..)` to receiving the first
//!   `GenerateEvent::Stream { event: TextDelta, .. }`. This covers resolving the model
//!   and key, building the request in the core, spawning the driver task and the
//!   request task, the HTTP exchange, SSE framing and JSON decoding of the events before
//!   the delta, and the channel hops to the application.
//! - `baseline`: the same reqwest configuration (rustls with ring, http2 enabled, built
//!   once) sending the very bytes omni sent (method, URL, headers, body captured by the
//!   server in a warm-up call) and reading `Response::chunk` until a chunk contains the
//!   first `text_delta`: no parsing at all, the least any reqwest-based client must do.
//! - `omni_setup_only`: the pure, synchronous part of `stream_text` (resolving the call,
//!   building the machine and its request), to attribute the difference.
//!
//! The ratio `omni / baseline` (medians) is what omni adds over the bare client. Each is
//! measured on a current-thread runtime (every hop on one thread) and a multi-thread one
//! (two workers, as most applications run; task hops may cross threads). One iteration
//! per sample: the previous stream is dropped (divan drops a sample's outputs after
//! timing it), its leftovers given 2 ms to finish and the server's reply queued, all
//! outside the timed part.
//!
//! After divan's table, the same two measurements run interleaved in pairs (alternating
//! which goes first), which cancels the load drifting between benchmarks on a shared
//! machine; that prints the medians, quartiles and the ratio.
//!
//! Run: `cargo bench -p omni-tokio --bench ttfe`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Instant;

use divan::Bencher;
use futures_core::Stream;
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::Reply;
use omni_conformance::ttfe::{
    contains_text_delta, paired, reply, under_cargo_bench, Captured, MODEL, PROMPT, REPLY_TEXT, SAMPLES, SETTLE,
};
use omni_tokio::protocol::client::CallSpec;
use omni_tokio::protocol::generate::Effect;
use omni_tokio::{Client, GenerateEvent, Options, StreamEvent, TextStream};

const RUNTIMES: [&str; 2] = ["current_thread", "multi_thread"];

fn main() {
    divan::main();
    if under_cargo_bench() {
        let f = fixture();
        for flavour in RUNTIMES {
            let rt = f.runtime(flavour);
            paired(
                &format!("tokio {flavour}"),
                || f.prepare(rt),
                || drop(rt.block_on(omni_first_delta(&f.client))),
                || drop(rt.block_on(bare_first_delta(&f.http, &f.request, &f.body))),
            );
        }
    }
}

struct Fixture {
    server: ReplayServer,
    reply: Reply,
    client: Client,
    http: reqwest::Client,
    request: Captured,
    /// The request's body, shared rather than copied into each baseline request.
    body: bytes::Bytes,
    current_thread: tokio::runtime::Runtime,
    multi_thread: tokio::runtime::Runtime,
}

impl Fixture {
    fn runtime(&self, flavour: &str) -> &tokio::runtime::Runtime {
        if flavour == "current_thread" {
            &self.current_thread
        } else {
            &self.multi_thread
        }
    }

    /// Before each sample, outside the timed part: lets the previous iteration's
    /// leftovers (the cancelled call's tasks, the closing connection) finish, then
    /// queues the reply of the next request.
    fn prepare(&self, runtime: &tokio::runtime::Runtime) {
        runtime.block_on(async { tokio::time::sleep(SETTLE).await });
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
        let current_thread = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let multi_thread =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        // Warm-up call: checks the setup and captures the request omni sends.
        let response = current_thread.block_on(client.generate_text(MODEL, PROMPT)).expect("warm-up call");
        assert_eq!(response.text(), REPLY_TEXT);
        let request = Captured::last_request(&server);
        let body = bytes::Bytes::from(request.body.clone());
        Fixture { server, reply, client, http: bare_client(), request, body, current_thread, multi_thread }
    })
}

/// reqwest configured as omni-tokio configures it (rustls with ring, Mozilla roots).
fn bare_client() -> reqwest::Client {
    let tls = omni_shell::tls::rustls_config(&[]).expect("tls configuration");
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().expect("reqwest client")
}

fn next(stream: &mut TextStream) -> impl Future<Output = Option<GenerateEvent>> + '_ {
    std::future::poll_fn(move |cx| Pin::new(&mut *stream).poll_next(cx))
}

/// omni: `stream_text` to the first text delta. Returns the stream so that dropping
/// it (cancelling the call) happens after the sample is timed.
async fn omni_first_delta(client: &Client) -> TextStream {
    let mut stream = client.stream_text(MODEL, PROMPT).expect("stream_text");
    while let Some(event) = next(&mut stream).await {
        match event {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. } => return stream,
            GenerateEvent::Failed { error, .. } => panic!("the call failed: {error}"),
            _ => {}
        }
    }
    panic!("the stream ended before a text delta")
}

/// Baseline: bare reqwest, the same request, reading chunks until one holds the first
/// text delta. Returns the response so that closing it happens after timing.
async fn bare_first_delta(http: &reqwest::Client, request: &Captured, body: &bytes::Bytes) -> reqwest::Response {
    let mut builder = http.post(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let mut response = builder.body(body.clone()).send().await.expect("send");
    assert_eq!(response.status(), 200);
    let mut seen = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("chunk") {
        if contains_text_delta(&mut seen, &chunk) {
            return response;
        }
    }
    panic!("the body ended before a text delta")
}

#[divan::bench(args = RUNTIMES, sample_size = 1, sample_count = SAMPLES)]
fn omni(bencher: Bencher, runtime: &str) {
    let f = fixture();
    let rt = f.runtime(runtime);
    bencher.with_inputs(|| f.prepare(rt)).bench_local_values(|()| rt.block_on(omni_first_delta(&f.client)));
}

#[divan::bench(args = RUNTIMES, sample_size = 1, sample_count = SAMPLES)]
fn baseline(bencher: Bencher, runtime: &str) {
    let f = fixture();
    let rt = f.runtime(runtime);
    bencher
        .with_inputs(|| f.prepare(rt))
        .bench_local_values(|()| rt.block_on(bare_first_delta(&f.http, &f.request, &f.body)));
}

/// The pure part of `stream_text` (the same in every driver): resolving the call
/// (model, provider, key, options), building the machine and taking its first effect,
/// the request with its JSON body. Part of `omni` above; shown to attribute the gap.
#[divan::bench]
fn omni_setup_only() -> Option<Effect> {
    let f = fixture();
    let spec = CallSpec {
        model: MODEL.into(),
        context: PROMPT.into(),
        options: Options::default(),
        tools: Vec::new(),
        api_key: None,
        output_validator: None,
        observe: Default::default(),
    };
    let env = |name: &str| std::env::var(name).ok();
    let mut machine = f.client.config().start(spec, &env, 0, Instant::now()).expect("machine");
    machine.poll_effect()
}
