//! Runs the decoding pipeline, a call's machine or their floor on one synthetic stream,
//! for instruction counts under callgrind (wall-clock time is too noisy on a shared
//! machine):
//!
//! ```text
//! cargo build --profile bench -p omni-conformance --example profile_decode
//! valgrind --tool=callgrind --toggle-collect='*floor::pipeline*' \
//!     target/release/examples/profile_decode openai_responses pipeline
//! ```
//!
//! Arguments: dialect name (or `all`); `pipeline` (framing, dialect, accumulator:
//! `floor::pipeline`), `machine` (the same inside a `Generate` machine, events taken with
//! `poll_event`: `floor::machine`), `baseline` (`floor::baseline`, or
//! `floor::baseline_tool` for a tool stream) or `compare`; iterations (default 1); deltas
//! (default 10000); `text` (default) or `tool`: a text stream, or one tool call whose
//! arguments (`synth::long_string_args`) come in that many 4-byte fragments
//! (Anthropic Messages and Chat Completions only). `compare` times the pipeline and the
//! baseline alternately, so both see the same machine load, and prints the fastest and
//! median runs of each.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use omni_conformance::floor::{baseline, baseline_tool, machine, pipeline};
use omni_conformance::synth::{long_string_args, text_stream, tool_call_stream};
use omni_protocol::Dialect;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dialects: Vec<Dialect> = match args.get(1).map(String::as_str) {
        Some("all") | None => Dialect::ALL.to_vec(),
        Some(name) => Dialect::from_name(name).into_iter().collect(),
    };
    let mode = args.get(2).map_or("pipeline", String::as_str);
    let iterations: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(1);
    let deltas: usize = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let tool = args.get(5).is_some_and(|kind| kind == "tool");
    for dialect in dialects {
        let body = if tool {
            let Some(body) = tool_call_stream(dialect, &long_string_args(deltas * FRAGMENT), FRAGMENT) else {
                continue;
            };
            body
        } else {
            text_stream(dialect, deltas, "token ")
        };
        let floor = if tool { baseline_tool } else { baseline };
        if mode == "compare" {
            compare(dialect, &body, iterations, floor);
            continue;
        }
        let mut total = 0;
        for _ in 0..iterations {
            total += match mode {
                "baseline" => floor(black_box(&body), dialect),
                "machine" => machine(black_box(&body), dialect),
                _ => pipeline(black_box(&body), dialect),
            };
        }
        println!("{dialect} {mode}: {total}");
    }
}

/// Bytes of tool arguments per fragment, as in the end-to-end benchmark.
const FRAGMENT: usize = 4;

fn compare(dialect: Dialect, body: &[u8], rounds: usize, floor: fn(&[u8], Dialect) -> usize) {
    let time = |f: &dyn Fn() -> usize| {
        let start = Instant::now();
        black_box(f());
        start.elapsed()
    };
    let (mut pipe, mut base): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        pipe.push(time(&|| pipeline(black_box(body), dialect)));
        base.push(time(&|| floor(black_box(body), dialect)));
    }
    pipe.sort();
    base.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let (pf, bf, pm, bm) = (ms(pipe[0]), ms(base[0]), ms(pipe[pipe.len() / 2]), ms(base[base.len() / 2]));
    println!(
        "{:20} fastest {pf:.3}/{bf:.3} ms = {:.2}x   median {pm:.3}/{bm:.3} ms = {:.2}x",
        dialect.name(),
        pf / bf,
        pm / bm
    );
}
