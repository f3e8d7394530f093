//! The flood suite (omni_conformance::floods) through omni-smol: keep-alive floods cannot
//! hold off a stall or a timeout, a stream nobody reads holds the server back and still
//! ends at its deadline, a dropped stream closes its connection at once, and a response
//! past the size limit fails typed. A test binary of its own: its global allocator counts
//! the heap, and its one test runs the cases one after another, so the counts are theirs.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

omni_conformance::flood_suite_test!(common::Driver::new());
