//! The flood suite (omni_conformance::floods) through omni-smol: keep-alive floods cannot
//! hold off a stall or a timeout, a stream nobody reads holds the server back and still
//! ends at its deadline, a dropped stream closes its connection at once, and a response
//! past the size limit fails typed. A test binary of its own: its global allocator counts
//! the heap, and its one test runs the cases one after another, so the counts are theirs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::Driver;
use omni_conformance::floods::flood_suite;
use omni_conformance::heap::CountingAllocator;

#[global_allocator]
static HEAP: CountingAllocator = CountingAllocator::new();

#[test]
fn floods_cost_bounded_memory_and_never_hold_off_a_deadline() {
    flood_suite(Driver::new(), &HEAP);
}
