//! What omni's telemetry costs per request (issue 28): `cargo bench -p omni-bench --bench telemetry`.
//!
//! Short requests through omni-tokio against the loopback server (`omni_bench::server`,
//! one connection per request), the bodies from `omni_conformance::synth`:
//!
//! - `openai_text`: a Chat Completions stream of 20 text deltas (one `chat` span);
//! - `openai_tool`: two steps: a tool call whose arguments (64 bytes) come in 8 fragments,
//!   the tool run (it answers at once), then the 20-delta text (two `chat` spans and one
//!   `execute_tool`).
//!
//! Each in four configurations:
//!
//! - `off`: no subscriber at all (what omni does when nobody listens);
//! - `filtered`: a subscriber at `INFO` with a recording layer, target `omni` turned off
//!   (`Targets`): an application that logs, but not omni; the one `tracing::enabled!`
//!   check per call is what omni adds;
//! - `recorded`: the same subscriber with `omni` on: every span and field omni makes is
//!   formatted into a `String` per span (`Recorder`: `on_new_span`, `on_record`,
//!   `on_close`), so each field is really visited, as a formatting or exporting layer does;
//! - `content`: `recorded`, the client built with `capture_content(true)` (the messages,
//!   tool definitions, arguments and results as JSON on the spans).
//!
//! The subscribers are set with `tracing::subscriber::set_default`, which holds for the
//! thread that sets it; so the calls run on a current-thread tokio runtime, where every
//! part of a call (the request's task, the call's loop, the tool's future) runs on that
//! thread. Before anything is timed, one request of each case and configuration checks
//! the spans the recorder saw (`recorded`, `content`: the spans above; `off`,
//! `filtered`: none).
//!
//! After divan's table (under `cargo bench` only), the configurations run interleaved:
//! `ROUNDS` rounds (15), each running `BATCH` requests (200) of each configuration, the
//! order rotated every round, which cancels most of the drift of a shared machine. Per
//! configuration: the medians over rounds of wall time, the bench thread's CPU
//! (`CLOCK_THREAD_CPUTIME_ID`: the client's whole work, without the server's thread) and
//! allocations per request (the process's, the server's included: the same in every
//! configuration); against `off`, the medians of the per-round ratios and differences.
//!
//! `PROFILE=<case>/<configuration>` (e.g. `openai_text/recorded`) runs only `BATCH`
//! requests of that one, for an instruction count (`valgrind --tool=callgrind`): the
//! difference of two such runs with different `BATCH` is what one request costs,
//! without the process's start.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use divan::Bencher;
use omni_bench::rusage::thread_cpu;
use omni_bench::server::Server;
use omni_conformance::heap::{allocations, AllocationCounter};
use omni_conformance::synth::{long_string_args, text_stream, tool_call_stream};
use omni_conformance::ttfe::under_cargo_bench;
use omni_conformance::wires::Wire;
use omni_tokio::{Client, Dialect, GenerateEvent, Model, StreamEvent, Tool, ToolError, ToolOutput};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

#[global_allocator]
static ALLOCATOR: AllocationCounter = AllocationCounter;

const CASES: [&str; 2] = ["openai_text", "openai_tool"];
const CONFIGS: [&str; 4] = ["off", "filtered", "recorded", "content"];
/// Text deltas of each reply.
const DELTAS: usize = 20;
/// Bytes of the tool call's arguments, and of each of their fragments.
const TOOL_ARGS: usize = 64;
const FRAGMENT: usize = 8;
const PROMPT: &str = "Say hello.";

fn main() {
    // Every case and configuration once, checked, before anything is timed (also what
    // `cargo test --benches` runs).
    let f = fixture();
    for case in CASES {
        for config in CONFIGS {
            f.check(case, config);
        }
    }
    // `PROFILE=<case>/<configuration>`: only `BATCH` requests of that, to be counted
    // alone (`valgrind --tool=callgrind`, `perf stat`); two runs' difference divided by
    // the difference of their `BATCH` is one request's count.
    if let Some((case, config)) = std::env::var("PROFILE").ok().as_deref().and_then(|p| p.split_once('/')) {
        let n = env_number("BATCH", 200);
        let _installed = install(config);
        for _ in 0..n {
            f.request(case, config);
        }
        println!("{case} {config}: {n} requests");
        return;
    }
    divan::main();
    if under_cargo_bench() {
        for case in CASES {
            interleaved(f, case);
        }
    }
}

fn main_bench(bencher: Bencher, case: &str, config: &str) {
    let f = fixture();
    let _installed = install(config);
    bencher.bench_local(|| f.request(case, config));
}

