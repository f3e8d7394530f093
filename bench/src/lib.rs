//! # omni-bench
//!
//! The end-to-end benchmark of issue 12: what a whole process spends to receive a long
//! streamed reply through each driver's public streaming API, against a floor client,
//! over loopback. See `README.md` of this crate for how to run it and what it measures.
//!
//! - [`case`]: the cases (two dialects × text deltas or tool-argument fragments), the
//!   clients, and the line a client prints.
//! - [`floor`] and [`drivers`]: the clients the binary `omni-bench-client` runs.
//! - [`server`]: the loopback server, noting when each request arrives.
//! - [`harness`]: a child process per run, CPU taken by [`rusage`], interleaved rounds,
//!   medians and ratios.
//! - [`many`] and [`concurrency`]: many streams at once from one client (issue 29), the
//!   client side and the measurement.
//!
//! The client binary counts allocations with `omni_conformance::heap::AllocationCounter`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod case;
pub mod concurrency;
pub mod drivers;
pub mod floor;
pub mod harness;
pub mod many;
pub mod rusage;
pub mod server;
