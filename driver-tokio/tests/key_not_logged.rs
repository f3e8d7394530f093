//! The key, secret headers and a proxy's credentials never reach a log record, with every
//! crate logging at trace level (reqwest logs its connections there); the test is
//! omni_conformance::logs's, in a binary of its own for its logger.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::Driver;
use omni_conformance::logs::secrets_are_sent_but_never_logged;

#[test]
fn secrets_are_sent_but_never_logged_or_printed() {
    secrets_are_sent_but_never_logged(&Driver::new(), "reqwest");
}
