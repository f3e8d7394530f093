//! The key never reaches a log record, even with every crate logging at trace level
//! (ureq-proto logs the bytes it writes at that level); nor do a proxy's credentials
//! (omni_conformance::logs's test, in a binary of its own for its logger).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::Driver;
use omni_conformance::logs::secrets_are_sent_but_never_logged;

#[test]
fn secrets_are_sent_but_never_logged_or_printed() {
    secrets_are_sent_but_never_logged(&Driver::new(), "ureq_proto");
}
