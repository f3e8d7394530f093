//! Sessions: a persistent, branching conversation over the agent. The message tree
//! ([`tree`]), what a store keeps of a session ([`store`]), and the session machine
//! ([`machine`]) that joins the agent's committed turns to the tree and writes them to a
//! store through effects; [`presence`]: which sessions run where, for a manager.

pub(crate) mod machine;
pub(crate) mod presence;
pub(crate) mod store;
pub(crate) mod tree;
