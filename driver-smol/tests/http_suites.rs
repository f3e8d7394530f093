//! The HTTP suites every driver runs, through omni-smol (the list is
//! `omni_conformance::http_suite_tests`): connections kept alive and stale ones costing no
//! retry; calls through a CONNECT proxy with credentials; whatever bytes a server sends, a
//! call ends with a typed outcome, keeping what came; redirects decided by the core;
//! secret headers never printed; decisions once made per driver, now made once.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

omni_conformance::http_suite_tests!(common::Driver::new());
