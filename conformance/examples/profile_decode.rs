//! Runs the decoding pipeline or its floor on one synthetic stream, for instruction
//! counts under callgrind (wall-clock time is too noisy on a shared machine):
//!
//! ```text
//! cargo build --profile bench -p omni-conformance --example profile_decode
//! valgrind --tool=callgrind --toggle-collect='*floor::pipeline*' \
//!     target/release/examples/profile_decode openai_responses pipeline
//! ```
//!
//! Arguments: dialect name (or `all`), `pipeline`, `baseline` or `compare`, iterations
//! (default 1), deltas (default 10000). `compare` times the two alternately, so both
//! see the same machine load, and prints the fastest and median runs of each.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use omni_conformance::floor::{baseline, pipeline};
use omni_conformance::synth::text_stream;
use omni_core::Dialect;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dialects: Vec<Dialect> = match args.get(1).map(String::as_str) {
        Some("all") | None => Dialect::ALL.to_vec(),
        Some(name) => Dialect::from_name(name).into_iter().collect(),
    };
    let mode = args.get(2).map_or("pipeline", String::as_str);
    let iterations: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(1);
    let deltas: usize = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    for dialect in dialects {
        let body = text_stream(dialect, deltas, "token ");
        if mode == "compare" {
            compare(dialect, &body, iterations);
            continue;
        }
        let mut total = 0;
        for _ in 0..iterations {
            total += match mode {
                "baseline" => baseline(black_box(&body), dialect),
                _ => pipeline(black_box(&body), dialect),
            };
        }
        println!("{dialect} {mode}: {total}");
    }
}

fn compare(dialect: Dialect, body: &[u8], rounds: usize) {
    let time = |f: &dyn Fn() -> usize| {
        let start = Instant::now();
        black_box(f());
        start.elapsed()
    };
    let (mut pipe, mut base): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        pipe.push(time(&|| pipeline(black_box(body), dialect)));
        base.push(time(&|| baseline(black_box(body), dialect)));
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
