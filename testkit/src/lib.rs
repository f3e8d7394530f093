//! omni-testkit: what you need to test code built on omni without a key or a network.
//!
//! - [`http`]: a loopback HTTP/1.1 server answering with scripted replies (bytes, waits,
//!   cuts, hangs) and recording every request, secrets redacted when printed.
//! - [`check`] (feature `proptest`, default): proptest checks for your own `WireFormat`
//!   and `TextProtocol` (split invariance, cut streams, damaged input, request building,
//!   round trips), with reports naming the failing case.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

#[cfg(feature = "proptest")]
pub mod check;
pub mod http;
