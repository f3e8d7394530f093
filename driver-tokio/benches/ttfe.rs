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
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use divan::Bencher;
use futures_core::Stream;
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{paced, text_events};
use omni_conformance::sim::Reply;
use omni_tokio::core::client::CallSpec;
use omni_tokio::core::generate::{Effect, Generate};
use omni_tokio::{Client, GenerateEvent, Options, StreamEvent, TextStream};

const MODEL: &str = "anthropic:claude-sonnet-4-5";
const PROMPT: &str = "Say hello.";
const SAMPLES: u32 = 300;
const PAIRS: usize = 300;
const SETTLE: Duration = Duration::from_millis(2);
const RUNTIMES: [&str; 2] = ["current_thread", "multi_thread"];

fn main() {
    divan::main();
    let args: Vec<String> = std::env::args().collect();
    // Only under `cargo bench` (divan runs each benchmark once otherwise, as a test).
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test" || a == "--list") {
        let f = fixture();
        for flavour in RUNTIMES {
            let rt = f.runtime(flavour);
            paired(
                &format!("tokio {flavour}"),
                || f.prepare(rt),
                || drop(rt.block_on(omni_first_delta(&f.client))),
                || drop(rt.block_on(bare_first_delta(&f.http, &f.request))),
            );
        }
    }
}

/// The same measurement with omni and the baseline interleaved (alternating which goes
/// first), so that the machine's load drifting between two divan benchmarks cannot
/// bias the ratio. Prints the medians, quartiles and `omni / baseline` of the medians.
/// Here the drop of the stream is timed too (it is cheap: a channel close).
fn paired(name: &str, prepare: impl Fn(), omni: impl Fn(), baseline: impl Fn()) {
    let (mut omni_times, mut baseline_times) = (Vec::new(), Vec::new());
    for i in 0..PAIRS {
        let timed = |f: &dyn Fn(), into: &mut Vec<Duration>| {
            prepare();
            let started = Instant::now();
            f();
            into.push(started.elapsed());
        };
        if i % 2 == 0 {
            timed(&omni, &mut omni_times);
            timed(&baseline, &mut baseline_times);
        } else {
            timed(&baseline, &mut baseline_times);
            timed(&omni, &mut omni_times);
        }
    }
    let (o, b) = (quantiles(&mut omni_times), quantiles(&mut baseline_times));
    println!(
        "paired {name}, {PAIRS} pairs: omni {}, baseline {}; omni/baseline: median {:.2}, fastest {:.2}",
        show(o),
        show(b),
        o[2] / b[2],
        o[0] / b[0]
    );
}

/// Fastest, p25, median, p75, in µs.
fn quantiles(times: &mut [Duration]) -> [f64; 4] {
    times.sort();
    let at = |q: usize| times[(times.len() - 1) * q / 4].as_secs_f64() * 1e6;
    [at(0), at(1), at(2), at(3)]
}

fn show(q: [f64; 4]) -> String {
    format!("median {:.0} µs (fastest {:.0}, p25 {:.0}, p75 {:.0})", q[2], q[0], q[1], q[3])
}

/// A request exactly as omni sent it, replayed by the baseline.
struct Captured {
    url: String,
    headers: Vec<(String, String)>,
    body: bytes::Bytes,
}

struct Fixture {
    server: ReplayServer,
    reply: Reply,
    client: Client,
    http: reqwest::Client,
    request: Captured,
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
        let reply = paced(&text_events(&["Hello", " there", ", how", " are", " you?"]), Duration::ZERO);
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
        let response =
            current_thread.block_on(client.generate_text(MODEL, PROMPT, Options::default())).expect("warm-up call");
        assert_eq!(response.text(), "Hello there, how are you?");
        let recorded = server.requests().pop().expect("the warm-up request");
        let skip = ["host", "content-length", "connection", "transfer-encoding"];
        let request = Captured {
            url: format!("{}{}", server.base_url(), recorded.path),
            headers: recorded.headers.into_iter().filter(|(n, _)| !skip.contains(&n.as_str())).collect(),
            body: recorded.body.into(),
        };
        Fixture { server, reply, client, http: bare_client(), request, current_thread, multi_thread }
    })
}

/// reqwest configured as omni-tokio configures it (rustls with ring, Mozilla roots).
fn bare_client() -> reqwest::Client {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("tls versions")
        .with_root_certificates(rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() })
        .with_no_client_auth();
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().expect("reqwest client")
}

fn next(stream: &mut TextStream) -> impl Future<Output = Option<GenerateEvent>> + '_ {
    std::future::poll_fn(move |cx| Pin::new(&mut *stream).poll_next(cx))
}

/// omni: `stream_text` to the first text delta. Returns the stream so that dropping
/// it (cancelling the call) happens after the sample is timed.
async fn omni_first_delta(client: &Client) -> TextStream {
    let mut stream = client.stream_text(MODEL, PROMPT, Options::default()).expect("stream_text");
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
async fn bare_first_delta(http: &reqwest::Client, request: &Captured) -> reqwest::Response {
    let mut builder = http.post(&request.url);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let mut response = builder.body(request.body.clone()).send().await.expect("send");
    assert_eq!(response.status(), 200);
    let mut seen = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("chunk") {
        if contains_text_delta(&mut seen, &chunk) {
            return response;
        }
    }
    panic!("the body ended before a text delta")
}

/// Appends `chunk` to `seen` and looks for the marker in the new bytes (plus the
/// marker's length minus one before them, in case it straddles two chunks).
fn contains_text_delta(seen: &mut Vec<u8>, chunk: &[u8]) -> bool {
    const MARKER: &[u8] = b"\"text_delta\"";
    let from = seen.len().saturating_sub(MARKER.len() - 1);
    seen.extend_from_slice(chunk);
    seen.get(from..).unwrap_or_default().windows(MARKER.len()).any(|w| w == MARKER)
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
    bencher.with_inputs(|| f.prepare(rt)).bench_local_values(|()| rt.block_on(bare_first_delta(&f.http, &f.request)));
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
    };
    let config = f.client.config().prepare(spec, &|name| std::env::var(name).ok()).expect("prepare");
    let mut machine = Generate::new(config, Instant::now()).expect("machine");
    machine.poll_effect()
}
