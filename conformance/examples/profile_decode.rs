//! Runs the decoding pipeline or its floor on one synthetic stream, for instruction
//! counts under callgrind (wall-clock time is too noisy on a shared machine):
//!
//! ```text
//! cargo build --profile bench -p omni-conformance --example profile_decode
//! valgrind --tool=callgrind --toggle-collect='*floor::pipeline*' \
//!     target/release/examples/profile_decode openai_responses pipeline
//! ```
//!
//! Arguments: dialect name, `pipeline` or `baseline`, iterations (default 1), deltas
//! (default 10000).
#![allow(clippy::disallowed_methods, missing_docs)]

use std::hint::black_box;

use omni_conformance::floor::{baseline, pipeline};
use omni_conformance::synth::text_stream;
use omni_core::Dialect;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dialect = args.get(1).and_then(|d| Dialect::from_name(d)).unwrap_or(Dialect::AnthropicMessages);
    let mode = args.get(2).map_or("pipeline", String::as_str);
    let iterations: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(1);
    let deltas: usize = args.get(4).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let body = text_stream(dialect, deltas, "token ");
    let mut total = 0;
    for _ in 0..iterations {
        total += match mode {
            "baseline" => baseline(black_box(&body), dialect),
            _ => pipeline(black_box(&body), dialect),
        };
    }
    println!("{dialect} {mode}: {total}");
}
