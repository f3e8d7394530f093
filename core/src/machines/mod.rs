//! The state machines a driver runs, all on one contract ([`Machine`]): `new(.., now)`,
//! `handle_input(input, now) -> Result`, `handle_timeout(now)`, `poll_effect`,
//! `poll_event`, and `poll_timeout` giving the next deadline with its reason from one
//! timer table ([`timer`]). What they all speak (effects, reports, ids, errors) is
//! [`common`].
//!
//! [`generate`] is one call (a loop of requests and tool rounds, tools auto-approved);
//! [`agent`] is a stateful conversation (the same steps, with callbacks or a pause for
//! approval, and a history). Both are built from two sub-machines, each the one home of
//! its decisions: a *request* (one HTTP exchange with its retries, backoff, stall,
//! timeout, redirects and size limit) and a *tool round* (validation, a decision policy,
//! parallel runs with deadlines, results in call order). [`client`] turns a client's
//! configuration and a call's arguments into a machine's configuration. [`session`] holds
//! a session's message tree, what a store keeps of it, and the session machine;
//! [`manager`] the bookkeeping of many running sessions. [`mcp`] is a Model Context
//! Protocol client: one server's tools, over stdio or streamable HTTP, in both protocol eras.

pub(crate) mod agent;
pub(crate) mod client;
pub(crate) mod common;
pub(crate) mod generate;
mod machine;
pub(crate) mod manager;
pub(crate) mod mcp;
pub(crate) mod observe;
mod request;
pub(crate) mod session;
pub(crate) mod timer;
mod tool_round;

pub use machine::Machine;