#[divan::bench(args = CONFIGS, sample_count = 500)]
fn openai_text(bencher: Bencher, config: &str) {
    main_bench(bencher, "openai_text", config);
}

#[divan::bench(args = CONFIGS, sample_count = 500)]
fn openai_tool(bencher: Bencher, config: &str) {
    main_bench(bencher, "openai_tool", config);
}

// The recording layer.

/// Spans closed and events seen, and the bytes of text they made, since the start.
static SPANS: AtomicU64 = AtomicU64::new(0);
static EVENTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// Formats every field of every span (when it is made and each time one is recorded)
/// and event into text, kept in the span until it closes: what a formatting or
/// exporting layer does with each value, without the output.
struct Recorder;

/// A span's fields as text, in its extensions.
struct SpanText(String);

/// Writes each field as ` name=value`.
struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut text = String::from(attrs.metadata().name());
        attrs.record(&mut Fields(&mut text));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanText(text));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(text) = span.extensions_mut().get_mut::<SpanText>() {
                values.record(&mut Fields(&mut text.0));
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut text = String::from(event.metadata().name());
        event.record(&mut Fields(&mut text));
        EVENTS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(text.len() as u64, Ordering::Relaxed);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(text) = span.extensions_mut().remove::<SpanText>() {
                SPANS.fetch_add(1, Ordering::Relaxed);
                BYTES.fetch_add(text.0.len() as u64, Ordering::Relaxed);
            }
        }
    }
}

/// A configuration's subscriber, set for this thread until dropped.
struct Installed(Option<DefaultGuard>);

impl Drop for Installed {
    fn drop(&mut self) {
        drop(self.0.take());
        // Back to no subscriber at all: `tracing`'s global level and callsite interests
        // are recomputed from the subscribers still alive (none), as if none had been set.
        tracing::callsite::rebuild_interest_cache();
    }
}

fn install(config: &str) -> Installed {
    let guard = match config {
        "off" => None,
        "filtered" => {
            let filter = Targets::new().with_default(LevelFilter::INFO).with_target("omni", LevelFilter::OFF);
            Some(tracing::subscriber::set_default(tracing_subscriber::registry().with(filter).with(Recorder)))
        }
        _ => Some(tracing::subscriber::set_default(
            tracing_subscriber::registry().with(LevelFilter::INFO).with(Recorder),
        )),
    };
    Installed(guard)
}

// The requests.

struct Fixture {
    runtime: tokio::runtime::Runtime,
    model: Model,
    tool: Tool,
    /// The servers (text, tool): each text request gets the text stream; the tool
    /// requests get the tool call and the text stream in turn. (A `Mutex` to be `Sync`.)
    servers: Mutex<[Server; 2]>,
    /// Clients of the text and the tool server, without and with content captured.
    text: [Client; 2],
    tools: [Client; 2],
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let wire = Wire(Dialect::OpenaiCompletions);
        let text_body = text_stream(wire.0, DELTAS, "token ");
        let tool_body =
            tool_call_stream(wire.0, &long_string_args(TOOL_ARGS), FRAGMENT).expect("a Chat Completions body");
        let text_server = Server::start().expect("a loopback port");
        text_server.serve(&text_body);
        let tool_server = Server::start().expect("a loopback port");
        tool_server.serve_in_turn(&[&tool_body, &text_body]);
        let client = |server: &Server, capture: bool| {
            wire.apply(Client::builder(), &server.base_url()).capture_content(capture).build().expect("omni client")
        };
        let schema =
            serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        let tool = Tool::new("store", "Stores a text.", schema, |_input| async {
            Ok::<_, ToolError>(ToolOutput::text("stored"))
        });
        Fixture {
            runtime: tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime"),
            model: wire.model(),
            tool,
            text: [client(&text_server, false), client(&text_server, true)],
            tools: [client(&tool_server, false), client(&tool_server, true)],
            servers: Mutex::new([text_server, tool_server]),
        }
    })
}

impl Fixture {
    /// One request of `case` by the client of `config`, read to its end; panics if it
    /// does not go as scripted.
    fn request(&self, case: &str, config: &str) {
        let capture = usize::from(config == "content");
        // The call starts inside the runtime (omni-tokio spawns its tasks there).
        let outcome = self.runtime.block_on(async {
            if case == "openai_tool" {
                read(self.tools[capture].call(self.model.clone(), PROMPT).tool(self.tool.clone()).stream(), 1).await
            } else {
                read(self.text[capture].call(self.model.clone(), PROMPT).stream(), 0).await
            }
        });
        if let Err(error) = outcome {
            panic!("{case} {config}: {error}");
        }
    }

