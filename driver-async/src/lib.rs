//! # omni-async
//!
//! The runtime-neutral parts of omni's async drivers, shared by `omni-tokio` and
//! `omni-smol` (which re-export them): the call builder and its event stream ([`Call`],
//! [`TextStream`]) and the agent handle ([`Agent`], [`Subscription`]), over runtime-neutral
//! channels. Each driver only runs the machines' tasks in its runtime. Applications use the drivers, not this crate.
#![allow(clippy::use_self)] // issue 11: lint hits here are fixed when this module's rewrite lands

mod agent;
mod call;
pub mod delivery;
mod drive;
mod subscription;

pub use agent::{Agent, LoopMessage, StateChange, WeakAgent};
pub use call::{Call, Handlers, StartCall, TextStream};
pub use drive::{drive_call, CallRuntime};
pub use omni_core::driver_error::Error;
pub use subscription::{Subscriber, Subscription};
