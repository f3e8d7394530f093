//! omni driver (blocking): executes the core's effects. The driver itself is built in the drivers issue.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub use omni_core as core;
pub use omni_core::*;
