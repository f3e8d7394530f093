//! omni-testkit: what you need to test code built on omni without a key or a network.
//!
//! - [`MockProvider`]: a mock LLM provider on loopback, started in one line, answering
//!   each request with the next [`Turn`] you push (text, thinking, parallel tool calls,
//!   usage, errors with `retry-after`, cut streams, stalls), written as data and
//!   rendered in any of omni's five dialects (or your own format), delivered in the
//!   chunks you ask for; the requests it received are there for assertions. It is an
//!   HTTP server, so it works with every driver, blocking and async.
//! - [`http`]: the level underneath, a loopback HTTP/1.1 server answering with scripted
//!   replies of your own bytes (waits, cuts, hangs) and recording every request, secrets
//!   redacted when printed.
//! - [`check`] (feature `proptest`, default): proptest checks for your own `WireFormat`
//!   and `TextProtocol` (split invariance, cut streams, damaged input, request building,
//!   round trips), with reports naming the failing case.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

#[cfg(feature = "proptest")]
pub mod check;
pub mod http;
mod mock;
mod render;
mod turn;

pub use mock::{MockProvider, Renderer, MODEL_ID, PROVIDER_ID};
pub use turn::{Answer, Block, Delivery, Ending, Finish, ToolCall, Turn};
