//! Allocation budget of the decoding pipeline, counted (not timed) with a counting
//! global allocator: at most one allocation per text delta, amortised, in every dialect.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::heap::{allocations, AllocationCounter};
use omni_conformance::synth::text_stream;
use omni_core::{Dialect, StreamDecoder};

#[global_allocator]
static GLOBAL: AllocationCounter = AllocationCounter;

#[test]
fn at_most_one_allocation_per_text_delta() {
    const DELTAS: usize = 20_000;
    let mut report = Vec::new();
    for dialect in Dialect::ALL {
        let body = text_stream(dialect, DELTAS, "token ");
        let mut decoder = StreamDecoder::new(dialect, "bench");
        let mut events = Vec::with_capacity(1024);
        let before = allocations();
        for chunk in body.chunks(16 * 1024) {
            decoder.feed(chunk, &mut events);
            events.clear();
        }
        decoder.finish(&mut events);
        let used = allocations() - before;
        let per_delta = used as f64 / DELTAS as f64;
        report.push(format!("{dialect}: {per_delta:.3} allocations per text delta"));
        assert_eq!(decoder.response().text().len(), DELTAS * 6, "{dialect} decoded every delta");
        assert!(per_delta <= 1.05, "{dialect}: {per_delta:.3} allocations per text delta (budget: 1)");
    }
    println!("{}", report.join("\n"));
}
