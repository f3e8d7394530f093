//! omni-testkit: what you need to test code built on omni without a key or a network.
//!
//! - [`http`]: a loopback HTTP/1.1 server answering with scripted replies (bytes, waits,
//!   cuts, hangs) and recording every request, secrets redacted when printed.
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

pub mod http;
