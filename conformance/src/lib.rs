//! omni conformance suite: the project's fixtures, the upstream corpus of recorded
//! provider streams, and helpers to replay both through the core.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod agent_drive;
pub mod agent_requests;
pub mod agent_scenarios;
pub mod agent_script;
pub mod agent_sim;
pub mod async_agent;
pub mod async_manager;
pub mod async_session;
pub mod blocking_work;
pub mod connect_proxy;
pub mod custom_wire;
pub mod divergences;
pub mod faults;
pub mod fixtures;
pub mod floods;
pub mod floor;
pub mod heap;
pub mod hooks;
pub mod http_suite;
pub mod keepalive;
pub mod logs;
pub mod many_calls;
pub mod mcp_agent;
pub mod mcp_real;
pub mod mcp_suite;
pub mod redirects;
pub mod replay;
pub mod scenarios;
pub mod session_drive;
pub mod session_scenarios;
pub mod session_sim;
pub mod sim;
pub mod structured;
pub mod synth;
pub mod telemetry_capture;
pub mod telemetry_suite;
pub mod ttfe;
pub mod upstream;
pub mod wires;

/// The README's examples, compiled (and run where they need no network) as doc tests of
/// this crate, which can see every driver.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
