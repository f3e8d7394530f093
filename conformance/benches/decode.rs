//! Decoding speed per dialect against a floor measured in the same run.
//!
//! - `pipeline`: omni's whole path, bytes in 16 KiB chunks to consumer events and a
//!   response (framing, dialect parsing, accumulation).
//! - `baseline`: the least any decoder must do: a memchr scan for event boundaries and a
//!   typed, borrowed serde_json decode of each payload down to the text delta.
//! - `tool_args`: 100 KB and 1 MB of tool arguments in 4-byte fragments (linear: ~10x).
//!
//! Both live in `omni_conformance::floor`, shared with the `profile_decode` example that
//! counts instructions under callgrind. Report `pipeline / baseline` per dialect.
//! Allocations are counted by divan's `AllocProfiler` (divide by the number of deltas).
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use divan::{black_box, AllocProfiler, Bencher};
use omni_conformance::floor::{baseline, pipeline};
use omni_conformance::synth::{text_stream, tool_args_stream};
use omni_protocol::Dialect;

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

const DELTAS: usize = 10_000;
const WORD: &str = "token ";

fn main() {
    divan::main();
}

const DIALECTS: [Dialect; 5] = Dialect::ALL;

#[divan::bench(args = DIALECTS)]
fn pipeline_text(bencher: Bencher, dialect: Dialect) {
    let body = text_stream(dialect, DELTAS, WORD);
    bencher.counter(divan::counter::ItemsCount::new(DELTAS)).bench(|| pipeline(black_box(&body), dialect));
}

#[divan::bench(args = DIALECTS)]
fn baseline_text(bencher: Bencher, dialect: Dialect) {
    let body = text_stream(dialect, DELTAS, WORD);
    assert_eq!(baseline(&body, dialect), DELTAS * WORD.len(), "the baseline must see every delta");
    bencher.counter(divan::counter::ItemsCount::new(DELTAS)).bench(|| baseline(black_box(&body), dialect));
}

#[divan::bench(args = [100_000, 1_000_000])]
fn tool_args_4_byte_fragments(bencher: Bencher, bytes: usize) {
    let body = tool_args_stream(bytes, 4);
    bencher.bench(|| pipeline(black_box(&body), Dialect::AnthropicMessages));
}
