//! # omni-async
//!
//! The runtime-neutral parts of omni's async drivers, shared by `omni-tokio` and
//! `omni-smol` (which re-export them): the [`Error`] type and the agent handle
//! ([`Agent`], [`Subscription`]) over runtime-neutral channels. Each driver only starts
//! the agent's task in its runtime. Applications use the drivers, not this crate.

mod agent;
mod error;
mod subscription;

pub use agent::{Agent, LoopMessage, StateChange};
pub use error::Error;
pub use subscription::Subscription;
