//! Decodes one stream of many tool calls, for instruction counts under callgrind (the
//! `many_calls` benchmark's wall-clock ratios are noisy on a shared machine):
//!
//! ```text
//! cargo build --profile bench -p omni-conformance --example many_calls
//! valgrind --tool=callgrind --toggle-collect='*floor::pipeline*' \
//!     target/release/examples/many_calls openai_completions sequential 100000
//! ```
//!
//! Arguments: dialect name, `sequential` or `one_event`, number of calls.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::hint::black_box;

use omni_conformance::floor::pipeline;
use omni_conformance::many_calls::{calls_in_one_event, sequential_calls};
use omni_protocol::Dialect;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dialect) = args.get(1).and_then(|d| Dialect::from_name(d)) else {
        eprintln!("usage: many_calls <dialect> [sequential|one_event] [calls]");
        std::process::exit(2);
    };
    let shape = args.get(2).map_or("sequential", String::as_str);
    let calls: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let body = match shape {
        "one_event" => calls_in_one_event(dialect, calls),
        _ => Some(sequential_calls(dialect, calls)),
    };
    let Some(body) = body else {
        eprintln!("{dialect} carries one call per event");
        std::process::exit(2);
    };
    let started = std::time::Instant::now();
    let count = pipeline(black_box(&body), dialect);
    println!("{dialect} {shape} {calls}: {} bytes, {count} events, {:?}", body.len(), started.elapsed());
}
