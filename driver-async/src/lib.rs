//! # omni-async
//!
//! The runtime-neutral parts of omni's async drivers, shared by `omni-tokio` and
//! `omni-smol` (which re-export them): the agent handle
//! ([`Agent`], [`Subscription`]) over runtime-neutral channels. Each driver only starts
//! the agent's task in its runtime. Applications use the drivers, not this crate.

mod agent;
mod subscription;

pub use agent::{Agent, LoopMessage, StateChange};
pub use omni_core::driver_error::Error;
pub use subscription::Subscription;
