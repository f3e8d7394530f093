//! What the loops share to stay bounded: the capacities of their channels, how much body
//! a transport reads at once and the budget of inputs per wake-up (decided in
//! [`crate::machine`]).
//!
//! ```text
//!  transport tasks ─► reports (bounded: INPUT_CAPACITY) ─► the call's loop, run by ─► events of one report ─► application
//!            ▲ a full channel makes them wait,               the stream's poll
//!            └ so the socket is not read and TCP pushes back
//! ```
//!
//! A call's loop takes the next report only when the application has read every event
//! the last one made: what waits unread is bounded by the largest piece of body a
//! transport reads ([`BODY_CHUNK`]), however long the application leaves the stream
//! unread. An agent's events go to its subscribers, each with a bounded queue of its own
//! (a subscriber that falls behind is dropped).

pub use crate::machine::{BODY_CHUNK, COMMAND_CAPACITY, INPUT_BUDGET, INPUT_CAPACITY, SPARE_BUFFERS};