    /// One request of each, the subscriber of `config` installed: checks what the
    /// recorder saw.
    fn check(&self, case: &str, config: &str) {
        let (spans, events, bytes) =
            (SPANS.load(Ordering::Relaxed), EVENTS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
        {
            let _installed = install(config);
            self.request(case, config);
        }
        let spans = SPANS.load(Ordering::Relaxed) - spans;
        let events = EVENTS.load(Ordering::Relaxed) - events;
        let bytes = BYTES.load(Ordering::Relaxed) - bytes;
        let expected = match (case, config) {
            (_, "off" | "filtered") => 0,
            ("openai_tool", _) => 3,
            _ => 1,
        };
        assert_eq!(spans, expected, "{case} {config}: spans recorded");
        assert_eq!(events, 0, "{case} {config}: events recorded");
        if under_cargo_bench() {
            println!("{case} {config}: {spans} spans, {bytes} bytes of recorded text per request");
        }
        self.drain();
    }

    /// Forgets the servers' notes of arrived requests (they pile up otherwise).
    fn drain(&self) {
        for server in self.servers.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            let _ = server.arrivals();
        }
    }
}

/// Reads a call's stream to the end: `DELTAS` text deltas and `tool_results` tool
/// results, then `Finished`.
async fn read(stream: Result<omni_tokio::TextStream, omni_tokio::Error>, tool_results: usize) -> Result<(), String> {
    let mut stream = stream.map_err(|e| e.to_string())?;
    let (mut deltas, mut results, mut finished) = (0, 0, false);
    while let Some(event) = stream.next().await {
        match event {
            GenerateEvent::Stream { event: StreamEvent::TextDelta { .. }, .. } => deltas += 1,
            GenerateEvent::ToolResult { result, .. } if !result.is_error => results += 1,
            GenerateEvent::ToolResult { result, .. } => {
                return Err(format!("the tool failed: {}", result.text_content()))
            }
            GenerateEvent::Finished(_) => finished = true,
            GenerateEvent::Failed { error, .. } => return Err(format!("the call failed: {error}")),
            _ => {}
        }
    }
    if (deltas, results, finished) != (DELTAS, tool_results, true) {
        return Err(format!("{deltas} deltas, {results} tool results, finished: {finished}"));
    }
    Ok(())
}

// The interleaved measurement.

/// One configuration's batch in one round, per request.
#[derive(Debug, Clone, Copy)]
struct Batch {
    wall_us: f64,
    cpu_us: f64,
    allocations: f64,
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

fn batch(f: &Fixture, case: &str, config: &str, n: usize) -> Batch {
    let _installed = install(config);
    let (started, cpu, allocated) = (Instant::now(), thread_cpu(), allocations());
    for _ in 0..n {
        f.request(case, config);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let batch = Batch {
        wall_us: per(started.elapsed()),
        cpu_us: per(thread_cpu().saturating_sub(cpu)),
        allocations: (allocations() - allocated) as f64 / n as f64,
    };
    f.drain();
    batch
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn interleaved(f: &Fixture, case: &str) {
    let (rounds, n) = (env_number("ROUNDS", 15), env_number("BATCH", 200));
    // A warm-up batch of each, not kept.
    for config in CONFIGS {
        batch(f, case, config, n / 4 + 1);
    }
    let mut runs: Vec<Vec<Batch>> = vec![Vec::new(); CONFIGS.len()];
    for round in 0..rounds {
        for k in 0..CONFIGS.len() {
            let c = (round + k) % CONFIGS.len();
            runs[c].push(batch(f, case, CONFIGS[c], n));
        }
    }
    println!("\n{case}, interleaved: {rounds} rounds of {n} requests per configuration; medians over rounds");
    println!("| configuration | wall µs/request | × off | + µs | thread CPU µs/request | × off | + µs | allocations/request | + |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let off = &runs[0];
    for (c, config) in CONFIGS.iter().enumerate() {
        let of = |get: fn(&Batch) -> f64| {
            let values: Vec<f64> = runs[c].iter().map(get).collect();
            let ratios = runs[c].iter().zip(off).map(|(b, o)| get(b) / get(o)).collect();
            let added = runs[c].iter().zip(off).map(|(b, o)| get(b) - get(o)).collect();
            (median(values), median(ratios), median(added))
        };
        let (wall, wall_ratio, wall_added) = of(|b| b.wall_us);
        let (cpu, cpu_ratio, cpu_added) = of(|b| b.cpu_us);
        let (allocs, _, allocs_added) = of(|b| b.allocations);
        println!(
            "| {config} | {wall:.1} | {wall_ratio:.3} | {wall_added:+.1} | {cpu:.1} | {cpu_ratio:.3} | {cpu_added:+.1} | {allocs:.0} | {allocs_added:+.0} |"
        );
    }
}
