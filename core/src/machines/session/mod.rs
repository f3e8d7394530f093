//! Sessions: a persistent, branching conversation over the agent. So far its data: the
//! message tree ([`tree`]) and what a store keeps of a session ([`store`]).

pub mod store;
pub mod tree;
